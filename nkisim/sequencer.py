"""Run-time control flow: a program's loops and registers run as the engines' sequencers run them.

NKI 0.6 compiles nl.fori_loop / nl.while_loop with a bound or condition known only on the device
(a register loaded from memory with nisa.register_load) into branches the sequencers take at run
time: "a single copy of the body is generated and the hardware iterates over it" (the dynamic
loops deep dive). nkisim traces such a body once, between control records
(nkisim.instructions.registers: loop_begin/loop_end, while_begin/while_end, register_move), and
this module walks the program as the sequencers would: it keeps the register file, decides
each branch from it, and hands every instruction it reaches to the executor in turn. What it
returns is the executed trace, one record per instruction executed, in order: what the cost
model times, as for any other program (a loop's body once per iteration).

A register read before anything set it, a loop that runs past the instruction limit and a value
that does not fit 32 bits are the kernel's errors (ProgramError, with the instruction's index).

The branch itself is not timed (docs/cost-model.md): the engines' queues see the body's
instructions back to back. What is modelled is the wait a branch imposes: every instruction after
a decision taken on a loaded register starts only after that load (its attrs["after"]), on every
engine, as each engine's sequencer must know the register before it goes past the branch (and
no instruction after a branch can be hoisted above it)."""
from __future__ import annotations

from typing import Callable

import math

from . import dtypes
from .instructions.registers import stored_value
from .program import ProgramError, control_blocks, record_place
from .trace import Region, TraceRecord

_MASK32 = 0xFFFFFFFF


def _int32(value: int) -> int:
    """A register's 32 bits, read as a signed int (the loop's compare-and-branch is 32-bit)."""
    bits = value & _MASK32
    return bits - (1 << 32) if bits >= 1 << 31 else bits


class Sequencer:
    """One walk of a program with run-time control. `step(record)` executes an instruction
    (False: a print, which is not timed); `load(record)` reads a register_load's element."""

    def __init__(self, records: list[TraceRecord], limit: int, allocs: dict) -> None:
        self.records = records
        self.allocs = allocs                      # allocation id -> AllocInfo
        self.blocks = control_blocks(records)
        self.limit = limit
        self.registers: dict[int, int] = {}
        # for each register, the executed register_load its value came from (None: a constant)
        self.loaded_by: dict[int, int | None] = {}
        self.trace: list[TraceRecord] = []
        self.instance_of: dict[int, int] = {}     # program index -> its latest executed instance
        self.gate: int | None = None              # the latest load a branch was decided on
        self._gated_attrs: dict = {}              # (id of a record's attrs, gate) -> those attrs with the edge
        self.loops: dict[int, int] = {}           # loop_begin position -> its upper bound this time

    def read(self, rec: TraceRecord, register: int) -> int:
        if register not in self.registers:
            raise ProgramError(f"{record_place(rec)} reads register {register} before anything set it")
        return self.registers[register]

    def operand(self, rec: TraceRecord, spec: list) -> int:
        return spec[1] if spec[0] == "imm" else self.read(rec, spec[1])

    def latest_load(self, registers) -> int | None:
        """The latest executed register_load the values of `registers` came from (None: constants)."""
        return max((i for i in (self.loaded_by.get(r) for r in registers) if i is not None), default=None)

    def decided_by(self, *registers: int) -> None:
        """A branch was taken on these registers: every instruction executed from now on waits
        for the loads their values came from."""
        load = self.latest_load(registers)
        if load is not None and (self.gate is None or load > self.gate):
            self.gate = load

    def run(self, step: Callable[[TraceRecord], bool], load: Callable[[TraceRecord], int]) -> list[TraceRecord]:
        records, blocks = self.records, self.blocks
        pc, n = 0, len(records)
        steps, limit = 0, self.limit
        while pc < n:
            rec = records[pc]
            steps += 1
            if steps > limit:          # the branches count: a loop with an empty body ends too
                raise ProgramError(f"the kernel executed more than {limit} instructions (a run-time loop that "
                                   "does not end, or runs far more often than intended?)")
            if rec.kind == "control":
                pc = self._control(rec, pc, blocks)
                continue
            instance = self._instance(rec)
            if rec.kind == "register_load":
                register = rec.params["register"]
                self.registers[register] = _int32(load(instance))
                self.loaded_by[register] = instance.index
            elif "register" in rec.params:       # a register_store of a run-time value
                register = rec.params["register"]
                instance.params = {"value": stored_value(self.read(rec, register), _dtype_of(rec))}
                self._wait_for(instance, self.loaded_by.get(register))
            if step(instance):
                self.trace.append(instance)
                self.instance_of[rec.index] = instance.index
            pc += 1
        return self.trace

    def _instance(self, rec: TraceRecord) -> TraceRecord:
        index = len(self.trace)
        attrs = rec.attrs
        after = attrs.get("after")
        gate = self.gate
        if after:                            # its own edges, to the latest instances of their records
            attrs = dict(attrs)
            attrs["after"] = [self.instance_of[j] for j in after if j in self.instance_of] + \
                ([gate] if gate is not None else [])
        elif gate is not None:               # one dict per record and gate, shared by its iterations
            key = (id(attrs), gate)
            gated = self._gated_attrs.get(key)
            if gated is None:
                gated = self._gated_attrs[key] = {**attrs, "after": (gate,)}
            attrs = gated
        reads, writes, stores = rec.reads, rec.writes, rec.stores
        moved = [r.dyn[0] for group in (reads, writes, stores) for r in group if r.dyn is not None]
        if moved:                                # accesses moved by run-time registers: where they land now
            reads, writes, stores = ([self._resolved(r, rec) for r in group] for group in (reads, writes, stores))
        instance = TraceRecord(index, rec.opcode, rec.engine, reads, writes, rec.site, rec.accumulate, attrs,
                               rec.kind, rec.params, rec.mask, stores)
        for number in moved:
            self._wait_for(instance, self.loaded_by.get(number))
        return instance

    def _resolved(self, r: Region, rec: TraceRecord) -> Region:
        """`r` moved by its register's value times its unit, held to its allocation as the
        tracer holds a static access: inside it and, on chip, inside the partitions it starts in."""
        if r.dyn is None:
            return r
        number, unit = r.dyn
        value = self.read(rec, number)
        shift = value * unit
        alloc = self.allocs[r.alloc_id]
        size = math.prod(alloc.shape)
        offsets = r.offsets + shift if r.offsets is not None else None
        lo, hi = r.lo, r.hi
        inside = lo + shift >= 0 and hi + shift <= size
        if inside and alloc.buffer in ("sbuf", "psum") and alloc.shape and hi > lo:
            row = math.prod(alloc.shape[alloc.par_axis + 1:]) or 1
            if offsets is not None:
                inside = bool((r.offsets // row == offsets // row).all())
            else:
                first_row, last_row = lo // row, (hi - 1) // row
                inside = lo - first_row * row + shift >= 0 and hi - last_row * row + shift <= row
        if not inside:
            raise ProgramError(f"{record_place(rec)}: register {number} holds {value} at run time, which moves its access of "
                               f"{alloc.dtype}{list(alloc.shape)} in {alloc.buffer} outside the tensor"
                               + (" (or across its partitions)" if alloc.buffer in ("sbuf", "psum") else ""))
        return Region(r.alloc_id, r.buffer, r.start + shift, r.shape, r.strides, r.itemsize, r.dtype, r.partitions,
                      None if offsets is None else (int(offsets.min()), int(offsets.max()) + 1, r.itemsize)
                      if offsets.size else None, offsets=offsets)

    def _wait_for(self, instance: TraceRecord, load: int | None) -> None:
        """The instance waits for `load` (what a register it reads came from), unless a branch
        made everything wait for that load, or a later one, already."""
        if load is not None and (self.gate is None or load > self.gate):
            edges = list(instance.attrs.get("after", ()))
            instance.attrs = {**instance.attrs, "after": edges + [load]}

    def _control(self, rec: TraceRecord, pc: int, blocks: dict[int, int]) -> int:
        p, op = rec.params, rec.opcode
        if op == "register_move":
            src = p["src"]
            self.registers[p["dst"]] = self.operand(rec, src)
            self.loaded_by[p["dst"]] = self.loaded_by.get(src[1]) if src[0] == "reg" else None
            return pc + 1
        if op == "loop_begin":                 # reached only on entry: loop_end goes back to the body
            lower, upper = self.operand(rec, p["lower"]), self.operand(rec, p["upper"])
            regs = [s[1] for s in (p["lower"], p["upper"]) if s[0] == "reg"]
            self.decided_by(*regs)
            if lower >= upper:
                return blocks[pc] + 1
            self.registers[p["counter"]] = lower
            self.loaded_by[p["counter"]] = self.latest_load(regs)
            self.loops[pc] = upper
            return pc + 1
        if op == "loop_end":
            begin = blocks[pc]
            head = self.records[begin].params
            counter = self.registers[head["counter"]] + head["step"]
            if counter < self.loops[begin]:
                self.registers[head["counter"]] = counter
                return begin + 1
            del self.loops[begin]
            return pc + 1
        if op == "while_begin":
            self.decided_by(p["cond"])
            return pc + 1 if self.read(rec, p["cond"]) != 0 else blocks[pc] + 1
        if op == "while_end":
            self.registers[p["cond"]] = self.read(rec, p["next"])
            self.loaded_by[p["cond"]] = self.loaded_by.get(p["next"])
            self.decided_by(p["cond"])
            return blocks[pc] + 1 if self.registers[p["cond"]] != 0 else pc + 1
        raise ProgramError(f"instruction {rec.index} ({op}): not a control record")   # control_blocks refused it


def _dtype_of(rec: TraceRecord):
    return dtypes.to_dtype(rec.writes[0].dtype)
