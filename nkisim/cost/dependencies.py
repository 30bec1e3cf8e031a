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
    for i, rec in enumerate(trace):
        found: set[int] = set()
        for r in rec.reads:
            builder.producers(r, found)
        if rec.accumulate:                    # accumulation continues the previous writes in order
            for r in rec.writes:
                builder.producers(r, found)
        deps.append(tuple(found))
        for r in rec.writes:
            builder.wrote(r, i)
        for r in getattr(rec, "stores", ()):     # further destinations of the same values
            builder.wrote(r, i)
    return DependencyGraph(deps, builder.joins, builder.checks)
