"""A conv2d written with helper functions, typing annotations, a frozen dataclass for the
tiling plan, math.ceil, nested defs and `from neuronxcc import nki` imports."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np
from neuronxcc import nki
from neuronxcc.nki import isa as nisa
from neuronxcc.nki import language as nl
from neuronxcc.nki.typing import tensor


@dataclass(frozen=True)
class Plan:
    c_in_tiles: int
    c_out_tiles: int
    rows_per_block: int
    pool: int

    @property
    def block_rows(self) -> int:
        return self.rows_per_block * self.pool


def make_plan(in_channels: int, out_channels: int, out_height: int, out_width: int, pool: int) -> Plan:
    P = nl.tile_size.pmax
    fmax = nl.tile_size.gemm_moving_fmax
    rows = max(1, min(out_height // pool, fmax // max(out_width, 1) // pool))
    while (out_height // pool) % rows:
        rows -= 1
    return Plan(math.ceil(in_channels / P), math.ceil(out_channels / P), rows, pool)


def load_weights(W: tensor, plan: Plan) -> List[List[object]]:
    """W transposed per filter tap: taps[fh * FW + fw][co][ci] is a (ci, co) tile."""
    out_channels, in_channels, FH, FW = W.shape
    P = nl.tile_size.pmax
    raw = nl.ndarray((plan.c_out_tiles, nl.par_dim(P), in_channels, FH, FW), dtype=W.dtype, buffer=nl.sbuf)
    for co in nl.affine_range(plan.c_out_tiles):
        nisa.dma_copy(dst=raw[co], src=W[co * P:(co + 1) * P])
    taps = []
    for fh in range(FH):
        for fw in range(FW):
            per_co = []
            for co in range(plan.c_out_tiles):
                per_ci = []
                for ci in range(plan.c_in_tiles):
                    t = nl.ndarray((P, P), dtype=W.dtype, buffer=nl.sbuf)
                    t[...] = nisa.nc_transpose(raw[co, :, ci * P:(ci + 1) * P, fh, fw])
                    per_ci.append(t)
                per_co.append(per_ci)
            taps.append(per_co)
    return taps


@nki.jit
def fused_conv2d_maxpool(X: tensor, W: tensor, bias: tensor, pool_size: int = 1,
                         plan: Optional[Plan] = None) -> tensor:
    batch_size, in_channels, H, Wd = X.shape
    out_channels, _, FH, FW = W.shape
    OH, OW = H - FH + 1, Wd - FW + 1
    plan = plan or make_plan(in_channels, out_channels, OH, OW, pool_size)
    P = nl.tile_size.pmax
    out = nl.ndarray((batch_size, out_channels, OH // pool_size, OW // pool_size), dtype=X.dtype, buffer=nl.hbm)
    taps = load_weights(W, plan)

    def bias_tile(co: int):
        t = nl.ndarray((P, 1), dtype=bias.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=bias[co * P:(co + 1) * P].reshape((P, 1)))
        return t

    biases = [bias_tile(co) for co in range(plan.c_out_tiles)]

    def pool_rows(conv, shape: Tuple[int, int, int]):
        rows, width, k = shape
        if k == 1:
            return conv
        wide = conv.reshape((P, rows, k, width // k, k))
        return nisa.tensor_reduce(op=nl.max, data=wide, axis=(2, 4))

    for b in nl.affine_range(batch_size):
        for blk in nl.sequential_range(OH // plan.block_rows):
            r0 = blk * plan.block_rows
            x_tiles = []
            for ci in range(plan.c_in_tiles):
                xt = nl.ndarray((P, plan.block_rows + FH - 1, Wd), dtype=X.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=xt, src=X[b, ci * P:(ci + 1) * P, r0:r0 + plan.block_rows + FH - 1, :])
                x_tiles.append(xt)
            for co in range(plan.c_out_tiles):
                acc = nl.zeros((P, plan.block_rows, OW), dtype=nl.float32, buffer=nl.psum)
                for fh in range(FH):
                    for fw in range(FW):
                        for ci, xt in enumerate(x_tiles):
                            acc += nisa.nc_matmul(taps[fh * FW + fw][co][ci],
                                                  xt[:, fh:fh + plan.block_rows, fw:fw + OW])
                biased = nisa.tensor_tensor(acc, biases[co], op=np.add)
                pooled = pool_rows(biased, (plan.block_rows, OW, pool_size))
                res = nisa.tensor_copy(pooled, dtype=X.dtype)
                nisa.dma_copy(dst=out[b, co * P:(co + 1) * P, r0 // pool_size:(r0 + plan.block_rows) // pool_size, :],
                              src=res)
    return out
