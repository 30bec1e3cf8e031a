"""One program executed by several processes at once: each runs the instructions its share of
the output needs, on its own copy of every tile, and writes its share into the one output.

A conv2d kernel computes each block of its output from the inputs, the weights it prepared
once, and tiles no other block reads. So the output's stores are split into consecutive ranges
and each part executes the stores of its range with everything they depend on (the weights'
preparation then runs in every part). Each part executes its instructions in program order,
on the same values the whole program would give them, so the output has the same bits.

What an instruction depends on is found per allocation: the instructions that wrote to an
allocation since an unmasked, non-accumulating write of all of it (which makes earlier values
irrelevant) are what a read of it, an accumulating write to it or a masked write to it
depends on.

A program is split only when that is safe and worth it (`plan` gives None otherwise):
- its output is one whole allocation the caller gives as memory every part writes to (shared);
- nothing reads the output, accumulates into it or writes it under a mask, and no two parts
  write the same element of it (then which part writes last would decide its value);
- nothing writes an input (inputs are the caller's, shared by every part);
- the work is well above a fork's cost, and the largest part well under the whole program's.
Instructions no store needs (a device_print, dead code) go to the first part with what they
read. Errors: every part stops at its first failing instruction; the one raised is the earliest
in program order, which is the one the whole program stops at.
"""
from __future__ import annotations

import bisect
import builtins
import math
import os

import numpy as np

from . import dtypes, forked
from .errors import KernelValueError
from .execute import Execution, _contiguous, _covers, _plan, execute, written_regions
from .program import Program, ProgramError, is_dynamic
from .trace import Region

WORTH_IT = 0.8                    # split only when the largest part is below this share of the work ...
MIN_WORK_US = 20_000.0            # ... and the work well above what forking a process costs (a few ms)
MATMUL_US_PER_MFLOP = 10.0        # a part's cost: ~100 GFLOP/s per core ...
INSTRUCTION_US = 5.0              # ... and a few microseconds of Python per instruction
ELEMENT_US = 0.001


class Plan(list):
    """The instructions each part executes (a list of lists of indices into program.records, in
    order), and whether the parts' stores write every element of the output between them (its
    starting values then never show: nothing fills it first)."""

    def __init__(self, parts: list[list[int]], covers_output: bool) -> None:
        super().__init__(parts)
        self.covers_output = covers_output


def plan(program: Program, parts: int, largest_share: float = WORTH_IT,
         min_work_us: float = MIN_WORK_US) -> Plan | None:
    """The instructions each of `parts` processes executes (indices into program.records, in
    order), or None when the program cannot be split safely, or usefully: its work is below
    `min_work_us` (estimated), or the costliest part would be above `largest_share` of it. A
    program the analysis cannot read (only a forged one) is left to one process, which reports
    what is wrong with it. A program with run-time control is never split: which instructions
    run is known only as it runs (nkisim.sequencer)."""
    if type(parts) is not int or parts < 2 or is_dynamic(program.records):
        return None
    try:
        return _worked_out(program, parts, largest_share, min_work_us)
    except (AttributeError, TypeError, ValueError, IndexError, KeyError, OverflowError):
        return None


def _worked_out(program: Program, parts: int, largest_share: float, min_work_us: float) -> Plan | None:
    records = program.records
    out = program.outputs
    if not isinstance(out, Region) or out.offsets is not None or out.start != 0:
        return None
    allocs = {a.id: a for a in program.allocs}
    target = allocs.get(out.alloc_id)
    if target is None or target.input_index is not None or out.dtype != target.dtype \
            or out.shape != target.shape or out.strides != _contiguous(out.shape, out.itemsize):
        return None
    found = _dependencies(program, allocs, out.alloc_id)
    if found is None:
        return None
    deps, node_of, stores = found
    if len(stores) < parts:
        return None
    lo, hi = _needed_by(deps, node_of, stores)
    weights = [_cost(rec) for rec in records]
    if sum(weights) < min_work_us:
        return None
    bounds = _balance(lo, hi, weights, len(stores), parts, largest_share)
    if bounds is None:
        return None
    lo_a, hi_a = np.asarray(lo), np.asarray(hi)
    chosen = [np.flatnonzero((lo_a < b) & (hi_a >= a)).tolist() for a, b in zip(bounds, bounds[1:])]
    covered = _disjoint_outputs(records, chosen, stores, out, target)
    if covered is None:
        return None
    return Plan(chosen, covered)


def _dependencies(program: Program, allocs: dict, output_id: int):
    """(the dependency graph: for each node, the earlier nodes it needs; each instruction's node;
    the indices of the instructions writing the output, in order), or None when the program
    must not be split. Nodes are instructions and allocation states: a write that leaves part
    of an allocation's earlier values makes a state needing its instruction and the state
    before, so a read needs one node however many partial writes came before it (a tile
    loaded row by row and read by every matmul stays linear)."""
    sizes = {a.id: math.prod(a.shape) for a in program.allocs}
    inputs = {a.id for a in program.allocs if a.input_index is not None}
    state: dict[int, int] = {}            # allocation: the node holding its current values
    deps: list[list[int]] = []
    node_of: list[int] = []
    stores: list[int] = []
    for i, rec in enumerate(program.records):
        needs: list[int] = []
        for r in rec.reads:
            if r.alloc_id == output_id:
                return None                   # the output read back: parts would race on it
            found = state.get(r.alloc_id)
            if found is not None:
                needs.append(found)
        written = []                          # (allocation, written whole?)
        for r, partial, adds in written_regions(rec):
            alloc_id = r.alloc_id
            if alloc_id in inputs:
                return None
            if alloc_id == output_id:
                if partial or adds:
                    return None
                if not stores or stores[-1] != i:
                    stores.append(i)
            if partial or adds:
                found = state.get(alloc_id)
                if found is not None:
                    needs.append(found)
            written.append((alloc_id, not partial and not adds and _covers(r, sizes.get(alloc_id, -1))))
        me = len(deps)
        deps.append(needs)
        node_of.append(me)
        for alloc_id, whole in written:
            before = state.get(alloc_id)
            if whole or before is None:
                state[alloc_id] = me
            else:                             # the earlier values it kept, and this write
                state[alloc_id] = len(deps)
                deps.append([me, before])
    return deps, node_of, stores


def _needed_by(deps: list[list[int]], node_of: list[int], stores: list[int]) -> tuple[list[int], list[int]]:
    """For each instruction, the first and last store (by rank among the stores) that needs it;
    an instruction no store needs counts as needed by the first (it runs in the first part)."""
    n = len(deps)
    lo, hi = [len(stores)] * n, [-1] * n
    for rank, i in enumerate(stores):
        lo[node_of[i]] = hi[node_of[i]] = rank
    instruction = bytearray(n)
    for node in node_of:
        instruction[node] = 1
    for i in range(n - 1, -1, -1):
        a, b = lo[i], hi[i]
        if b < 0:
            if not instruction[i]:
                continue                      # values nothing reads
            a = b = lo[i] = hi[i] = 0
        for j in deps[i]:
            if a < lo[j]:
                lo[j] = a
            if b > hi[j]:
                hi[j] = b
    return [lo[node] for node in node_of], [hi[node] for node in node_of]


def _cost(rec) -> float:
    """Rough microseconds one instruction takes to execute (only the parts' balance uses it)."""
    if rec.kind == "matmul":
        a = rec.attrs
        return INSTRUCTION_US + MATMUL_US_PER_MFLOP * 2e-6 * a.get("k", 0) * a.get("m", 0) * a.get("n", 0)
    elements = math.prod(rec.writes[0].shape) if rec.writes else 0
    return INSTRUCTION_US + ELEMENT_US * elements


def _balance(lo: list[int], hi: list[int], weights: list[float], n_stores: int, parts: int,
             largest_share: float) -> list[int] | None:
    """Store ranks [0, b1, ..., n_stores] cutting the stores into `parts` ranges, the costliest
    part as cheap as it can be, or None when it would still be most of the work. A part
    [a, b) executes every instruction needed by a store in it: all but those needed only
    before a (hi < a) or only from b on (lo >= b)."""
    total = float(sum(weights))
    by_hi = np.bincount(hi, weights=weights, minlength=n_stores)
    by_lo = np.bincount(lo, weights=weights, minlength=n_stores + 1)
    before = np.concatenate(([0.0], np.cumsum(by_hi)))               # before[a]: weight with hi < a
    from_on = np.concatenate((np.cumsum(by_lo[::-1])[::-1], [0.0]))  # from_on[b]: weight with lo >= b

    def cost(a: int, b: int) -> float:
        return total - before[a] - from_on[b]

    def cut(limit: float) -> list[int] | None:
        bounds, a = [0], 0
        for k in range(parts - 1):
            # the furthest b whose part [a, b) stays within the limit, leaving a store for each part after
            last = n_stores - (parts - 1 - k)
            b = bisect.bisect_right(range(last + 1), limit, lo=a + 1, key=lambda x: cost(a, x)) - 1
            b = min(max(b, a + 1), last)
            bounds.append(b)
            a = b
        if cost(a, n_stores) > limit:
            return None
        return bounds + [n_stores]

    low, high = total / parts, total
    best = None
    for _ in range(40):
        middle = (low + high) / 2
        found = cut(middle)
        if found is None:
            low = middle
        else:
            best, high = found, middle
    if best is None:
        best = cut(total)
    if best is None:
        return None
    worst = max(cost(a, b) for a, b in zip(best, best[1:]))
    return best if worst <= largest_share * total else None


def _disjoint_outputs(records, chosen: list[list[int]], stores: list[int], out: Region, target) -> bool | None:
    """None when an element of the output is written by two parts; else whether every element
    is written by one. Worked out on a map of who owns each block of the output, a block being
    the most elements every store writes whole (a conv2d's stores write whole rows: a map of
    rows, not of the 50M elements of a 224x224 batch's output, whose first touch alone took
    0.15 s of the executor's time before any part could start)."""
    size = math.prod(target.shape)
    is_store = set(stores)
    writes = []                                        # (part, region)
    for p, indices in enumerate(chosen, start=1):
        for i in indices:
            if i not in is_store:
                continue
            rec = records[i]
            for r in (rec.writes + rec.stores if rec.stores else rec.writes):
                if r.alloc_id != out.alloc_id:
                    continue
                if r.itemsize != out.itemsize:
                    return None
                if r.offsets is not None or math.prod(r.shape):
                    writes.append((p, r))
    block = _block(size, [r for _, r in writes])
    owner = np.zeros(size // block, dtype=np.uint8)
    for p, r in writes:
        if r.offsets is not None:                      # block is 1 here
            mine = owner[r.offsets]
            if np.any((mine != 0) & (mine != p)):
                return None
            owner[r.offsets] = p
            continue
        # the region over blocks: its innermost run of whole blocks, its other steps in blocks
        shape, strides = list(r.shape), [st // r.itemsize // block for st in r.strides]
        if block > 1:
            shape[-1], strides[-1] = shape[-1] // block, 1
        mine = np.ndarray(tuple(shape), np.uint8, owner, r.start // block, tuple(strides))
        if np.any((mine != 0) & (mine != p)):
            return None
        mine[...] = p
    return bool(owner.all())


def _block(size: int, regions: list[Region]) -> int:
    """The largest number of elements g such that the output's size is a multiple of g and
    every region writes whole aligned runs of g elements: its innermost dimension is contiguous
    and its start, its innermost length and its other steps are multiples of g. 1 when a region
    is gathered or its innermost dimension not contiguous."""
    g = size
    for r in regions:
        if r.offsets is not None or not r.shape:
            return 1
        item = r.itemsize
        if r.shape[-1] > 1 and r.strides[-1] != item:
            return 1
        g = math.gcd(g, r.start, r.shape[-1])
        for n, st in zip(r.shape[:-1], r.strides[:-1]):
            if n > 1:
                g = math.gcd(g, st // item)
        if g == 1:
            return 1
    return max(g, 1)


# ----- executing the parts ---------------------------------------------------------------------------

def execute_split(program: Program, inputs: list[np.ndarray], parts: list[list[int]], output: np.ndarray, *,
                  fill_nan: bool = True) -> Execution:
    """Execute `program` as the parts `plan` gave, the first in this process and each other in
    a forked one, at once. `output`: the flat memory of the output's allocation (its size and
    dtype), shared with forked processes (a MAP_SHARED mapping: what they write lands in it).
    The same Execution as execute(program, inputs, placed={its id: output}) gives."""
    out = program.outputs
    target = next(a for a in program.allocs if a.id == out.alloc_id)
    if output.shape != (math.prod(target.shape),) or dtypes.name_of(output.dtype) != target.dtype \
            or not output.flags.writeable:
        raise ValueError("the output memory is not the size and dtype of the output's allocation")
    if not getattr(parts, "covers_output", False):
        _fill_once(program, target, output, fill_nan)       # else every element is written before the end
    filled = frozenset([out.alloc_id])
    children = []
    try:
        for indices in parts[1:]:
            children.append(_fork_part(program, inputs, indices, output, fill_nan, filled))
        first_error = None
        printed: list[tuple[int, str]] = []
        try:
            done = execute(_part(program, parts[0]), inputs, fill_nan=fill_nan,
                           placed={out.alloc_id: output}, filled=filled)
            printed += _numbered(program, parts[0], done.printed)
        except Exception as err:                  # the earliest of every part's errors is raised
            first_error = (_at(err), err)
        for part in children:
            report = _collect(part)
            printed += [tuple(p) for p in report.get("printed", [])]
            if "error" in report:
                at, kind, message = report["error"]
                if first_error is None or at < first_error[0]:
                    first_error = (at, _rebuilt(kind, message))
        children = []
    finally:
        for part in children:                     # this process failed: the others are not waited for
            part.kill()
    if first_error is not None:
        raise first_error[1]
    printed.sort(key=lambda p: p[0])
    trace = [rec for rec in program.records if rec.kind != "print"]
    return Execution(output.reshape(target.shape), trace, [text for _, text in printed])


def _rebuilt(kind: str, message: str) -> Exception:
    """A forked part's error, as the one process would have raised it."""
    if kind == "ProgramError":
        return ProgramError(message)
    if kind == "KernelValueError":
        return KernelValueError.rebuilt(message)
    cls = getattr(builtins, kind, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(message)
        except Exception:
            pass
    return RuntimeError(f"{kind}: {message}")


def _part(program: Program, indices: list[int]) -> Program:
    return Program(program.kernel, program.allocs, [program.records[i] for i in indices], program.outputs,
                   program.compile_options, program.platform, program.dialect, program.lnc)


def _fill_once(program: Program, target, output: np.ndarray, fill_nan: bool) -> None:
    """The output's starting values, as executing the whole program gives them at first touch."""
    from .execute import _Memory
    mem = _Memory(program, [], fill_nan, None, _plan(program))
    mem.fill(target, output, dtypes.to_dtype(target.dtype))


def _numbered(program: Program, indices: list[int], printed: list[str]) -> list[tuple[int, str]]:
    prints = [program.records[i].index for i in indices if program.records[i].kind == "print"]
    return list(zip(prints, printed))


def _at(err: BaseException) -> int:
    at = getattr(err, "at", None)
    return at if type(at) is int else -1


def _fork_part(program, inputs, indices, output, fill_nan, filled) -> forked.Forked:
    def run() -> dict:
        try:
            done = execute(_part(program, indices), inputs, fill_nan=fill_nan,
                           placed={program.outputs.alloc_id: output}, filled=filled)
            return {"printed": _numbered(program, indices, done.printed)}
        except Exception as err:
            return {"error": [_at(err), type(err).__name__, str(err)]}
    return forked.start(run)


def _collect(part: forked.Forked) -> dict:
    """What a forked part reported; a part that died without a word is an error of its own."""
    report, status = part.report()
    if report is not None:
        return report
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == 9:
        return {"error": [-1, "MemoryError", "a part of the program was killed (memory)"]}
    return {"error": [-1, "other", f"a part of the program ended without a result (status {status})"]}
