"""The sequencer registers' instructions (NKI 0.6): nisa.register_store writes a register's value to
a one-element tensor in HBM or SBUF, nisa.register_load reads one into a register, and the
sequencers' own control (nkisim.sequencer): run-time loops and register moves.

A register whose value is known when the kernel is traced (nkisim.nki06.registers) is stored as
a fill of that value; one known only on the device (loaded from memory, or a run-time loop's
counter) as a fill whose value the sequencer supplies when it runs (params["register"]). Both
transfers are issued as a DMA of the element (assumed: the reference gives no engine or cost; a
register reaches memory, and memory a register, only through a transfer). The control records
move no data and are not timed: the sequencers' branches are not modelled (docs/cost-model.md)."""
from __future__ import annotations

import math

from .. import dtypes
from ..errors import NotSimulatedError, ShapeError
from ..registry import instruction
from ..tensor import DeviceTensor
from ..trace import Engine
from .common import DMA_ENDPOINTS, operand

# what a 32-bit register value is stored as; the reference allows any dtype but does not say
# whether a float dst receives the register's bits or its value converted
STORE_DTYPES = {dtypes.int32: (-2 ** 31, 2 ** 31), dtypes.uint32: (0, 2 ** 32)}


@instruction("register_store", Engine.DMA, kinds=("fill",))
def register_store(m, dst: DeviceTensor, value: int | None, register: int | None = None) -> None:
    """dst = `value` (known when traced), or the run-time value of register number `register`."""
    instr = "nisa.register_store"
    _one_element(dst, instr, "dst")
    m.check_writable(dst, f"the dst of '{instr}'")
    if dst.dtype not in STORE_DTYPES:
        raise NotSimulatedError(f"'dst' of '{instr}' is {dtypes.name_of(dst.dtype)}: whether a register stored "
                                "into a non-32-bit-integer tensor gives its bits or its value converted is not "
                                "documented", remedy="store into an int32 or uint32 element, then convert it "
                                                     "with nisa.tensor_copy")
    if register is not None:                   # the sequencer knows the value when it runs
        m.emit("register_store", Engine.DMA, "fill", [], [dst], params={"value": 0, "register": register})
        return
    m.emit("register_store", Engine.DMA, "fill", [], [dst], params={"value": stored_value(value, dst.dtype)})


def _one_element(t, instr: str, param: str) -> None:
    """A register's memory side: one element of HBM or SBUF."""
    operand(t, instr, param, DMA_ENDPOINTS, tile=False)
    if math.prod(t.shape) != 1 or t.ndim > 2:
        raise ShapeError(f"'{param}' of '{instr}' must hold exactly one element (shape [1] or [1, 1]), got "
                         f"{t._label()}", remedy="slice one element, e.g. t[0:1, 0:1]",
                         code="err_param_shape_mismatch")


def stored_value(value: int, dtype) -> int:
    """A register's 32 bits as an element of `dtype` (int32 or uint32) holds them."""
    low = STORE_DTYPES[dtype][0]
    bits = value & 0xFFFFFFFF                  # the register holds 32 bits
    return bits - 2 ** 32 if low < 0 and bits >= 2 ** 31 else bits


@instruction("register_load", Engine.DMA, kinds=("register_load",))
def register_load(m, src: DeviceTensor, register: int) -> None:
    """Register number `register` = the one element of `src`, when the program runs."""
    instr = "nisa.register_load"
    _one_element(src, instr, "src")
    if src.dtype not in STORE_DTYPES:
        raise NotSimulatedError(f"'src' of '{instr}' is {dtypes.name_of(src.dtype)}: what a register holds after "
                                "loading a value that is not a 32-bit integer (its bits, or the value converted) "
                                "is not documented", remedy="load from an int32 or uint32 element (convert a float "
                                                            "one first with nisa.tensor_copy)")
    m.emit("register_load", Engine.DMA, "register_load", [src], [], params={"register": register})


# ----- the sequencers' control: what nkisim.sequencer runs ----------------------------------------
# Each takes register numbers and operands ["imm", int] or ["reg", register number]; the front end
# (nkisim.nki06.loops) emits them around a loop body it traced once.

@instruction("loop_begin", Engine.SYNC, kinds=("control",))
def loop_begin(m, counter: int, lower: list, upper: list, step: int) -> None:
    """for counter in range(lower, upper, step): the body up to the matching loop_end."""
    m.emit("loop_begin", Engine.SYNC, "control", [], [],
           params={"counter": counter, "lower": lower, "upper": upper, "step": step})


@instruction("loop_end", Engine.SYNC, kinds=("control",))
def loop_end(m) -> None:
    m.emit("loop_end", Engine.SYNC, "control", [], [])


@instruction("while_begin", Engine.SYNC, kinds=("control",))
def while_begin(m, cond: int) -> None:
    """while register `cond` != 0: the body up to the matching while_end."""
    m.emit("while_begin", Engine.SYNC, "control", [], [], params={"cond": cond})


@instruction("while_end", Engine.SYNC, kinds=("control",))
def while_end(m, cond: int, next_cond: int) -> None:
    """cond = next_cond (what the body returned), then back to the test."""
    m.emit("while_end", Engine.SYNC, "control", [], [], params={"cond": cond, "next": next_cond})


@instruction("register_move", Engine.SYNC, kinds=("control",))
def register_move(m, dst: int, src: list) -> None:
    """Register `dst` = an int or another register, when the program runs."""
    m.emit("register_move", Engine.SYNC, "control", [], [], params={"dst": dst, "src": src})
