"""NKI 0.6's sequencer registers (nisa.VirtualRegister) as nkisim traces them.

On Trainium a register holds a 32-bit value an engine's sequencer reads at run time: the loop
counter of nl.fori_loop / nl.dynamic_range, or an offset passed to `t.ap(scalar_offset=r)`.
nkisim traces a kernel into a static program, so it simulates exactly the registers whose
values are known when the kernel is traced: constants (register_alloc(x), register_move) and
loop counters, each traced iteration with its own value; register_store writes that value to
memory (nkisim.instructions.registers). A register loaded from memory (register_load) makes
control flow or addresses depend on data, which a static program cannot express: that is
refused, not guessed.

As the 0.6 reference says, a register is not a Python int: `if r:`, `int(r)`, `range(r)` and
Python arithmetic on one are refused (TypeError under NKI's tracer)."""
from __future__ import annotations

from ..errors import ArgumentError, KernelContractError
from .bind import binding, semantics

_register_store = semantics("register_store")


class VirtualRegister:
    """A register of an engine sequencer, with the value nkisim knows it holds (None: unset)."""

    __slots__ = ("_value", "frozen")

    def __init__(self, state: int | None = None, frozen: bool = False) -> None:
        if state is not None and (isinstance(state, bool) or not isinstance(state, int)):
            raise ArgumentError(f"a VirtualRegister holds a 32-bit integer, got {state!r}")
        self._value = state
        self.frozen = frozen

    def traced_value(self, where: str) -> int:
        if self._value is None:
            raise KernelContractError(f"{where} reads a register no instruction has set",
                                      remedy="set it first: nisa.register_alloc(x) or nisa.register_move(dst, src)",
                                      code="err_register_uninitialized")
        return self._value

    def set(self, value: int, where: str) -> None:
        if self.frozen:
            raise KernelContractError(f"{where} writes a loop's counter register, which is read-only",
                                      remedy="copy it into a register of your own with nisa.register_move",
                                      code="err_register_frozen")
        self._value = value

    def __repr__(self) -> str:
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
                            remedy="load a value computed on the device with nisa.register_load (not simulated)",
                            code="err_unsupported_args")
    return VirtualRegister(x)


def register_move(dst: VirtualRegister, src) -> None:
    """dst = src: an int, or another register."""
    if not isinstance(dst, VirtualRegister):
        raise ArgumentError(f"'dst' of nisa.register_move must be a VirtualRegister, got {type(dst).__name__}",
                            code="err_unsupported_args")
    if isinstance(src, VirtualRegister):
        value = src.traced_value("nisa.register_move")
    elif isinstance(src, int) and not isinstance(src, bool):
        value = src
    else:
        raise ArgumentError(f"'src' of nisa.register_move must be an int or a VirtualRegister, got {src!r}",
                            code="err_unsupported_args")
    dst.set(value, "nisa.register_move")


@binding
def register_store(m, dst, src) -> None:
    """Memory's one element `dst` = the register `src` (its traced value)."""
    if not isinstance(src, VirtualRegister):
        raise ArgumentError(f"'src' of nisa.register_store must be a VirtualRegister, got {type(src).__name__}",
                            remedy="allocate one with nisa.register_alloc(x)", code="err_unsupported_args")
    _register_store(m, dst, src.traced_value("nisa.register_store"))
