"""`neuronxcc.nki.language` (nl), simulated."""
from types import SimpleNamespace as _NS

import numpy as _np

from .. import dtypes as _dt
from ..alu import OPS as _OPS
from ..alu import NkiOp as _NkiOp
from ..indexing import arange, ds, mgrid
from ..instructions.language_ops import (
    BlockDimensionWarning, broadcast_to, copy, device_print, empty_like, full, load,
    load_transpose2d, matmul, ndarray, ones, ones_like, par_dim, store, transpose,
    where, zeros, zeros_like)
from ..instructions.gather import gather_flattened
from ..instructions.constants import legacy_shared_constant as shared_constant
from ..instructions.constants import legacy_shared_identity_matrix as shared_identity_matrix
from ..instructions.dma import legacy_atomic_rmw as atomic_rmw
from ..instructions.select import legacy_dropout as dropout
from ..instructions.loops import loop_reduce
from ..instructions import normalizations as _normalizations
from ..instructions.random_tiles import rand, random_seed
from ..memory import Buffer as _Buffer
from ..registry import kernel_facing as _kernel_facing
from ..settings import HardwareLimits as _Limits
from . import names as _names

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


# ----- functions the compiler lowers onto several instructions (nkisim.instructions.normalizations)
def softmax(x, axis, *, dtype=None, compute_dtype=None, mask=None):
    return _normalizations.softmax(x, axis, dtype=dtype, compute_dtype=compute_dtype, mask=mask)


def rms_norm(x, w, axis, n, epsilon=1e-06, *, dtype=None, compute_dtype=None, mask=None):
    return _normalizations.rms_norm(x, w, axis, n, epsilon, dtype=dtype, compute_dtype=compute_dtype, mask=mask)


# ----- iterators: concrete Python ints, as the course's kernels need -----
def _range(*args):
    ints = []
    for a in args:
        if isinstance(a, float) and a.is_integer():
            a = int(a)
        ints.append(a)
    return range(*ints)


def affine_range(*args):
    return _range(*args)


def sequential_range(*args):
    return _range(*args)


def static_range(*args):
    return _range(*args)


# ----- SPMD: the instance of a launch grid being traced (nkisim.launch) -----
from ..launch import NcDim as nc, SpmdDim as spmd_dim  # noqa: E402,F401
from ..instructions.collectives import all_reduce  # noqa: E402,F401 (the instances of a grid reducing a tile)
from ..running import current_machine as _current_machine  # noqa: E402
from ..errors import KernelContractError as _KernelContractError  # noqa: E402
import builtins as _builtins  # noqa: E402 (nl.max and others shadow the builtins here)


def _axis(axis, sizes: tuple, where: str) -> int:
    if isinstance(axis, bool) or not isinstance(axis, (int, _np.integer)):
        raise _KernelContractError(f"the axis of {where} must be an int, got {axis!r}", code="err_unsupported_args")
    if not 0 <= int(axis) < _builtins.max(len(sizes), 1):
        raise _KernelContractError(f"{where}({axis}) names an axis the launch grid does not have: the grid is "
                                   f"{list(sizes) if sizes else 'absent (one instance)'}",
                                   remedy=f"ask for an axis in 0..{_builtins.max(len(sizes), 1) - 1}",
                                   code="err_program_id_axis_out_of_bounds")
    return int(axis)


def program_id(axis):
    """This instance's index along `axis` of the launch grid (0 without a grid)."""
    m = _current_machine()
    axis = _axis(axis, m.grid_sizes, "nl.program_id")
    return m.program_ids[axis] if m.grid_sizes else 0


def num_programs(axes=None):
    """The instances of the launch grid: all of them, or along `axes` (an int or a tuple of ints)."""
    sizes = _current_machine().grid_sizes
    if axes is None:
        return int(_np.prod(sizes)) if sizes else 1
    chosen = axes if isinstance(axes, tuple) else (axes,)
    total = 1
    for a in chosen:
        axis = _axis(a, sizes, "nl.num_programs")
        total *= sizes[axis] if sizes else 1
    return total


def program_ndim():
    """The launch grid's number of dimensions (0 without a grid)."""
    return len(_current_machine().grid_sizes)


def expand_dims(data, axis):
    """nl.expand_dims(data, axis): a view with a size-1 dimension inserted at `axis`."""
    return data.expand_dims(axis)


# Every function a kernel calls reports any exception at the kernel's own line (op objects
# such as nl.add stay as they are: they are also op codes passed to instructions).
for _name, _fn in list(globals().items()):
    if (callable(_fn) and not _name.startswith("_") and not isinstance(_fn, (type, _NkiOp))
            and getattr(_fn, "__module__", "").startswith("nkisim")):
        globals()[_name] = _kernel_facing(_fn, f"nl.{_name}")
del _name, _fn


def _simulated() -> str:
    public = _names.public_names(globals())
    ops = [n for n in public if isinstance(globals()[n], _NkiOp)]
    functions = [n for n in public if n not in ops and callable(globals()[n])
                 and not isinstance(globals()[n], type)]
    return (f"nl.{', nl.'.join(functions)}; op codes/functions nl.{', nl.'.join(ops)}; dtypes, "
            "buffers and nl.tile_size")


# documented NKI names nkisim does not simulate, and names that are not NKI at all
_names.NAMESPACES["nl."] = globals()
__getattr__ = _names.make_getattr("nl.", globals(), _names.LANGUAGE_NOT_SIMULATED, _simulated,
                                  elsewhere=_names.elsewhere("nl."))
