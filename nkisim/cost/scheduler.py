"""The scheduler: a pure function from a trace and the cost rules to a timeline.

Model (trn2-cost-model.md section 5):
- one instruction queue per engine (PE, DVE, ACT, POOL) in program order, as the course's
  kernels skip the middle end; like the backend's scheduler, an engine fills its idle gaps
  with later independent instructions, up to `lookahead` instructions ahead; DVE and ACT hold
  their queue for an instruction's occupancy while its result lands a pipeline latency later;
  an SBUF copy whose engine the kernel left open goes, in program order, to whichever of DVE
  and ACT has the least work so far with it (the compiler places it by engine load when it
  compiles: trn2-conv-measurements.md C4, C6);
- DMAs are issued on an issue queue (one of the two hardware DGE queues in the default mode,
  each in program order with the same look-ahead; cheap prebuilt descriptors with
  --disable-dge), then move their bytes on 16 DMA engines;
- an instruction waits for the instructions that wrote what it reads (read-after-write on
  overlapping regions, PSUM accumulation in program order; dependencies.py finds them in
  O(n log n)); a dependency that crosses engines costs a semaphore hop;
- on NeuronCore-v2 (CostParams.shared_ports) the Vector and GpSimd engines take turns at SBUF,
  the Vector and Scalar engines at PSUM: an instruction touching the buffer also waits for the
  port, and holds it for its occupancy;
- `hazard_deps` (dependencies.hazards) add write-after-read and write-after-write waits where
  memory cannot be renamed (HBM, tiles too large to hold twice): a compute instruction waits
  for them like for its inputs; a DMA is issued anyway and only its transfer waits.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from .. import collector
from ..trace import TraceRecord
from .dependencies import DependencyGraph, dependencies
from .masks import restricted
from .params import CostParams
from .rules import (BALANCED_QUEUES, COST_RULES, DmaCost, balanced_copy, copy_ns, dma_issue_ns, dma_issue_queues,
                    pipeline_ns)


@dataclass(slots=True)
class Slot:
    """When one trace record ran. For a DMA: issue on the issue queue, then transfer."""

    queue: str
    start: float
    end: float
    issue_start: float = 0.0
    issue_end: float = 0.0
    engines: int = 0
    dma_queues: tuple[int, ...] = ()    # which of the 16 DMA engines moved its bytes
    issue_queue: str = ""               # a DMA: the queue that issued it (DGE-SP, DGE-ACT, DMA-issue)
    hazard_wait: float = 0.0            # how long a write-after-read/-write hazard held it back


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
    dependency_checks: int = 0         # element ranges the dependency index looked at
    hazard_count: int = 0              # records that had to wait for a WAR/WAW hazard

    @property
    def total_ns(self) -> float:
        return self.overhead_ns + self.makespan_ns

    @property
    def total_us(self) -> float:
        return self.total_ns / 1000.0


@dataclass(frozen=True, slots=True)
class _Job:
    """Where one record may run: (queue, duration) options, more than one for an instruction
    the compiler may place on either engine; a DMA also moves bytes after its issue."""

    options: tuple[tuple[str, float], ...]
    dma: DmaCost | None = None
    core: int = 0                       # a DMA: the physical core whose DMA engines move it
    ports: tuple[str, ...] = ()         # a compute job: the shared access ports it holds (NC-v2)


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


def core_queue(queue: str, core: int) -> str:
    """A queue of physical core `core` of a logical NeuronCore: core 0's keep their names."""
    return queue if not core else f"{queue}:core{core}"


def _jobs(trace: list[TraceRecord], p: CostParams, dge: bool) -> list[_Job]:
    auto_default = not any("auto_engine" in rec.attrs for rec in trace)
    jobs = []
    load: dict[str, float] = {}           # engine time given to each compute queue so far
    for rec in trace:
        rec = restricted(rec)                 # what its mask leaves it to do
        cost = COST_RULES[rec.opcode](rec, p)
        core = rec.attrs.get("core", 0)       # another physical core: its own engines and DMA queues
        if isinstance(cost, DmaCost):
            queues = dma_issue_queues(rec, dge, p.dge_default_queues)
            jobs.append(_Job(tuple((core_queue(q, core), dma_issue_ns(cost, p, q != "DMA-issue")) for q in queues),
                             cost, core))
            continue
        if balanced_copy(rec, auto_default):
            engine, ns = _least_loaded([(q, copy_ns(rec, q, p)) for q in BALANCED_QUEUES], load, core)
        else:
            engine, ns = cost.queue, cost.ns
        queue = core_queue(engine, core)
        load[queue] = load.get(queue, 0.0) + ns
        ports = _ports(rec, engine, core, p.shared_ports) if p.shared_ports else ()
        jobs.append(_Job(((queue, ns),), ports=ports))
    return jobs


def _ports(rec: TraceRecord, engine: str, core: int, shared: tuple) -> tuple[str, ...]:
    """The shared access ports (CostParams.shared_ports) an instruction on `engine` holds: those
    of the buffers it reads or writes that its engine shares with another."""
    touched = {r.buffer for r in rec.reads + rec.writes}
    return tuple(core_queue(port, core) for port, engines, buffer in shared
                 if engine in engines and buffer in touched)


def _least_loaded(options: list[tuple[str, float]], load: dict[str, float], core: int = 0) -> tuple[str, float]:
    """C4, C6: the compiler places a copy the kernel left open by engine workload ("compiler
    selects best engine based on engine workload", nki.isa.tensor_copy) when it compiles (C4's
    counts are of the NEFF's instruction streams), so not by when an engine happens to be free
    at run time: the engine whose work so far, with the copy's, is the least (ties: DVE)."""
    return min(options, key=lambda o: load.get(core_queue(o[0], core), 0.0) + o[1])


def schedule(trace: list[TraceRecord], params: CostParams, *, dge: bool = True,
             overhead_ns: float | None = None, graph: DependencyGraph | None = None,
             hazard_deps: list[tuple[int, ...]] | None = None) -> Timeline:
    """The trace's timeline; `graph` gives dependencies found another way (tests compare the
    interval index with a plain scan); `hazard_deps` the write-after-read/-write predecessors
    of each record (dependencies.hazards), none if not given."""
    # the scheduler makes no reference cycles but millions of small tuples: left on, the cyclic
    # collector would rescan the whole trace again and again, making the time superlinear
    with collector.off():
        return _Scheduler(trace, params, dge, graph, hazard_deps).run(overhead_ns)


class _Scheduler:
    """List scheduling over the dependency graph: each engine lane picks, among its next
    `lookahead` members whose inputs are ready, the one ready first; lanes advance in time
    order through one heap of their next start times."""

    def __init__(self, trace: list[TraceRecord], p: CostParams, dge: bool, graph: DependencyGraph | None,
                 hazard_deps: list[tuple[int, ...]] | None = None) -> None:
        self.p, self.dge, self.n = p, dge, len(trace)
        self.jobs = _jobs(trace, p, dge)
        graph = dependencies(trace) if graph is None else graph
        self.checks = graph.checks
        self.lanes: dict[str, _Lane] = {}
        self.position: list[tuple[int, ...]] = []
        for job in self.jobs:
            pos = []
            for name, _ in job.options:
                lane = self.lanes.get(name) or self.lanes.setdefault(name, _Lane(name))
                pos.append(len(lane.members))
                lane.members.append(len(self.position))
            self.position.append(tuple(pos))
        all_deps = graph.deps + graph.joins
        self.successors: list[list[int]] = [[] for _ in all_deps]
        for i, d in enumerate(all_deps):
            for j in d:
                self.successors[j].append(i)
        self.waiting = [len(d) for d in all_deps]
        # hazards: a compute instruction waits for them like for its inputs (plus a hop); a DMA
        # is issued regardless and only its transfer waits (the queue's semaphore gates the data)
        self.hazard_succ: list[list[int]] = [[] for _ in all_deps]
        self.hazard_pending = [0] * self.n
        self.hazard_ready = [0.0] * self.n
        self.raw_ready = [0.0] * self.n
        self.issued: dict[int, tuple[float, float, str]] = {}     # DMAs issued, transfer held by a hazard
        self.hazard_count = 0
        for i, d in enumerate(hazard_deps or ()):
            for j in d:
                self.hazard_succ[j].append(i)
                if self.jobs[i].dma is not None:
                    self.hazard_pending[i] += 1
                else:
                    self.waiting[i] += 1
        self.ready_at = [[0.0] * len(job.options) for job in self.jobs]
        # a join finishes at its last input's end; `hop_end` adds the semaphore hop, which a
        # reader on another queue than all of the join's inputs pays
        self.join_end = [0.0] * len(graph.joins)
        self.join_hop_end = [0.0] * len(graph.joins)
        self.join_queue: list[str | None] = [None] * len(graph.joins)
        self.slots: list[Slot | None] = [None] * self.n
        self.scheduled = [False] * self.n
        # each physical core's DMA engines (cores beyond 0 only under LNC > 1)
        self.dma_free: dict[int, list[float]] = {}
        self.port_free: dict[str, float] = {}     # NC-v2's shared access ports: when each is free
        self.global_heap: list[tuple[float, int, int, str]] = []

    # --- lanes ------------------------------------------------------------------------------

    def offer(self, lane: _Lane) -> None:
        heap = lane.ready_heap
        while heap and self.scheduled[heap[0][1]]:     # taken by another lane (a DMA either DGE queue may issue)
            heapq.heappop(heap)
        if heap:
            lane.version += 1
            start = max(lane.free, heap[0][0])
            heapq.heappush(self.global_heap, (start, heap[0][1], lane.version, lane.name))

    def enter_window(self, lane: _Lane) -> None:
        limit = min(len(lane.members), lane.head + max(1, self.p.lookahead))
        while lane.entered < limit:
            idx = lane.members[lane.entered]
            lane.entered += 1
            if self.waiting[idx] == 0 and not self.scheduled[idx]:
                k = self._option(idx, lane.name)
                heapq.heappush(lane.ready_heap, (self.ready_at[idx][k], idx))

    def advance(self, lane: _Lane) -> None:
        members = lane.members
        while lane.head < len(members) and self.scheduled[members[lane.head]]:
            lane.head += 1
        self.enter_window(lane)

    def _option(self, idx: int, name: str) -> int:
        for k, (queue, _) in enumerate(self.jobs[idx].options):
            if queue == name:
                return k
        raise KeyError(name)

    # --- completion -------------------------------------------------------------------------

    def finished(self, node: int, end: float, hop_end: float, queue: str | None, touched: set) -> None:
        """Pass a finished node's end time to its successors; joins pass it on at once. A DMA
        whose transfer only waited for hazards finishes here too, once the last one has."""
        stack = [(node, end, hop_end, queue)]
        while stack:
            node, end, hop_end, queue = stack.pop()
            if node < self.n:
                for s in self.hazard_succ[node]:
                    released = end + self.p.dma_hazard_hop_ns
                    if self.jobs[s].dma is not None:
                        self.hazard_ready[s] = max(self.hazard_ready[s], released)
                        self.hazard_pending[s] -= 1
                        if self.hazard_pending[s] == 0 and s in self.issued:
                            slot = self.place_transfer(s, *self.issued.pop(s))
                            stack.append((s, slot.end, slot.end + self.p.semaphore_ns, "DMA"))
                        continue
                    self.hazard_ready[s] = max(self.hazard_ready[s], released)
                    self.waiting[s] -= 1
                    self.release(s, released, released, None, touched, hazard=True)
            for s in self.successors[node]:
                self.waiting[s] -= 1
                if s >= self.n:
                    j = s - self.n
                    self.join_end[j] = max(self.join_end[j], end)
                    self.join_hop_end[j] = max(self.join_hop_end[j], hop_end)
                    prev = self.join_queue[j]
                    self.join_queue[j] = queue if prev in (None, queue) else "*"
                    if self.waiting[s] == 0:
                        stack.append((s, self.join_end[j], self.join_hop_end[j], self.join_queue[j]))
                    continue
                self.release(s, end, hop_end, queue, touched)

    def release(self, s: int, end: float, hop_end: float, queue: str | None, touched: set,
                hazard: bool = False) -> None:
        """One predecessor of record `s` finished; queue it where it may run once all have."""
        if not hazard and hop_end > self.raw_ready[s]:
            self.raw_ready[s] = hop_end
        times = self.ready_at[s]
        for k, (lane_name, _) in enumerate(self.jobs[s].options):
            t = end if lane_name == queue else hop_end
            if t > times[k]:
                times[k] = t
        if self.waiting[s] == 0:
            for k, (lane_name, _) in enumerate(self.jobs[s].options):
                lane = self.lanes[lane_name]
                if self.position[s][k] < lane.entered:
                    heapq.heappush(lane.ready_heap, (times[k], s))
                    touched.add(lane_name)

    # --- the loop ---------------------------------------------------------------------------

    def run(self, overhead_ns: float | None) -> Timeline:
        p = self.p
        for lane in self.lanes.values():
            self.enter_window(lane)
            self.offer(lane)
        while self.global_heap:
            _, _, version, name = heapq.heappop(self.global_heap)
            lane = self.lanes[name]
            if version != lane.version or not lane.ready_heap:
                continue
            ready, idx = heapq.heappop(lane.ready_heap)
            job = self.jobs[idx]
            duration = job.options[self._option(idx, name)][1] if len(job.options) > 1 else job.options[0][1]
            free_before = lane.free
            start = ready if ready > lane.free else lane.free
            ports = job.ports
            for port in ports:                 # NC-v2: wait for the engine that shares the buffer
                start = max(start, self.port_free.get(port, 0.0))
            lane.free = start + duration      # the queue is held for the occupancy ...
            for port in ports:
                self.port_free[port] = lane.free
            end = lane.free if job.dma is not None else lane.free + pipeline_ns(name, p)  # ... the result lands later
            lane.busy += duration
            self.scheduled[idx] = True
            touched = {name}
            for other, _ in job.options:
                self.advance(self.lanes[other])
                touched.add(other)
            if job.dma is not None:
                if self.hazard_pending[idx]:       # issued; the transfer waits for its hazards
                    self.issued[idx] = (start, end, name)
                    self.slots[idx] = Slot("DMA", start, end, start, end, issue_queue=name)
                else:
                    slot = self.place_transfer(idx, start, end, name)
                    self.finished(idx, slot.end, slot.end + p.semaphore_ns, "DMA", touched)
            else:
                slot = self.slots[idx] = Slot(name, start, end)
                held = min(start, self.hazard_ready[idx]) - max(free_before, self.raw_ready[idx])
                if held > 0:
                    slot.hazard_wait = held
                    self.hazard_count += 1
                self.finished(idx, end, end + p.semaphore_ns, name, touched)
            for lname in touched:
                self.offer(self.lanes[lname])
        makespan = max((s.end for s in self.slots if s is not None), default=0.0)
        dma_count = sum(1 for j in self.jobs if j.dma is not None)
        dma_bytes = sum(j.dma.nbytes for j in self.jobs if j.dma is not None)
        busy = {name: lane.busy for name, lane in self.lanes.items()}
        if dma_count:   # average busy time of one DMA engine (of every physical core's)
            busy["DMA"] = sum((s.end - s.start - p.dma_end_latency_ns) * s.engines for s in self.slots
                              if s.queue == "DMA") / (p.dma_engines * max(1, len(self.dma_free)))
        return Timeline(self.slots, makespan, p.bench_overhead_ns if overhead_ns is None else overhead_ns,
                        busy, "dge" if self.dge else "static", dma_count, dma_bytes, p, self.checks,
                        self.hazard_count)

    def place_transfer(self, idx: int, issue_start: float, issue_end: float, queue: str) -> Slot:
        """Move an issued DMA's bytes, no earlier than its hazards allow."""
        held = self.hazard_ready[idx]
        job = self.jobs[idx]
        engines = self.dma_free.get(job.core)
        if engines is None:
            engines = self.dma_free[job.core] = [0.0] * self.p.dma_engines
        slot = _transfer(job.dma, issue_start, issue_end, self.p, engines, held)
        slot.issue_queue = queue
        if held > issue_end:
            slot.hazard_wait = held - issue_end
            self.hazard_count += 1
        self.slots[idx] = slot
        return slot


def engines_used(cost: DmaCost, p: CostParams) -> int:
    """The DMA engines a DMA's descriptors spread over: one a descriptor, up to all of them."""
    return max(1, min(p.dma_engines, cost.descriptors))


def engine_ns(cost: DmaCost, p: CostParams, k: int) -> float:
    """How long each of the `k` DMA engines a DMA is spread over works on it: its bytes at the
    engine rate, and per contiguous run the descriptor cost, or for a run of a few elements on
    chip (an element-scattered SBUF side) their element writes if that is less, plus C3's HBM
    read-modify-writes; never less than `dma_row_min_ns` a partition row of its on-chip side (the
    conv-a/b profiles' small-row loads)."""
    # a descriptor shorter than the minimum efficient transfer takes as long as one of that size
    moved = max(cost.nbytes, cost.descriptors * p.dma_min_efficient_bytes)
    per_run = min(p.dma_descriptor_ns, cost.run_elements * p.dma_run_element_ns)
    streamed = (moved / k / (p.dma_engine_bytes_per_ns * cost.efficiency) + cost.descriptors / k * per_run
                + cost.partial_writes / k * p.dma_hbm_partial_write_ns)
    return max(streamed, cost.on_chip_rows / k * p.dma_row_min_ns)


def _transfer(cost: DmaCost, issue_start: float, issue_end: float, p: CostParams,
              dma_free: list[float], hazard_ready: float = 0.0) -> Slot:
    """Spread a DMA's descriptors over the least busy of the 16 DMA engines. The data moves the
    semaphore-to-start latency after its issue, or after the last hazard it waited for."""
    k = engines_used(cost, p)
    chunk = engine_ns(cost, p, k)
    order = sorted(range(len(dma_free)), key=dma_free.__getitem__)[:k]
    latency = p.dma_store_start_latency_ns if cost.store and p.dma_store_start_latency_ns is not None \
        else p.dma_start_latency_ns
    earliest = max(issue_end, hazard_ready) + latency
    start = max(earliest, max(dma_free[e] for e in order))
    for e in order:
        dma_free[e] = start + chunk
    return Slot("DMA", start, start + chunk + p.dma_end_latency_ns, issue_start, issue_end, k, tuple(order))
