"""Tracing a launch on a logical NeuronCore of several physical cores (NKI 0.6's kernel[2]).

Each core runs the kernel's Python in a thread of its own, one at a time: core 0 runs until it
reaches a point where the cores meet (nisa.core_barrier, nisa.sendrecv) or ends, then core 1,
and so on. When every core has reached the same meeting point, the last to arrive completes it
(its records are emitted, one per core) and the cores go on in order. So the program holds each
core's instructions before a meeting ahead of every core's instructions after it, which is what
makes the executor's values those of the hardware; the cost model runs each core's records on
that core's engines (attrs["core"]).

Only one thread ever runs kernel code, the tracing machine switching to its core at each hand-
over (Machine.switch_core); every thread is joined before the trace is returned, and an
exception on one core ends the others."""
from __future__ import annotations

import contextvars
import threading
from dataclasses import dataclass, field
from typing import Callable

from .errors import KernelContractError


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
