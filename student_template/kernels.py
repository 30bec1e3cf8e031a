"""Part 1 starter kernels: three vector additions to study and a transpose to write."""

import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa


@nki.compiler.skip_middle_end_transformations
@nki.jit
def vector_add_naive(a_vec, b_vec):

    # The output vector, allocated in HBM
    out = nl.ndarray(shape=a_vec.shape, dtype=a_vec.dtype, buffer=nl.hbm)

    # SBUF copies of the inputs: every element gets its own partition
    a_sbuf = nl.ndarray(shape=(a_vec.shape[0], 1), dtype=a_vec.dtype, buffer=nl.sbuf)
    b_sbuf = nl.ndarray(shape=(b_vec.shape[0], 1), dtype=b_vec.dtype, buffer=nl.sbuf)

    nisa.dma_copy(src=a_vec, dst=a_sbuf)
    nisa.dma_copy(src=b_vec, dst=b_sbuf)

    # Element-wise add on the vector engine
    res = nisa.tensor_scalar(a_sbuf, nl.add, b_sbuf)

    # Write the sum back to HBM
    nisa.dma_copy(src=res, dst=out)

    return out


@nki.compiler.skip_middle_end_transformations
@nki.jit
def vector_add_tiled(a_vec, b_vec):

    # The output vector, allocated in HBM
    out = nl.ndarray(shape=a_vec.shape, dtype=a_vec.dtype, buffer=nl.hbm)

    # Number of elements (rows) in the vectors
    M = a_vec.shape[0]

    # TODO (Step 1): choose a better chunk size
    ROW_CHUNK = 1

    # No iteration depends on another one, so affine_range is allowed
    for m in nl.affine_range(M // ROW_CHUNK):

        # SBUF tiles holding one chunk of each input
        a_tile = nl.ndarray((ROW_CHUNK, 1), dtype=a_vec.dtype, buffer=nl.sbuf)
        b_tile = nl.ndarray((ROW_CHUNK, 1), dtype=b_vec.dtype, buffer=nl.sbuf)

        # Bring the chunk in from HBM
        nisa.dma_copy(src=a_vec[m * ROW_CHUNK : (m + 1) * ROW_CHUNK], dst=a_tile)
        nisa.dma_copy(src=b_vec[m * ROW_CHUNK : (m + 1) * ROW_CHUNK], dst=b_tile)

        # Add the two chunks
        res = nisa.tensor_scalar(a_tile, nl.add, b_tile)

        # Write the chunk of the sum back to HBM
        nisa.dma_copy(src=res, dst=out[m * ROW_CHUNK : (m + 1) * ROW_CHUNK])

    return out


@nki.compiler.skip_middle_end_transformations
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
    out = nl.ndarray(shape=a_vec_re.shape, dtype=a_vec_re.dtype, buffer=nl.hbm)

    # One iteration per (128, FREE_DIM) tile
    for m in nl.affine_range(M // (PARTITION_DIM * FREE_DIM)):

        # SBUF tiles for one piece of each input
        a_tile = nl.ndarray((PARTITION_DIM, FREE_DIM), dtype=a_vec.dtype, buffer=nl.sbuf)
        b_tile = nl.ndarray((PARTITION_DIM, FREE_DIM), dtype=b_vec.dtype, buffer=nl.sbuf)

        # Bring the tiles in from HBM
        nisa.dma_copy(src=a_vec_re[:, m * FREE_DIM : (m + 1) * FREE_DIM], dst=a_tile)
        nisa.dma_copy(src=b_vec_re[:, m * FREE_DIM : (m + 1) * FREE_DIM], dst=b_tile)

        # Both operands are full tiles, so this needs tensor_tensor rather than tensor_scalar
        res = nisa.tensor_tensor(a_tile, b_tile, op=nl.add)

        # Write the tile of the sum back to HBM
        nisa.dma_copy(src=res, dst=out[:, m * FREE_DIM : (m + 1) * FREE_DIM])

    # Return the sum with the inputs' 1-D shape
    out = out.reshape(a_vec.shape)

    return out


@nki.compiler.skip_middle_end_transformations
@nki.jit
def matrix_transpose(a_tensor):
    M, N = a_tensor.shape
    out = nl.ndarray((N, M), dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    tile_dim = 128

    assert M % tile_dim == 0 and N % tile_dim == 0, "M and N must both be multiples of 128"

    # TODO: transpose a_tensor into out. The only compute instruction allowed
    # here is nisa.nc_transpose (no nl.transpose, no nisa.dma_transpose).
    raise NotImplementedError(
        "matrix_transpose is not implemented yet: move 128x128 tiles into SBUF, "
        "transpose them with nisa.nc_transpose, copy the PSUM results back to "
        "SBUF and store them into out."
    )

    return out
