"""Scalar Engine (ACT) instruction: activation functions with scale, bias and reduction."""
from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes
from .. import alu
from ..errors import DtypeError
from ..memory import Buffer
from ..registry import instruction
from ..tensor import DeviceTensor
from ..trace import Engine
from .common import as_f32, free_size, operand, out_dtype, partitions, scalar_or_vector, store_result

REDUCE_CMD_REDUCE = 2   # nisa.reduce_cmd.reduce: keep accumulating into reduce_res


@instruction("activation", Engine.SCALAR)
def activation(m, op, data, *, bias=None, scale=1.0, reduce_op=None, reduce_res=None, reduce_cmd=0,
               mask=None, dtype=None, **kwargs):
    fn = alu.activation_op(op)
    operand(data, "activation", "data")
    parts = partitions(data)
    shape = (parts,) + (1,) * (data.ndim - 1)
    values = as_f32(data)
    sc = scalar_or_vector(scale, "activation", "scale", parts)
    x = values * (sc.reshape(shape) if isinstance(sc, np.ndarray) else sc)
    reads = [data]
    if bias is not None and not isinstance(bias, DeviceTensor):
        x = x + scalar_or_vector(bias, "activation", "bias", parts)   # a constant bias
    elif bias is not None:
        if bias.dtype not in (dtypes.float32, dtypes.float16, dtypes.bfloat16):
            raise DtypeError(f"'bias' param of 'activation' must be a vector of type float32, float16, "
                             f"or bfloat16, got {bias.dtype.name}", code="err_activation_bias_invalid_type",
                             remedy="keep the bias in a float32 (P, 1) tile, or cast it with "
                                    "nisa.tensor_copy(bias, dtype=nl.float32)")
        x = x + scalar_or_vector(bias, "activation", "bias", parts).reshape(shape)
        reads.append(bias)
    if not isinstance(scale, (numbers.Number, np.number)):   # a (P, 1) tile, not np.float32(2.0)
        reads.append(scale)
    out = fn.fn(x.astype(np.float32))
    result = m.new_tile(data.shape, out_dtype(dtype, data.dtype), Buffer.SBUF)
    writes = [result]
    if reduce_res is not None:
        operand(reduce_res, "activation", "reduce_res")
        red = alu.reduce_op(reduce_op if reduce_op is not None else "add", "activation")
        partial = red.reduce_ufunc.reduce(out.reshape(parts, free_size(data)), axis=1)
        if int(reduce_cmd or 0) == REDUCE_CMD_REDUCE:
            partial = red.fn(as_f32(reduce_res).reshape(parts), partial)
        writes.append(reduce_res)
    m.record("activation", Engine.SCALAR, reads, writes, op=fn.name)
    store_result(result, out, mask)
    if reduce_res is not None:
        reduce_res._store(partial.reshape(reduce_res.shape))
    return result
