"""Reference vector-add kernels (part 1 of the course).

The three kernels follow the handout's code; only the tile constants are
turned into parameters so the grader and the benchmarks can sweep them.
`make_vector_add_tiled` and `make_vector_add_stream` bake a constant into a
fresh kernel; the module-level kernels use the settings that are best for
n = 25600 (ROW_CHUNK = 128, FREE_DIM = 200).
"""

import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa

# 128 is the partition limit, so it is the largest legal row chunk.
ROW_CHUNK = 128
# 25600 = 128 * 200: one DMA per input vector and one for the output.
FREE_DIM = 200


@nki.compiler.skip_middle_end_transformations
@nki.jit
def vector_add_naive(a_vec, b_vec):
    """Add two vectors of at most 128 elements (one element per partition)."""
    out = nl.ndarray(shape=a_vec.shape, dtype=a_vec.dtype, buffer=nl.hbm)

    # The whole vector goes down the partition dimension, hence n <= 128.
    a_sbuf = nl.ndarray(shape=(a_vec.shape[0], 1), dtype=a_vec.dtype, buffer=nl.sbuf)
    b_sbuf = nl.ndarray(shape=(b_vec.shape[0], 1), dtype=b_vec.dtype, buffer=nl.sbuf)
    nisa.dma_copy(src=a_vec, dst=a_sbuf)
    nisa.dma_copy(src=b_vec, dst=b_sbuf)

    # b_sbuf is a (P, 1) column, so the cheaper tensor_scalar form applies.
    res = nisa.tensor_scalar(a_sbuf, nl.add, b_sbuf)
    nisa.dma_copy(src=res, dst=out)
    return out


def make_vector_add_tiled(row_chunk):
    """Return a vector_add_tiled kernel that moves `row_chunk` rows per DMA.

    `row_chunk` must divide the vector length; values above 128 exceed the
    partition limit and fail when the kernel is traced.
    """

    @nki.compiler.skip_middle_end_transformations
    @nki.jit
    def vector_add_tiled(a_vec, b_vec):
        out = nl.ndarray(shape=a_vec.shape, dtype=a_vec.dtype, buffer=nl.hbm)
        M = a_vec.shape[0]

        # Iterations are independent, so affine_range is allowed.
        for m in nl.affine_range(M // row_chunk):
            a_tile = nl.ndarray((row_chunk, 1), dtype=a_vec.dtype, buffer=nl.sbuf)
            b_tile = nl.ndarray((row_chunk, 1), dtype=b_vec.dtype, buffer=nl.sbuf)
            nisa.dma_copy(src=a_vec[m * row_chunk:(m + 1) * row_chunk], dst=a_tile)
            nisa.dma_copy(src=b_vec[m * row_chunk:(m + 1) * row_chunk], dst=b_tile)

            res = nisa.tensor_scalar(a_tile, nl.add, b_tile)
            nisa.dma_copy(src=res, dst=out[m * row_chunk:(m + 1) * row_chunk])
        return out

    return vector_add_tiled


def make_vector_add_stream(free_dim):
    """Return a vector_add_stream kernel whose tiles are (128, `free_dim`).

    The vector length must be a multiple of 128 * `free_dim`.
    """

    @nki.compiler.skip_middle_end_transformations
    @nki.jit
    def vector_add_stream(a_vec, b_vec):
        M = a_vec.shape[0]
        PARTITION_DIM = 128

        # View the vector as 128 rows so each DMA fills every partition and
        # streams `free_dim` contiguous elements into each of them.
        a_vec_re = a_vec.reshape((PARTITION_DIM, M // PARTITION_DIM))
        b_vec_re = b_vec.reshape((PARTITION_DIM, M // PARTITION_DIM))
        out = nl.ndarray(shape=a_vec_re.shape, dtype=a_vec_re.dtype, buffer=nl.hbm)

        for m in nl.affine_range(M // (PARTITION_DIM * free_dim)):
            a_tile = nl.ndarray((PARTITION_DIM, free_dim), dtype=a_vec.dtype, buffer=nl.sbuf)
            b_tile = nl.ndarray((PARTITION_DIM, free_dim), dtype=b_vec.dtype, buffer=nl.sbuf)
            nisa.dma_copy(src=a_vec_re[:, m * free_dim:(m + 1) * free_dim], dst=a_tile)
            nisa.dma_copy(src=b_vec_re[:, m * free_dim:(m + 1) * free_dim], dst=b_tile)

            # Both operands are full tiles now, so tensor_scalar no longer fits.
            res = nisa.tensor_tensor(a_tile, b_tile, op=nl.add)
            nisa.dma_copy(src=res, dst=out[:, m * free_dim:(m + 1) * free_dim])

        # Hand back the caller's 1-D shape.
        out = out.reshape(a_vec.shape)
        return out

    return vector_add_stream


vector_add_tiled = make_vector_add_tiled(ROW_CHUNK)
vector_add_stream = make_vector_add_stream(FREE_DIM)
