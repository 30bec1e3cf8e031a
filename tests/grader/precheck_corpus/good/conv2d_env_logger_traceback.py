"""Debug switches read from the environment, a module logger, sys.path set up for a local
checkout, and traceback.print_exc in an except block around a helper."""
import logging
import os
import sys
import traceback

sys.path.append(os.path.join(os.path.dirname(__file__), ".."))

import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa

VERBOSE = os.environ.get("CONV_VERBOSE", "0") == "1" or bool(os.getenv("NKI_DEBUG"))
logger = logging.getLogger(__name__)
logger.setLevel(logging.DEBUG if VERBOSE else logging.WARNING)
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")


def plan_rows(out_height, out_width, pool):
    fmax = nl.tile_size.gemm_moving_fmax
    rows = pool
    try:
        while (rows + pool) * out_width <= fmax and out_height % (rows + pool) == 0:
            rows += pool
    except Exception:
        traceback.print_exc()
        rows = pool
    logger.debug("rows per block: %d", rows)
    return rows


@nki.compiler.skip_middle_end_transformations
@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    B, C_in, H, Wd = X.shape
    C_out, _, FH, FW = W.shape
    OH, OW = H - FH + 1, Wd - FW + 1
    P = nl.tile_size.pmax
    rows = plan_rows(OH, OW, pool_size)
    if VERBOSE:
        print(f"[conv] B={B} C_in={C_in} C_out={C_out} H={H} W={Wd} rows={rows}", file=sys.stderr)
    out = nl.ndarray((B, C_out, OH // pool_size, OW // pool_size), dtype=X.dtype, buffer=nl.hbm)
    w_t = nl.ndarray((C_out // P, C_in // P, FH, FW, nl.par_dim(P), P), dtype=W.dtype, buffer=nl.sbuf)
    for co in nl.affine_range(C_out // P):
        for ci in nl.affine_range(C_in // P):
            raw = nl.ndarray((P, P, FH, FW), dtype=W.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=raw, src=W[co * P:(co + 1) * P, ci * P:(ci + 1) * P])
            for fh in nl.affine_range(FH):
                for fw in nl.affine_range(FW):
                    w_t[co, ci, fh, fw] = nisa.nc_transpose(raw[:, :, fh, fw])
    for b in nl.affine_range(B):
        for blk in nl.affine_range(OH // rows):
            for co in nl.affine_range(C_out // P):
                acc = nl.zeros((P, rows, OW), dtype=nl.float32, buffer=nl.psum)
                for ci in nl.affine_range(C_in // P):
                    x = nl.ndarray((P, rows + FH - 1, Wd), dtype=X.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=x, src=X[b, ci * P:(ci + 1) * P, blk * rows:blk * rows + rows + FH - 1])
                    for fh in nl.affine_range(FH):
                        for fw in nl.affine_range(FW):
                            acc += nisa.nc_matmul(w_t[co, ci, fh, fw], x[:, fh:fh + rows, fw:fw + OW])
                bt = nl.ndarray((P, 1), dtype=bias.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=bt, src=bias[co * P:(co + 1) * P])
                y = nisa.tensor_tensor(acc, bt, op=nl.add)
                if pool_size > 1:
                    y = nisa.tensor_reduce(op=nl.max, data=y.reshape((P, rows // 2, 2, OW // 2, 2)), axis=(2, 4))
                nisa.dma_copy(dst=out[b, co * P:(co + 1) * P, blk * rows // pool_size:(blk + 1) * rows // pool_size],
                              src=nisa.tensor_copy(y, dtype=X.dtype))
    return out
