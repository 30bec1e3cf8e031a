"""Kernels matching the hardware experiments the cost model is calibrated on
(trn2-cost-model.md section 4). The vector-add experiments use vector_add.py's factories;
the transpose experiment used the plainest tiled transpose, which is this one."""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.compiler.skip_middle_end_transformations
@nki.jit
def transpose_per_tile(a_tensor):
    """One 128x128 tile at a time: load, Tensor Engine transpose, PSUM->SBUF copy, store."""
    M, N = a_tensor.shape
    out = nl.ndarray((N, M), dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    tile = nl.tile_size.pmax
    for i in nl.affine_range(M // tile):
        for j in nl.affine_range(N // tile):
            a_sb = nl.ndarray((tile, tile), dtype=a_tensor.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=a_sb, src=a_tensor[i * tile:(i + 1) * tile, j * tile:(j + 1) * tile])
            t_psum = nisa.nc_transpose(a_sb)
            t_sb = nisa.tensor_copy(t_psum)
            nisa.dma_copy(dst=out[j * tile:(j + 1) * tile, i * tile:(i + 1) * tile], src=t_sb)
    return out
