"""Fused arithmetic and scans on the Vector engine: scalar_tensor_tensor, tensor_tensor_scan,
tensor_scalar_reduce, tensor_scalar_cumulative and reciprocal. Each checks its operands and
emits one program instruction; nkisim.kinds.fused does the math (fp32, rounded once).

tensor_scalar_reduce and tensor_scalar_cumulative reduce into the Vector engine's accumulator
registers (nkisim.instructions.accumulator), so NKI 0.6's chains (reduce_cmd=reduce, reduce_res
only on the last call) carry their running value from record to record.

The table's functions take the accumulator keywords NKI 0.6 has; the legacy dialect exports
`legacy_tensor_scalar_reduce`, which has exactly the 2.26 signature (no reduce_cmd)."""
from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes
from ..alu import binary_op, reduce_op
from ..errors import MemorySpaceError, ShapeError, UnsupportedOperationError
from ..memory import Buffer
from ..registry import INSTRUCTIONS, instruction, machine_call
from ..tensor import DeviceTensor
from ..trace import Engine
from . import accumulator
from .common import operand, out_dtype, partitions, same_partitions, scalar_operand

_VECTOR = Engine.VECTOR
_PSUM = Buffer.PSUM
# reductions both references list for tensor_scalar_reduce (2.26 adds nl.subtract, below)
_REDUCTIONS = ("add", "multiply", "maximum", "minimum")
# tensor_scalar_cumulative's op1 ("add, subtract, mult, max, min", the 0.6 reference)
_CUMULATIVE = ("add", "subtract", "multiply", "maximum", "minimum")
# tensor_scalar_cumulative's dtypes (the 0.6 reference: "INT32/UINT32 are not supported")
_CUMULATIVE_DTYPES = (dtypes.bfloat16, dtypes.float16, dtypes.float32, dtypes.float8_e4m3,
                      dtypes.float8_e5m2, dtypes.uint8, dtypes.uint16, dtypes.int8, dtypes.int16)


def _arithmetic(op, instr: str, param: str):
    """An ALU op that is arithmetic: these instructions have no bitvec form."""
    alu = binary_op(op, instr)
    if alu.bitvec:
        raise UnsupportedOperationError(f"{param}={alu!r} of '{instr}' is a bitvec operator; '{instr}' takes "
                                        "arithmetic operators only", remedy="use nisa.tensor_scalar or "
                                        "nisa.tensor_tensor for bitwise operations",
                                        code="err_unsupported_args")
    return alu


def _not_both_psum(instr: str, a: DeviceTensor, b: DeviceTensor, names: str) -> None:
    if a._alloc.buffer is _PSUM and b._alloc.buffer is _PSUM:
        raise MemorySpaceError(f"{names} of '{instr}' are both in PSUM; at most one may be",
                               remedy="copy one of them to SBUF with nisa.tensor_copy first")


def _no_mask(mask, instr: str, why: str) -> None:
    if mask is not None:
        raise UnsupportedOperationError(
            f"'{instr}' with mask=: {why}, and the reference does not say what a mask leaves out of it",
            remedy="slice the operands to the elements you want instead of masking",
            code="err_not_simulated")


def _same_shape(instr: str, a: DeviceTensor, b: DeviceTensor, names: tuple[str, str]) -> None:
    same_partitions(instr, **{names[0]: a, names[1]: b})
    if a.shape != b.shape:
        raise ShapeError(f"{names[1]} of '{instr}' must have the shape of {names[0]} {list(a.shape)}, got "
                         f"{list(b.shape)}", remedy=f"slice {names[1]} to {list(a.shape)}",
                         code="err_param_shape_mismatch")


@instruction("scalar_tensor_tensor", _VECTOR, kinds=("scalar_tensor_tensor",))
def scalar_tensor_tensor(m, *, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, dtype=None,
                         mask=None):
    """(data op0 operand0) op1 operand1: operand0 a number or a (P, 1) column, operand1 a tile
    of data's shape. The 2.26 page describes data as a 2-D tile; the 0.6 reference asks only
    that operand1 has data's shape, which is what nkisim checks in both dialects."""
    instr = "scalar_tensor_tensor"
    operand(data, instr, "data", mask=mask)
    operand(operand1, instr, "operand1", mask=mask)
    alu0, alu1 = _arithmetic(op0, instr, "op0"), _arithmetic(op1, instr, "op1")
    _same_shape(instr, data, operand1, ("data", "operand1"))
    _not_both_psum(instr, data, operand1, "data and operand1")
    reads = [data, operand1]
    params = {"op0": alu0.name, "operand0": scalar_operand(operand0, instr, "operand0", partitions(data), reads),
              "reverse0": bool(reverse0), "op1": alu1.name, "reverse1": bool(reverse1)}
    result = m.new_tile(data.shape, out_dtype(dtype, data.dtype), Buffer.SBUF)
    m.emit(instr, _VECTOR, instr, reads, [result], params=params, mask=mask, op=alu0.name, op1=alu1.name)
    return result


@instruction("tensor_tensor_scan", _VECTOR, kinds=("tensor_tensor_scan",))
def tensor_tensor_scan(m, data0, data1, initial, op0, op1, reverse0=False, reverse1=False, *, dtype=None,
                       mask=None):
    """Per partition, r[:, i] = op1(op0(data0[:, i], r[:, i-1]), data1[:, i]), r[:, -1] = initial
    (a number or a (P, 1) column). Both references state the scan for 2-D tiles; along which
    element order a scan of more free dimensions runs is not said, so nkisim takes 2-D tiles."""
    instr = "tensor_tensor_scan"
    _no_mask(mask, instr, "every element of a scan depends on the one before it")
    operand(data0, instr, "data0")
    operand(data1, instr, "data1")
    alu0, alu1 = _arithmetic(op0, instr, "op0"), _arithmetic(op1, instr, "op1")
    _same_shape(instr, data0, data1, ("data0", "data1"))
    if data0.ndim != 2:
        raise UnsupportedOperationError(f"'{instr}' of {data0.ndim}-D tiles {list(data0.shape)}: the reference "
                                        "defines the scan along one free dimension",
                                        remedy="reshape the tiles to (partitions, elements) first",
                                        code="err_not_simulated")
    _not_both_psum(instr, data0, data1, "data0 and data1")
    reads = [data0, data1]
    params = {"op0": alu0.name, "op1": alu1.name, "reverse0": bool(reverse0), "reverse1": bool(reverse1),
              "initial": scalar_operand(initial, instr, "initial", partitions(data0), reads)}
    result = m.new_tile(data0.shape, out_dtype(dtype, data0.dtype), Buffer.SBUF)
    m.emit(instr, _VECTOR, instr, reads, [result], params=params, op=alu0.name, op1=alu1.name)
    return result


@instruction("reciprocal", _VECTOR, kinds=("unary",))
def reciprocal(m, data, *, dtype=None, mask=None):
    """1/x of every element, in fp32 (the Vector engine's, more precise than the Scalar
    engine's activation(op=nl.reciprocal) and slower: nkisim.cost.rules)."""
    operand(data, "reciprocal", "data", mask=mask)
    result = m.new_tile(data.shape, out_dtype(dtype, data.dtype), Buffer.SBUF)
    m.emit("reciprocal", _VECTOR, "unary", [data], [result], params={"op": "reciprocal"}, mask=mask,
           op="reciprocal")
    return result


def _reduction_op(op, instr: str):
    alu = reduce_op(op, instr)
    if alu.name == "subtract":
        raise UnsupportedOperationError(
            f"reduce_op=nl.subtract of '{instr}': the 2.26 reference lists it, NKI 0.6's does not, and neither "
            "says what a subtracting reduction computes", remedy="reduce with nl.add (negate operand0 first)",
            code="err_not_simulated")
    if alu.name not in _REDUCTIONS:
        raise UnsupportedOperationError(f"reduce_op={alu!r} of '{instr}' is not one of nl.add, nl.multiply, "
                                        "nl.maximum, nl.minimum", code="err_unsupported_args")
    return alu


def _plain_init(value, instr: str, param: str):
    if value is None or (isinstance(value, (numbers.Real, np.floating, np.integer)) and not isinstance(value, bool)):
        return value
    raise UnsupportedOperationError(f"{param} of '{instr}' must be a number (the fp32 value the accumulator "
                                    f"starts from), got {type(value).__name__}",
                                    remedy=f"pass {param} as a Python float", code="err_not_simulated")


@instruction("tensor_scalar_reduce", _VECTOR, kinds=("tensor_scalar_reduce",))
def tensor_scalar_reduce(m, *, data, op0, operand0, reduce_op, reduce_res=None, reverse0=False,
                         reduce_cmd=accumulator.RESET_REDUCE, reduce_init=None, reduce_res_negate=False,
                         dtype=None, mask=None):
    """data op0 operand0, and its reduction over every free axis into the accumulator registers
    (and reduce_res when given). The reduction is of the fp32 values before they are rounded
    into the result's dtype, as the Scalar engine's activation reduces (nkisim.execute)."""
    instr = "tensor_scalar_reduce"
    _no_mask(mask, instr, "the instruction reduces over every element it computes")
    operand(data, instr, "data")
    alu0 = _arithmetic(op0, instr, "op0")
    if reverse0:
        raise UnsupportedOperationError(f"reverse0=True of '{instr}': the reference marks it \"not supported yet\"",
                                        remedy="swap the operands yourself (e.g. negate, then add)",
                                        code="err_not_simulated")
    red = _reduction_op(reduce_op, instr)
    cmd = accumulator.command(reduce_cmd, instr)
    init = _plain_init(reduce_init, instr, "reduce_init")
    reads = [data]
    params = {"op0": alu0.name, "operand0": scalar_operand(operand0, instr, "operand0", partitions(data), reads)}
    result = m.new_tile(data.shape, out_dtype(dtype, data.dtype), Buffer.SBUF)
    writes = [result]
    accumulator.reduction(m, instr, data, red.name, cmd, reduce_res, reads, writes, params, init=init,
                          negate=bool(reduce_res_negate))
    m.emit(instr, _VECTOR, instr, reads, writes, params=params, op=alu0.name, reduce_op=red.name)
    return result


def _legacy_tensor_scalar_reduce(m, *, data, op0, operand0, reduce_op, reduce_res, reverse0=False, dtype=None,
                                 mask=None):
    """The 2.26 signature: reduce_res is required and written in place; each call starts its
    reduction afresh (2.26 has no reduce_cmd here)."""
    return INSTRUCTIONS["tensor_scalar_reduce"].semantics(
        m, data=data, op0=op0, operand0=operand0, reduce_op=reduce_op, reduce_res=reduce_res, reverse0=reverse0,
        dtype=dtype, mask=mask)


_legacy_tensor_scalar_reduce.__name__ = _legacy_tensor_scalar_reduce.__qualname__ = "tensor_scalar_reduce"
legacy_tensor_scalar_reduce = machine_call(_legacy_tensor_scalar_reduce, "nisa.tensor_scalar_reduce")


def _cumulative_dtype(dtype, instr: str, param: str) -> None:
    if dtype not in _CUMULATIVE_DTYPES or dtypes.is_tf32(dtype):
        allowed = "bfloat16, float16, float32, float8, uint8, uint16, int8, int16"
        raise UnsupportedOperationError(f"{param} of '{instr}' is {dtypes.name_of(dtype)}; the instruction takes "
                                        f"{allowed} (int32 and uint32 are an ISA limitation)",
                                        remedy="cast to float32 with nisa.tensor_copy first",
                                        code="err_instruction_unsupported_dtypes")


@instruction("tensor_scalar_cumulative", _VECTOR, kinds=("tensor_scalar_cumulative",))
def tensor_scalar_cumulative(m, src, op0, op1, imm0, imm1=None, *, reduce_cmd=accumulator.RESET_REDUCE,
                             dtype=None, mask=None):
    """reg = op1(op0(x, imm0), reg); dst = reg, element after element of each partition (the
    0.6 reference's pseudo-code, operand order and all; its elements in row-major order over
    the free dimensions). The register starts at op1's identity (reset_reduce), at imm1
    (load_reduce) or where the accumulator's chain left it (reduce), and keeps the last value."""
    instr = "tensor_scalar_cumulative"
    _no_mask(mask, instr, "every element of a running reduction depends on the ones before it")
    operand(src, instr, "src")
    alu0 = _arithmetic(op0, instr, "op0")
    alu1 = binary_op(op1, instr)
    if alu1.name not in _CUMULATIVE:
        raise UnsupportedOperationError(f"op1={alu1!r} of '{instr}' is not one of nl.add, nl.subtract, "
                                        "nl.multiply, nl.maximum, nl.minimum", code="err_unsupported_args")
    cmd = accumulator.command(reduce_cmd, instr)
    if cmd in (accumulator.IDLE, accumulator.RESET):
        raise UnsupportedOperationError(
            f"'{instr}' with reduce_cmd={'idle' if cmd == accumulator.IDLE else 'reset'}: the reference defines "
            "the running reduction for reset_reduce, reduce and load_reduce only",
            remedy="pass reduce_cmd=reset_reduce (or reduce / load_reduce)", code="err_not_simulated")
    out = out_dtype(dtype, src.dtype)
    _cumulative_dtype(src.dtype, instr, "src")
    _cumulative_dtype(out, instr, "dst")
    parts = partitions(src)
    reads = [src]
    params = {"op0": alu0.name, "imm0": scalar_operand(imm0, instr, "imm0", parts, reads)}
    if isinstance(imm1, DeviceTensor):
        scalar_operand(imm1, instr, "imm1", parts, [])       # its shape, checked; accumulator reads it
    result = m.new_tile(src.shape, out, Buffer.SBUF)
    writes = [result]
    accumulator.reduction(m, instr, src, alu1.name, cmd, None, reads, writes, params, init=imm1,
                          init_name="imm1")
    m.emit(instr, _VECTOR, instr, reads, writes, params=params, op=alu0.name, op1=alu1.name)
    return result
