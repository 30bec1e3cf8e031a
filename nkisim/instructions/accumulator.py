"""The Vector engine's accumulator registers at trace time: one fp32 register per partition
lane, shared by the instructions that reduce as they go (tensor_scalar_reduce,
tensor_scalar_cumulative, range_select, select_reduce). A chain of them carries its running
value in the registers; only the call that passes `reduce_res` writes it out.

In the program the registers are one small allocation of the machine's, "vector accumulator"
(4 bytes a partition, 128 lanes): a reducing record writes the lanes of its partitions and, when
it continues a chain (reduce_cmd=reduce), reads them first, so program order, the executor and
the cost model's dependencies need nothing new. Registers no instruction has written hold NaN,
as any never-written memory does in nkisim, so a chain that continues from nothing shows.

The 0.6 reference says an idle-mode (reduce_cmd=idle) Vector instruction "may still modify" the
registers and recommends reset_reduce after one: the value is unknown, so continuing a chain
right after one is refused here rather than given a value the hardware might not have."""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..errors import ShapeError, UnsupportedOperationError
from ..memory import Buffer
from ..tensor import DeviceTensor
from .common import operand, partitions, start_partition

# the table's reduce_cmd codes (the legacy nisa.reduce_cmd values, and load_reduce of NKI 0.6)
IDLE, RESET, REDUCE, RESET_REDUCE, LOAD_REDUCE = 0, 1, 2, 3, 4
_COMMANDS = {IDLE: "idle", RESET: "reset", REDUCE: "reduce", RESET_REDUCE: "reset_reduce", LOAD_REDUCE: "load_reduce"}
LANES = 128


def command(code, instr: str) -> int:
    """A reduce_cmd argument as the table's code (an int or an IntEnum member of the legacy dialect)."""
    try:
        value = int(code)
    except (TypeError, ValueError):
        value = None
    if value not in _COMMANDS:
        raise UnsupportedOperationError(f"reduce_cmd of '{instr}' must be a nisa.reduce_cmd member, got {code!r}",
                                        code="err_unsupported_args")
    return value


def _registers(m) -> DeviceTensor:
    """The machine's accumulator registers, allocated on first use."""
    return m.engine_state("_vector_accumulator_tile", (LANES, 1), dtypes.float32, "vector accumulator")


def lanes(m, data: DeviceTensor) -> DeviceTensor:
    """The registers of `data`'s partitions."""
    first, parts = start_partition(data), partitions(data)
    return _registers(m)[first:first + parts, 0:1]


def reduction(m, instr: str, data: DeviceTensor, op_name: str, cmd: int, reduce_res, reads: list,
              writes: list, params: dict, *, init=None, negate: bool = False,
              init_name: str = "reduce_init") -> None:
    """Add to a record (its `reads`, `writes` and `params`) what its reduction into the registers
    does: `cmd` (command()) says where the register starts, `reduce_res` (a (P, 1) tile or None)
    receives the register's new value. Idle: the instruction reduces nothing. `init` (load_reduce's
    start, the kernel's `init_name` argument) is a number or a (P, 1) tile the record reads."""
    state = m.core_state.setdefault("_vector_accumulator", {"unknown": False})
    if cmd == IDLE:
        if reduce_res is not None:
            raise UnsupportedOperationError(
                f"'{instr}' with reduce_cmd=idle and a reduce_res: an idle instruction does not reduce, and the "
                "value it would write is not documented", remedy="pass reduce_cmd=reset_reduce (or reduce, to "
                                                                 "continue a chain) to write the reduction",
                code="err_not_simulated")
        state["unknown"] = True          # "may still modify the accumulator" (0.6 reference)
        return
    if init is not None and cmd != LOAD_REDUCE:
        raise UnsupportedOperationError(f"{init_name} of '{instr}' is used only with reduce_cmd=load_reduce",
                                        remedy=f"leave {init_name} unset, or pass reduce_cmd=load_reduce",
                                        code="err_unsupported_args")
    if cmd == LOAD_REDUCE and init is None:
        raise UnsupportedOperationError(f"reduce_cmd=load_reduce of '{instr}' needs {init_name}, the value the "
                                        "registers start from", code="err_operand_cannot_be_none")
    registers = lanes(m, data)
    how = {RESET: "reset", RESET_REDUCE: "reset", LOAD_REDUCE: "load", REDUCE: "continue"}[cmd]
    spec = {"op": op_name, "how": how}
    if how == "load" and isinstance(init, DeviceTensor):
        reads.append(init)               # one start value per partition
        spec["init_read"] = len(reads) - 1
    elif how == "load":
        spec["init"] = float(init)
    if how == "continue":
        if state["unknown"]:
            raise UnsupportedOperationError(
                f"'{instr}' continues an accumulation (reduce_cmd=reduce) right after an idle-mode Vector "
                "instruction, which may have changed the accumulator registers",
                remedy="start the chain again with reduce_cmd=reset_reduce", code="err_not_simulated")
        reads.append(registers)
        spec["read"] = len(reads) - 1
    writes.append(registers)
    if reduce_res is not None:
        operand(reduce_res, instr, "reduce_res")
        if reduce_res.size != partitions(data) or reduce_res.shape[:1] != data.shape[:1]:
            raise ShapeError(f"reduce_res of '{instr}' must hold one value per partition of the data "
                             f"({partitions(data)}, 1), got {reduce_res._label()}",
                             code="err_activation_reduce_res_shape")
        if reduce_res.dtype.kind != "f":
            raise UnsupportedOperationError(f"reduce_res of '{instr}' must be a float tile, got "
                                            f"{dtypes.name_of(reduce_res.dtype)}",
                                            code="err_instruction_unsupported_dtypes")
        writes.append(reduce_res)
        spec["result"] = True
        spec["negate"] = bool(negate)
    elif negate:
        raise UnsupportedOperationError(f"reduce_res_negate of '{instr}' negates what is written to reduce_res: "
                                        "pass a reduce_res too", code="err_unsupported_args")
    if cmd == RESET:                  # the registers reset, this instruction's values not reduced in
        spec["partial"] = False
    state["unknown"] = False
    params["reduce"] = spec
