"""`neuronxcc.nki.language` (nl), simulated."""
from types import SimpleNamespace as _NS

import numpy as _np

from .. import dtypes as _dt
from ..alu import OPS as _OPS
from ..indexing import arange, mgrid
from ..instructions.language_ops import (
    BlockDimensionWarning, broadcast_to, copy, device_print, empty_like, full, load,
    load_transpose2d, matmul, ndarray, ones, ones_like, par_dim, store, transpose, unsupported,
    where, zeros, zeros_like)
from ..memory import Buffer as _Buffer
from ..settings import HardwareLimits as _Limits

# ----- data types -----
float32, float16, bfloat16, tfloat32 = _dt.float32, _dt.float16, _dt.bfloat16, _dt.tfloat32
float8_e4m3, float8_e5m2 = _dt.float8_e4m3, _dt.float8_e5m2
int8, int16, int32 = _dt.int8, _dt.int16, _dt.int32
uint8, uint16, uint32 = _dt.uint8, _dt.uint16, _dt.uint32
bool_ = _dt.bool_
fp32 = _NS(min=float(_np.finfo(_np.float32).min))
bfp16 = _NS(min=float(__import__("ml_dtypes").finfo(_dt.bfloat16).min))

# ----- buffers -----
sbuf = _Buffer.SBUF
psum = _Buffer.PSUM
hbm = private_hbm = _Buffer.HBM
shared_hbm = _Buffer.SHARED_HBM

# ----- tile sizes -----
_limits = _Limits()
tile_size = _NS(
    pmax=_limits.pmax,
    psum_fmax=_limits.psum_fmax,
    gemm_stationary_fmax=_limits.gemm_stationary_fmax,
    gemm_moving_fmax=_limits.gemm_moving_fmax,
    bn_stats_fmax=512,
    psum_min_align=4,
    sbuf_min_align=1,
    total_available_sbuf_size=_limits.sbuf_usable_bytes,
)

# ----- ALU / activation / reduction ops (each also callable on tiles) -----
globals().update({name: op for name, op in _OPS.items()})


# ----- iterators: concrete Python ints, as the course's kernels need -----
def _range(*args):
    ints = []
    for a in args:
        if isinstance(a, float) and a.is_integer():
            a = int(a)
        ints.append(a)
    return range(*ints)


def affine_range(*args, **kwargs):
    return _range(*args)


def sequential_range(*args, **kwargs):
    return _range(*args)


def static_range(*args, **kwargs):
    return _range(*args)


# ----- SPMD: a single program instance -----
def program_id(axis=0):
    return 0


def num_programs(axes=None):
    return 1


def program_ndim():
    return 0


# documented NKI functions nkisim does not simulate: a clear error rather than AttributeError
for _name in ("softmax", "rms_norm", "dropout", "gather_flattened", "loop_reduce", "all_reduce",
              "atomic_rmw", "rand", "random_seed", "shared_constant", "shared_identity_matrix", "ds"):
    globals()[_name] = unsupported(_name)
del _name
