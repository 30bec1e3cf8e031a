"""The instruction table: every nki.isa instruction is registered here once, with the
engines it may run on. Trace records carry these names as opcodes, and the cost model
keys its rules by them.

Every call a kernel makes into the simulator goes through `kernel_facing` (registered
instructions here, nki.language functions in nki/language.py): an exception that is not
already a typed NKISimError becomes one that names the kernel's own file:line."""
from __future__ import annotations

import functools
import inspect
from sys import _getframe
from dataclasses import dataclass
from typing import Callable

from .errors import ArgumentError, NKISimError, SimulatorFailure
from .running import RUNNING, current_machine
from .source import SITE_AT_OFFSET, site_of_frame, user_site
from .trace import Engine


@dataclass(frozen=True)
class InstructionSpec:
    name: str
    engines: tuple[Engine, ...]
    semantics: Callable
    kinds: tuple[str, ...] = ()       # the value semantics (nkisim.execute) its records may have


INSTRUCTIONS: dict[str, InstructionSpec] = {}
# (name, engine, kind) of every record the table allows: one set lookup per traced instruction
ALLOWED: set[tuple[str, Engine, str]] = set()

# Left alone: typed errors already say everything; resource exhaustion and warnings
# (BlockDimensionWarning under -W error) must keep their own type for the caller.
_PASS_THROUGH = (NKISimError, MemoryError, RecursionError, Warning)


def translate(exc: Exception, label: str, signature: inspect.Signature | None, args, kwargs,
              advice: Callable | None = None) -> NKISimError:
    """The typed error for `exc`, raised inside the simulator while it ran `label(*args, **kwargs)`
    for the kernel. Arguments that do not fit the signature are the kernel's to fix (`advice`,
    given the mismatch, may say how the dialect changed); anything else is reported as what it
    is: an exception inside the simulator."""
    shown = f"{label}{signature}" if signature is not None else label
    site = user_site(2)
    if signature is not None:
        try:
            signature.bind(*args, **kwargs)
        except TypeError as mismatch:
            told = advice(str(mismatch), args, kwargs) if advice is not None else None
            remedy = f"call it as documented: {shown}"
            return ArgumentError(f"{label}: {mismatch}" + (f"; {told}" if told else ""), site=site,
                                 remedy=remedy)
    return SimulatorFailure(
        f"{label} raised {type(exc).__name__} inside the simulator: {exc}", site=site,
        remedy=f"check the argument values against the NKI documentation of {shown}; if the call "
               "is valid NKI, nkisim cannot simulate it yet: report it with this message")


def kernel_facing(fn: Callable, label: str, signature: inspect.Signature | None = None) -> Callable:
    """`fn` as the kernel calls it: untyped exceptions become typed errors at the kernel's line,
    with the original kept as __cause__."""
    if signature is None:
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError):
            signature = None

    @functools.wraps(fn)
    def facing(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except _PASS_THROUGH:
            raise
        except Exception as exc:
            raise translate(exc, label, signature, args, kwargs) from exc
    return facing


def instruction(name: str, *engines: Engine, kinds: tuple[str, ...]):
    """Register `fn(machine, *args, **kwargs)` as instruction `name`, computing one of `kinds`
    (its value semantics); the returned function has the public NKI signature and finds the
    running machine itself. A program read back is held to both: engines and kinds."""
    def register(fn):
        if name in INSTRUCTIONS:
            raise RuntimeError(f"instruction {name!r} registered twice")
        INSTRUCTIONS[name] = InstructionSpec(name, engines, fn, tuple(kinds))
        ALLOWED.update((name, engine, kind) for engine in engines for kind in kinds)
        return machine_call(fn, f"nisa.{fn.__name__}")
    return register


def machine_call(fn: Callable, label: str, advice: Callable | None = None, returns: Callable | None = None) -> Callable:
    """`fn(machine, *args, **kwargs)` as a kernel calls it: the running machine found here, the
    kernel's line of the call noted for Machine.emit, and untyped exceptions made typed errors
    at that line. Both front ends' instructions are made by it: the legacy table's own
    functions (`instruction`) and the current dialect's destination-first bindings.
    `returns(machine, first)`, if given, is what the call returns instead of fn's result, given
    the index of the first record fn traced (NKI 0.6's instruction handles)."""
    sig = inspect.signature(fn)
    public = sig.replace(parameters=list(sig.parameters.values())[1:])
    running = RUNNING.get          # the running machine (nkisim.running): one C call per instruction

    @functools.wraps(fn)
    def call(*args, **kwargs):
        machine = running()
        if machine is None:
            machine = current_machine()     # outside a kernel: its error
        # the kernel line of this call, found here from the caller's frame: Machine.emit
        # uses it when it is called by `fn` itself (see Machine.emit), instead of walking
        # out through fn's and this frame (each walked frame is made into an object)
        caller = _getframe(1)
        code, offset = caller.f_code, caller.f_lasti
        last = machine.last_call          # the same call as the last one (a loop's body)?
        if code is last[0] and offset == last[1] and caller.f_trace is None:
            site = last[2]
        else:
            known = SITE_AT_OFFSET.get((id(code), offset))     # site_of_frame's first look, inline
            if known is not None and known[0] is code and caller.f_trace is None:
                site = known[1]
                machine.last_call = (code, offset, site)         # only a site found at this offset
            else:
                site = site_of_frame(caller)
        outer = machine.entry
        machine.entry = (caller, site)
        try:
            if returns is None:
                return fn(machine, *args, **kwargs)
            first = len(machine.trace)
            fn(machine, *args, **kwargs)
            return returns(machine, first)
        except _PASS_THROUGH:
            raise
        except Exception as exc:
            raise translate(exc, label, public, args, kwargs, advice) from exc
        finally:
            machine.entry = outer

    call.__signature__ = public
    return call
