"""A nested @nki.jit helper kernel called from the main kernel, nl.copy and nl.transpose,
tensor methods (reshape, broadcast_to) and a PSUM accumulation written as c = c + matmul."""
import numpy as np
from neuronxcc import nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa


@nki.jit
def add_bias(tile, bias_tile):
    return nisa.tensor_tensor(tile, bias_tile.broadcast_to(tile.shape), op=nl.add)


@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    B, C_in, H, Wd = X.shape
    C_out, _, FH, FW = W.shape
    OH, OW = H - FH + 1, Wd - FW + 1
    P = nl.tile_size.pmax
    out = nl.ndarray((B, C_out, OH // pool_size, OW // pool_size), dtype=X.dtype, buffer=nl.hbm)
    for co in nl.affine_range(C_out // P):
        bt = nl.ndarray((P, 1), dtype=bias.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=bt, src=bias[co * P:(co + 1) * P].reshape((P, 1)))
        for b in nl.affine_range(B):
            for r in nl.sequential_range(OH // pool_size):
                acc = nl.zeros((P, pool_size, OW), dtype=nl.float32, buffer=nl.psum)
                for ci in nl.affine_range(C_in // P):
                    w = nl.ndarray((P, P, FH, FW), dtype=W.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=w, src=W[co * P:(co + 1) * P, ci * P:(ci + 1) * P])
                    x = nl.ndarray((P, pool_size + FH - 1, Wd), dtype=X.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=x, src=X[b, ci * P:(ci + 1) * P, r * pool_size:r * pool_size + pool_size + FH - 1])
                    for fh in nl.affine_range(FH):
                        for fw in nl.affine_range(FW):
                            wt = nl.copy(nl.transpose(w[:, :, fh, fw]), dtype=W.dtype)
                            acc[...] = acc + nisa.nc_matmul(wt, x[:, fh:fh + pool_size, fw:fw + OW])
                y = add_bias(acc, bt)
                if pool_size == 2:
                    y = nisa.tensor_reduce(op=nl.max, data=y.reshape((P, 2, OW // 2, 2)), axis=[1, 3])
                nisa.dma_copy(dst=out[b, co * P:(co + 1) * P, r], src=nisa.tensor_copy(y, dtype=X.dtype))
    return out
