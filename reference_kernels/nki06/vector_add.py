"""Reference vector-add kernels (part 1 of the course), in NKI 0.6.

The same three kernels as reference_kernels/vector_add.py, written in the current dialect:
each nisa call writes an SBUF tile allocated for it, and the outputs are in nl.shared_hbm.
As there, the tile constants are parameters so the grader and the benchmarks can sweep them:
`make_vector_add_tiled` and `make_vector_add_stream` bake a constant into a new kernel, and
the module-level kernels use the best settings for n = 25600 (ROW_CHUNK = 128,
FREE_DIM = 200).
"""

import nki
import nki.language as nl
import nki.isa as nisa

# 128 is the partition limit, so the largest legal row chunk.
ROW_CHUNK = 128
# 25600 = 128 * 200: one DMA per input vector, one for the output.
FREE_DIM = 200


@nki.jit
def vector_add_naive(a_vec, b_vec):
    """Add two vectors of at most 128 elements (one element per partition)."""
    out = nl.ndarray(a_vec.shape, dtype=a_vec.dtype, buffer=nl.shared_hbm)

    # The whole vector runs down the partition dimension, hence n <= 128.
    a_sbuf = nl.ndarray((a_vec.shape[0], 1), dtype=a_vec.dtype, buffer=nl.sbuf)
    b_sbuf = nl.ndarray((b_vec.shape[0], 1), dtype=b_vec.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_sbuf, src=a_vec)
    nisa.dma_copy(dst=b_sbuf, src=b_vec)

    # b_sbuf is a (P, 1) column, so the cheaper tensor_scalar form applies.
    res = nl.ndarray(a_sbuf.shape, dtype=a_vec.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=res, data=a_sbuf, op0=nl.add, operand0=b_sbuf)
    nisa.dma_copy(dst=out, src=res)
    return out


def make_vector_add_tiled(row_chunk):
    """Return a vector_add_tiled kernel that moves `row_chunk` rows per DMA.

    `row_chunk` must divide the vector length; a value above 128 exceeds the partition limit
    and fails when the kernel is traced.
    """

    @nki.jit
    def vector_add_tiled(a_vec, b_vec):
        out = nl.ndarray(a_vec.shape, dtype=a_vec.dtype, buffer=nl.shared_hbm)
        M = a_vec.shape[0]

        # The iterations are independent of each other.
        for m in nl.affine_range(M // row_chunk):
            a_tile = nl.ndarray((row_chunk, 1), dtype=a_vec.dtype, buffer=nl.sbuf)
            b_tile = nl.ndarray((row_chunk, 1), dtype=b_vec.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=a_tile, src=a_vec[m * row_chunk:(m + 1) * row_chunk])
            nisa.dma_copy(dst=b_tile, src=b_vec[m * row_chunk:(m + 1) * row_chunk])

            res = nl.ndarray((row_chunk, 1), dtype=a_vec.dtype, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=res, data=a_tile, op0=nl.add, operand0=b_tile)
            nisa.dma_copy(dst=out[m * row_chunk:(m + 1) * row_chunk], src=res)
        return out

    return vector_add_tiled


def make_vector_add_stream(free_dim):
    """Return a vector_add_stream kernel whose tiles are (128, `free_dim`).

    The vector length must be a multiple of 128 * `free_dim`.
    """

    @nki.jit
    def vector_add_stream(a_vec, b_vec):
        M = a_vec.shape[0]
        PARTITION_DIM = 128

        # The vectors seen as 128 rows: each DMA fills every partition with `free_dim`
        # contiguous elements.
        a_vec_re = a_vec.reshape((PARTITION_DIM, M // PARTITION_DIM))
        b_vec_re = b_vec.reshape((PARTITION_DIM, M // PARTITION_DIM))
        out = nl.ndarray(a_vec_re.shape, dtype=a_vec_re.dtype, buffer=nl.shared_hbm)

        for m in nl.affine_range(M // (PARTITION_DIM * free_dim)):
            a_tile = nl.ndarray((PARTITION_DIM, free_dim), dtype=a_vec.dtype, buffer=nl.sbuf)
            b_tile = nl.ndarray((PARTITION_DIM, free_dim), dtype=b_vec.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=a_tile, src=a_vec_re[:, m * free_dim:(m + 1) * free_dim])
            nisa.dma_copy(dst=b_tile, src=b_vec_re[:, m * free_dim:(m + 1) * free_dim])

            # Both operands are full tiles here, so tensor_scalar no longer fits.
            res = nl.ndarray((PARTITION_DIM, free_dim), dtype=a_vec.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=res, data1=a_tile, data2=b_tile, op=nl.add)
            nisa.dma_copy(dst=out[:, m * free_dim:(m + 1) * free_dim], src=res)

        # The caller's 1-D shape again.
        out = out.reshape(a_vec.shape)
        return out

    return vector_add_stream


vector_add_tiled = make_vector_add_tiled(ROW_CHUNK)
vector_add_stream = make_vector_add_stream(FREE_DIM)
