"""Dtype dispatch through getattr with literal names and a dict of dtypes, a global counter,
isinstance checks, numpy scalars, math.prod and time measured around a helper."""
import math
import time
import warnings
from collections import namedtuple

import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa

Tiling = namedtuple("Tiling", ["rows", "cols"])
ACC_DTYPES = {"float32": nl.float32, "bfloat16": nl.bfloat16, "float16": nl.float16}
CALLS = 0


def accumulate_dtype(name):
    if name not in ACC_DTYPES:
        warnings.warn(f"unknown dtype {name!r}, accumulating in float32")
    return ACC_DTYPES.get(name, getattr(nl, "float32"))


def count_call():
    global CALLS
    CALLS += 1
    return CALLS


def elements(shape):
    return math.prod(shape) if isinstance(shape, tuple) else int(np.prod(np.asarray(shape)))


@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    started = time.perf_counter()
    count_call()
    B, C_in, H, Wd = X.shape
    C_out, _, FH, FW = W.shape
    OH, OW = H - FH + 1, Wd - FW + 1
    P = nl.tile_size.pmax
    acc_dtype = accumulate_dtype(str(np.dtype(np.float32)))
    zero = np.float32(0.0)
    tiling = Tiling(rows=pool_size, cols=OW)
    assert elements((P, tiling.rows * tiling.cols)) <= P * nl.tile_size.gemm_moving_fmax, "tile too wide"
    out = nl.ndarray((B, C_out, OH // pool_size, OW // pool_size), dtype=X.dtype, buffer=nl.hbm)
    for b in nl.affine_range(B):
        for co in nl.affine_range(C_out // P):
            bt = nl.ndarray((P, 1), dtype=bias.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=bt, src=bias[co * P:(co + 1) * P])
            for r in nl.sequential_range(OH // tiling.rows):
                acc = nl.zeros((P, tiling.rows, tiling.cols), dtype=acc_dtype, buffer=nl.psum)
                for ci in nl.affine_range(C_in // P):
                    w = nl.ndarray((P, P, FH, FW), dtype=W.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=w, src=W[co * P:(co + 1) * P, ci * P:(ci + 1) * P])
                    x = nl.ndarray((P, tiling.rows + FH - 1, Wd), dtype=X.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=x, src=X[b, ci * P:(ci + 1) * P, r * tiling.rows:r * tiling.rows + tiling.rows + FH - 1])
                    for fh in nl.affine_range(FH):
                        for fw in nl.affine_range(FW):
                            acc += nisa.nc_matmul(nisa.tensor_copy(nisa.nc_transpose(w[:, :, fh, fw])),
                                                  x[:, fh:fh + tiling.rows, fw:fw + OW])
                y = nisa.tensor_scalar(acc, np.maximum, zero) if False else nisa.tensor_tensor(acc, bt, op=nl.add)
                if pool_size == 2:
                    y = nisa.tensor_reduce(op=nl.max, data=y.reshape((P, 2, OW // 2, 2)), axis=[1, 3])
                nisa.dma_copy(dst=out[b, co * P:(co + 1) * P, r], src=nisa.tensor_copy(y, dtype=X.dtype))
    if hasattr(nl, "device_print") and CALLS > 1000:
        print(f"traced in {time.perf_counter() - started:.2f} s")
    return out
