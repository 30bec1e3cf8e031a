"""`nki.isa` of NKI 0.6 (nisa), simulated: every instruction takes its destination first and
returns nothing. Each lowers onto the one instruction table (see nkisim.nki06.bind)."""
from __future__ import annotations

import numbers as _numbers

import numpy as _np

from .. import dtypes as _dt
from ..alu import OPS as _OPS
from ..alu import binary_op as _binary_op
from ..errors import ArgumentError as _ArgumentError
from ..errors import MemorySpaceError as _MemorySpaceError
from ..errors import ShapeError as _ShapeError
from ..errors import UnsupportedOperationError as _Unsupported
from ..indexing import Predicate as _Predicate
from ..instructions.dma import transposed_shape as _transposed_shape
from ..memory import Buffer as _Buffer
from ..platforms import current_rules as _current_rules
from ..tensor import DeviceTensor as _DeviceTensor
from ..trace import Engine as _Engine
from . import bind as _bind
from . import names as _names
from .bind import binding as _binding
from .bind import into as _into
from .bind import destination as _destination
from .bind import named as _named
from .bind import semantics as _semantics


# the enums (named members only, since NKI 0.3) and their table codes: nkisim.nki06.enums
from .enums import dge_mode, dma_engine, engine, matmul_perf_mode, nc_version, oob_mode, reduce_cmd
from .enums import DGE_MODE as _DGE_MODE, OOB_MODE as _OOB_MODE, PERF_MODE as _PERF_MODE
from .enums import REDUCE_CMD as _REDUCE_CMD, TABLE_DGE_MODE as _TABLE_DGE_MODE
from .enums import TABLE_REDUCE_CMD as _TABLE_REDUCE_CMD, UNKNOWN_ENGINE as _UNKNOWN_ENGINE
from .enums import table_engine as _engine


# sequencer registers whose values are known when the kernel is traced (nkisim.nki06.registers)
from .registers import VirtualRegister, register_alloc, register_load, register_move, register_store  # noqa: E402,F401
# the Vector engine's statistics and top-8 instructions (nkisim.nki06.stats)
from .bind import NkiInstruction  # noqa: E402,F401  (what every instruction returns)
# the two cores of an LNC=2 launch meeting (nkisim.nki06.meetings)
from .meetings import core_barrier, sendrecv  # noqa: E402,F401
from .stats import bn_aggr, bn_stats, max8, nc_find_index8, nc_match_replace8  # noqa: E402,F401
# fused arithmetic and scans on the Vector engine (nkisim.nki06.fused)
from .fused import reciprocal, scalar_tensor_tensor, tensor_scalar_cumulative, tensor_scalar_reduce  # noqa: E402,F401
from .fused import tensor_tensor_scan  # noqa: E402,F401
# selection on the Vector engine (nkisim.nki06.select)
from .select import dropout, range_select, select_reduce, tensor_copy_predicated  # noqa: E402,F401
# cross-partition movement and gathers (nkisim.nki06.gather)
from .gather import nc_n_gather, nc_stream_shuffle, nonzero_with_count, sequence_bounds  # noqa: E402,F401
from .topk import topk  # noqa: E402,F401
# random bits and their seed; the DMA engines' sum (nkisim.nki06.random_bits)
from .random_bits import dma_compute, rng, set_rng_seed  # noqa: E402,F401
from .random_bits import rand_get_state, rand_set_state  # noqa: E402,F401  (the GpSimd generator's state)
# NeuronCore-v4 (Trainium3): MX quantization, the fast exponential, rand2, activate2 (nkisim.nki06.trn3)
from .trn3 import activate2, exponential, quantize_mx, rand2  # noqa: E402,F401


def get_nc_version() -> nc_version:
    """The NeuronCore version of the platform the kernel is traced for."""
    return nc_version(_current_rules().nc_version)


def get_nc_sub_version() -> int:
    """The silicon revision within the generation: nkisim models the first (0)."""
    return 0


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
    _named(dge_mode, _DGE_MODE, "dge_mode", "dma_copy")
    mode = _TABLE_DGE_MODE[dge_mode]
    if engine is not _UNKNOWN_ENGINE and dge_mode is not _DGE_MODE.hwdge:
        raise _Unsupported("'engine' of 'nisa.dma_copy' chooses the sequencer that drives the hardware DGE: it "
                           "is valid only with dge_mode=nisa.dge_mode.hwdge",
                           remedy="add dge_mode=nisa.dge_mode.hwdge, or leave engine unset",
                           code="err_instruction_engine_unsupported")
    if mode == 2 and getattr(src, "dtype", None) is not None and src.dtype != getattr(dst, "dtype", src.dtype):
        raise _Unsupported(f"nisa.dma_copy with dge_mode=nisa.dge_mode.hwdge cannot cast "
                           f"{_dt.name_of(src.dtype)} to {_dt.name_of(dst.dtype)}",
                           remedy="copy between tensors of the same dtype, or leave dge_mode unset",
                           code="err_instruction_unsupported_dtypes")
    _named(oob_mode, _OOB_MODE, "oob_mode", "dma_copy")
    if oob_mode is _OOB_MODE.skip:
        raise _Unsupported("nisa.dma_copy with oob_mode=nisa.oob_mode.skip needs indirect (vector) offsets, "
                           "which nkisim does not simulate", remedy="keep every access in bounds",
                           code="err_not_simulated")
    if priority is not None and not isinstance(priority, _numbers.Integral):
        raise _ArgumentError(f"'priority' of 'nisa.dma_copy' must be an integer, got {priority!r}")
    eng = _engine(engine, "dma_copy")
    _dma_copy(m, dst=dst, src=src, dge_mode=mode, engine=eng or None)


@_binding
def dma_transpose(m, dst, src, axes=None, priority=None, dge_mode=dge_mode.unknown, oob_mode=oob_mode.error,
                  name=None):
    _bind.instruction_name(name, "dma_transpose")
    _named(dge_mode, _DGE_MODE, "dge_mode", "dma_transpose")
    _named(oob_mode, _OOB_MODE, "oob_mode", "dma_transpose")
    if oob_mode is _OOB_MODE.skip:
        raise _Unsupported("oob_mode=nisa.oob_mode.skip is valid only with an indirect source, which nkisim "
                           "does not simulate", remedy="leave oob_mode unset", code="err_not_simulated")
    if dge_mode is _DGE_MODE.swdge:
        raise _Unsupported("dge_mode=nisa.dge_mode.swdge makes dma_transpose a gather transpose of an indirect "
                           "source, which nkisim does not simulate", remedy="leave dge_mode unset",
                           code="err_not_simulated")
    if priority is not None and not isinstance(priority, _numbers.Integral):
        raise _ArgumentError(f"'priority' of 'nisa.dma_transpose' must be an integer, got {priority!r}")
    _destination(dst, "dma_transpose")
    if dst._alloc.buffer is not _Buffer.SBUF:
        raise _MemorySpaceError(f"'dst' of 'nisa.dma_transpose' must be in SBUF, got {dst._label()}")
    if getattr(src, "dtype", None) is not None and src.dtype != dst.dtype:
        raise _Unsupported(f"nisa.dma_transpose moves elements unchanged: src is {_dt.name_of(src.dtype)}, dst "
                           f"{_dt.name_of(dst.dtype)}", remedy="give dst the dtype of src",
                           code="err_instruction_unsupported_dtypes")
    expected = _transposed_shape(tuple(getattr(src, "shape", ())))
    if expected is not None and tuple(dst.shape) != expected:    # since 0.4: the transposed shape, rank and all
        raise _ShapeError(f"'dst' of 'nisa.dma_transpose' is {list(dst.shape)}; the transposed src is "
                          f"{list(expected)} (since NKI 0.4 they must be equal, rank included)",
                          remedy="allocate dst with the transposed shape of src")
    _into(m, dst, "dma_transpose", _dma_transpose, src, axes=axes, dtype=dst.dtype)    # the DMA writes dst itself


# ----- Tensor Engine -------------------------------------------------------------------------------
def _matmul_written(m, dst, key) -> str:
    """How much of dst's PSUM region (`key`: _region_key(dst)) earlier nc_matmuls wrote: "all",
    "none" or "part". accumulate=None's "first write overwrites, later writes accumulate" is per
    PSUM location. Kept per allocation: the exact regions written (the common case, one lookup)
    and a bitmap of the elements written."""
    regions, bitmap = _matmul_writes(m, dst)
    if key in regions:
        return "all"
    if bitmap is None:
        return "none"
    written = bitmap[dst._offset_map().ravel()]
    return "all" if written.all() else "part" if written.any() else "none"


def _matmul_writes(m, dst):
    table = m.core_state.setdefault("_psum_matmul_writes", {})
    entry = table.get(dst._alloc.id)
    if entry is None:
        entry = table[dst._alloc.id] = [set(), None]
    return entry


def _mark_written(m, dst, key) -> None:
    entry = _matmul_writes(m, dst)
    if key in entry[0]:
        return
    entry[0].add(key)
    if entry[1] is None:
        entry[1] = _np.zeros(dst._alloc.size, dtype=bool)
    entry[1][dst._offset_map().ravel()] = True


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
    _named(perf_mode, _PERF_MODE, "perf_mode", "nc_matmul")
    if perf_mode is not _PERF_MODE.none:
        raise _Unsupported("nisa.nc_matmul perf_mode=double_row is not simulated by nkisim",
                           remedy="leave perf_mode unset", code="err_not_simulated")
    if dst._alloc.buffer is not _Buffer.PSUM:
        raise _MemorySpaceError(f"'dst' of 'nisa.nc_matmul' must be a PSUM tile, got {dst._label()} in "
                                f"{dst.buffer.value}", remedy="allocate it with nl.ndarray(..., nl.float32, "
                                                             "buffer=nl.psum)")
    bf16_psum = _current_rules().nc_version >= 4     # [MM]: "Starting NeuronCore-v4, dst can either be float32 or bfloat16"
    if dst.dtype != _dt.float32 and not (bf16_psum and dst.dtype == _dt.bfloat16):
        raise _Unsupported(f"'dst' of 'nisa.nc_matmul' is {_dt.name_of(dst.dtype)}; " + (
                           "it must be a float32 or bfloat16 tile" if bf16_psum else
                           "the dst tile must be a float32 tile in NeuronCore-v2 and NeuronCore-v3 (a bfloat16 dst is "
                           "NeuronCore-v4's, trn3)"), remedy="use a float32 PSUM tile" + (
                           "" if bf16_psum else ', or trace for trn3 (spec platform = "trn3", '
                           'SimSettings(platform="trn3") or NEURON_PLATFORM_TARGET_OVERRIDE=trn3)'),
                           code="err_instruction_unsupported_dtypes")
    key, adding = _psum_accumulation(m, dst, accumulate, "nc_matmul")
    _into(m, dst, "nc_matmul", _nc_matmul, stationary, moving, is_stationary_onezero=is_stationary_onezero,
          is_moving_onezero=is_moving_onezero, is_transpose=is_transpose, tile_position=tile_position,
          tile_size=tile_size)
    m.trace[-1].accumulate = adding
    _mark_written(m, dst, key)


def _psum_accumulation(m, dst, accumulate, instr: str) -> tuple:
    """(dst's region key, whether the matmul adds onto dst): accumulate=None adds where an earlier
    matmul wrote all of dst's region and overwrites where none did."""
    key = _region_key(dst)
    if accumulate is None:
        written = _matmul_written(m, dst, key)
        if written == "part":
            raise _Unsupported(
                f"nisa.{instr} into {dst._label()}: part of this PSUM region was written by an earlier matmul "
                "and part was not, so accumulate=None would add in some places and overwrite in others",
                remedy="pass accumulate=True or accumulate=False explicitly, or use matching PSUM regions",
                code="err_not_simulated")
        return key, written == "all"
    if isinstance(accumulate, bool):
        if accumulate and _matmul_written(m, dst, key) != "all":
            raise _Unsupported(
                f"nisa.{instr}(accumulate=True) into {dst._label()}, which no earlier matmul wrote whole: adding onto "
                "PSUM that a matmul did not initialise is undefined behaviour on Trainium",
                remedy="let the first matmul of the group overwrite (accumulate=False, or leave it None)",
                code="err_psum_accumulate_uninitialized")
        return key, accumulate
    raise _ArgumentError(f"'accumulate' of 'nisa.{instr}' must be True, False or None, got {accumulate!r}")


_nc_matmul_mx = _semantics("nc_matmul_mx")


@_binding
def nc_matmul_mx(m, dst, stationary, moving, stationary_scale, moving_scale, tile_position=None, tile_size=None,
                 accumulate=None, name=None):
    """NeuronCore-v4's MX matmul (nkisim.instructions.mx), accumulating into dst as nc_matmul does."""
    _bind.instruction_name(name, "nc_matmul_mx")
    _destination(dst, "nc_matmul_mx")
    _nc_matmul_mx(m, dst, stationary, moving, stationary_scale, moving_scale, tile_position=tile_position,
                  tile_size=tile_size)
    # the table checked the platform and operands first; the accumulation rule is nc_matmul's
    key, adding = _psum_accumulation(m, dst, accumulate, "nc_matmul_mx")
    m.trace[-1].accumulate = adding
    _mark_written(m, dst, key)


@_binding
def nc_transpose(m, dst, data, engine=engine.unknown, name=None):
    _bind.instruction_name(name, "nc_transpose")
    _destination(dst, "nc_transpose")
    if getattr(data, "dtype", None) is not None and data.dtype != dst.dtype:
        raise _Unsupported(f"nisa.nc_transpose keeps the dtype: data is {_dt.name_of(data.dtype)}, dst "
                           f"{_dt.name_of(dst.dtype)}", remedy="give dst the dtype of data (cast afterwards with "
                                                                "nisa.tensor_copy)", code="err_instruction_unsupported_dtypes")
    _into(m, dst, "nc_transpose", _nc_transpose, data, dtype=dst.dtype,
          engine=_engine(engine, "nc_transpose"))


# ----- Vector / Scalar / GpSimd --------------------------------------------------------------------
@_binding
def tensor_copy(m, dst, src, engine=engine.unknown, name=None):
    _bind.instruction_name(name, "tensor_copy")
    _destination(dst, "tensor_copy")
    _into(m, dst, "tensor_copy", _tensor_copy, src, dtype=dst.dtype, engine=_engine(engine, "tensor_copy"))


@_binding
def tensor_tensor(m, dst, data1, data2, op, engine=engine.unknown, name=None):
    if name is not None:
        _bind.instruction_name(name, "tensor_tensor")
    _destination(dst, "tensor_tensor")
    if (type(data1) is _DeviceTensor and type(data2) is _DeviceTensor and data1.shape != data2.shape
            and (data1.shape[:1] != data2.shape[:1] or data1.size != data2.size)):
        raise _ShapeError(f"nisa.tensor_tensor takes two tiles of the same partitions and element count, got "
                          f"{list(data1.shape)} and {list(data2.shape)} (NKI 0.6 does not broadcast)",
                          remedy="for a per-partition (P, 1) operand use nisa.tensor_scalar(dst, data, op0, "
                                 "operand0=column)", code="err_param_shape_incompatible_with_numpy")
    if type(data1) is _DeviceTensor and type(data2) is _DeviceTensor and data1.shape != data2.shape:
        data2 = data2.reshape(data1.shape)  # same elements a partition: paired in row-major order
    # (no dtype=: the table writes dst itself, in dst's dtype, through Machine.result_tile)
    _into(m, dst, "tensor_tensor", _tensor_tensor, data1, data2, op, engine=_engine(engine, "tensor_tensor"))


@_binding
def tensor_scalar(m, dst, data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False,
                  engine=engine.unknown, name=None):
    _bind.instruction_name(name, "tensor_scalar")
    _destination(dst, "tensor_scalar")
    _into(m, dst, "tensor_scalar", _tensor_scalar, data, op0, operand0, reverse0, op1, operand1, reverse1,
          dtype=dst.dtype, engine=_engine(engine, "tensor_scalar"))


@_binding
def tensor_reduce(m, dst, op, data, axis, negate=False, keepdims=False, name=None):
    _bind.instruction_name(name, "tensor_reduce")
    _destination(dst, "tensor_reduce")
    _trailing_axes(axis, data, "tensor_reduce")
    _into(m, dst, "tensor_reduce", _tensor_reduce, op, data, axis, dtype=dst.dtype, negate=negate,
          keepdims=keepdims)


def _trailing_axes(axis, data, instr: str) -> None:
    """NKI 0.6 reduces the last free dimensions, contiguous and ending at the final one."""
    ndim = getattr(data, "ndim", None)
    if ndim is None:
        return                       # the table's own check says what data must be
    axes = (axis,) if isinstance(axis, _numbers.Integral) else tuple(axis)
    wanted = tuple(range(ndim - len(axes), ndim))
    normal = tuple(sorted(int(a) + ndim if int(a) < 0 else int(a) for a in axes))
    if normal != wanted or 0 in normal:
        choices = ", ".join(str(tuple(range(k, ndim))) for k in range(ndim - 1, 0, -1))
        raise _ShapeError(f"axis={axis!r} of 'nisa.{instr}' on a {ndim}-D tile: NKI 0.6 reduces the last free "
                          f"dimensions, contiguous and ending at the final one ({choices})",
                          remedy="reorder the tile's dimensions (t.permute(...)) so the reduced ones come last",
                          code="err_reduce_axis_not_trailing")


@_binding
def tensor_partition_reduce(m, dst, op, data, name=None):
    _bind.instruction_name(name, "tensor_partition_reduce")
    _destination(dst, "tensor_partition_reduce")
    _into(m, dst, "tensor_partition_reduce", _tensor_partition_reduce, op, data, dtype=dst.dtype)


@_binding
def activation(m, dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None,
               reduce_cmd=reduce_cmd.idle, name=None):
    _bind.instruction_name(name, "activation")
    _destination(dst, "activation")
    _named(reduce_cmd, _REDUCE_CMD, "reduce_cmd", "activation")
    if reduce_cmd is _REDUCE_CMD.load_reduce:
        raise _Unsupported("reduce_cmd=nisa.reduce_cmd.load_reduce is not simulated for nisa.activation",
                           remedy="use reset_reduce or reduce", code="err_not_simulated")
    _into(m, dst, "activation", _activation, op, data, bias=bias, scale=scale, reduce_op=reduce_op,
          reduce_res=reduce_res, reduce_cmd=_TABLE_REDUCE_CMD[reduce_cmd], dtype=dst.dtype)


@_binding
def activation_reduce(m, dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0, name=None):
    """activation with reduce_cmd=reset_reduce: the free-axis reduction of the result goes to reduce_res."""
    _bind.instruction_name(name, "activation_reduce")
    _destination(dst, "activation_reduce")
    _into(m, dst, "activation_reduce", _activation, op, data, bias=bias, scale=scale, reduce_op=reduce_op,
          reduce_res=reduce_res, reduce_cmd=_TABLE_REDUCE_CMD[_REDUCE_CMD.reset_reduce], dtype=dst.dtype)


@_binding
def memset(m, dst, value, engine=engine.unknown, name=None):
    _bind.instruction_name(name, "memset")
    _destination(dst, "memset")
    if not isinstance(value, (_numbers.Number, _np.number)) or isinstance(value, bool):
        raise _Unsupported(f"nisa.memset fills with a number, got {type(value).__name__}",
                           code="err_expected_constant_value")
    if dst.dtype.kind in "iub" and not isinstance(value, (_numbers.Integral, _np.integer)):
        raise _Unsupported(f"nisa.memset value {value!r} does not fit the {_dt.name_of(dst.dtype)} tile "
                           f"{dst._label()}", remedy="fill an integer tile with an integer value",
                           code="err_memset_value_dtype_mismatch")
    if _dt.is_packed_x4(dst.dtype) and value != 0:
        raise _Unsupported(f"nisa.memset of the x4-packed {_dt.name_of(dst.dtype)} tile {dst._label()} with {value!r}: "
                           "for x4 packed types only value=0 is supported", remedy="fill with 0",
                           code="err_memset_value_dtype_mismatch")
    _into(m, dst, "memset", _memset, dst.shape, value, dst.dtype, engine=_engine(engine, "memset"))


def _pattern_values(pattern, offset, channel_multiplier, parts: int, instr: str) -> _np.ndarray:
    """offset + channel_multiplier * p + sum(step_i * i_i) over the tile (p, i_1, i_2, ...):
    `pattern` is [[step, count], ...] over the free dimensions, as NKI 0.6 writes it."""
    try:
        steps = [(int(step), int(count)) for step, count in pattern]
    except (TypeError, ValueError):
        raise _ShapeError(f"'pattern' of 'nisa.{instr}' must be a list of [step, count] pairs, got {pattern!r}",
                          code="err_expected_index_expression") from None
    if not steps or len(steps) > 4 or any(count < 1 for _, count in steps):
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
    _sbuf_only(dst, "iota", "dst")
    values = _pattern_values(pattern, offset, channel_multiplier, dst.shape[0], "iota")
    if values.size != dst.size:
        raise _ShapeError(f"'pattern' of 'nisa.iota' covers {values.size} elements per tile, dst "
                          f"{dst._label()} holds {dst.size}", remedy="make the counts multiply to dst's free size")
    m.emit("iota", _Engine.GPSIMD, "iota", [], [dst], params={"values": values.reshape(dst.shape).astype(_np.int32)})


def _sbuf_only(t, instr: str, param: str) -> None:
    if t._alloc.buffer is not _Buffer.SBUF:
        raise _MemorySpaceError(f"'{param}' of 'nisa.{instr}' must be in SBUF (the GpSimd engine cannot reach "
                                f"PSUM), got {t._label()}", remedy="use an SBUF tile")


_COMPARISONS = ("equal", "not_equal", "greater", "greater_equal", "less", "less_equal")


@_binding
def affine_select(m, dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op=_OPS["equal"],
                  offset=0, name=None):
    _bind.instruction_name(name, "affine_select")
    _destination(dst, "affine_select")
    _sbuf_only(dst, "affine_select", "dst")
    compare = _binary_op(cmp_op, "affine_select")
    if compare.name not in _COMPARISONS:
        raise _Unsupported(f"cmp_op of 'nisa.affine_select' must be a comparison, got {compare.name}",
                           remedy="use nl.greater_equal, nl.greater, nl.less, nl.less_equal, nl.equal or "
                                  "nl.not_equal")
    values = _pattern_values(pattern, offset, channel_multiplier, dst.shape[0], "affine_select")
    if values.size != on_true_tile.size:
        raise _ShapeError(f"'pattern' of 'nisa.affine_select' covers {values.size} elements, on_true_tile "
                          f"{on_true_tile._label()} holds {on_true_tile.size}")
    predicate = compare.fn(values.reshape(on_true_tile.shape), 0).astype(bool)
    _into(m, dst, "affine_select", _affine_select, _Predicate(predicate), on_true_tile, on_false_value, dtype=dst.dtype)


# the __future__ import's binding is not an NKI name
del annotations  # noqa: F821

# documented NKI 0.6 instructions nkisim does not simulate yet, and names that are not NKI at all
__getattr__ = _names.isa_getattr(globals())
