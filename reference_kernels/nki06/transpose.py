"""Reference matrix transpose for part 1 (Tensor Engine), in NKI 0.6.

The same kernel as reference_kernels/transpose.py, written in the current dialect; nc_transpose
is its only compute instruction (tensor_copy only moves each transposed block out of PSUM).

The layout that keeps every DMA large: for a strip of 128 input rows and a chunk of
`n_chunk = 128 * J` columns, transpose block j takes the strided columns {s * J + j : s < 128}
rather than 128 contiguous ones. Its transpose then holds the output rows {s * J + j}, so once
the J blocks are gathered into a (128, J, 128) tile, partition s holds the J consecutive output
rows s*J .. s*J + J - 1 and the whole tile goes out in one strided store (each run a
128-element piece of a row). Per strip and chunk: one load, J transposes and PSUM->SBUF
copies, one store.
"""

import numpy as np
import nki
import nki.language as nl
import nki.isa as nisa

# Bytes per partition of one input chunk (the gathered output tile is as large). Big enough to
# amortise the DMAs' fixed costs, small enough to leave room for the next chunk's buffers.
CHUNK_BYTES_PER_PARTITION = 16 * 1024


def _blocks_per_chunk(n_blocks, itemsize):
    """The largest divisor of n_blocks whose chunk of 128-column blocks fits the byte budget."""
    limit = max(1, CHUNK_BYTES_PER_PARTITION // (128 * itemsize))
    best = 1
    for j in range(1, n_blocks + 1):
        if n_blocks % j == 0 and j <= limit:
            best = j
    return best


@nki.jit
def matrix_transpose(a_tensor):
    """Return the (N, M) transpose of an (M, N) matrix; M and N multiples of 128."""
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
            # one load of contiguous rows: 128 rows x n_chunk columns
            strip = nl.ndarray((tile_dim, n_chunk), dtype=a_tensor.dtype, buffer=nl.sbuf)
            nisa.dma_copy(
                dst=strip,
                src=a_tensor[i * tile_dim:(i + 1) * tile_dim, c * n_chunk:(c + 1) * n_chunk],
            )
            # strip_view[r, s, j] = strip[r, s * J + j]
            strip_view = strip.reshape((tile_dim, tile_dim, J))

            gathered = nl.ndarray((tile_dim, J, tile_dim), dtype=a_tensor.dtype, buffer=nl.sbuf)
            for j in nl.affine_range(J):
                # the PE transpose writes PSUM, which DMA cannot read: copy it out to SBUF
                block_t = nl.ndarray((tile_dim, tile_dim), dtype=a_tensor.dtype, buffer=nl.psum)
                nisa.nc_transpose(dst=block_t, data=strip_view[:, :, j])
                nisa.tensor_copy(dst=gathered[:, j, :], src=block_t)

            nisa.dma_copy(
                dst=out_view[c, :, :, i * tile_dim:(i + 1) * tile_dim],
                src=gathered,
            )

    return out
