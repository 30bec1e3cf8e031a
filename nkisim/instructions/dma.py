"""DMA instructions: copies between HBM and SBUF, with casting and optional accumulation."""
from __future__ import annotations

import numbers

import numpy as np

from ..errors import ArgumentError, ShapeError, UnsupportedOperationError
from ..indexing import Predicate, kept_box
from ..memory import Buffer
from ..registry import INSTRUCTIONS, instruction, machine_call
from ..tensor import DeviceTensor
from ..trace import Engine
from .common import ANY_HBM, DMA_ENDPOINTS, SBUF_ONLY, operand, out_dtype

_TRANSPOSE_AXES = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


def transposed_shape(shape: tuple) -> tuple | None:
    """The shape dma_transpose makes of a tensor of `shape` (None for a rank it does not take)."""
    perm = _TRANSPOSE_AXES.get(len(shape))
    return None if perm is None else tuple(shape[i] for i in perm)


# engines whose sequencer may trigger a DMA: the hardware DGE is commanded from the Sync or
# Scalar engine, the software DGE runs on GpSimd (nki-dge.rst)
_DGE_ENGINES = {2: (Engine.SYNC, Engine.SCALAR), 1: (Engine.GPSIMD,)}


def _issue_engine(engine, dge_mode: int) -> int:
    """The engine `engine=` asks to trigger the DMA (0: the compiler's choice)."""
    if engine is None or int(engine) == 0:
        return 0
    allowed = _DGE_ENGINES.get(dge_mode, (Engine.SYNC, Engine.SCALAR))
    if dge_mode == 0 or int(engine) not in [int(e) for e in allowed]:
        names = " or ".join(f"nisa.engine.{e.name.lower()}" for e in allowed)
        why = "dge_mode=none prebuilds descriptors, so no engine triggers it" if dge_mode == 0 else \
            f"only {names} can trigger a DMA in this DGE mode"
        raise UnsupportedOperationError(f"engine={engine!r} cannot issue 'dma_copy': {why}",
                                        remedy=f"use engine={names}, or leave engine unset for the compiler to choose"
                                        if dge_mode else "leave engine unset, or pick a DGE mode",
                                        code="err_instruction_engine_unsupported")
    return int(engine)


def _oob_error_only(oob_mode) -> None:
    """oob_mode: error (0, what every access in bounds needs) or skip (1), which only an
    indirect (dynamic-offset) access has and nkisim does not simulate."""
    if isinstance(oob_mode, bool) or not isinstance(oob_mode, numbers.Integral) or int(oob_mode) not in (0, 1):
        raise ArgumentError(f"'oob_mode' of 'dma_copy' must be nisa.oob_mode.error or nisa.oob_mode.skip, got "
                            f"{oob_mode!r}")
    if int(oob_mode) == 1:
        raise UnsupportedOperationError("dma_copy with oob_mode=nisa.oob_mode.skip needs indirect (dynamic) "
                                        "offsets, which nkisim does not simulate",
                                        remedy="keep every access in bounds and leave oob_mode unset",
                                        code="err_not_simulated")


def _masked_box(src: DeviceTensor, dst: DeviceTensor, mask):
    """(src, dst, mask) of a copy, its mask taken into the operands when it keeps exactly a box
    of two operands of one shape: the box's copy, unmasked. The DMA then moves the box's rows,
    as a masked access pattern does on the device (not the whole tile's, which the cost model
    would count), and its trace holds strided accesses instead of per-element offsets of a tile
    that overhangs its tensor (a ragged last tile: 128 KB a load, which a 224x224 conv2d
    loading its rows that way ran out of memory with)."""
    if mask is None or src.shape != dst.shape or not isinstance(mask, Predicate):
        return src, dst, mask
    box = kept_box(mask, dst.shape)
    if box is None:
        return src, dst, mask
    if all(b.start == 0 and b.stop == n for b, n in zip(box, dst.shape)):
        return src, dst, None
    return src[box], dst[box], None


@instruction("dma_copy", Engine.DMA, kinds=("copy",))
def dma_copy(m, *, dst, src, mask=None, dst_rmw_op=None, oob_mode=0, dge_mode=3, engine=None, name=None):
    operand(src, "dma_copy", "src", DMA_ENDPOINTS, tile=False, mask=mask)
    operand(dst, "dma_copy", "dst", DMA_ENDPOINTS, tile=False, mask=mask)
    m.check_writable(dst, "dma_copy destination")
    if src.size != dst.size:
        raise ShapeError(
            f"dma_copy needs src and dst with the same number of elements: src {src._label()} has "
            f"{src.size}, dst {dst._label()} has {dst.size}",
            remedy="slice src and dst to matching sizes", code="err_dma_shape_mismatch")
    _oob_error_only(oob_mode)
    accumulate = dst_rmw_op is not None
    if accumulate and dst_rmw_op is not np.add and getattr(dst_rmw_op, "name", None) != "add":
        raise UnsupportedOperationError(f"dst_rmw_op={dst_rmw_op!r} is not supported by 'dma_copy'",
                                        remedy="only np.add (accumulate into dst) is allowed")
    mode = int(dge_mode if dge_mode is not None else 3)
    src, dst, mask = _masked_box(src, dst, mask)
    m.emit("dma_copy", Engine.DMA, "copy", [src], [dst], mask=mask, accumulate=accumulate,
           dge_mode=mode, issue_engine=_issue_engine(engine, mode))


@instruction("dma_transpose", Engine.DMA, kinds=("permute",))
def dma_transpose(m, src, *, axes=None, mask=None, dtype=None):
    operand(src, "dma_transpose", "src", DMA_ENDPOINTS, tile=False, mask=mask)
    perm = _TRANSPOSE_AXES.get(src.ndim)
    if perm is None:
        raise ShapeError(f"dma_transpose takes a 2-D, 3-D or 4-D tensor, got {src._label()}")
    if axes is not None and tuple(axes) != perm:
        raise UnsupportedOperationError(f"axes={tuple(axes)} is not supported by 'dma_transpose' for a "
                                        f"{src.ndim}-D tensor", remedy=f"use axes={perm}")
    if src.dtype.itemsize not in (2, 4):
        raise UnsupportedOperationError(f"dma_transpose moves 2- or 4-byte elements, got {src.dtype.name}",
                                        code="err_instruction_unsupported_dtypes")
    # the 0.6 binding's dst when it names one (a DMA writes SBUF itself), else a new tile
    result = m.result_tile(tuple(src.shape[i] for i in perm), out_dtype(dtype, src.dtype), Buffer.SBUF)
    m.emit("dma_transpose", Engine.DMA, "permute", [src], [result], mask=mask, params={"perm": list(perm)})
    return result


def dma_move(m, dst: DeviceTensor, src: DeviceTensor, mask=None) -> None:
    """A plain DMA between two tensors of equal element count (nl.load / nl.store)."""
    src, dst, mask = _masked_box(src, dst, mask)
    m.emit("dma_copy", Engine.DMA, "copy", [src], [dst], mask=mask)


def _legacy_atomic_rmw(m, dst, value, op, *, mask=None):
    """SDK 2.26's nl.atomic_rmw: dst = op(dst, value) on HBM, op np.add only, lowered onto
    dma_copy(dst_rmw_op=np.add) (a scalar value is first filled into an SBUF tile of dst's shape
    by nisa.memset). Elements pair as in dma_copy: equal counts, row-major. The reference says dst
    "only supports indirect dynamic indexing currently"; nkisim has no indirect indexing (such a
    subscript is refused where it is written), and takes a static subscript of dst as the same
    read-modify-write."""
    instr = "nl.atomic_rmw"
    if op is not np.add and getattr(op, "name", None) != "add":
        raise UnsupportedOperationError(f"op of {instr} is {op!r}: SDK 2.26 supports only np.add",
                                        remedy="pass op=np.add")
    operand(dst, instr, "dst", ANY_HBM, tile=False, mask=mask)
    if isinstance(value, (numbers.Number, np.number)) and not isinstance(value, (bool, np.bool_)):
        value = INSTRUCTIONS["memset"].semantics(m, dst.shape, value, dst.dtype)
    elif not isinstance(value, DeviceTensor):
        raise ShapeError(f"value of {instr} must be a tile or a number, got {type(value).__name__}",
                         remedy="pass an SBUF tile, or a Python number", code="err_operand_must_be_tensor")
    operand(value, instr, "value", SBUF_ONLY, mask=mask)
    if value.size != dst.size:
        raise ShapeError(f"value {value._label()} of {instr} has {value.size} elements, dst {dst._label()} "
                         f"{dst.size}", remedy="give value as many elements as the dst subscript selects",
                         code="err_dma_shape_mismatch")
    INSTRUCTIONS["dma_copy"].semantics(m, dst=dst, src=value, mask=mask, dst_rmw_op=np.add)


legacy_atomic_rmw = machine_call(_legacy_atomic_rmw, "nl.atomic_rmw")
legacy_atomic_rmw.__name__ = legacy_atomic_rmw.__qualname__ = "atomic_rmw"
