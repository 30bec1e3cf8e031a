"""The scheduler: a pure function from a trace and the cost rules to a timeline.

Model (trn2-cost-model.md section 5):
- one instruction queue per engine (PE, DVE, ACT, POOL) in program order, as the course's
  kernels skip the middle end; like the backend's scheduler, an engine fills its idle gaps
  with later independent instructions, up to `lookahead` instructions ahead;
- DMAs are issued one after another on one issue queue (the DGE in the default mode, cheap
  prebuilt descriptors with --disable-dge), then move their bytes on 16 DMA engines;
- an instruction waits for the instructions that wrote what it reads (read-after-write on
  overlapping regions, PSUM accumulation in program order); a dependency that crosses
  engines costs a semaphore hop. Rewriting a tile buffer does not wait for its readers
  (measured on hardware: no write-after-read stall while capacity allows).
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from ..trace import TraceRecord
from .params import CostParams
from .rules import COST_RULES, ComputeCost, DmaCost


@dataclass(slots=True)
class Slot:
    """When one trace record ran. For a DMA: issue on the issue queue, then transfer."""

    queue: str
    start: float
    end: float
    issue_start: float = 0.0
    issue_end: float = 0.0
    engines: int = 0


@dataclass
class Timeline:
    slots: list[Slot]
    makespan_ns: float
    overhead_ns: float
    busy_ns: dict[str, float]
    dma_mode: str                      # "dge" or "static"
    dma_count: int = 0
    dma_bytes: int = 0
    params: CostParams = field(default_factory=CostParams)

    @property
    def total_ns(self) -> float:
        return self.overhead_ns + self.makespan_ns

    @property
    def total_us(self) -> float:
        return self.total_ns / 1000.0


class _Writers:
    """Who last wrote each part of each allocation, in program order: gives every record the
    earlier records it must wait for (read-after-write on overlapping element ranges)."""

    _PRUNE_SCAN = 16   # how far back a new write looks for older writes it fully replaces

    def __init__(self) -> None:
        self.by_alloc: dict[int, list[tuple[int, int, int]]] = {}

    def producers(self, region, out: set) -> None:
        entries = self.by_alloc.get(region.alloc_id)
        if not entries:
            return
        lo, hi = region.lo, region.hi
        for wlo, whi, index in reversed(entries):
            if wlo < hi and lo < whi:
                out.add(index)
                if wlo <= lo and whi >= hi:      # this write covers the whole read: older ones are dead
                    return

    def add(self, region, index: int) -> None:
        lo, hi = region.lo, region.hi
        entries = self.by_alloc.setdefault(region.alloc_id, [])
        tail = entries[-self._PRUNE_SCAN:]
        if any(lo <= e[0] and e[1] <= hi for e in tail):
            keep = [e for e in tail if not (lo <= e[0] and e[1] <= hi)]
            entries[len(entries) - len(tail):] = keep
        entries.append((lo, hi, index))


def dependencies(trace: list[TraceRecord]) -> list[tuple[int, ...]]:
    """For each record, the indices of the earlier records whose results it reads."""
    writers = _Writers()
    deps: list[tuple[int, ...]] = []
    for i, rec in enumerate(trace):
        found: set[int] = set()
        for r in rec.reads:
            writers.producers(r, found)
        if rec.accumulate:                    # accumulation continues the previous writes in order
            for r in rec.writes:
                writers.producers(r, found)
        deps.append(tuple(found))
        for r in rec.writes:
            writers.add(r, i)
    return deps


class _Lane:
    """One in-order engine queue that may run any of its next `window` instructions whose
    inputs are ready (the backend scheduler's gap filling)."""

    __slots__ = ("name", "members", "head", "entered", "ready_heap", "free", "busy", "version")

    def __init__(self, name: str) -> None:
        self.name = name
        self.members: list[int] = []      # record indices in program order
        self.head = 0                     # position of the first unscheduled member
        self.entered = 0                  # members[:entered] have entered the window
        self.ready_heap: list[tuple[float, int]] = []
        self.free = 0.0
        self.busy = 0.0
        self.version = 0


def schedule(trace: list[TraceRecord], params: CostParams, *, dge: bool = True,
             overhead_ns: float | None = None) -> Timeline:
    p = params
    n = len(trace)
    costs = [COST_RULES[rec.opcode](rec, p) for rec in trace]
    deps = dependencies(trace)
    lanes: dict[str, _Lane] = {}
    lane_of: list[_Lane] = []
    durations: list[float] = []
    for cost in costs:
        if isinstance(cost, ComputeCost):
            name, dur = cost.queue, cost.ns
        else:
            name = "DGE" if dge else "DMA-issue"
            dur = (p.dge_issue_ns + p.dge_issue_per_row_ns * cost.descriptors) if dge else p.static_issue_ns
        lane = lanes.get(name) or lanes.setdefault(name, _Lane(name))
        lane.members.append(len(lane_of))
        lane_of.append(lane)
        durations.append(dur)
    position = [0] * n
    for lane in lanes.values():
        for pos, idx in enumerate(lane.members):
            position[idx] = pos
    successors: list[list[int]] = [[] for _ in range(n)]
    waiting = [len(d) for d in deps]
    for i, d in enumerate(deps):
        for j in d:
            successors[j].append(i)
    ready_at = [0.0] * n
    done_queue = ["" for _ in range(n)]     # the queue a finished record ran on, for hops
    slots: list[Slot | None] = [None] * n
    dma_free = [0.0] * p.dma_engines
    window = max(1, p.lookahead)
    global_heap: list[tuple[float, int, int, str]] = []

    def offer(lane: _Lane) -> None:
        if lane.ready_heap:
            lane.version += 1
            start = max(lane.free, lane.ready_heap[0][0])
            heapq.heappush(global_heap, (start, lane.ready_heap[0][1], lane.version, lane.name))

    def enter_window(lane: _Lane) -> None:
        limit = min(len(lane.members), lane.head + window)
        while lane.entered < limit:
            idx = lane.members[lane.entered]
            lane.entered += 1
            if waiting[idx] == 0:
                heapq.heappush(lane.ready_heap, (ready_at[idx], idx))

    for lane in lanes.values():
        enter_window(lane)
        offer(lane)
    hop = p.semaphore_ns
    makespan = 0.0
    scheduled = [False] * n
    dma_count = dma_bytes = 0
    while global_heap:
        _, _, version, name = heapq.heappop(global_heap)
        lane = lanes[name]
        if version != lane.version or not lane.ready_heap:
            continue
        ready, idx = heapq.heappop(lane.ready_heap)
        start = ready if ready > lane.free else lane.free
        end = start + durations[idx]
        lane.free = end
        lane.busy += durations[idx]
        cost = costs[idx]
        if isinstance(cost, DmaCost):
            slot = _transfer(cost, start, end, p, dma_free)
            dma_count += 1
            dma_bytes += cost.nbytes
            done_queue[idx] = "DMA"
        else:
            slot = Slot(name, start, end)
            done_queue[idx] = name
        slots[idx] = slot
        scheduled[idx] = True
        if slot.end > makespan:
            makespan = slot.end
        # advance the lane's head past scheduled members, letting later ones into the window
        members = lane.members
        while lane.head < len(members) and scheduled[members[lane.head]]:
            lane.head += 1
        enter_window(lane)
        touched = {name}
        for s in successors[idx]:
            t = slot.end + (hop if lane_of[s].name != done_queue[idx] else 0.0)
            if t > ready_at[s]:
                ready_at[s] = t
            waiting[s] -= 1
            if waiting[s] == 0:
                succ_lane = lane_of[s]
                if position[s] < succ_lane.entered:
                    heapq.heappush(succ_lane.ready_heap, (ready_at[s], s))
                    touched.add(succ_lane.name)
        for lname in touched:
            offer(lanes[lname])
    busy = {name: lane.busy for name, lane in lanes.items()}
    if dma_count:   # average busy time of one DMA engine
        busy["DMA"] = sum((s.end - s.start - p.dma_end_latency_ns) * s.engines for s in slots
                          if s.queue == "DMA") / p.dma_engines
    return Timeline(slots, makespan, p.bench_overhead_ns if overhead_ns is None else overhead_ns, busy,
                    "dge" if dge else "static", dma_count, dma_bytes, p)


def _transfer(cost: DmaCost, issue_start: float, issue_end: float, p: CostParams,
              dma_free: list[float]) -> Slot:
    """Spread a DMA's descriptors over the least busy of the 16 DMA engines."""
    k = min(p.dma_engines, cost.descriptors)
    chunk = (cost.nbytes / k / (p.dma_engine_bytes_per_ns * cost.efficiency)
             + cost.descriptors / k * p.dma_descriptor_ns)
    order = sorted(range(len(dma_free)), key=dma_free.__getitem__)[:k]
    earliest = issue_end + p.dma_start_latency_ns
    start = max(earliest, max(dma_free[e] for e in order))
    for e in order:
        dma_free[e] = start + chunk
    return Slot("DMA", start, start + chunk + p.dma_end_latency_ns, issue_start, issue_end, k)
