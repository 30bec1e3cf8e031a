"""matrix_transpose with nl.static_range, a nested helper def, a list of tiles built in a
comprehension, nisa.dma_copy with an explicit engine, and asserts with messages."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa


@nki.compiler.skip_middle_end_transformations
@nki.jit
def matrix_transpose(a_tensor):
    M, N = a_tensor.shape
    P = nl.tile_size.pmax
    assert M % P == 0 and N % P == 0, "dimensions must be multiples of 128"
    out = nl.ndarray((N, M), dtype=a_tensor.dtype, buffer=nl.hbm)
    n_row_tiles, n_col_tiles = M // P, N // P

    def load_row(i):
        tiles = [nl.ndarray((P, P), dtype=a_tensor.dtype, buffer=nl.sbuf) for _ in range(n_col_tiles)]
        for j in nl.static_range(n_col_tiles):
            nisa.dma_copy(dst=tiles[j], src=a_tensor[i * P:(i + 1) * P, j * P:(j + 1) * P])
        return tiles

    for i in nl.affine_range(n_row_tiles):
        row = load_row(i)
        for j, tile in enumerate(row):
            flipped = nisa.nc_transpose(tile, engine=nisa.tensor_engine)
            staged = nl.ndarray((P, P), dtype=a_tensor.dtype, buffer=nl.sbuf)
            staged[...] = nisa.tensor_copy(flipped, engine=nisa.vector_engine)
            nisa.dma_copy(dst=out[j * P:(j + 1) * P, i * P:(i + 1) * P], src=staged)
    return out
