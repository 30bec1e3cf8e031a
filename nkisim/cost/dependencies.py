"""Read-after-write dependencies of a trace, in O(n log n) whatever the kernel does.

Each allocation keeps an interval index: disjoint element ranges, each mapped to the node
that last wrote it. A record depends on the last writers of the ranges it reads (and, when
it accumulates, of the ranges it adds into). A write replaces the ranges it covers, so it
costs O(log n) plus the ranges it removes, each of which was added once.

A read that overlaps many ranges (thousands of one-element writes, then one read of the whole
tile) would hand every later reader of that tile thousands of dependencies. Instead, past
`FAN_IN` ranges the read merges them into one range owned by a *join*: a node with no engine
and no duration that finishes when all of them have. Each range is merged at most once, so
every record looks at O(FAN_IN) ranges and waits on O(FAN_IN) nodes per region.

Node ids 0..n-1 are trace records; n, n+1, ... are joins.
"""
from __future__ import annotations

from dataclasses import dataclass

from sortedcontainers import SortedList

from ..trace import TraceRecord

# ranges a read may depend on one by one before they are merged behind a join (a read then
# costs at most this many checks; our reference kernels' timelines are the same with or without)
FAN_IN = 32


@dataclass
class DependencyGraph:
    deps: list[tuple[int, ...]]        # per trace record: the nodes whose results it reads
    joins: list[tuple[int, ...]]       # per join (node id len(deps) + i): the nodes it waits for
    checks: int                        # ranges looked at in all: the work done, O(n) per FAN_IN

    @property
    def nodes(self) -> int:
        return len(self.deps) + len(self.joins)


class _IntervalIndex:
    """Last writer of every element range of one allocation: sorted (start, end, node)."""

    __slots__ = ("ranges",)

    def __init__(self) -> None:
        self.ranges = SortedList()

    def overlapping(self, lo: int, hi: int) -> tuple[int, list[tuple[int, int, int]]]:
        """Position of the first range overlapping [lo, hi) and all of them, in order."""
        ranges = self.ranges
        at = max(ranges.bisect_left((lo, lo)) - 1, 0)     # the range that may hold lo starts before it
        found = []
        for entry in ranges.islice(at):
            if entry[0] >= hi:
                break
            if entry[1] > lo:
                found.append(entry)
            else:                  # ends before lo: only the first one looked at can
                at += 1
        return at, found

    def replace(self, lo: int, hi: int, node: int, at: int, covered: list[tuple[int, int, int]]) -> None:
        """Make [lo, hi) belong to `node`; `covered` are the ranges overlapping it, from `at`."""
        ranges = self.ranges
        if covered:
            del ranges[at:at + len(covered)]
            start, _, owner = covered[0]
            if start < lo:
                ranges.add((start, lo, owner))
            _, end, owner = covered[-1]
            if end > hi:
                ranges.add((hi, end, owner))
        ranges.add((lo, hi, node))


class _Builder:
    def __init__(self, n: int, fan_in: int) -> None:
        self.n, self.fan_in = n, fan_in
        self.index: dict[int, _IntervalIndex] = {}
        self.joins: list[tuple[int, ...]] = []
        self.checks = 0

    def producers(self, region, out: set) -> None:
        index = self.index.get(region.alloc_id)
        if index is None:
            return
        lo, hi = region.lo, region.hi
        if hi <= lo:
            return
        at, found = index.overlapping(lo, hi)
        self.checks += len(found) + 1
        if len(found) <= self.fan_in:
            out.update(node for _, _, node in found)
            return
        join = self.n + len(self.joins)
        self.joins.append(tuple({node for _, _, node in found}))
        # the merged range spans the found ranges and the gaps between them, which no one wrote
        index.replace(found[0][0], found[-1][1], join, at, found)
        out.add(join)

    def wrote(self, region, node: int) -> None:
        index = self.index.get(region.alloc_id)
        if index is None:
            index = self.index[region.alloc_id] = _IntervalIndex()
        lo, hi = region.lo, region.hi
        if hi <= lo:
            return
        at, covered = index.overlapping(lo, hi)
        self.checks += len(covered) + 1
        index.replace(lo, hi, node, at, covered)


def dependencies(trace: list[TraceRecord], fan_in: int = FAN_IN) -> DependencyGraph:
    """For each record, the earlier records (or joins of them) whose results it reads."""
    builder = _Builder(len(trace), fan_in)
    deps: list[tuple[int, ...]] = []
    position = None                 # program index -> place in this trace, for scheduling edges
    for i, rec in enumerate(trace):
        found: set[int] = set()
        for r in rec.reads:
            builder.producers(r, found)
        if rec.accumulate:                    # accumulation continues the previous writes in order
            for r in rec.writes:
                builder.producers(r, found)
        if i and "ordered" in rec.attrs:       # inside nl.no_reorder(): after the one before it
            found.add(i - 1)
        after = rec.attrs.get("after")         # depends_on / with_schedule: after these instructions
        if after:
            if position is None:
                position = {r.index: k for k, r in enumerate(trace)}
            found.update(k for k in map(position.get, after) if k is not None and k < i)
        deps.append(tuple(found))
        for r in rec.writes:
            builder.wrote(r, i)
        for r in getattr(rec, "stores", ()):     # further destinations of the same values
            builder.wrote(r, i)
    return DependencyGraph(deps, builder.joins, builder.checks)


# ----- write-after-read and write-after-write hazards -----------------------------------------
#
# A write must not land before earlier instructions finished reading (WAR) or writing (WAW) the
# same memory. On chip the compiler renames a rewritten tile into a fresh buffer while capacity
# allows (trn2-cost-model.md section 1: a conv kernel reloading one SBUF buffer thousands of
# times stayed Tensor Engine bound), so only allocations too large to hold twice keep their
# hazards there. HBM is never renamed: an output lives where the caller put it. And a DMA writes
# HBM in granules: a write smaller than one is a read-modify-write of the whole granule, so two
# writes into one granule are ordered even when their elements differ.

HAZARD_FAN_IN = FAN_IN          # predecessors a write keeps (the latest ones finish last)


def _runs_of(region) -> tuple:
    """(first element, elements) of each contiguous run of a region, sorted; None if unknown."""
    import numpy as np
    if region.offsets is not None:
        starts = np.unique(np.asarray(region.offsets, dtype=np.int64).ravel())
        return starts, 1
    item = region.itemsize
    run = max(region.contiguous_bytes // item, 1)
    starts = np.array([region.start], dtype=np.int64)
    inner = 1
    for n, stride in zip(reversed(region.shape), reversed(region.strides)):
        if inner < run:                     # dimensions inside the contiguous run
            inner *= n
            continue
        starts = (starts[None, :] + (np.arange(n, dtype=np.int64) * (stride // item))[:, None]).ravel()
        if starts.size > 1 << 20:           # too many to list: treat as one span
            return None
    return np.sort(starts), run


def _granules(region, granule: int):
    """Sorted (first, last) granule of each run of a region, or None (then: its bounding box)."""
    import numpy as np
    found = _runs_of(region)
    if found is None:
        return None
    starts, run = found
    return starts // granule, (starts + run - 1) // granule, np


def _rows(r):
    """(row stride, row length, rows) in elements of a region of equal contiguous rows, or None."""
    if r.offsets is not None or r.strides is None:
        return None
    item = r.itemsize
    run = max(r.contiguous_bytes // item, 1)
    inner, outer = 1, []
    for n, stride in zip(reversed(r.shape), reversed(r.strides)):
        if inner < run:
            inner *= n
        elif n > 1:
            outer.append((n, stride // item))
    if not outer:
        return (run, run, 1)
    if len(outer) > 1 or outer[0][1] <= 0:
        return None
    return outer[0][1], run, outer[0][0]


def _share_granule(a, b, granule: int, cache: dict) -> bool:
    """Whether two regions of one allocation write a common granule (their footprints, not
    just their bounding boxes: strided stores of rows overlap as boxes, rarely as elements)."""
    ra, rb = _rows(a), _rows(b)
    if ra is not None and ra == rb:      # equal row patterns: a closed form
        stride, length, rows = ra
        d = b.start - a.start
        if granule == 1:
            reach = length
        else:                            # rows widen to whole granules
            reach = length + granule
        k = round(d / stride) if stride else 0
        return any(abs(d - m * stride) < reach for m in (k - 1, k, k + 1) if -rows < m < rows) or \
            (rows == 1 and abs(d) < reach)
    ga, gb = cache.get(id(a)), cache.get(id(b))
    if ga is None:
        ga = cache[id(a)] = _granules(a, granule)
    if gb is None:
        gb = cache[id(b)] = _granules(b, granule)
    if ga is None or gb is None:
        return True
    a_lo, a_hi, np = ga
    b_lo, b_hi, _ = gb
    b_hi_run = np.maximum.accumulate(b_hi)          # monotone, for the search
    at = np.searchsorted(b_hi_run, a_lo)
    ok = at < len(b_lo)
    return bool(np.any(b_lo[at[ok]] <= a_hi[ok]))


class _HazardIndex:
    """Per allocation: earlier writes (node, region) and reads since, as sorted (lo, hi, node)."""

    __slots__ = ("writes", "reads", "longest_write", "longest_read")

    def __init__(self) -> None:
        self.writes = SortedList()
        self.reads = SortedList()
        self.longest_write = 0
        self.longest_read = 0

    @staticmethod
    def _overlapping(entries: SortedList, longest: int, lo: int, hi: int, limit: int):
        found = []      # newest first among equal ranges: past `limit` the oldest are left out
        for entry in entries.irange((lo - longest,), (hi,), inclusive=(True, False), reverse=True):
            if entry[1] > lo:
                found.append(entry)
                if len(found) >= limit:
                    break
        return found


def hazards(trace: list[TraceRecord], tracked: dict[int, int]) -> list[tuple[int, ...]]:
    """For each record, the earlier records its writes must wait for (WAR and WAW). `tracked`
    maps an allocation id to its write granule in elements (1 = exact); allocations not in it
    are renamed by the compiler and have no hazards."""
    # only memory written more than once can be overwritten while in use
    writes_per_alloc: dict[int, int] = {}
    for rec in trace:
        for r in rec.writes:
            if r.alloc_id in tracked:
                writes_per_alloc[r.alloc_id] = writes_per_alloc.get(r.alloc_id, 0) + 1
    tracked = {a: g for a, g in tracked.items() if writes_per_alloc.get(a, 0) > 1}
    index: dict[int, _HazardIndex] = {}
    cache: dict = {}                        # granule footprints of the regions looked at
    out: list[tuple[int, ...]] = []
    limit = 4 * HAZARD_FAN_IN
    for i, rec in enumerate(trace):
        waits: set[int] = set()
        for r in rec.writes:
            granule = tracked.get(r.alloc_id)
            if granule is None:
                continue
            h = index.get(r.alloc_id)
            if h is None:
                continue
            lo, hi = r.lo, r.hi
            if hi <= lo:
                continue
            # WAR: reads of these elements since they were last written
            for entry in h._overlapping(h.reads, h.longest_read, lo, hi, limit):
                waits.add(entry[2])
                if lo <= entry[0] and entry[1] <= hi:     # this write orders every later one after it
                    h.reads.remove(entry)
            # WAW: earlier writes sharing a granule (elements, for a granule of one)
            glo, ghi = (lo // granule) * granule, -(-hi // granule) * granule
            for entry in h._overlapping(h.writes, h.longest_write, glo, ghi, limit):
                if any(_share_granule(r, w, granule, cache) for w in trace[entry[2]].writes
                       if w.alloc_id == r.alloc_id):
                    waits.add(entry[2])
                    if glo <= entry[0] and entry[1] <= ghi:     # later writes order after this one
                        h.writes.remove(entry)
        if rec.accumulate:                  # an accumulation continues the previous writes in order
            waits.clear()
        waits.discard(i)
        out.append(tuple(sorted(waits)[-HAZARD_FAN_IN:]))
        for r in rec.reads:
            if r.alloc_id in tracked and r.hi > r.lo:
                h = index.get(r.alloc_id) or index.setdefault(r.alloc_id, _HazardIndex())
                h.reads.add((r.lo, r.hi, i))
                h.longest_read = max(h.longest_read, r.hi - r.lo)
        for r in rec.writes:
            if r.alloc_id in tracked and r.hi > r.lo:
                h = index.get(r.alloc_id) or index.setdefault(r.alloc_id, _HazardIndex())
                # keep only the latest writes of a span: an older one is ordered before them
                for entry in h._overlapping(h.writes, h.longest_write, r.lo, r.hi, limit):
                    if r.lo <= entry[0] and entry[1] <= r.hi:
                        h.writes.remove(entry)
                h.writes.add((r.lo, r.hi, i))
                h.longest_write = max(h.longest_write, r.hi - r.lo)
    return out
