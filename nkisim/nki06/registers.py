"""NKI 0.6's sequencer registers (nisa.VirtualRegister) as nkisim traces them.

On Trainium a register holds a 32-bit value an engine's sequencer reads at run time: the loop
counter of nl.fori_loop / nl.dynamic_range, a while loop's condition, or an offset passed to
`t.ap(scalar_offset=r)`. Most registers' values are known when the kernel is traced: constants
(register_alloc(x), register_move) and the counters of loops whose bounds are, each traced
iteration with its own value; nkisim traces those into a static program. A register loaded
from memory (register_load) holds a value only the device knows: it gets a register number in
the program, and what reads it becomes run-time control (loop_begin, while_begin, register_move
records; a register_store of its value) that nkisim.sequencer runs with the register file. A
loop bounded by one is traced once, as the compiler emits one copy of its body, with a counter
of its own number; every register the kernel set before such a loop is handed to the program
first (a register_move), since the body may change it. An access addressed by a run-time
register (t.ap(scalar_offset=r), t.select(dim, r)) is recorded at the register's value 0 with the
register and its unit beside it (Region.dyn); the sequencer moves it, and checks where it lands,
each time it runs the instruction.

As the 0.6 reference says, a register is not a Python int: `if r:`, `int(r)`, `range(r)` and
Python arithmetic on one are refused (TypeError under NKI's tracer)."""
from __future__ import annotations

import contextlib

from ..errors import ArgumentError, KernelContractError, NotSimulatedError
from ..running import RUNNING, current_machine
from .bind import binding, semantics

_register_store = semantics("register_store")
_register_load = semantics("register_load")
_register_move = semantics("register_move")


class VirtualRegister:
    """A register of an engine sequencer: the value nkisim knows it holds when traced (None:
    unset), or, on the device only (`runtime`), the register number the program reads it by."""

    __slots__ = ("_value", "frozen", "number", "runtime")

    def __init__(self, state: int | None = None, frozen: bool = False) -> None:
        if state is not None and (isinstance(state, bool) or not isinstance(state, int)):
            raise ArgumentError(f"a VirtualRegister holds a 32-bit integer, got {state!r}")
        self._value = state
        self.frozen = frozen
        self.number: int | None = None     # its number in the program, once it has one
        self.runtime = False               # its value is known only on the device

    def traced_value(self, where: str) -> int:
        if self.runtime:
            raise NotSimulatedError(f"{where} needs the register's value when the kernel is traced, but it is "
                                    "known only on the device (loaded with nisa.register_load, or the counter of "
                                    "a loop whose bounds are)",
                                    remedy="use a run-time register where NKI reads one on the device: loop "
                                           "bounds, a while loop's condition, nisa.register_move/register_store, "
                                           "t.ap(scalar_offset=r) and t.select(dim, r)",
                                    code="err_register_runtime")
        if self._value is None:
            raise KernelContractError(f"{where} reads a register no instruction has set",
                                      remedy="set it first: nisa.register_alloc(x) or nisa.register_move(dst, src)",
                                      code="err_register_uninitialized")
        return self._value

    def set(self, value: int, where: str) -> None:
        self._check_writable(where)
        self._value = value
        self.runtime = False

    def set_runtime(self, m, where: str) -> int:
        """The register now holds a value only the device knows; returns its number."""
        self._check_writable(where)
        self._value = None
        self.runtime = True
        return number_of(m, self)

    def _check_writable(self, where: str) -> None:
        if self.frozen:
            raise KernelContractError(f"{where} writes a loop's counter register, which is read-only",
                                      remedy="copy it into a register of your own with nisa.register_move",
                                      code="err_register_frozen")

    def __repr__(self) -> str:
        if self.runtime:
            return f"<VirtualRegister #{self.number} (run-time)>"
        return f"<VirtualRegister {'unset' if self._value is None else self._value}>"

    def _not_an_int(self, *args, **kwargs):
        raise TypeError("a VirtualRegister is a device register, not a Python int: Python control flow, int() "
                        "and arithmetic on it are not allowed; pass it where NKI takes a register "
                        "(t.ap(scalar_offset=r), t.select(dim, r), nl.fori_loop bounds)")

    __bool__ = __int__ = __index__ = __float__ = _not_an_int
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _not_an_int
    __floordiv__ = __rfloordiv__ = __truediv__ = __rtruediv__ = __mod__ = __rmod__ = _not_an_int
    __lt__ = __le__ = __gt__ = __ge__ = _not_an_int
    __hash__ = object.__hash__


def register_alloc(x: int | None = None) -> VirtualRegister:
    """A register, unset or holding the int `x`."""
    if x is not None and (isinstance(x, bool) or not isinstance(x, int)):
        raise ArgumentError(f"nisa.register_alloc(x) takes an int known when the kernel is traced, got {x!r}",
                            remedy="load a value computed on the device into it with nisa.register_load",
                            code="err_unsupported_args")
    register = VirtualRegister(x)
    m = RUNNING.get()
    if m is not None:          # what a run-time loop must hand to the program first (runtime_block)
        m.core_state.setdefault("_registers", []).append(register)
    return register


def number_of(m, register: VirtualRegister) -> int:
    """The register's number in the program (given at its first run-time use)."""
    if register.number is None:
        register.number = m.core_state.get("_next_register", 0)
        m.core_state["_next_register"] = register.number + 1
    return register.number


def in_runtime_block(m) -> bool:
    return m.core_state.get("_runtime_depth", 0) > 0


@contextlib.contextmanager
def runtime_block(m):
    """Trace a body the sequencer runs at run time (once, for all its iterations). First every
    register the kernel set that the program does not hold yet is handed to it (a register_move
    of its value), as the body may read what an earlier iteration wrote."""
    for register in m.core_state.get("_registers", ()):
        if not register.runtime and register._value is not None:
            value = register._value
            _register_move(m, register.set_runtime(m, "nl.fori_loop"), ["imm", value])
    m.core_state["_runtime_depth"] = m.core_state.get("_runtime_depth", 0) + 1
    try:
        yield
    finally:
        m.core_state["_runtime_depth"] -= 1


def operand_of(m, value) -> list:
    """A control record's operand: ["imm", int] for what is known when traced, ["reg", number]."""
    if isinstance(value, VirtualRegister) and value.runtime:
        return ["reg", number_of(m, value)]
    if isinstance(value, VirtualRegister):
        value = value.traced_value("a run-time loop")
    if not -2 ** 31 <= value < 2 ** 31:
        raise ArgumentError(f"a register holds 32 bits: {value} does not fit", code="err_unsupported_args")
    return ["imm", value]


def register_move(dst: VirtualRegister, src) -> None:
    """dst = src: an int, or another register."""
    if not isinstance(dst, VirtualRegister):
        raise ArgumentError(f"'dst' of nisa.register_move must be a VirtualRegister, got {type(dst).__name__}",
                            code="err_unsupported_args")
    if not isinstance(src, VirtualRegister) and (isinstance(src, bool) or not isinstance(src, int)):
        raise ArgumentError(f"'src' of nisa.register_move must be an int or a VirtualRegister, got {src!r}",
                            code="err_unsupported_args")
    m = current_machine()
    if in_runtime_block(m) or (isinstance(src, VirtualRegister) and src.runtime):
        # the move happens on the device: inside a run-time loop it happens once per iteration
        source = operand_of(m, src)
        _register_move(m, dst.set_runtime(m, "nisa.register_move"), source)
        return
    dst.set(src.traced_value("nisa.register_move") if isinstance(src, VirtualRegister) else src,
            "nisa.register_move")


@binding
def register_load(m, dst, src) -> None:
    """Register `dst` = the one element of `src` (int32 or uint32, in HBM or SBUF), on the device."""
    if not isinstance(dst, VirtualRegister):
        raise ArgumentError(f"'dst' of nisa.register_load must be a VirtualRegister, got {type(dst).__name__}",
                            remedy="allocate one with nisa.register_alloc()", code="err_unsupported_args")
    dst._check_writable("nisa.register_load")
    _register_load(m, src, number_of(m, dst))
    dst.set_runtime(m, "nisa.register_load")


@binding
def register_store(m, dst, src) -> None:
    """Memory's one element `dst` = the register `src`: its traced value, or its run-time one."""
    if not isinstance(src, VirtualRegister):
        raise ArgumentError(f"'src' of nisa.register_store must be a VirtualRegister, got {type(src).__name__}",
                            remedy="allocate one with nisa.register_alloc(x)", code="err_unsupported_args")
    if src.runtime:
        _register_store(m, dst, None, number_of(m, src))
        return
    _register_store(m, dst, src.traced_value("nisa.register_store"))
