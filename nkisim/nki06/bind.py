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

from ..errors import ArgumentError, KernelContractError, MemorySpaceError, ShapeError
from ..machine import DESTINATION_REMEDY, ENGINE_OUTPUTS, as_destination, fits_destination
from ..memory import Buffer
from ..registry import INSTRUCTIONS, machine_call
from ..running import RUNNING
from ..tensor import DeviceTensor
from ..trace import Engine
from .names import DESTINATION_FIRST, REMOVED_KEYWORDS

# what an instruction given its destination may write: the compute engines' outputs, and a DMA's
# SBUF (nisa.dma_transpose writes its dst itself; the legacy dialect's retargeting, which
# ENGINE_OUTPUTS is for, never moves a DMA's result)
DESTINATION_OUTPUTS = {**ENGINE_OUTPUTS, Engine.DMA: (Buffer.SBUF,)}


def binding(fn):
    """`fn(machine, dst, ...)` as `nisa.<name>(dst, ...)`: the running machine found, the kernel's
    line noted, an argument the 0.6 signature does not have refused with that signature, and
    the call's instruction handle returned."""
    return machine_call(fn, f"nisa.{fn.__name__}", migration_advice, returns=NkiInstruction.traced)


class NkiInstruction:
    """What an NKI 0.6 instruction returns while tracing: a handle on the records it traced.
    `.depends_on(*producers)` makes it run after each producer (a scheduling edge: the cost
    model's dependency, attrs["after"]); it returns the handle, so calls chain."""

    __slots__ = ("_machine", "_first", "_end")

    def __init__(self, machine, first: int, end: int) -> None:
        self._machine, self._first, self._end = machine, first, end

    @classmethod
    def traced(cls, machine, first: int) -> "NkiInstruction":
        label = machine.pending_label
        if label is not None:                 # name=: a label for kernel.with_schedule
            machine.pending_label = None
            for rec in machine.trace[first:]:
                rec.attrs["name"] = label
        handle = _new_object(cls)             # __init__'s fields set here: one is made per instruction
        handle._machine = machine
        handle._first = first
        handle._end = len(machine.trace)
        return handle

    @property
    def records(self) -> list:
        return self._machine.trace[self._first:self._end]

    def depends_on(self, *producers) -> "NkiInstruction":
        for producer in producers:
            if not isinstance(producer, NkiInstruction):
                raise ArgumentError(f"depends_on takes the handles nki.isa calls return, got {type(producer).__name__}",
                                    code="err_unsupported_args")
            if producer._machine is not self._machine or producer._end > self._first:
                raise KernelContractError(
                    "depends_on names an instruction traced after this one (or in another kernel): an edge runs "
                    "from an earlier instruction to a later one", remedy="call depends_on on the later instruction",
                    code="err_schedule_edge_order")
        add_edges(self.records, [rec for producer in producers for rec in producer.records])
        return self

    def __repr__(self) -> str:
        ops = ", ".join(rec.opcode for rec in self.records)
        return f"<NkiInstruction {ops or 'of no record'}>"


_new_object = object.__new__


def add_edges(consumers: list, producers: list) -> None:
    """Each consumer record runs after each producer record (by their program indices)."""
    wanted = {rec.index for rec in producers}
    for rec in consumers:
        before = {j for j in wanted if j < rec.index}
        if before:
            rec.attrs["after"] = tuple(sorted(set(rec.attrs.get("after", ())) | before))


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
    if result is not dst and result._alloc is not dst._alloc:    # (dst in the result's shape: dst)
        deliver(m, dst, result, instr)
        return
    engine = m.trace[-1].engine
    if dst._alloc.buffer not in DESTINATION_OUTPUTS.get(engine, ()):
        _engine_cannot_write(m, dst, instr)


def _engine_cannot_write(m, dst: DeviceTensor, instr: str):
    engine = m.trace[-1].engine
    raise MemorySpaceError(
        f"'nisa.{instr}' runs on the {engine.label} engine, which cannot write {dst._label()} "
        f"in {dst.buffer.value}",
        remedy="write an SBUF tile (copy it onward with nisa.tensor_copy), or choose another engine=")


def deliver(m, dst: DeviceTensor, result: DeviceTensor, instr: str, accumulate: bool = False) -> None:
    """Make the instruction that just produced `result` write `dst` instead."""
    if not fits_destination(dst.shape, result.shape):
        raise ShapeError(f"'dst' of 'nisa.{instr}' has shape {list(dst.shape)}, but the instruction "
                         f"computes {list(result.shape)}", remedy=DESTINATION_REMEDY,
                         code="err_param_shape_mismatch")
    dst = as_destination(dst, result.shape)
    if not m._place_result(result, dst, accumulate=accumulate):
        _engine_cannot_write(m, dst, instr)


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
    if name is None:
        return
    if not isinstance(name, str) or not name:
        raise ArgumentError(f"'name' of 'nisa.{instr}' must be a non-empty string, got {name!r}",
                            code="err_unsupported_args")
    RUNNING.get().pending_label = name
