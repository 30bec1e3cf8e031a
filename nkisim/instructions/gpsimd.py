"""GpSimd (POOL) instructions: index patterns, affine predicates, cross-partition reduction."""
from __future__ import annotations

import numpy as np

from ..alu import reduce_op
from ..errors import ShapeError
from ..indexing import IndexExpr, Predicate
from ..memory import Buffer
from ..registry import instruction
from ..trace import Engine
from .common import SBUF_ONLY, number, operand, out_dtype


@instruction("iota", Engine.GPSIMD, kinds=("iota",))
def iota(m, expr, dtype, *, mask=None):
    if not isinstance(expr, IndexExpr):
        raise ShapeError("iota takes an index expression built from nl.arange / nl.mgrid",
                         code="err_expected_index_expression")
    if expr.ndim < 2:
        raise ShapeError(f"iota needs a 2-D (partition, free) expression, got shape {list(expr.shape)}",
                         remedy="shape it with nl.arange(n)[:, None] or nl.arange(n)[None, :]")
    result = m.result_tile(expr.shape, dtype, Buffer.SBUF)
    m.emit("iota", Engine.GPSIMD, "iota", [], [result], params={"values": expr.values.astype(np.int32)},
           mask=mask)
    return result


@instruction("affine_select", Engine.GPSIMD, kinds=("affine_select",))
def affine_select(m, pred, on_true_tile, on_false_value, *, mask=None, dtype=None):
    if not isinstance(pred, Predicate):
        raise ShapeError("affine_select's pred must compare index expressions (e.g. i_p >= i_f)",
                         code="err_expected_index_expression")
    operand(on_true_tile, "affine_select", "on_true_tile", SBUF_ONLY, mask=mask)
    try:
        np.broadcast_shapes(pred.values.shape, on_true_tile.shape)
        if np.broadcast_shapes(pred.values.shape, on_true_tile.shape) != on_true_tile.shape:
            raise ValueError
    except ValueError:
        raise ShapeError(f"pred of shape {list(pred.values.shape)} does not match on_true_tile "
                         f"{list(on_true_tile.shape)} in 'affine_select'") from None
    result = m.result_tile(on_true_tile.shape, out_dtype(dtype, on_true_tile.dtype), Buffer.SBUF)
    m.emit("affine_select", Engine.GPSIMD, "affine_select", [on_true_tile], [result], mask=mask,
           params={"pred": np.ascontiguousarray(pred.values, dtype=bool), "on_false": number(on_false_value)})
    return result


@instruction("tensor_partition_reduce", Engine.GPSIMD, kinds=("partition_reduce",))
def tensor_partition_reduce(m, op, data, *, mask=None, dtype=None):
    operand(data, "tensor_partition_reduce", "data", SBUF_ONLY, mask=mask)
    alu = reduce_op(op, "tensor_partition_reduce")
    result = m.result_tile((1,) + data.shape[1:], out_dtype(dtype, data.dtype), Buffer.SBUF)
    m.emit("tensor_partition_reduce", Engine.GPSIMD, "partition_reduce", [data], [result], mask=mask,
           params={"op": alu.name}, op=alu.name)
    return result
