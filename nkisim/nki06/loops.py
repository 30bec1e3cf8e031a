"""NKI 0.6's runtime loops and scheduling block, as nkisim traces them.

nl.fori_loop, nl.dynamic_range and nl.while_loop compile to loops the sequencers run. nkisim
traces each iteration in turn with its counter register holding that iteration's value
(nkisim.nki06.registers), so values and every instruction's cost are the hardware's; what the
sequencers spend on the loop's own branch is not modelled (docs/cost-model.md). A loop bound
that is only known at run time (a register loaded from memory) cannot be traced: refused.

`with nl.no_reorder():` keeps the instructions of the block in program order: the cost model
lets each start only when the one before it has finished (the block's instructions carry
attrs["ordered"])."""
from __future__ import annotations

import contextlib
import numbers
import warnings

from ..errors import ArgumentError, KernelContractError
from ..running import current_machine
from .bind import NkiInstruction
from .registers import VirtualRegister

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


def fori_loop(lower, upper, body_fun, step=1):
    """body_fun(i) for i in range(lower, upper, step), `i` a read-only register; returns None."""
    _no_loop_inside_no_reorder("nl.fori_loop")
    lo, hi = _bound(lower, "lower bound", "nl.fori_loop"), _bound(upper, "upper bound", "nl.fori_loop")
    st = _step(step, "nl.fori_loop")
    if not callable(body_fun):
        raise ArgumentError(f"body_fun of nl.fori_loop must be a function of the counter, got {type(body_fun).__name__}")
    for value in range(lo, hi, st):
        returned = body_fun(VirtualRegister(value, frozen=True))
        # an instruction's handle is what a one-call lambda body returns: not a carried value
        if returned is not None and not isinstance(returned, NkiInstruction):
            raise KernelContractError("the body of nl.fori_loop returned a value: in NKI 0.6 it returns nothing "
                                      "(there is no carried value)",
                                      remedy="keep loop state in an SBUF or HBM tensor updated in place",
                                      code="err_fori_loop_body_returns")


def while_loop(init, body_fun):
    """r = init; while r != 0: r = body_fun(r). The condition must be known when traced."""
    _no_loop_inside_no_reorder("nl.while_loop")
    if not isinstance(init, VirtualRegister):
        raise ArgumentError(f"init of nl.while_loop must be a VirtualRegister, got {type(init).__name__}",
                            code="err_unsupported_args")
    register = init
    for _ in range(WHILE_LOOP_LIMIT):
        if register.traced_value("nl.while_loop's condition") == 0:
            return None
        register = body_fun(register)
        if not isinstance(register, VirtualRegister):
            raise KernelContractError("the body of nl.while_loop must return the next condition register, got "
                                      f"{type(register).__name__}", code="err_while_loop_body_returns")
    raise KernelContractError(f"nl.while_loop ran {WHILE_LOOP_LIMIT} iterations without its condition becoming 0",
                              remedy="make the body set the condition register to 0 to end the loop",
                              code="err_while_loop_endless")


def dynamic_range(start, stop=None, step=1):
    """A for loop the sequencers run (deprecated in 0.6: NKI warns); its variable is a frozen register."""
    warnings.warn("nl.dynamic_range is deprecated in NKI 0.6: use nl.fori_loop", DeprecationWarning, stacklevel=3)
    _no_loop_inside_no_reorder("nl.dynamic_range")
    if stop is None:
        start, stop = 0, start
    lo, hi = _bound(start, "start", "nl.dynamic_range"), _bound(stop, "stop", "nl.dynamic_range")
    st = _step(step, "nl.dynamic_range")
    return (VirtualRegister(value, frozen=True) for value in range(lo, hi, st))


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
