"""Scalar Engine (ACT) instruction: activation functions with scale, bias and reduction."""
from __future__ import annotations

from .. import dtypes
from .. import alu
from ..errors import DtypeError, NotSimulatedError, ShapeError, UnsupportedOperationError
from ..memory import Buffer
from ..platforms import current_rules
from ..registry import INSTRUCTIONS, instruction, machine_call
from ..tensor import DeviceTensor
from ..trace import Engine
from .common import operand, out_dtype, partitions, scalar_operand

REDUCE_CMD_REDUCE = 2   # nisa.reduce_cmd.reduce: keep accumulating into reduce_res
REDUCE_CMD_RESET_REDUCE = 3   # nisa.reduce_cmd.reset_reduce: this instruction's reduction only


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


def _legacy_activation_reduce(m, op, data, *, reduce_op, reduce_res, bias=None, scale=1.0, mask=None, dtype=None):
    """SDK 2.26's nisa.activation_reduce: "equivalent to calling nisa.activation with
    reduce_cmd=nisa.reduce_cmd.reset_reduce and passing in reduce_res", so one activation record.
    The 2.26 reference limits reduce_op to an addition on NeuronCore-v2 only; on gen3 the op the
    kernel names is reduced (the legacy activation's reading). Which elements a masked
    instruction reduces is not documented, so a mask is refused."""
    instr = "activation_reduce"
    if not isinstance(reduce_res, DeviceTensor):
        raise ShapeError(f"reduce_res of '{instr}' must be an SBUF/PSUM tile of one element per partition, "
                         f"got {type(reduce_res).__name__}", remedy="pass a (P, 1) tile, e.g. nl.ndarray((P, 1), "
                                                                   "nl.float32, buffer=nl.sbuf)",
                         code="err_activation_reduce_res_shape")
    if isinstance(data, DeviceTensor) and partitions(reduce_res) != partitions(data):
        raise ShapeError(f"reduce_res of '{instr}' spans {partitions(reduce_res)} partitions, data "
                         f"{partitions(data)}", remedy="give reduce_res data's partitions and one element on each",
                         code="err_activation_reduce_res_shape")
    if current_rules().nc_version == 2 and alu.reduce_op(reduce_op, instr).name != "add":
        raise UnsupportedOperationError(f"reduce_op of '{instr}' on NeuronCore-v2 can only be an addition, got "
                                        f"{reduce_op!r}", remedy="pass reduce_op=nl.add")
    if mask is not None:
        raise NotSimulatedError(f"'{instr}' with a mask=: which elements a masked instruction reduces is not "
                                "documented", remedy="slice the operands instead of masking them")
    return INSTRUCTIONS["activation"].semantics(m, op, data, bias=bias, scale=scale, reduce_op=reduce_op,
                                                reduce_res=reduce_res, reduce_cmd=REDUCE_CMD_RESET_REDUCE, dtype=dtype)


legacy_activation_reduce = machine_call(_legacy_activation_reduce, "nisa.activation_reduce")
legacy_activation_reduce.__name__ = legacy_activation_reduce.__qualname__ = "activation_reduce"
