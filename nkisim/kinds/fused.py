"""Values of the Vector engine's fused arithmetic and scans (nkisim.instructions.vector_fused):
scalar_tensor_tensor, tensor_tensor_scan, tensor_scalar_reduce, tensor_scalar_cumulative.
All of it in fp32, as the engine computes; the executor rounds each result once into its
destination's dtype. A scan's running value stays fp32 from element to element."""
from __future__ import annotations

import numpy as np

from .. import alu
from .accumulate import reduce_into, start_value
from .values import f32, operand_value, per_partition, value_kind

_RUNNING = ("add", "subtract", "multiply", "maximum", "minimum")


def _arithmetic(name) -> alu.NkiOp:
    op = alu.binary_op(name)
    if op.bitvec:
        raise ValueError(f"{name!r} is a bitvec op; the fused Vector instructions are arithmetic")
    return op


def _parts(x: np.ndarray) -> int:
    return x.shape[0] if x.ndim else 1


@value_kind("scalar_tensor_tensor", reads=None, writes=1)
def scalar_tensor_tensor(rec, values):
    """(data op0 operand0) op1 operand1; reverse0/reverse1 put the operand on the left."""
    p = rec.params
    data = f32(values[0])
    op0, op1 = _arithmetic(p["op0"]), _arithmetic(p["op1"])
    a0 = per_partition(operand_value(p["operand0"], values), _parts(data), data.ndim)
    tmp = f32(op0.fn(a0, data) if p["reverse0"] else op0.fn(data, a0))
    other = f32(values[1]).reshape(tmp.shape)
    return [op1.fn(other, tmp) if p["reverse1"] else op1.fn(tmp, other)]


@value_kind("tensor_tensor_scan", reads=None, writes=1)
def tensor_tensor_scan(rec, values):
    """r[:, i] = op1(op0(data0[:, i], r[:, i-1]), data1[:, i]), r[:, -1] = initial; reverse0
    makes the running value op0's left operand, reverse1 makes data1 op1's left operand."""
    p = rec.params
    d0 = f32(values[0])
    parts = _parts(d0)
    d0 = d0.reshape(parts, -1)
    d1 = f32(values[1]).reshape(d0.shape)
    op0, op1 = _arithmetic(p["op0"]), _arithmetic(p["op1"])
    rev0, rev1 = bool(p["reverse0"]), bool(p["reverse1"])
    prev = np.broadcast_to(per_partition(operand_value(p["initial"], values), parts, 1), (parts,))
    out = np.empty(d0.shape, dtype=np.float32)
    for i in range(d0.shape[1]):
        x = op0.fn(prev, d0[:, i]) if rev0 else op0.fn(d0[:, i], prev)
        out[:, i] = op1.fn(d1[:, i], x) if rev1 else op1.fn(x, d1[:, i])
        prev = out[:, i]
    return [out.reshape(values[0].shape)]


@value_kind("tensor_scalar_reduce", reads=None, writes=None)
def tensor_scalar_reduce(rec, values):
    """[data op0 operand0, the accumulator registers (, reduce_res)]: the reduction over every
    free axis of the fp32 result joins the registers' running value (nkisim.kinds.accumulate)."""
    p = rec.params
    data = f32(values[0])
    parts = _parts(data)
    op0 = _arithmetic(p["op0"])
    out = f32(op0.fn(data, per_partition(operand_value(p["operand0"], values), parts, data.ndim)))
    reduction = p.get("reduce")
    if reduction is None:               # reduce_cmd=idle: the registers take no part
        return [out]
    red = alu.reduce_op(reduction["op"])
    partial = red.reduce_ufunc.reduce(out.reshape(parts, -1), axis=1)
    return [out] + reduce_into(reduction, values, partial)


@value_kind("tensor_scalar_cumulative", reads=None, writes=2)
def tensor_scalar_cumulative(rec, values):
    """[the running values, the registers' last value]: reg = op1(op0(x, imm0), reg), element
    after element of each partition's free elements in row-major order."""
    p = rec.params
    src = f32(values[0])
    parts = _parts(src)
    op0 = _arithmetic(p["op0"])
    reduction = p["reduce"]
    op1 = alu.binary_op(reduction["op"])
    if op1.name not in _RUNNING:
        raise ValueError(f"{op1.name} is not a running reduction of tensor_scalar_cumulative")
    terms = f32(op0.fn(src.reshape(parts, -1), per_partition(operand_value(p["imm0"], values), parts, 2)))
    reg = start_value(reduction, values, parts)
    if op1.name == "subtract":          # reg = term - reg: not an accumulation NumPy has
        running = np.empty(terms.shape, dtype=np.float32)
        for i in range(terms.shape[1]):
            reg = running[:, i] = terms[:, i] - reg
    else:                               # commutative: ufunc.accumulate folds in the same order
        running = op1.fn.accumulate(np.concatenate([reg.reshape(parts, 1), terms], axis=1), axis=1,
                                    dtype=np.float32)[:, 1:]
    last = running[:, -1] if running.shape[1] else reg
    return [running.reshape(src.shape), np.asarray(last, dtype=np.float32).reshape(parts, 1)]
