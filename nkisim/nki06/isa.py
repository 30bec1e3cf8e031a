"""`nki.isa` of NKI 0.6 (nisa), simulated: every instruction takes its destination first and
returns nothing. Each lowers onto the one instruction table (see nkisim.nki06.bind)."""
from __future__ import annotations

import enum as _enum
import numbers as _numbers

import numpy as _np

from .. import dtypes as _dt
from ..alu import binary_op as _binary_op
from ..errors import ArgumentError as _ArgumentError
from ..errors import MemorySpaceError as _MemorySpaceError
from ..errors import ShapeError as _ShapeError
from ..errors import UnsupportedOperationError as _Unsupported
from ..indexing import Predicate as _Predicate
from ..memory import Buffer as _Buffer
from ..platforms import current_rules as _current_rules
from ..trace import Engine as _Engine
from . import bind as _bind
from . import names as _names
from .bind import binding as _binding
from .bind import deliver as _deliver
from .bind import destination as _destination
from .bind import named as _named
from .bind import semantics as _semantics


# ----- enums: since NKI 0.3 only named members are accepted --------------------------------------
class engine(_enum.Enum):
    unknown = 0
    tensor = _Engine.TENSOR.value
    scalar = _Engine.SCALAR.value
    gpsimd = _Engine.GPSIMD.value
    vector = _Engine.VECTOR.value
    sync = _Engine.SYNC.value


class dge_mode(_enum.Enum):
    none = 0
    swdge = 1
    hwdge = 2
    unknown = 3


class oob_mode(_enum.Enum):
    error = 0
    skip = 1


class reduce_cmd(_enum.Enum):
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3


class matmul_perf_mode(_enum.Enum):
    none = 0
    double_row = 1


class nc_version(_enum.Enum):
    gen2 = 2
    gen3 = 3
    gen4 = 4


# the enum types under names that the instructions' own parameters (dge_mode=, ...) do not shadow
_ENGINE, _DGE_MODE, _OOB_MODE, _REDUCE_CMD, _PERF_MODE = engine, dge_mode, oob_mode, reduce_cmd, matmul_perf_mode


def get_nc_version() -> nc_version:
    """The NeuronCore version of the platform the kernel is traced for."""
    return nc_version(_current_rules().nc_version)


# ----- the table's functions each binding lowers onto ----------------------------------------------
_dma_copy = _semantics("dma_copy")
_dma_transpose = _semantics("dma_transpose")
_nc_matmul = _semantics("nc_matmul")
_nc_transpose = _semantics("nc_transpose")
_tensor_copy = _semantics("tensor_copy")
_tensor_tensor = _semantics("tensor_tensor")
_tensor_scalar = _semantics("tensor_scalar")
_tensor_reduce = _semantics("tensor_reduce")
_tensor_partition_reduce = _semantics("tensor_partition_reduce")
_activation = _semantics("activation")
_memset = _semantics("memset")
_affine_select = _semantics("affine_select")


def _engine(value, instr: str) -> int:
    if value is _UNKNOWN_ENGINE:       # the default: no enum lookup on tracing's hot path
        return 0
    return _named(value, _ENGINE, "engine", instr)


_UNKNOWN_ENGINE = engine.unknown


# ----- DMA -----------------------------------------------------------------------------------------
@_binding
def dma_copy(m, dst, src, priority=None, oob_mode=oob_mode.error, dge_mode=dge_mode.unknown,
             engine=engine.unknown, name=None):
    _bind.instruction_name(name, "dma_copy")
    if getattr(src, "_alloc", None) is not None and src._alloc.buffer is _Buffer.PSUM:
        raise _MemorySpaceError(
            f"nisa.dma_copy cannot read PSUM (src {src._label()}): since NKI 0.3 DMA moves data "
            "between HBM and SBUF only", remedy="copy the PSUM tile to SBUF with "
                                               "nisa.tensor_copy(dst=sbuf_tile, src=psum_tile) first",
            code="err_unsupported_memory")
    if getattr(dst, "_alloc", None) is not None and dst._alloc.buffer is _Buffer.PSUM:
        raise _MemorySpaceError(f"nisa.dma_copy cannot write PSUM (dst {dst._label()})",
                                remedy="DMA into an SBUF tile; PSUM is written by the compute engines",
                                code="err_unsupported_memory")
    mode = _named(dge_mode, _DGE_MODE, "dge_mode", "dma_copy")
    if mode == 2 and getattr(src, "dtype", None) is not None and src.dtype != getattr(dst, "dtype", src.dtype):
        raise _Unsupported(f"nisa.dma_copy with dge_mode=nisa.dge_mode.hwdge cannot cast "
                           f"{_dt.name_of(src.dtype)} to {_dt.name_of(dst.dtype)}",
                           remedy="copy between tensors of the same dtype, or leave dge_mode unset",
                           code="err_instruction_unsupported_dtypes")
    skip = _named(oob_mode, _OOB_MODE, "oob_mode", "dma_copy")
    if skip:
        raise _Unsupported("nisa.dma_copy with oob_mode=nisa.oob_mode.skip needs indirect (vector) offsets, "
                           "which nkisim does not simulate", remedy="keep every access in bounds",
                           code="err_not_simulated")
    if priority is not None and not isinstance(priority, _numbers.Integral):
        raise _ArgumentError(f"'priority' of 'nisa.dma_copy' must be an integer, got {priority!r}")
    eng = _engine(engine, "dma_copy")
    _dma_copy(m, dst=dst, src=src, dge_mode=mode, engine=eng or None)


@_binding
def dma_transpose(m, dst, src, axes=None, dge_mode=dge_mode.unknown, name=None):
    _bind.instruction_name(name, "dma_transpose")
    _named(dge_mode, _DGE_MODE, "dge_mode", "dma_transpose")
    _destination(dst, "dma_transpose")
    result = _dma_transpose(m, src, axes=axes, dtype=dst.dtype)
    _deliver(m, dst, result, "dma_transpose")


# ----- Tensor Engine -------------------------------------------------------------------------------
def _accumulates(m, dst) -> bool:
    """accumulate=None: the Tensor Engine adds into dst when the same PSUM region was written by
    the matmul just before it in dst's accumulation group: written by nc_matmul, and neither read
    nor written by anything else since. Otherwise the matmul overwrites (a new group starts)."""
    groups = m.__dict__.setdefault("_matmul_groups", {})
    alloc_id = dst._alloc.id
    last = groups.get(alloc_id)
    if last is None:
        return False
    index, key = last
    if key != _region_key(dst):
        return False
    for rec in m.trace[index + 1:]:
        if any(r.alloc_id == alloc_id for r in rec.reads) or any(r.alloc_id == alloc_id for r in rec.writes):
            return False
    return True


def _region_key(t) -> tuple:
    r = t._region or t.region()
    return (r.start, r.shape, tuple(r.strides) if r.strides is not None else None,
            None if r.offsets is None else id(r.offsets))


@_binding
def nc_matmul(m, dst, stationary, moving, is_stationary_onezero=False, is_moving_onezero=False,
              is_transpose=False, accumulate=None, tile_position=(), tile_size=(),
              perf_mode=matmul_perf_mode.none, name=None):
    _bind.instruction_name(name, "nc_matmul")
    _destination(dst, "nc_matmul")
    if _named(perf_mode, _PERF_MODE, "perf_mode", "nc_matmul"):
        raise _Unsupported("nisa.nc_matmul perf_mode=double_row is not simulated by nkisim",
                           remedy="leave perf_mode unset", code="err_not_simulated")
    if dst._alloc.buffer is not _Buffer.PSUM:
        raise _MemorySpaceError(f"'dst' of 'nisa.nc_matmul' must be a PSUM tile, got {dst._label()} in "
                                f"{dst.buffer.value}", remedy="allocate it with nl.ndarray(..., nl.float32, "
                                                             "buffer=nl.psum)")
    if dst.dtype != _dt.float32:
        raise _Unsupported(f"'dst' of 'nisa.nc_matmul' is {_dt.name_of(dst.dtype)}; the Tensor Engine "
                           "accumulates in float32 on this platform", remedy="use a float32 PSUM tile",
                           code="err_instruction_unsupported_dtypes")
    if accumulate is None:
        adding = _accumulates(m, dst)
    elif isinstance(accumulate, bool):
        adding = accumulate
    else:
        raise _ArgumentError(f"'accumulate' of 'nisa.nc_matmul' must be True, False or None, got {accumulate!r}")
    result = _nc_matmul(m, stationary, moving, is_stationary_onezero=is_stationary_onezero,
                        is_moving_onezero=is_moving_onezero, is_transpose=is_transpose,
                        tile_position=tile_position, tile_size=tile_size)
    _deliver(m, dst, result, "nc_matmul", accumulate=adding)
    m.__dict__.setdefault("_matmul_groups", {})[dst._alloc.id] = (len(m.trace) - 1, _region_key(dst))


@_binding
def nc_transpose(m, dst, data, engine=engine.unknown, name=None):
    _bind.instruction_name(name, "nc_transpose")
    _destination(dst, "nc_transpose")
    result = _nc_transpose(m, data, dtype=dst.dtype, engine=_engine(engine, "nc_transpose"))
    _deliver(m, dst, result, "nc_transpose")


# ----- Vector / Scalar / GpSimd --------------------------------------------------------------------
@_binding
def tensor_copy(m, dst, src, engine=engine.unknown, name=None):
    _bind.instruction_name(name, "tensor_copy")
    _destination(dst, "tensor_copy")
    result = _tensor_copy(m, src, dtype=dst.dtype, engine=_engine(engine, "tensor_copy"))
    _deliver(m, dst, result, "tensor_copy")


@_binding
def tensor_tensor(m, dst, data1, data2, op, engine=engine.unknown, name=None):
    if name is not None:
        _bind.instruction_name(name, "tensor_tensor")
    _destination(dst, "tensor_tensor")
    result = _tensor_tensor(m, data1, data2, op, dtype=dst.dtype, engine=_engine(engine, "tensor_tensor"))
    _deliver(m, dst, result, "tensor_tensor")


@_binding
def tensor_scalar(m, dst, data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False,
                  engine=engine.unknown, name=None):
    _bind.instruction_name(name, "tensor_scalar")
    _destination(dst, "tensor_scalar")
    result = _tensor_scalar(m, data, op0, operand0, reverse0, op1, operand1, reverse1, dtype=dst.dtype,
                            engine=_engine(engine, "tensor_scalar"))
    _deliver(m, dst, result, "tensor_scalar")


@_binding
def tensor_reduce(m, dst, op, data, axis, negate=False, keepdims=False, name=None):
    _bind.instruction_name(name, "tensor_reduce")
    _destination(dst, "tensor_reduce")
    result = _tensor_reduce(m, op, data, axis, dtype=dst.dtype, negate=negate, keepdims=keepdims)
    _deliver(m, dst, result, "tensor_reduce")


@_binding
def tensor_partition_reduce(m, dst, op, data, name=None):
    _bind.instruction_name(name, "tensor_partition_reduce")
    _destination(dst, "tensor_partition_reduce")
    result = _tensor_partition_reduce(m, op, data, dtype=dst.dtype)
    _deliver(m, dst, result, "tensor_partition_reduce")


@_binding
def activation(m, dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None,
               reduce_cmd=reduce_cmd.idle, name=None):
    _bind.instruction_name(name, "activation")
    _destination(dst, "activation")
    cmd = _named(reduce_cmd, _REDUCE_CMD, "reduce_cmd", "activation")
    result = _activation(m, op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
                         reduce_cmd=cmd, dtype=dst.dtype)
    _deliver(m, dst, result, "activation")


@_binding
def memset(m, dst, value, engine=engine.unknown, name=None):
    _bind.instruction_name(name, "memset")
    _destination(dst, "memset")
    if not isinstance(value, (_numbers.Number, _np.number)) or isinstance(value, bool):
        raise _Unsupported(f"nisa.memset fills with a number, got {type(value).__name__}",
                           code="err_expected_constant_value")
    if dst.dtype.kind in "iu" and not float(value).is_integer():
        raise _Unsupported(f"nisa.memset value {value!r} does not fit the {_dt.name_of(dst.dtype)} tile "
                           f"{dst._label()}", remedy="fill an integer tile with an integer value",
                           code="err_memset_value_dtype_mismatch")
    result = _memset(m, dst.shape, value, dst.dtype, engine=_engine(engine, "memset"))
    _deliver(m, dst, result, "memset")


def _pattern_values(pattern, offset, channel_multiplier, parts: int, instr: str) -> _np.ndarray:
    """offset + channel_multiplier * p + sum(step_i * i_i) over the tile (p, i_1, i_2, ...):
    `pattern` is [[step, count], ...] over the free dimensions, as NKI 0.6 writes it."""
    try:
        steps = [(int(step), int(count)) for step, count in pattern]
    except (TypeError, ValueError):
        raise _ShapeError(f"'pattern' of 'nisa.{instr}' must be a list of [step, count] pairs, got {pattern!r}",
                          code="err_expected_index_expression") from None
    if not steps or any(count < 1 for _, count in steps):
        raise _ShapeError(f"'pattern' of 'nisa.{instr}' needs at least one [step, count] pair with count >= 1")
    values = _np.full((parts,) + tuple(c for _, c in steps), int(offset), dtype=_np.int64)
    values += int(channel_multiplier) * _np.arange(parts).reshape((parts,) + (1,) * len(steps))
    for axis, (step, count) in enumerate(steps, start=1):
        shape = [1] * (len(steps) + 1)
        shape[axis] = count
        values += step * _np.arange(count).reshape(shape)
    return values


@_binding
def iota(m, dst, pattern, offset=0, channel_multiplier=0, name=None):
    _bind.instruction_name(name, "iota")
    _destination(dst, "iota")
    values = _pattern_values(pattern, offset, channel_multiplier, dst.shape[0], "iota")
    if values.size != dst.size:
        raise _ShapeError(f"'pattern' of 'nisa.iota' covers {values.size} elements per tile, dst "
                          f"{dst._label()} holds {dst.size}", remedy="make the counts multiply to dst's free size")
    m.emit("iota", _Engine.GPSIMD, "iota", [], [dst], params={"values": values.reshape(dst.shape).astype(_np.int32)})


_COMPARISONS = ("equal", "not_equal", "greater", "greater_equal", "less", "less_equal")


@_binding
def affine_select(m, dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op=None, offset=0,
                  name=None):
    _bind.instruction_name(name, "affine_select")
    _destination(dst, "affine_select")
    compare = _binary_op(cmp_op if cmp_op is not None else "greater_equal", "affine_select")
    if compare.name not in _COMPARISONS:
        raise _Unsupported(f"cmp_op of 'nisa.affine_select' must be a comparison, got {compare.name}",
                           remedy="use nl.greater_equal, nl.greater, nl.less, nl.less_equal, nl.equal or "
                                  "nl.not_equal")
    values = _pattern_values(pattern, offset, channel_multiplier, dst.shape[0], "affine_select")
    if values.size != on_true_tile.size:
        raise _ShapeError(f"'pattern' of 'nisa.affine_select' covers {values.size} elements, on_true_tile "
                          f"{on_true_tile._label()} holds {on_true_tile.size}")
    predicate = compare.fn(values.reshape(on_true_tile.shape), 0).astype(bool)
    result = _affine_select(m, _Predicate(predicate), on_true_tile, on_false_value, dtype=dst.dtype)
    _deliver(m, dst, result, "affine_select")


# documented NKI 0.6 instructions nkisim does not simulate yet, and names that are not NKI at all
__getattr__ = _names.isa_getattr(globals())
