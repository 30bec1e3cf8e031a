"""Reference matrix transpose for part 1, using the Tensor Engine.

Layout trick that keeps every DMA large: for a strip of 128 input rows and a
chunk of `n_chunk = 128 * J` columns, transpose block j is built from the
strided columns {s * J + j : s < 128} instead of a contiguous 128-column
block. Its transpose then holds output rows {s * J + j}, so once all J blocks
are gathered into a (128, J, 128) tile, partition s holds the J consecutive
output rows s*J .. s*J + J - 1, and the whole tile is one strided store
(each run is one 128-element row piece). Per strip and chunk: one load, J
transposes and PSUM->SBUF copies, one store.
"""

import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa

# Bytes per partition for one input chunk (the gathered output tile has the
# same size). Large enough to amortise DMA fixed costs, small enough to leave
# room for the next chunk's buffers.
CHUNK_BYTES_PER_PARTITION = 16 * 1024


def _blocks_per_chunk(n_blocks, itemsize):
    """Largest divisor of n_blocks whose 128-column chunk fits the byte budget."""
    limit = max(1, CHUNK_BYTES_PER_PARTITION // (128 * itemsize))
    best = 1
    for j in range(1, n_blocks + 1):
        if n_blocks % j == 0 and j <= limit:
            best = j
    return best


@nki.compiler.skip_middle_end_transformations
@nki.jit
def matrix_transpose(a_tensor):
    """Return the (N, M) transpose of an (M, N) matrix; M, N multiples of 128."""
    M, N = a_tensor.shape
    out = nl.ndarray((N, M), dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    tile_dim = nl.tile_size.pmax

    assert M % tile_dim == 0 and N % tile_dim == 0, "Matrix dimensions must be multiples of 128"

    n_blocks = N // tile_dim
    J = _blocks_per_chunk(n_blocks, np.dtype(a_tensor.dtype).itemsize)
    n_chunk = tile_dim * J
    n_chunks = N // n_chunk

    # out_view[c, s, j, m] = out[c * n_chunk + s * J + j, m]
    out_view = out.reshape((n_chunks, tile_dim, J, M))

    for i in nl.affine_range(M // tile_dim):
        for c in nl.affine_range(n_chunks):
            # One contiguous-row load: 128 rows x n_chunk columns.
            strip = nl.ndarray((tile_dim, n_chunk), dtype=a_tensor.dtype, buffer=nl.sbuf)
            nisa.dma_copy(
                dst=strip,
                src=a_tensor[i * tile_dim:(i + 1) * tile_dim, c * n_chunk:(c + 1) * n_chunk],
            )
            # strip_view[r, s, j] = strip[r, s * J + j]
            strip_view = strip.reshape((tile_dim, tile_dim, J))

            gathered = nl.ndarray((tile_dim, J, tile_dim), dtype=a_tensor.dtype, buffer=nl.sbuf)
            for j in nl.affine_range(J):
                # PE transpose lands in PSUM; DMA cannot read PSUM, so copy it out.
                block_t = nisa.nc_transpose(strip_view[:, :, j])
                gathered[:, j, :] = nisa.tensor_copy(block_t)

            nisa.dma_copy(
                dst=out_view[c, :, :, i * tile_dim:(i + 1) * tile_dim],
                src=gathered,
            )

    return out
