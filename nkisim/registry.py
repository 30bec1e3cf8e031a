"""The instruction table: every nki.isa instruction is registered here once, with the
engines it may run on. Trace records carry these names as opcodes, and the cost model
keys its rules by them."""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Callable

from .trace import Engine


@dataclass(frozen=True)
class InstructionSpec:
    name: str
    engines: tuple[Engine, ...]
    semantics: Callable


INSTRUCTIONS: dict[str, InstructionSpec] = {}


def instruction(name: str, *engines: Engine):
    """Register `fn(machine, *args, **kwargs)` as instruction `name`; the returned function
    has the public NKI signature and finds the running machine itself."""
    def register(fn):
        if name in INSTRUCTIONS:
            raise RuntimeError(f"instruction {name!r} registered twice")
        INSTRUCTIONS[name] = InstructionSpec(name, engines, fn)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            from .machine import current_machine
            return fn(current_machine(), *args, **kwargs)

        sig = inspect.signature(fn)
        call.__signature__ = sig.replace(parameters=list(sig.parameters.values())[1:])
        return call
    return register
