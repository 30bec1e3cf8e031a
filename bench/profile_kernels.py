"""Calibration kernels with the structure of the kernels in /work/shared/data/trn2-profiles/.

The profiles' sources are not available; these kernels are written from the structure the
profiles themselves show (instruction counts per engine and opcode, DMA triggers per queue,
descriptor bytes), from trn2-conv-measurements.md C2/C3, and from the course handout (part 1).
bench/profiles.py prints each kernel's counts beside its profile's, so a structural mismatch
stays visible.

* part1-vadd-fd{1k,2k}: the handout's vector_add_stream (reference_kernels/vector_add.py).
* part1-transpose-1024-{a..d}: one 128x128 tile at a time, PSUM->SBUF copy on ACT
  (reference_kernels/calibration.py: transpose_per_tile, the P3 kernel); `transpose_per_tile_dve`
  below is run e's variant, whose 64 copies ran on the Vector engine (DVE 0x46).
* conv-a / conv-b (C2, tiny N = 14 matmuls), `conv_tiny_matmuls` below. What the profile shows
  and this kernel copies: 4 weight DMAs, 36 PE transposes with their PSUM->SBUF copies on DVE;
  2 bias DMAs; 60 input DMAs of 128 x 3 x 16 (one per output row and ci tile: 960 descriptors
  of 16 x (768 + 4) B, not C2's 120; the load does not depend on the co tile); per (row, co
  tile) 18 matmuls into one PSUM tile, a PSUM->SBUF copy to the input dtype on DVE (0x47 in
  fp16, 0x46 in fp32), the bias add in the input dtype from SBUF (0x41, 14 elements, no PSUM
  operand), a max reduce (0x42: 60 of ~14 elements at pool 1, 30 of ~28 at pool 2) and an
  output DMA (60 at pool 1, 30 at pool 2). No PSUM memset (the hardware has none: the first
  matmul of each accumulation assigns).
* conv-c / conv-d (C3): `conv_hbm_gather_dma_transpose` below: calibration.py's C3 kernel (36
  element-granular HBM->HBM gathers, 36 DMA transposes, 36 engine-unspecified SBUF copies,
  2 input, 2 bias and 2 output DMAs, 36 N = 420 matmuls, 2 bias adds from PSUM), which has the
  profile's counts, calibration.conv_rows_tiled with memset=False (the profile has no PSUM memset).
"""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

from reference_kernels.calibration import (conv_rows_tiled, transpose_tiles, weights_by_hbm_gather_and_dma_transpose,
                                           weights_by_pe_transpose)

P = 128


@nki.compiler.skip_middle_end_transformations
@nki.jit
def transpose_per_tile_dve(a_tensor):
    """calibration.transpose_per_tile with its PSUM->SBUF copies on the Vector engine (profile run e)."""
    return transpose_tiles(a_tensor, copy_engine=nisa.vector_engine)


def make_conv_tiny_matmuls(pool: int):
    """conv-a / conv-b: the 32x16 C2 kernel as its profile shows it (module docstring)."""

    @nki.compiler.skip_middle_end_transformations
    @nki.jit
    def conv_tiny_matmuls(X, W, bias):
        _, C_in, H, Wd = X.shape
        C_out, _, K, _ = W.shape
        n_ci, n_co = C_in // P, C_out // P
        H_out, W_out = H - K + 1, Wd - K + 1
        out = nl.ndarray((1, C_out, H_out // pool, W_out // pool), dtype=X.dtype, buffer=nl.hbm)
        # weights: one DMA per (co, ci) tile, tap-major in SBUF; 9 PE transposes each, copies on DVE
        w_t = weights_by_pe_transpose(W, copy_engine=nisa.vector_engine, tap_major=True)
        bias_sb = nl.ndarray((P, n_co, 1), dtype=bias.dtype, buffer=nl.sbuf)
        bias_hbm = bias.reshape((n_co, P, 1))
        for co in nl.affine_range(n_co):
            nisa.dma_copy(dst=bias_sb[:, co, :], src=bias_hbm[co])
        pairs = {}
        for h in nl.affine_range(H_out):
            x_rows = nl.ndarray((P, n_ci, K, Wd), dtype=X.dtype, buffer=nl.sbuf)
            for ci in nl.affine_range(n_ci):
                nisa.dma_copy(dst=x_rows[:, ci], src=X[0, ci * P:(ci + 1) * P, h:h + K, :])
            for co in nl.affine_range(n_co):
                acc = nl.ndarray((P, W_out), dtype=nl.float32, buffer=nl.psum)
                first = True
                for ci in nl.affine_range(n_ci):
                    for kh in nl.affine_range(K):
                        for kw in nl.affine_range(K):
                            prod = nisa.nc_matmul(w_t[:, ci, kh * K + kw, co * P:(co + 1) * P],
                                                  x_rows[:, ci, kh, kw:kw + W_out])
                            if first:
                                acc[...] = prod
                                first = False
                            else:
                                acc += prod
                row = nisa.tensor_copy(acc, dtype=X.dtype, engine=nisa.vector_engine)
                if pool == 1:
                    biased = nisa.tensor_tensor(row, bias_sb[:, co, :], op=nl.add, dtype=X.dtype)
                    pooled = nisa.tensor_reduce(nl.max, biased.reshape((P, W_out, 1)), axis=2, dtype=X.dtype)
                    nisa.dma_copy(dst=out[0, co * P:(co + 1) * P, h, :], src=pooled)
                    continue
                if h % 2 == 0:
                    pairs[co] = nl.ndarray((P, 2, W_out), dtype=X.dtype, buffer=nl.sbuf)
                pair = pairs[co]
                pair[:, h % 2, :] = nisa.tensor_tensor(row, bias_sb[:, co, :], op=nl.add, dtype=X.dtype)
                if h % 2 == 1:
                    pooled = nisa.tensor_reduce(nl.max, pair.reshape((P, 2, W_out // 2, 2)), axis=(1, 3),
                                                dtype=X.dtype)
                    nisa.dma_copy(dst=out[0, co * P:(co + 1) * P, h // 2, :], src=pooled)
        return out

    return conv_tiny_matmuls


conv_tiny_matmuls_pool1 = make_conv_tiny_matmuls(1)
conv_tiny_matmuls_pool2 = make_conv_tiny_matmuls(2)


@nki.compiler.skip_middle_end_transformations
@nki.jit
def conv_hbm_gather_dma_transpose(X, W, bias):
    """conv-c / conv-d (C3): calibration.weights_by_hbm_gather_and_dma_transpose (36 HBM->HBM
    element gathers, 36 DMA transposes, 36 engine-unspecified SBUF copies into the stationary
    layout), then the row-tiled conv without a PSUM memset."""
    return conv_rows_tiled(X, weights_by_hbm_gather_and_dma_transpose(W), bias, memset=False)
