"""NKI 0.6's runtime loops and scheduling block, as nkisim traces them.

nl.fori_loop, nl.dynamic_range and nl.while_loop compile to loops the sequencers run. When the
bounds (or a while loop's condition) are known when the kernel is traced, nkisim traces each
iteration in turn with its counter register holding that iteration's value
(nkisim.nki06.registers), so values and every instruction's cost are the hardware's. When one
is known only on the device (a register loaded from memory), the body is traced once between
control records, as the compiler emits one copy of it, and nkisim.sequencer runs it as many
times as the registers say. Either way what the sequencers spend on the loop's own branch is
not modelled (docs/cost-model.md).

`with nl.no_reorder():` keeps the instructions of the block in program order: the cost model
lets each start only when the one before it has finished (the block's instructions carry
attrs["ordered"])."""
from __future__ import annotations

import contextlib
import numbers
import warnings

from ..errors import ArgumentError, KernelContractError
from ..registry import INSTRUCTIONS
from ..running import current_machine
from .bind import NkiInstruction
from .registers import VirtualRegister, number_of, operand_of, runtime_block

_loop_begin, _loop_end = INSTRUCTIONS["loop_begin"].semantics, INSTRUCTIONS["loop_end"].semantics
_while_begin, _while_end = INSTRUCTIONS["while_begin"].semantics, INSTRUCTIONS["while_end"].semantics
_register_move = INSTRUCTIONS["register_move"].semantics

# iterations of a while_loop before nkisim calls it endless (its condition never became 0)
WHILE_LOOP_LIMIT = 1 << 20


def _bound(value, what: str, where: str) -> int:
    if isinstance(value, VirtualRegister):
        return value.traced_value(f"the {what} of {where}")
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ArgumentError(f"the {what} of {where} must be an int or a VirtualRegister, got {type(value).__name__}",
                            code="err_unsupported_args")
    return int(value)


def _step(step, where: str) -> int:
    if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 1:
        raise ArgumentError(f"the step of {where} must be a positive int known when the kernel is traced, got "
                            f"{step!r}", remedy="count up with a positive step", code="err_unsupported_args")
    return int(step)


def _no_loop_inside_no_reorder(where: str) -> None:
    if current_machine().core_state.get("_no_reorder_depth"):
        raise KernelContractError(f"{where} cannot run inside nl.no_reorder()",
                                  remedy="put the loop outside the no_reorder block", code="err_no_reorder_loop")


def _runtime(*values) -> bool:
    return any(isinstance(v, VirtualRegister) and v.runtime for v in values)


def _check_body_result(returned, where: str) -> None:
    # an instruction's handle is what a one-call lambda body returns: not a carried value
    if returned is not None and not isinstance(returned, NkiInstruction):
        raise KernelContractError(f"the body of {where} returned a value: in NKI 0.6 it returns nothing "
                                  "(there is no carried value)",
                                  remedy="keep loop state in an SBUF or HBM tensor updated in place",
                                  code="err_fori_loop_body_returns")


def fori_loop(lower, upper, body_fun, step=1):
    """body_fun(i) for i in range(lower, upper, step), `i` a read-only register; returns None."""
    _no_loop_inside_no_reorder("nl.fori_loop")
    if not callable(body_fun):
        raise ArgumentError(f"body_fun of nl.fori_loop must be a function of the counter, got {type(body_fun).__name__}")
    st = _step(step, "nl.fori_loop")
    if _runtime(lower, upper):
        m = current_machine()
        with _runtime_loop(m, lower, upper, st, "nl.fori_loop") as counter:
            _check_body_result(body_fun(counter), "nl.fori_loop")
        return None
    lo, hi = _bound(lower, "lower bound", "nl.fori_loop"), _bound(upper, "upper bound", "nl.fori_loop")
    for value in range(lo, hi, st):
        _check_body_result(body_fun(VirtualRegister(value, frozen=True)), "nl.fori_loop")


@contextlib.contextmanager
def _runtime_loop(m, lower, upper, step: int, where: str):
    """A loop the sequencer runs: loop_begin, the body traced once with a run-time counter of its
    own number, loop_end."""
    for what, value in (("lower bound", lower), ("upper bound", upper)):
        if not (isinstance(value, VirtualRegister) and value.runtime):
            _bound(value, what, where)          # an int, or a register known when traced
    with runtime_block(m):
        counter = VirtualRegister(None, frozen=True)
        counter.runtime = True
        _loop_begin(m, number_of(m, counter), operand_of(m, lower), operand_of(m, upper), step)
        yield counter
        _loop_end(m)


def while_loop(init, body_fun):
    """r = init; while r != 0: r = body_fun(r). Traced iteration by iteration while the condition
    is known when traced; from the first iteration whose condition is known only on the device,
    the rest is a loop the sequencer runs (its body traced once)."""
    _no_loop_inside_no_reorder("nl.while_loop")
    if not isinstance(init, VirtualRegister):
        raise ArgumentError(f"init of nl.while_loop must be a VirtualRegister, got {type(init).__name__}",
                            code="err_unsupported_args")
    if not callable(body_fun):
        raise ArgumentError(f"body_fun of nl.while_loop must be a function of the condition register, got "
                            f"{type(body_fun).__name__}")
    register = init
    for _ in range(WHILE_LOOP_LIMIT):
        if register.runtime:
            return _runtime_while(current_machine(), register, body_fun)
        if register.traced_value("nl.while_loop's condition") == 0:
            return None
        register = _next_condition(body_fun(register))
    raise KernelContractError(f"nl.while_loop ran {WHILE_LOOP_LIMIT} iterations without its condition becoming 0",
                              remedy="make the body set the condition register to 0 to end the loop",
                              code="err_while_loop_endless")


def _next_condition(register):
    if not isinstance(register, VirtualRegister):
        raise KernelContractError("the body of nl.while_loop must return the next condition register, got "
                                  f"{type(register).__name__}", code="err_while_loop_body_returns")
    return register


def _runtime_while(m, init: VirtualRegister, body_fun) -> None:
    """The loop's own condition register starts as `init`; the body, traced once, returns the
    register the next test reads."""
    with runtime_block(m):
        cond = VirtualRegister()
        number = cond.set_runtime(m, "nl.while_loop")
        _register_move(m, number, operand_of(m, init))
        _while_begin(m, number)
        nxt = _next_condition(body_fun(cond))
        _while_end(m, number, number_of(m, nxt) if nxt.runtime else _as_register(m, nxt))
    return None


def _as_register(m, register: VirtualRegister) -> int:
    """A register known when traced, given a number and handed to the program (the body's
    returned condition is read by the device)."""
    source = operand_of(m, register)
    copy = VirtualRegister()
    number = copy.set_runtime(m, "nl.while_loop")
    _register_move(m, number, source)
    return number


def dynamic_range(start, stop=None, step=1):
    """A for loop the sequencers run (deprecated in 0.6: NKI warns); its variable is a frozen register."""
    warnings.warn("nl.dynamic_range is deprecated in NKI 0.6: use nl.fori_loop", DeprecationWarning, stacklevel=3)
    _no_loop_inside_no_reorder("nl.dynamic_range")
    if stop is None:
        start, stop = 0, start
    st = _step(step, "nl.dynamic_range")
    if _runtime(start, stop):
        return _runtime_range(current_machine(), start, stop, st)
    lo, hi = _bound(start, "start", "nl.dynamic_range"), _bound(stop, "stop", "nl.dynamic_range")
    return (VirtualRegister(value, frozen=True) for value in range(lo, hi, st))


def _runtime_range(m, start, stop, step: int):
    """The body of `for i in nl.dynamic_range(r)` traced once: one iteration of the Python loop.
    A break or return leaves the loop unended (the generator is closed, its loop_end never
    traced): check_loops_ended says so when the kernel's trace ends."""
    left_open = m.core_state.setdefault("_open_dynamic_ranges", [])
    marker = object()
    left_open.append(marker)
    with _runtime_loop(m, start, stop, step, "nl.dynamic_range") as counter:
        yield counter
    left_open.remove(marker)


def check_loops_ended(m) -> None:
    """At the end of a trace: every run-time loop was traced to its end."""
    if m.core_state.get("_open_dynamic_ranges"):
        raise KernelContractError("a loop over nl.dynamic_range with a run-time bound was left with break or return: "
                                  "its body is traced once for every iteration the device runs, so it cannot end "
                                  "early", remedy="end it through its bound (a register), or use nl.while_loop with "
                                                  "a condition register", code="err_dynamic_loop_break")


@contextlib.contextmanager
def no_reorder():
    m = current_machine()
    first = len(m.trace)
    m.core_state["_no_reorder_depth"] = m.core_state.get("_no_reorder_depth", 0) + 1
    try:
        yield
    finally:
        m.core_state["_no_reorder_depth"] -= 1
        for rec in m.trace[first + 1:]:
            rec.attrs["ordered"] = True
