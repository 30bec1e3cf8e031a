"""NeuronCore-v4's Activation2 on the Scalar engine (nisa.activate2, NKI 0.6 reference; Trainium3
architecture guide, "More flexible nisa.activation"), and the op codes only its stages take:
nl.bypass (a tensor-scalar stage that does nothing), nl.prelu (the activation that reads
relu_param), nl.abs_max and nl.abs_min (reductions of the results' magnitudes).

Per partition: val = (data op0 imm0) op1 imm1 (reverse0 / reverse1 put the immediate on the
left; a bypass stage is skipped), dst = op(val), all in fp32, rounded once into dst. The
reduction: the reference keeps it in the Scalar engine's registers (one fp32 a lane), which
nkisim does not carry from one instruction to the next (as for nisa.activation): each reducing
call passes reduce_res, which receives the register's value; reduce_cmd=reduce continues from
the value reduce_res holds (nisa.activation's reading in nkisim), reset_reduce starts from the
reduction's identity, reset writes the identity. abs_max / abs_min reduce |dst| (nkisim's
reading: the reference names them without a formula), so their register holds a magnitude."""
from __future__ import annotations

import numbers

import numpy as np

from .. import alu
from ..alu import NkiOp
from ..errors import ShapeError, UnsupportedOperationError
from ..memory import Buffer
from ..registry import instruction
from ..tensor import DeviceTensor
from ..trace import Engine
from . import accumulator
from .common import operand, out_dtype, partitions, scalar_operand
from .mx import require_nc_v4


class StageOp(NkiOp):
    """An op code of activate2's stages only: not an ALU function a kernel can call."""

    def __call__(self, *args, **kwargs):
        raise UnsupportedOperationError(f"{self!r} is an op code of nisa.activate2 (NeuronCore-v4), not a function",
                                        remedy=f"pass it to nisa.activate2 (op=, op0=/op1= or reduce_op=)",
                                        code="err_unsupported_args")


# kind "reduce" without an ALU op behind it: every other instruction's op lookup refuses these
abs_max = StageOp("abs_max", "reduce")
abs_min = StageOp("abs_min", "reduce")
# kind "unary", not an activation: nisa.activation and the ALU instructions refuse them
bypass = StageOp("bypass", "unary", lambda x: x, activation=False)
prelu = StageOp("prelu", "unary", None, activation=False)
STAGE_OPS = {op.name: op for op in (abs_max, abs_min, bypass, prelu)}

# the reference's six (op0, op1) combinations of the tensor-scalar stage
COMBINATIONS = {("multiply", "add"), ("multiply", "subtract"), ("multiply", "bypass"), ("add", "bypass"),
                ("subtract", "bypass"), ("bypass", "bypass")}
REDUCTIONS = ("add", "maximum", "minimum", "abs_max", "abs_min")


def _stage_name(op, instr: str, param: str) -> str:
    if op is bypass or op == "bypass":
        return "bypass"
    return alu.binary_op(op, f"{instr} ({param})").name


def _immediate(value, used: bool, instr: str, param: str, parts: int, reads: list):
    if isinstance(value, DeviceTensor):
        operand(value, instr, param)
    elif not isinstance(value, (numbers.Real, np.floating, np.integer)) or isinstance(value, bool):
        raise UnsupportedOperationError(f"'{param}' of 'nisa.{instr}' must be a number or a (P, 1) tile, got {value!r}",
                                        code="err_unsupported_args")
    return scalar_operand(value, instr, param, parts, reads) if used else None


@instruction("activate2", Engine.SCALAR, kinds=("activate2",))
def activate2(m, op, data, imm0, imm1, op0, op1, *, relu_param=0.0, reverse0=False, reverse1=False, reduce_op=None,
              reduce_res=None, reduce_cmd=accumulator.IDLE, dtype=None):
    instr = "activate2"
    require_nc_v4(instr, "before NeuronCore-v4 (on Trainium2) use nisa.activation (scale, then bias added) and "
                         "nisa.tensor_scalar for the other tensor-scalar stages")
    operand(data, instr, "data")
    parts = partitions(data)
    s0, s1 = _stage_name(op0, instr, "op0"), _stage_name(op1, instr, "op1")
    if (s0, s1) not in COMBINATIONS:
        raise UnsupportedOperationError(f"(op0, op1) = (nl.{s0}, nl.{s1}) is not a tensor-scalar stage of 'nisa.{instr}'",
                                        remedy="use (multiply, add), (multiply, subtract), (multiply, bypass), "
                                               "(add, bypass), (subtract, bypass) or (bypass, bypass)",
                                        code="err_unsupported_args")
    for flag, stage, name in ((reverse0, s0, "reverse0"), (reverse1, s1, "reverse1")):
        if type(flag) is not bool:
            raise UnsupportedOperationError(f"'{name}' of 'nisa.{instr}' must be True or False", code="err_unsupported_args")
        if flag and stage == "bypass":
            raise UnsupportedOperationError(f"'{name}' of 'nisa.{instr}' requires op{name[-1]} to be set (not nl.bypass)",
                                            code="err_unsupported_args")
    if isinstance(imm0, DeviceTensor) and isinstance(imm1, DeviceTensor) and imm0.dtype != imm1.dtype:
        raise UnsupportedOperationError(f"imm0 and imm1 of 'nisa.{instr}' are tiles of different dtypes; the reference "
                                        "requires one dtype", code="err_instruction_unsupported_dtypes")
    reads = [data]
    params = {"op0": s0, "op1": s1, "reverse0": reverse0, "reverse1": reverse1,
              "imm0": _immediate(imm0, s0 != "bypass", instr, "imm0", parts, reads),
              "imm1": _immediate(imm1, s1 != "bypass", instr, "imm1", parts, reads)}
    if op is prelu or op == "prelu":
        params["op"] = "prelu"
        params["relu"] = _immediate(relu_param, True, instr, "relu_param", parts, reads)
    else:
        params["op"] = alu.activation_op(op, instr).name
        if not (isinstance(relu_param, (numbers.Real, np.floating)) and float(relu_param) == 0.0):
            raise UnsupportedOperationError(f"relu_param of 'nisa.{instr}' is read by nl.prelu only (the reference names "
                                            f"no other activation that takes it), not by nl.{params['op']}",
                                            remedy="leave relu_param unset, or use op=nl.prelu",
                                            code="err_unsupported_args")
    result = m.result_tile(data.shape, out_dtype(dtype, data.dtype), Buffer.SBUF)
    writes = [result]
    _reduction(instr, reduce_op, reduce_res, accumulator.command(reduce_cmd, instr), parts, reads, writes, params)
    m.emit(instr, Engine.SCALAR, "activate2", reads, writes, params=params, op=params["op"])
    return result


def _reduction(instr, reduce_op, reduce_res, cmd, parts, reads, writes, params) -> None:
    if cmd == accumulator.LOAD_REDUCE:
        raise UnsupportedOperationError(f"reduce_cmd=load_reduce is not one of 'nisa.{instr}''s commands",
                                        remedy="use idle, reset, reduce or reset_reduce", code="err_unsupported_args")
    if cmd == accumulator.IDLE:
        if reduce_res is not None:
            raise UnsupportedOperationError(
                f"'nisa.{instr}' with reduce_cmd=idle and a reduce_res: the registers it would read out hold what the "
                "last reducing instruction left, which nkisim does not carry between instructions",
                remedy="pass reduce_cmd=reset_reduce (or reduce, continuing from reduce_res's value)",
                code="err_not_simulated")
        return
    if reduce_res is None:
        if cmd == accumulator.RESET:
            return                       # registers reset, nothing read out: nothing a kernel sees
        raise UnsupportedOperationError(
            f"'nisa.{instr}' reduces (reduce_cmd) without a reduce_res: nkisim does not carry the Scalar engine's "
            "registers from one instruction to the next", remedy="pass reduce_res to each reducing call (with "
                                                                 "reduce_cmd=reduce it continues from reduce_res's value)",
            code="err_not_simulated")
    red = reduce_op.name if isinstance(reduce_op, StageOp) else alu.lookup_op(reduce_op)
    red = getattr(red, "alias_of", "") or getattr(red, "name", red)
    if red not in REDUCTIONS:
        raise UnsupportedOperationError(f"reduce_op of 'nisa.{instr}' is {reduce_op!r}", code="err_unsupported_args",
                                        remedy="use nl.add, nl.maximum, nl.minimum, nl.abs_max or nl.abs_min")
    operand(reduce_res, instr, "reduce_res")
    if partitions(reduce_res) != parts or reduce_res.size != parts:
        raise ShapeError(f"reduce_res of 'nisa.{instr}' must hold one value per partition ({parts}, 1), got "
                         f"{reduce_res._label()}", code="err_activation_reduce_res_shape")
    how = {accumulator.RESET: "identity", accumulator.RESET_REDUCE: "reset", accumulator.REDUCE: "continue"}[cmd]
    spec = {"op": red, "how": how}
    if how == "continue":
        reads.append(reduce_res)
        spec["read"] = len(reads) - 1
    writes.append(reduce_res)
    params["reduce"] = spec
