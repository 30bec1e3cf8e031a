"""Scalar Engine (ACT) instruction: activation functions with scale, bias and reduction."""
from __future__ import annotations

from .. import dtypes
from .. import alu
from ..errors import DtypeError, ShapeError
from ..memory import Buffer
from ..registry import instruction
from ..tensor import DeviceTensor
from ..trace import Engine
from .common import operand, out_dtype, partitions, scalar_operand

REDUCE_CMD_REDUCE = 2   # nisa.reduce_cmd.reduce: keep accumulating into reduce_res


@instruction("activation", Engine.SCALAR, kinds=("activation",))
def activation(m, op, data, *, bias=None, scale=1.0, reduce_op=None, reduce_res=None, reduce_cmd=0,
               mask=None, dtype=None):
    fn = alu.activation_op(op)
    operand(data, "activation", "data", mask=mask)
    parts = partitions(data)
    reads = [data]
    params = {"op": fn.name, "scale": scalar_operand(scale, "activation", "scale", parts, reads)}
    if isinstance(bias, DeviceTensor) and bias.dtype not in (dtypes.float32, dtypes.float16, dtypes.bfloat16):
        raise DtypeError(f"'bias' param of 'activation' must be a vector of type float32, float16, "
                         f"or bfloat16, got {bias.dtype.name}", code="err_activation_bias_invalid_type",
                         remedy="keep the bias in a float32 (P, 1) tile, or cast it with "
                                "nisa.tensor_copy(bias, dtype=nl.float32)")
    if bias is not None:
        params["bias"] = scalar_operand(bias, "activation", "bias", parts, reads)
    result = m.result_tile(data.shape, out_dtype(dtype, data.dtype), Buffer.SBUF)
    writes = [result]
    if reduce_res is not None:
        operand(reduce_res, "activation", "reduce_res")
        red = alu.reduce_op(reduce_op if reduce_op is not None else "add", "activation")
        if reduce_res.size != parts:
            raise ShapeError(f"reduce_res of 'activation' must hold one value per partition ({parts}), "
                             f"got {reduce_res._label()}", code="err_activation_reduce_res_shape")
        params["reduce"] = {"op": red.name}
        if int(reduce_cmd or 0) == REDUCE_CMD_REDUCE:    # keep accumulating: it reads reduce_res too
            reads.append(reduce_res)
            params["reduce"]["read"] = len(reads) - 1
        writes.append(reduce_res)
    m.emit("activation", Engine.SCALAR, "activation", reads, writes, params=params, mask=mask, op=fn.name)
    return result
