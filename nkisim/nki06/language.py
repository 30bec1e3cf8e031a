"""`nki.language` of NKI 0.6 (nl), simulated: dtypes, buffers, tile sizes, op codes, tensor
allocation and the loop aliases."""
import dataclasses as _dataclasses
from types import SimpleNamespace as _NS

import numpy as _np

from .. import dtypes as _dt
from ..alu import OPS as _OPS
from ..alu import NkiOp as _NkiOp
from ..errors import ArgumentError as _ArgumentError
from ..errors import MemorySpaceError as _MemorySpaceError
from ..errors import NotSimulatedError as _NotSimulatedError
from ..running import current_machine as _current_machine
from ..memory import Buffer as _Buffer
from ..registry import kernel_facing as _kernel_facing
from ..limits import HardwareLimits as _Limits
from ..source import user_site as _user_site
from ..tensor import DeviceTensor as _DeviceTensor
from ..tensor import checked_shape as _checked_shape
from ..indexing import ds
from ..instructions import language_ops as _ops
from ..instructions import normalizations as _normalizations
from ..instructions import random_tiles as _random_tiles
from ..instructions.constants import shared_constant as _shared_constant
from ..instructions.gather import gather_flattened as _gather_flattened
from ..instructions.select import dropout as _dropout
from ..trace import Engine as _Engine
from . import isa as _isa
from . import views as _views
from . import names as _names

# ----- data types -----
float32, float16, bfloat16, tfloat32 = _dt.float32, _dt.float16, _dt.bfloat16, _dt.tfloat32
float8_e4m3, float8_e5m2 = _dt.float8_e4m3, _dt.float8_e5m2
int8, int16, int32 = _dt.int8, _dt.int16, _dt.int32
uint8, uint16, uint32 = _dt.uint8, _dt.uint16, _dt.uint32
bool_ = _dt.bool_
# nkisim stores NKI's float8_e4m3 in the OCP e4m3fn format (ml_dtypes.float8_e4m3fn) in both
# dialects, so 0.6's explicit OCP name is the same dtype
float8_e4m3fn = _dt.float8_e4m3
# NeuronCore-v4's MX types: the E8M0 scale and the x4-packed elements (nkisim.instructions.mx)
float8_e8m0fnu = _dt.float8_e8m0fnu
float8_e5m2_x4, float8_e4m3fn_x4, float4_e2m1fn_x4 = _dt.float8_e5m2_x4, _dt.float8_e4m3fn_x4, _dt.float4_e2m1fn_x4
fp32 = _NS(min=float(_np.finfo(_np.float32).min))

# ----- buffers -----
sbuf = _Buffer.SBUF
psum = _Buffer.PSUM
hbm = private_hbm = _Buffer.HBM
shared_hbm = _Buffer.SHARED_HBM
MemoryRegion = _NS(sbuf=sbuf, psum=psum, private_hbm=private_hbm, shared_hbm=shared_hbm)


def is_hbm(buffer) -> bool:
    return _as_buffer(buffer).is_hbm


def is_on_chip(buffer) -> bool:
    return _as_buffer(buffer).on_chip


def is_psum(buffer) -> bool:
    return _as_buffer(buffer) is psum


def is_sbuf(buffer) -> bool:
    return _as_buffer(buffer) is sbuf


def _as_buffer(buffer):
    if not isinstance(buffer, _Buffer):
        raise _ArgumentError(f"expected a memory region (nl.sbuf, nl.psum, nl.private_hbm, nl.shared_hbm), got "
                             f"{buffer!r}")
    return buffer


class NKIObject:
    """The base of a kernel's own classes (NKI 0.6): nothing for nkisim to add."""


class _TensorType(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, _DeviceTensor)

    def __call__(cls, *args, **kwargs):
        raise _NotSimulatedError("nl.NkiTensor(shape, dtype, storage, ...) builds a tensor on storage by hand, which "
                                 "nkisim does not simulate", remedy="allocate with nl.ndarray(shape, dtype, buffer=...)")


class NkiTensor(metaclass=_TensorType):
    """What isinstance(t, nl.NkiTensor) checks: every tensor a kernel holds."""

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
# the op codes of nisa.activate2's stages only (NeuronCore-v4): bypass, prelu, abs_max, abs_min
from ..instructions.activate2 import STAGE_OPS as _STAGE_OPS  # noqa: E402
globals().update(_STAGE_OPS)


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


def _filled(shape, value, dtype, buffer, name):
    t = ndarray(shape, dtype, buffer=buffer, name=name)
    if t.buffer.is_hbm:
        raise _MemorySpaceError("creating an HBM tensor with an initial value is not supported",
                                remedy="allocate it with nl.ndarray(..., buffer=nl.shared_hbm) and write it by DMA",
                                code="err_hbm_tensor_with_init_value_not_supported")
    _isa.memset(dst=t, value=value)
    return t


def zeros(shape, dtype, buffer=sbuf, name=""):
    return _filled(shape, 0 if _dt.to_dtype(dtype).kind in "iub" else 0.0, dtype, buffer, name)


def ones(shape, dtype, buffer=sbuf, name=""):
    return _filled(shape, 1 if _dt.to_dtype(dtype).kind in "iub" else 1.0, dtype, buffer, name)


def full(shape, fill_value, dtype, buffer=sbuf, name=""):
    return _filled(shape, fill_value, dtype, buffer, name)


def zeros_like(x, dtype=None, buffer=None, name=""):
    return zeros(x.shape, dtype or x.dtype, buffer or x.buffer, name)


def empty_like(x, dtype=None, buffer=None, name=""):
    return ndarray(x.shape, dtype or x.dtype, buffer or x.buffer, name)


# ----- the experimental wrappers (each one or two nki.isa instructions) -----
def load(src, dtype=None):
    """A new SBUF tile holding src (an HBM tensor)."""
    t = ndarray(src.shape, dtype or src.dtype, buffer=sbuf)
    _isa.dma_copy(dst=t, src=src)
    return t


def store(dst, value):
    """Write an SBUF tile into an HBM tensor."""
    _isa.dma_copy(dst=dst, src=value)


def _copy_wrapper(x, dtype=None):
    """A copy of an SBUF or PSUM tile on SBUF (the Vector engine's tensor_copy, stable since 0.6)."""
    t = ndarray(x.shape, dtype or x.dtype, buffer=sbuf)
    _isa.tensor_copy(dst=t, src=x, engine=_isa.engine.vector)
    return t


class _CopyCode(_NkiOp):
    """nl.copy is two things in NKI 0.6, as in 0.1: the activation table's identity (op=nl.copy,
    "Supported Activation Functions for NKI ISA") and the experimental wrapper nl.copy(x, dtype=None).
    So it is the op code, and calling it is the wrapper (reported at the kernel's line)."""

    def __call__(self, x, dtype=None):
        return _copy_call(x, dtype)


_copy_call = _kernel_facing(_copy_wrapper, "nl.copy")
copy = _CopyCode(**{_f.name: getattr(_OPS["copy"], _f.name) for _f in _dataclasses.fields(_OPS["copy"])})


def matmul(x, y, transpose_x=False):
    """x.T @ y into a new PSUM tile (NKI 0.6 supports transpose_x=True only)."""
    if transpose_x != True:                                  # noqa: E712 (a flag, compared as the docs do)
        raise _NotSimulatedError("nl.matmul works only with transpose_x=True in NKI 0.6 (a known issue of the "
                                 "experimental wrapper)", remedy="pass transpose_x=True (x holds the contraction "
                                                                 "dimension on its partitions), or call "
                                                                 "nisa.nc_matmul(dst=..., stationary=x, moving=y)")
    out = ndarray((x.shape[1] if len(x.shape) > 1 else 1,) + tuple(y.shape[1:]), float32, buffer=psum)
    _isa.nc_matmul(dst=out, stationary=x, moving=y)
    return out


def transpose(x, dtype=None):
    """The 2-D transpose of an SBUF tile, into a new PSUM tile (the Tensor Engine's)."""
    out = ndarray((x.shape[1], x.shape[0]), x.dtype, buffer=psum)
    _isa.nc_transpose(dst=out, data=x)
    return copy(out, dtype) if dtype is not None and dtype != x.dtype else out


def expand_dims(x, axis):
    return _views.expand_dim(x, axis)


def where(condition, x, y, dtype=None):
    return _ops.where(condition, x, y, dtype=dtype)


def broadcast_to(x, shape, dtype=None):
    result = _ops.broadcast_to(x, shape=shape)
    return copy(result, dtype) if dtype is not None and _dt.to_dtype(dtype) != result.dtype else result


def load_transpose2d(src, dtype=None):
    return _ops.load_transpose2d(src, dtype=dtype)


def gather_flattened(data, indices, axis=0, dtype=None):
    """nisa.nc_n_gather as a function: indices into each partition's flattened free dimensions."""
    if axis != 0:
        raise _NotSimulatedError(f"nl.gather_flattened(axis={axis!r}): the 0.6 reference documents the gather "
                                 "over each partition's flattened free dimensions (axis=0) only",
                                 remedy="leave axis unset")
    return _gather_flattened(data, indices, dtype=dtype)


def dropout(x, rate, dtype=None):
    """nisa.dropout as a function: each element zeroed with probability `rate` (nkisim's draw)."""
    return _dropout(x, rate, dtype=dtype)


def shared_identity_matrix(n, dtype=uint8, dst=None):
    """An (n, n) identity in SBUF (an iota of 0s and 1s on the GpSimd engine), or into `dst`."""
    size = _checked_shape((n,))[0]
    tile = ndarray((size, size), dtype, buffer=sbuf) if dst is None else dst
    if not isinstance(tile, _DeviceTensor) or tuple(tile.shape) != (size, size) or tile.buffer is not sbuf:
        raise _ArgumentError(f"dst of nl.shared_identity_matrix must be an ({size}, {size}) SBUF tile, got {tile!r}")
    _current_machine().emit("iota", _Engine.GPSIMD, "iota", [], [tile],
                            params={"values": _np.eye(size, dtype=_np.int32)})
    return tile


def rand(shape, dtype, buffer=sbuf, name=""):
    """A tile of uniform values in [0, 1) (nkisim's draw; nkisim.instructions.random_tiles)."""
    return _random_tiles.rand(shape, dtype, buffer=buffer, name=name)


def random_seed(seed):
    """Seed nl.rand's (and nisa.rng's Vector) generator with a [1, 1] SBUF tensor's value."""
    _random_tiles.random_seed(seed)


def shared_constant(constant):
    """A NumPy array (or .npy path) as a shared-HBM tensor embedded with the kernel."""
    return _shared_constant(constant)


def softmax(x, axis=-1, dtype=None):
    """exp(x - max) / sum over `axis`, lowered onto the table's instructions (nkisim.instructions.normalizations)."""
    return _normalizations.softmax(x, axis, dtype=dtype)


def rms_norm(x, w, axis, n, epsilon=1e-06, dtype=None, compute_dtype=None):
    """x / RMS(x) * w, RMS over `axis` of n values (nkisim.instructions.normalizations)."""
    return _normalizations.rms_norm(x, w, axis, n, epsilon, dtype=dtype, compute_dtype=compute_dtype)


def device_print(print_prefix, tensor):
    _ops.device_print(print_prefix, tensor)


# ----- loops: all three are Python's range() since NKI 0.2 (fully unrolled) -----
def affine_range(*args):
    return range(*args)


def sequential_range(*args):
    return range(*args)


def static_range(*args):
    return range(*args)


# ----- runtime loops (each iteration traced with its counter's value) and no_reorder ---------------
from .loops import dynamic_range, fori_loop, no_reorder, while_loop  # noqa: E402,F401


# ----- a kernel runs as one program on one logical NeuronCore -----
def program_id(axis=0):
    """Which physical core of the logical NeuronCore runs this copy of the kernel (kernel[lnc])."""
    _grid_axis(axis, "nl.program_id")
    return _current_machine().core


def num_programs(axes=None):
    """The launch's size: the logical NeuronCore's physical cores (1 without kernel[lnc])."""
    if axes is not None:
        _grid_axis(axes, "nl.num_programs")
    return _current_machine().cores


def program_ndim():
    """0 without a launch grid, 1 under kernel[lnc] with lnc > 1."""
    return 1 if _current_machine().cores > 1 else 0


def _grid_axis(axis, where: str) -> None:
    if isinstance(axis, bool) or axis != 0:
        raise _ArgumentError(f"{where}({axis!r}): an NKI 0.6 launch has one axis, 0 (kernel[lnc])",
                             code="err_unsupported_args")


# Every function a kernel calls reports any exception at the kernel's own line (op objects
# such as nl.add stay as they are: they are also op codes passed to instructions). The loops
# that call the kernel's own body are left as they are: its exceptions are the kernel's.
for _name, _fn in list(globals().items()):
    if (callable(_fn) and not _name.startswith("_") and not isinstance(_fn, (type, _NkiOp))
            and getattr(_fn, "__module__", "").startswith("nkisim") and _name not in ("fori_loop", "while_loop")):
        globals()[_name] = _kernel_facing(_fn, f"nl.{_name}")
del _name, _fn

# documented NKI 0.6 names nkisim does not simulate, legacy names 0.6 removed, and non-NKI names
__getattr__ = _names.language_getattr(globals())
