"""Element-wise instructions of the Vector, Scalar and GpSimd engines: copies, tensor-tensor
and tensor-scalar arithmetic, free-axis reductions, memset. Each checks its operands and
emits one program instruction; nkisim.execute does the math (fp32, rounded once)."""
from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes
from ..alu import NkiOp, binary_op, reduce_op
from ..errors import MemorySpaceError, ShapeError, UnsupportedOperationError
from ..memory import Buffer
from ..registry import instruction
from ..tensor import DeviceTensor, check_align, checked_shape
from ..trace import Engine
from .common import (ON_CHIP, broadcast_shape, engine_unspecified, number, operand, out_dtype, partitions,
                     resolve_engine, same_partitions, scalar_operand)

_ELEMENTWISE = (Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD)
_VECTOR, _GPSIMD = Engine.VECTOR, Engine.GPSIMD        # module constants: read once per instruction
_SBUF, _PSUM = Buffer.SBUF, Buffer.PSUM
_INT32_ON_GPSIMD = ("add", "subtract", "multiply")
_SELF_PROMOTING = dtypes.SELF_PROMOTING


def _no_psum_on_gpsimd(eng: Engine, instr: str, *tiles) -> None:
    if eng is Engine.GPSIMD and any(getattr(t, "buffer", None) is Buffer.PSUM for t in tiles):
        raise MemorySpaceError(f"the GpSimd engine cannot access PSUM ('{instr}')",
                               remedy="run it on the Vector or Scalar engine, or copy to SBUF first")


@instruction("tensor_copy", *_ELEMENTWISE, kinds=("copy", "broadcast"))
def tensor_copy(m, src, *, mask=None, dtype=None, engine=0):
    operand(src, "tensor_copy", "src", ON_CHIP, mask=mask)
    # PSUM evictions were measured on the Scalar engine; SBUF copies go to the Vector engine
    default = Engine.SCALAR if src.buffer is Buffer.PSUM else Engine.VECTOR
    eng = resolve_engine(engine, default, _ELEMENTWISE, "tensor_copy")
    _no_psum_on_gpsimd(eng, "tensor_copy", src)
    result = m.result_tile(src.shape, out_dtype(dtype, src.dtype), Buffer.SBUF)
    m.emit("tensor_copy", eng, "copy", [src], [result], mask=mask, auto_engine=engine_unspecified(engine))
    return result


@instruction("tensor_tensor", Engine.VECTOR, Engine.GPSIMD, kinds=("binary", "select"))
def tensor_tensor(m, data1, data2, op, *, dtype=None, mask=None, engine=0):
    # the checks of every instruction, in their order, with the calls that would only return
    # skipped (tracing's budget is a few microseconds per instruction)
    # operand() has nothing to say about a whole-partition on-chip tile with no invalid elements
    if not (type(data1) is DeviceTensor and data1._invalid is None and data1.par_axis == 0
            and data1._alloc.buffer.on_chip):
        operand(data1, "tensor_tensor", "data1", mask=mask)
    if not (type(data2) is DeviceTensor and data2._invalid is None and data2.par_axis == 0
            and data2._alloc.buffer.on_chip):
        operand(data2, "tensor_tensor", "data2", mask=mask)
    alu = op if type(op) is NkiOp and op.kind == "binary" else binary_op(op, "tensor_tensor")
    shape1, shape2 = data1.shape, data2.shape
    same_shape = shape1 == shape2
    if not same_shape and shape1[:1] != shape2[:1]:
        same_partitions("tensor_tensor", data1=data1, data2=data2)
    if data1._alloc.buffer is _PSUM and data2._alloc.buffer is _PSUM:
        raise MemorySpaceError("both inputs of 'tensor_tensor' are in PSUM; at most one may be",
                               remedy="copy one of them to SBUF with nisa.tensor_copy first")
    dtype1 = data1.dtype
    if alu.bitvec and not (dtype1.kind in "iub" and data2.dtype.kind in "iub"):
        raise UnsupportedOperationError(f"bitwise {alu!r} needs integer operands in 'tensor_tensor'",
                                        code="err_bitvec_operand_must_be_integer")
    promoted = dtype1 if dtype1 is data2.dtype and id(dtype1) in _SELF_PROMOTING else dtypes.promote(dtype1, data2.dtype)
    result_dtype = promoted if dtype is None else dtypes.to_dtype(dtype)
    name = alu.name
    # int32 add/subtract/multiply and power run on GpSimd (kind first: a dtype comparison is slow)
    int32_op = name in _INT32_ON_GPSIMD and dtype1.kind == "i" and dtype1 == dtypes.int32
    default = _GPSIMD if name == "power" or int32_op else _VECTOR
    if type(engine) is int and engine == 0:
        eng = default
    else:
        eng = resolve_engine(engine, default, (Engine.VECTOR, Engine.GPSIMD), "tensor_tensor")
    if eng is _GPSIMD:
        _no_psum_on_gpsimd(eng, "tensor_tensor", data1, data2)
    if same_shape:
        shape = shape1
    else:
        shape = broadcast_shape("tensor_tensor", shape1, shape2)
        if shape1 != shape:
            check_align(shape1, shape, "tensor_tensor", "", "")
        if shape2 != shape:
            check_align(shape2, shape, "tensor_tensor", "", "")
    # (the call result_tile makes, inline on the legacy dialect's path)
    result = (m.new_tile(shape, result_dtype, _SBUF) if m.destination is None
              else m.result_tile(shape, result_dtype, _SBUF))
    m.emit("tensor_tensor", eng, "binary", [data1, data2], [result], params={"op": name}, mask=mask, op=name)
    return result


@instruction("tensor_scalar", Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD, kinds=("scalar", "unary"))
def tensor_scalar(m, data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False, *,
                  dtype=None, mask=None, engine=0):
    operand(data, "tensor_scalar", "data", mask=mask)
    if (op1 is None) != (operand1 is None):
        raise UnsupportedOperationError("op1 and operand1 of 'tensor_scalar' must be given together",
                                        code="err_operand_cannot_be_none")
    alu0 = binary_op(op0, "tensor_scalar")
    alu1 = binary_op(op1, "tensor_scalar") if op1 is not None else None
    if alu1 is not None and alu0.bitvec != alu1.bitvec:
        raise UnsupportedOperationError("op0 and op1 of 'tensor_scalar' must both be arithmetic or both "
                                        "bitwise", code="err_instruction_engine_unsupported_op_comb")
    eng = resolve_engine(engine, Engine.VECTOR, (Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD), "tensor_scalar")
    _no_psum_on_gpsimd(eng, "tensor_scalar", data)
    parts = partitions(data)
    reads = [data]
    params = {"op0": alu0.name, "operand0": scalar_operand(operand0, "tensor_scalar", "operand0", parts, reads),
              "reverse0": bool(reverse0)}
    if alu1 is not None:
        params.update(op1=alu1.name, operand1=scalar_operand(operand1, "tensor_scalar", "operand1", parts, reads),
                      reverse1=bool(reverse1))
    result = m.result_tile(data.shape, out_dtype(dtype, data.dtype), Buffer.SBUF)
    m.emit("tensor_scalar", eng, "scalar", reads, [result], params=params, mask=mask, op=alu0.name,
           op1=alu1.name if alu1 else None)
    return result


def normalize_axes(axis, ndim: int, instr: str) -> tuple[int, ...]:
    axes = (axis,) if isinstance(axis, (numbers.Integral,)) else tuple(axis)
    out = []
    for a in axes:
        if not isinstance(a, numbers.Integral):
            raise ShapeError(f"axis entries of '{instr}' must be integers, got {a!r}")
        a = int(a) + ndim if a < 0 else int(a)
        if not 0 <= a < ndim:
            raise ShapeError(f"axis {a} is out of range for a {ndim}-D tile in '{instr}'")
        if a == 0:
            raise ShapeError(f"'{instr}' cannot reduce over the partition dimension (axis 0)",
                             remedy="reduce over free axes only; to reduce across partitions, "
                                    "transpose first (nisa.nc_transpose) or use nisa.tensor_partition_reduce",
                             code="err_reduce_on_partition_axis")
        out.append(a)
    if not out:
        raise ShapeError(f"'{instr}' needs at least one axis to reduce")
    return tuple(sorted(set(out)))


@instruction("tensor_reduce", Engine.VECTOR, kinds=("reduce",))
def tensor_reduce(m, op, data, axis, *, mask=None, dtype=None, negate=False, keepdims=False):
    operand(data, "tensor_reduce", "data", mask=mask)
    alu = reduce_op(op)
    axes = normalize_axes(axis, data.ndim, "tensor_reduce")
    if negate and alu.bitvec:
        raise UnsupportedOperationError("negate=True is only for arithmetic reductions",
                                        code="err_reduce_unsupported_negate")
    shape = reduced_shape(data.shape, axes, bool(keepdims))
    result = m.result_tile(shape, out_dtype(dtype, data.dtype), Buffer.SBUF)
    m.emit("tensor_reduce", Engine.VECTOR, "reduce", [data], [result], mask=mask,
           params={"op": alu.name, "axes": list(axes), "keepdims": bool(keepdims), "negate": bool(negate)},
           op=alu.name, axes=axes)
    return result


def reduced_shape(shape: tuple, axes: tuple, keepdims: bool) -> tuple:
    if keepdims:
        return tuple(1 if i in axes else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in axes)


@instruction("memset", Engine.VECTOR, Engine.GPSIMD, kinds=("fill",))
def memset(m, shape, value, dtype, *, mask=None, engine=0):
    eng = resolve_engine(engine, Engine.VECTOR, (Engine.VECTOR, Engine.GPSIMD), "memset")
    if not isinstance(value, (numbers.Number, np.number)):
        raise UnsupportedOperationError("memset fills with a compile-time number",
                                        code="err_expected_constant_value")
    result = m.result_tile(checked_shape(shape), dtype, Buffer.SBUF)   # the kernel's own shape
    m.emit("memset", eng, "fill", [], [result], params={"value": number(value)}, mask=mask, value=float(value))
    return result
