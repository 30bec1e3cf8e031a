"""Part 1 starter kernels (NKI 0.6): three vector additions to study and a transpose to write.

In NKI 0.6 every nisa call takes its destination first and returns nothing, so each
result tile is allocated with nl.ndarray before the instruction that writes it."""

import numpy as np
import nki
import nki.language as nl
import nki.isa as nisa


@nki.jit
def vector_add_naive(a_vec, b_vec):

    # The output vector, allocated in HBM (returned tensors live in nl.shared_hbm)
    out = nl.ndarray(a_vec.shape, dtype=a_vec.dtype, buffer=nl.shared_hbm)

    # SBUF copies of the inputs: every element gets its own partition
    a_sbuf = nl.ndarray((a_vec.shape[0], 1), dtype=a_vec.dtype, buffer=nl.sbuf)
    b_sbuf = nl.ndarray((b_vec.shape[0], 1), dtype=b_vec.dtype, buffer=nl.sbuf)

    nisa.dma_copy(dst=a_sbuf, src=a_vec)
    nisa.dma_copy(dst=b_sbuf, src=b_vec)

    # Element-wise add on the vector engine, into a tile allocated for the sum
    res = nl.ndarray(a_sbuf.shape, dtype=a_vec.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=res, data=a_sbuf, op0=nl.add, operand0=b_sbuf)

    # Write the sum back to HBM
    nisa.dma_copy(dst=out, src=res)

    return out


@nki.jit
def vector_add_tiled(a_vec, b_vec):

    # The output vector, allocated in HBM
    out = nl.ndarray(a_vec.shape, dtype=a_vec.dtype, buffer=nl.shared_hbm)

    # Number of elements (rows) in the vectors
    M = a_vec.shape[0]

    # TODO (Step 1): choose a better chunk size
    ROW_CHUNK = 1

    # No iteration depends on another one (affine_range is an alias of range in NKI 0.6)
    for m in nl.affine_range(M // ROW_CHUNK):

        # SBUF tiles holding one chunk of each input
        a_tile = nl.ndarray((ROW_CHUNK, 1), dtype=a_vec.dtype, buffer=nl.sbuf)
        b_tile = nl.ndarray((ROW_CHUNK, 1), dtype=b_vec.dtype, buffer=nl.sbuf)

        # Bring the chunk in from HBM
        nisa.dma_copy(dst=a_tile, src=a_vec[m * ROW_CHUNK : (m + 1) * ROW_CHUNK])
        nisa.dma_copy(dst=b_tile, src=b_vec[m * ROW_CHUNK : (m + 1) * ROW_CHUNK])

        # Add the two chunks
        res = nl.ndarray((ROW_CHUNK, 1), dtype=a_vec.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=res, data=a_tile, op0=nl.add, operand0=b_tile)

        # Write the chunk of the sum back to HBM
        nisa.dma_copy(dst=out[m * ROW_CHUNK : (m + 1) * ROW_CHUNK], src=res)

    return out


@nki.jit
def vector_add_stream(a_vec, b_vec):

    # Number of elements (rows) in the vectors
    M = a_vec.shape[0]

    # TODO (Step 2a): choose a better free-dimension size
    FREE_DIM = 2

    # Partition dimension limit of a tile
    PARTITION_DIM = 128

    # View the vectors (and the output) as 128-row matrices
    a_vec_re = a_vec.reshape((PARTITION_DIM, M // PARTITION_DIM))
    b_vec_re = b_vec.reshape((PARTITION_DIM, M // PARTITION_DIM))
    out = nl.ndarray(a_vec_re.shape, dtype=a_vec_re.dtype, buffer=nl.shared_hbm)

    # One iteration per (128, FREE_DIM) tile
    for m in nl.affine_range(M // (PARTITION_DIM * FREE_DIM)):

        # SBUF tiles for one piece of each input
        a_tile = nl.ndarray((PARTITION_DIM, FREE_DIM), dtype=a_vec.dtype, buffer=nl.sbuf)
        b_tile = nl.ndarray((PARTITION_DIM, FREE_DIM), dtype=b_vec.dtype, buffer=nl.sbuf)

        # Bring the tiles in from HBM
        nisa.dma_copy(dst=a_tile, src=a_vec_re[:, m * FREE_DIM : (m + 1) * FREE_DIM])
        nisa.dma_copy(dst=b_tile, src=b_vec_re[:, m * FREE_DIM : (m + 1) * FREE_DIM])

        # Both operands are full tiles, so this needs tensor_tensor rather than tensor_scalar
        res = nl.ndarray((PARTITION_DIM, FREE_DIM), dtype=a_vec.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=res, data1=a_tile, data2=b_tile, op=nl.add)

        # Write the tile of the sum back to HBM
        nisa.dma_copy(dst=out[:, m * FREE_DIM : (m + 1) * FREE_DIM], src=res)

    # Return the sum with the inputs' 1-D shape
    out = out.reshape(a_vec.shape)

    return out


@nki.jit
def matrix_transpose(a_tensor):
    M, N = a_tensor.shape
    out = nl.ndarray((N, M), dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    tile_dim = 128

    assert M % tile_dim == 0 and N % tile_dim == 0, "M and N must both be multiples of 128"

    # TODO: transpose a_tensor into out. The only compute instruction allowed
    # here is nisa.nc_transpose (no nisa.dma_transpose). It writes a PSUM tile
    # you allocate (nl.ndarray(..., buffer=nl.psum)); DMA cannot read PSUM, so
    # copy each result to SBUF with nisa.tensor_copy(dst=..., src=...) first.
    raise NotImplementedError(
        "matrix_transpose is not implemented yet: move 128x128 tiles into SBUF, "
        "transpose them with nisa.nc_transpose, copy the PSUM results back to "
        "SBUF and store them into out."
    )

    return out
