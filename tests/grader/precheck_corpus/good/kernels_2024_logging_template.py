"""Part 1 in the 2024 (Trn1) style: the template's own `import logging` and
`logging.disable(logging.OFF)`, nl.load/nl.store, nl.arange index grids and masks."""
import logging

import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

logging.disable(logging.OFF)


@nki.jit
def vector_add_naive(a_vec, b_vec):
    out = nl.ndarray(a_vec.shape, dtype=a_vec.dtype, buffer=nl.shared_hbm)
    a = nl.load(a_vec)
    b = nl.load(b_vec)
    res = nl.add(a, b)
    nl.store(out, value=res)
    return out


@nki.jit
def vector_add_tiled(a_vec, b_vec):
    out = nl.ndarray(a_vec.shape, dtype=a_vec.dtype, buffer=nl.shared_hbm)
    M = a_vec.shape[0]
    ROW_CHUNK = 128
    for m in nl.affine_range((M + ROW_CHUNK - 1) // ROW_CHUNK):
        i_p = m * ROW_CHUNK + nl.arange(ROW_CHUNK)[:, None]
        a_tile = nl.load(a_vec[i_p], mask=(i_p < M))
        b_tile = nl.load(b_vec[i_p], mask=(i_p < M))
        res = nl.add(a_tile, b_tile, mask=(i_p < M))
        nl.store(out[i_p], value=res, mask=(i_p < M))
    return out


@nki.jit
def matrix_transpose(a_tensor):
    M, N = a_tensor.shape
    out = nl.ndarray((N, M), dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    tile_dim = nl.tile_size.pmax
    i_p, i_f = nl.mgrid[0:tile_dim, 0:tile_dim]
    for m in nl.affine_range(M // tile_dim):
        for n in nl.affine_range(N // tile_dim):
            tile = nl.load(a_tensor[m * tile_dim + i_p, n * tile_dim + i_f])
            nl.store(out[n * tile_dim + i_p, m * tile_dim + i_f], value=nl.transpose(tile))
    return out
