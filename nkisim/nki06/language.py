"""`nki.language` of NKI 0.6 (nl), simulated: dtypes, buffers, tile sizes, op codes, tensor
allocation and the loop aliases."""
from types import SimpleNamespace as _NS

import numpy as _np

from .. import dtypes as _dt
from ..alu import OPS as _OPS
from ..alu import NkiOp as _NkiOp
from ..errors import ArgumentError as _ArgumentError
from ..errors import MemorySpaceError as _MemorySpaceError
from ..errors import NotSimulatedError as _NotSimulatedError
from ..machine import current_machine as _current_machine
from ..memory import Buffer as _Buffer
from ..registry import kernel_facing as _kernel_facing
from ..settings import HardwareLimits as _Limits
from ..source import user_site as _user_site
from ..tensor import checked_shape as _checked_shape
from . import names as _names

# ----- data types -----
float32, float16, bfloat16, tfloat32 = _dt.float32, _dt.float16, _dt.bfloat16, _dt.tfloat32
float8_e4m3, float8_e5m2 = _dt.float8_e4m3, _dt.float8_e5m2
int8, int16, int32 = _dt.int8, _dt.int16, _dt.int32
uint8, uint16, uint32 = _dt.uint8, _dt.uint16, _dt.uint32
bool_ = _dt.bool_
fp32 = _NS(min=float(_np.finfo(_np.float32).min))

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

# ----- ALU / activation / reduction op codes (op=nl.add, op=nl.exp, ...) -----
globals().update({name: op for name, op in _OPS.items()})


# ----- allocation -----
def ndarray(shape, dtype, buffer=sbuf, name="", address=None):
    """A tensor of `shape` in `buffer` (SBUF unless said), its partition dimension first."""
    if isinstance(buffer, str):
        raise _MemorySpaceError(f"buffer={buffer!r} is a string; since NKI 0.3 buffers are named by the "
                                "nki.language objects", remedy="pass buffer=nl.sbuf, nl.psum, nl.hbm, "
                                                              "nl.private_hbm or nl.shared_hbm",
                                code="err_unsupported_memory")
    if not isinstance(buffer, _Buffer):
        raise _MemorySpaceError(f"unknown buffer {buffer!r}",
                                remedy="pass buffer=nl.sbuf, nl.psum, nl.hbm, nl.private_hbm or nl.shared_hbm")
    if address is not None:
        raise _NotSimulatedError("nl.ndarray(address=...) places a tensor by hand, which nkisim does not "
                                 "simulate (tensors at chosen addresses may alias)",
                                 remedy="leave address unset: the allocator places the tensor")
    if not isinstance(name, str):
        raise _ArgumentError(f"'name' of nl.ndarray must be a string, got {type(name).__name__}")
    raw = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    return _current_machine().allocate(_checked_shape(raw), dtype, buffer, name=name, site=_user_site(2))


# ----- loops: all three are Python's range() since NKI 0.2 (fully unrolled) -----
def affine_range(*args):
    return range(*args)


def sequential_range(*args):
    return range(*args)


def static_range(*args):
    return range(*args)


# ----- a kernel runs as one program on one logical NeuronCore -----
def program_id(axis=0):
    return 0


def num_programs(axes=None):
    return 1


def program_ndim():
    return 0


# Every function a kernel calls reports any exception at the kernel's own line (op objects
# such as nl.add stay as they are: they are also op codes passed to instructions).
for _name, _fn in list(globals().items()):
    if (callable(_fn) and not _name.startswith("_") and not isinstance(_fn, (type, _NkiOp))
            and getattr(_fn, "__module__", "").startswith("nkisim")):
        globals()[_name] = _kernel_facing(_fn, f"nl.{_name}")
del _name, _fn

# documented NKI 0.6 names nkisim does not simulate, legacy names 0.6 removed, and non-NKI names
__getattr__ = _names.language_getattr(globals())
