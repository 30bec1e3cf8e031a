"""Tracing a launch on a logical NeuronCore of several physical cores (NKI 0.6's kernel[2], the
legacy dialect's SPMD grids with an nl.nc dimension), and the legacy launch grids themselves.

Each core runs the kernel's Python in a thread of its own, one at a time: core 0 runs until it
reaches a point where the cores meet (nisa.core_barrier, nisa.sendrecv) or ends, then core 1,
and so on. When every core has reached the same meeting point, the last to arrive completes it
(its records are emitted, one per core) and the cores go on in order. So the program holds each
core's instructions before a meeting ahead of every core's instructions after it, which is what
makes the executor's values those of the hardware; the cost model runs each core's records on
that core's engines (attrs["core"]).

A launch grid (kernel[4, 2], kernel[nl.nc(2), 2], kernel[nl.spmd_dim(nl.nc(2), 2), 2]) has one
instance of the kernel per grid point, each tracing with its own nl.program_id(axis). An
instance runs on core 0 unless an nl.nc factor places it; a core runs its instances one after
another in grid order, traced into its instruction stream as an unrolled loop over them would
be (the cost model overlaps two only where their data allow), and every instance's
nl.shared_hbm tensors are the first instance's.

Only one thread ever runs kernel code, the tracing machine switching to its core at each hand-
over (Machine.switch_core); every thread is joined before the trace is returned, and an
exception on one core ends the others."""
from __future__ import annotations

import contextvars
import itertools
import math
import threading
from dataclasses import dataclass, field
from typing import Callable

from .errors import KernelContractError


# ----- SPMD launch grids (the legacy dialect's kernel[grid], nl.nc, nl.spmd_dim) ----------------------

class NcDim:
    """nl.nc(n): a grid dimension of n instances, each on its own physical core of the logical one."""

    __slots__ = ("n",)

    def __init__(self, n) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise KernelContractError(f"nl.nc(n) takes a positive int, the physical cores, got {n!r}",
                                      remedy="write nl.nc(2) for Trainium2's two cores", code="err_unsupported_args")
        self.n = n

    def __repr__(self) -> str:
        return f"nl.nc({self.n})"


class SpmdDim:
    """nl.spmd_dim(a, b, ...): one grid dimension of a * b * ... instances, numbered row-major
    over its factors; an nl.nc factor places each of its sub-blocks on a core of its own."""

    __slots__ = ("factors",)

    def __init__(self, *factors) -> None:
        if not factors:
            raise KernelContractError("nl.spmd_dim() needs at least one factor", code="err_unsupported_args")
        for f in factors:
            if not isinstance(f, NcDim) and (isinstance(f, bool) or not isinstance(f, int) or f < 1):
                raise KernelContractError(f"a factor of nl.spmd_dim is a positive int or nl.nc(n), got {f!r}",
                                          code="err_unsupported_args")
        self.factors = factors

    def __repr__(self) -> str:
        return f"nl.spmd_dim({', '.join(map(repr, self.factors))})"


@dataclass(frozen=True)
class Grid:
    """A launch grid: its dimensions' sizes, and the physical core of each instance (row-major)."""

    sizes: tuple
    cores: int
    core_of: tuple

    def instances_by_core(self) -> list[list[tuple]]:
        """Each core's instances (their program ids), in grid order: the order the core runs them."""
        by_core: list[list[tuple]] = [[] for _ in range(self.cores)]
        for flat, ids in enumerate(itertools.product(*(range(n) for n in self.sizes))):
            by_core[self.core_of[flat]].append(ids)
        return by_core


MAX_GRID_INSTANCES = 1 << 16      # far beyond any grid a kernel is launched with; a bound on tracing


def parse_grid(grid) -> Grid:
    """kernel[grid]'s grid: an int, nl.nc(n), nl.spmd_dim(...), or a tuple of them."""
    dims = grid if isinstance(grid, tuple) else (grid,)
    if not dims:
        raise KernelContractError("kernel[()] names no grid dimension", remedy="launch as kernel[n](...) or "
                                  "call the kernel without a grid", code="err_unsupported_args")
    sizes, nc = [], []                 # nc: (axis, factor index, factor counts) of each nl.nc factor
    for axis, d in enumerate(dims):
        factors = d.factors if isinstance(d, SpmdDim) else (d,)
        if not all(isinstance(f, NcDim) or (type(f) is int and f >= 1) for f in factors):
            raise KernelContractError(f"a launch grid dimension is a positive int, nl.nc(n) or nl.spmd_dim(...), got "
                                      f"{d!r}", remedy="launch as kernel[2, 3](...) or kernel[nl.nc(2), 3](...)",
                                      code="err_unsupported_args")
        counts = [f.n if isinstance(f, NcDim) else f for f in factors]
        sizes.append(math.prod(counts))
        nc += [(axis, k, counts) for k, f in enumerate(factors) if isinstance(f, NcDim)]
    if len(nc) > 1:
        raise KernelContractError(f"the launch grid {grid!r} has {len(nc)} nl.nc dimensions; instances are placed on "
                                  "the physical cores along one", remedy="mark one dimension with nl.nc(n)",
                                  code="err_unsupported_args")
    total = math.prod(sizes)
    if total > MAX_GRID_INSTANCES:       # checked before any per-instance list is made
        raise KernelContractError(f"the launch grid {grid!r} has {total} instances; nkisim traces at most "
                                  f"{MAX_GRID_INSTANCES}", remedy="launch fewer, larger instances",
                                  code="err_unsupported_args")
    if not nc:
        return Grid(tuple(sizes), 1, (0,) * total)
    # an index along the nl.nc dimension numbers its factors row-major: the nc factor's digit is the core
    axis, k, counts = nc[0]
    cores, inner = counts[k], math.prod(counts[k + 1:])
    core_of = tuple((ids[axis] // inner) % cores for ids in itertools.product(*(range(n) for n in sizes)))
    return Grid(tuple(sizes), cores, core_of)


class _Ended(BaseException):
    """Raised inside a core's thread when another core failed: the trace is over."""


@dataclass
class _Meeting:
    kind: str                                   # "core_barrier" or "sendrecv"
    arrivals: dict = field(default_factory=dict)  # core -> what it brought
    done: bool = False


class Launch:
    """The cores of one launch and their hand-overs."""

    def __init__(self, machine, cores: int) -> None:
        self.machine = machine
        self.cores = cores
        self._turn = 0
        self._cv = threading.Condition()
        self._finished: set[int] = set()
        self._failure: BaseException | None = None
        self._meetings: list[_Meeting] = []
        self._reached = [0] * cores            # meetings each core has reached
        self.barrier_since = 0                 # the program index the last core_barrier was emitted at

    # ----- running the cores ---------------------------------------------------------------------
    def run(self, body: Callable[[int], object]) -> list:
        """body(core) on every core in turn (threads taking turns); their results, by core."""
        results: list = [None] * self.cores
        threads = []
        for core in range(self.cores):
            context = contextvars.copy_context()      # RUNNING: the same tracing machine
            thread = threading.Thread(target=context.run, args=(self._core, core, body, results),
                                      name=f"nkisim-core-{core}", daemon=True)
            threads.append(thread)
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        except BaseException as exc:          # interrupted while the cores trace: end them first
            with self._cv:
                self._fail_locked(exc)
            for thread in threads:
                if thread.ident is not None:
                    thread.join()
            raise
        if self._failure is not None:
            raise self._failure
        return results

    def _core(self, core: int, body, results: list) -> None:
        try:
            self._wait_turn(core)
            self.machine.switch_core(core)
            results[core] = body(core)
            self.machine.end_core()
        except _Ended:
            return
        except BaseException as exc:           # the first failure ends every core's trace
            with self._cv:
                if self._failure is None:
                    self._failure = exc
                self._cv.notify_all()
            return
        with self._cv:
            self._finished.add(core)
            if self._reached[core] < len(self._meetings):
                self._fail_locked(self._unmet(core))
            self._pass_locked(core)

    def _wait_turn(self, core: int) -> None:
        with self._cv:
            while self._turn != core and self._failure is None:
                self._cv.wait()
            if self._failure is not None:
                raise _Ended()

    def _pass_locked(self, core: int) -> None:
        """Hand over to the next core that still runs (core order, wrapping)."""
        for step in range(1, self.cores + 1):
            other = (core + step) % self.cores
            if other not in self._finished:
                self._turn = other
                break
        self._cv.notify_all()

    def _fail_locked(self, exc: BaseException) -> None:
        if self._failure is None:
            self._failure = exc
        self._cv.notify_all()

    def _unmet(self, core: int) -> KernelContractError:
        meeting = self._meetings[self._reached[core]]
        return KernelContractError(
            f"under LNC={self.cores} core {core} ended without reaching {meeting.kind} #{self._reached[core] + 1}, "
            f"which core {min(meeting.arrivals)} waits at: every core must reach the same barriers and transfers",
            remedy="call nisa.core_barrier / nisa.sendrecv on every core, outside branches on nl.program_id()",
            code="err_lnc_control_flow")

    # ----- meeting points ----------------------------------------------------------------------
    def meet(self, kind: str, brought, complete: Callable[[dict], None]) -> None:
        """Core `machine.core` reaches a meeting point of `kind`, bringing `brought`; when every
        core is there, complete({core: brought}) emits its records. Returns on this core's turn
        after the meeting."""
        m = self.machine
        core = m.core
        with self._cv:
            k = self._reached[core]
            if k == len(self._meetings):
                self._meetings.append(_Meeting(kind))
            meeting = self._meetings[k]
            if meeting.kind != kind:
                self._fail_locked(KernelContractError(
                    f"under LNC={self.cores} core {core} reaches {kind} where core {min(meeting.arrivals)} reached "
                    f"{meeting.kind}: the cores must meet at the same calls in the same order",
                    remedy="give every core the same sequence of core_barrier / sendrecv calls",
                    code="err_lnc_control_flow"))
                raise _Ended()
            meeting.arrivals[core] = brought
            self._reached[core] = k + 1
            others_done = [c for c in self._finished if c not in meeting.arrivals]
            if others_done:
                self._fail_locked(self._unmet(others_done[0]))
                raise _Ended()
        m._label_records()                           # this core's records so far: labelled
        if len(meeting.arrivals) == self.cores:      # the last to arrive completes the meeting
            complete(meeting.arrivals)
            meeting.done = True
            m._label_records()
            with self._cv:                            # core 0 goes on first
                self._turn = 0
                self._cv.notify_all()
        else:
            with self._cv:
                self._pass_locked(core)
        self._wait_turn(core)
        with self._cv:
            if not meeting.done:                      # woken with the meeting unfinished: the trace failed
                raise _Ended()
        m.switch_core(core)
