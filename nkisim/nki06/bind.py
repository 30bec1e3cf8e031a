"""How the current dialect (NKI 0.6) sits on the one instruction table.

An NKI 0.6 instruction takes its destination first and returns nothing. Each binding here
checks the 0.6 rules of its call (named enums, a destination it may write), runs the table's
own function for the instruction (nkisim.registry.INSTRUCTIONS, the legacy front end's
semantics and checks) and makes that instruction write the destination directly, as
`dst[...] = nisa.op(...)` does in the legacy dialect. So both dialects trace the same program
records: same opcodes, same regions, same costs.
"""
from __future__ import annotations

import enum
import math

from ..errors import ArgumentError, KernelContractError, MemorySpaceError, ShapeError
from ..machine import ENGINE_OUTPUTS
from ..registry import INSTRUCTIONS, machine_call
from ..tensor import DeviceTensor
from .names import DESTINATION_FIRST, REMOVED_KEYWORDS


def binding(fn):
    """`fn(machine, dst, ...)` as `nisa.<name>(dst, ...)`: the running machine found, the kernel's
    line noted, and an argument the 0.6 signature does not have refused with that signature."""
    return machine_call(fn, f"nisa.{fn.__name__}", migration_advice)


def migration_advice(mismatch: str, args, kwargs) -> str | None:
    """What a call that does not fit its 0.6 signature most likely missed."""
    for keyword, advice in REMOVED_KEYWORDS.items():
        if f"'{keyword}'" in mismatch and keyword in kwargs:
            return advice
    if "missing" in mismatch and "dst" not in kwargs:
        return f"in NKI 0.6 {DESTINATION_FIRST}"
    return None


def semantics(opcode: str):
    """The table's function for `opcode`: (machine, *legacy arguments) -> its result tile."""
    return INSTRUCTIONS[opcode].semantics


def destination(dst, instr: str) -> DeviceTensor:
    """Check `dst` is a tensor the instruction may write (on-chip; never a kernel input)."""
    if type(dst) is DeviceTensor and dst._alloc.buffer.on_chip and not dst._alloc.is_input:
        return dst                     # the common case, checked in one line (tracing's hot path)
    if type(dst) is not DeviceTensor:
        raise ShapeError(f"'dst' of 'nisa.{instr}' must be a tensor, got {type(dst).__name__}",
                         remedy="allocate the destination with nl.ndarray(shape, dtype, buffer=nl.sbuf) "
                                "and pass it (or a slice of it) as dst",
                         code="err_operand_must_be_tensor")
    if dst._alloc.is_input:
        raise KernelContractError(f"'dst' of 'nisa.{instr}' is the kernel parameter {dst._label()}, "
                                  "which is read-only",
                                  remedy="allocate the output with nl.ndarray(shape, dtype, buffer=nl.shared_hbm)",
                                  code="err_immutable_parameter")
    if not dst._alloc.buffer.on_chip:
        raise MemorySpaceError(f"'dst' of 'nisa.{instr}' is {dst._label()} in HBM; compute instructions "
                               "write SBUF or PSUM", remedy="write an SBUF tile, then copy it to HBM "
                                                          "with nisa.dma_copy(dst=hbm_tensor, src=tile)")
    return dst


def into(m, dst: DeviceTensor, instr: str, fn, *args, **kwargs) -> None:
    """Run the table's function `fn` with its result written straight into `dst` (the machine's
    destination, taken by Machine.result_tile): no transient tile, no retargeting. A function
    that made a result of its own has it delivered to dst instead."""
    m.destination = dst
    try:
        result = fn(m, *args, **kwargs)
    finally:
        m.destination = None
    if result is not dst:
        deliver(m, dst, result, instr)
        return
    engine = m.trace[-1].engine
    if dst._alloc.buffer not in ENGINE_OUTPUTS.get(engine, ()):
        _engine_cannot_write(m, dst, instr)


def _engine_cannot_write(m, dst: DeviceTensor, instr: str):
    engine = m.trace[-1].engine
    raise MemorySpaceError(
        f"'nisa.{instr}' runs on the {engine.label} engine, which cannot write {dst._label()} "
        f"in {dst.buffer.value}",
        remedy="write an SBUF tile (copy it onward with nisa.tensor_copy), or choose another engine=")


def deliver(m, dst: DeviceTensor, result: DeviceTensor, instr: str, accumulate: bool = False) -> None:
    """Make the instruction that just produced `result` write `dst` instead."""
    shape = dst.shape
    if shape != result.shape and (math.prod(shape) != math.prod(result.shape)
                                      or _squeezed(dst.shape) != _squeezed(result.shape)):
        raise ShapeError(f"'dst' of 'nisa.{instr}' has shape {list(dst.shape)}, but the instruction "
                         f"computes {list(result.shape)}",
                         remedy="slice dst to the shape of the result", code="err_param_shape_mismatch")
    if not m._place_result(result, dst, accumulate=accumulate):
        _engine_cannot_write(m, dst, instr)


def _squeezed(shape: tuple) -> tuple:
    return tuple(n for n in shape if n != 1)


def named(value, enum_type: type[enum.Enum], param: str, instr: str) -> None:
    """Refuse an enum argument that is not a member of `enum_type`: since NKI 0.3 only the named
    members are accepted (`nisa.engine.vector`, never 5). Each binding maps the member onto the
    table's own code."""
    if type(value) is enum_type:
        return
    raise ArgumentError(
        f"'{param}' of 'nisa.{instr}' must be a member of nisa.{enum_type.__name__}, got {value!r}",
        remedy=f"use one of {', '.join('nisa.%s.%s' % (enum_type.__name__, m.name) for m in enum_type)}",
        code="err_unsupported_args")


def instruction_name(name, instr: str) -> None:
    """`name=` labels an instruction for kernel.with_schedule; it does not change what runs."""
    if name is not None and not isinstance(name, str):
        raise ArgumentError(f"'name' of 'nisa.{instr}' must be a string, got {type(name).__name__}",
                            code="err_unsupported_args")
