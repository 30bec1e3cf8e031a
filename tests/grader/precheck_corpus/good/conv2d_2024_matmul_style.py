"""The 2024 (Trn1) conv2d style: nl.matmul with transpose_x, nl.load_transpose2d, nl.mgrid
index grids, nl.zeros in HBM, typing via neuronxcc.nki.typing, plus copy/json/pprint/sys
constants in small helpers."""
import copy
import json
import pprint
import sys
from typing import TYPE_CHECKING

import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt

if TYPE_CHECKING:
    from typing import Dict

DEFAULTS = {"rows": 2, "pool": 1}
LARGE = sys.maxsize if sys.version_info >= (3, 8) else 2 ** 31


def config(**overrides):
    cfg = copy.deepcopy(DEFAULTS)
    cfg.update(overrides)
    if cfg.get("verbose"):
        pprint.pprint(cfg)
        print(json.dumps(cfg, sort_keys=True))
    return cfg


@nki.jit
def fused_conv2d_maxpool(X: nt.tensor, W: nt.tensor, bias: nt.tensor, pool_size=1):
    cfg = config(pool=pool_size)
    B, C_in, H, Wd = X.shape
    C_out, _, FH, FW = W.shape
    OH, OW = H - FH + 1, Wd - FW + 1
    P = nl.tile_size.pmax
    out = nl.ndarray((B, C_out, OH // cfg["pool"], OW // cfg["pool"]), dtype=X.dtype, buffer=nl.shared_hbm)
    scratch = nl.zeros((P, OW), dtype=nl.float32, buffer=nl.hbm)
    i_p, i_f = nl.mgrid[0:P, 0:OW]
    for b in nl.affine_range(B):
        for co in nl.affine_range(C_out // P):
            bias_t = nl.load(bias[co * P + nl.arange(P)[:, None]])
            for r in nl.sequential_range(OH):
                acc = nl.zeros((P, OW), dtype=nl.float32, buffer=nl.psum)
                for ci in nl.affine_range(C_in // P):
                    for fh in nl.affine_range(FH):
                        for fw in nl.affine_range(FW):
                            w_t = nl.load_transpose2d(W[co * P:(co + 1) * P, ci * P:(ci + 1) * P, fh, fw])
                            x_t = nl.load(X[b, ci * P + i_p, r + fh, fw + i_f])
                            acc += nl.matmul(w_t, x_t, transpose_x=True)
                row = nl.add(acc, bias_t)
                nl.store(scratch[i_p, i_f], value=row)
                nl.store(out[b, co * P + i_p, r // cfg["pool"], i_f // cfg["pool"]],
                         value=nl.load(scratch[i_p, i_f]), mask=(r % cfg["pool"] == 0))
    return out
