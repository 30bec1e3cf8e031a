"""borderline = "hardware" (issue 41): a simulated run whose p99 lies within the simulator's error
of a threshold is provisional (today's points, flagged `borderline_hardware:<test>`, so held like
any flagged run) and is graded again on a Trainium worker of its spec's generation, when one is
alive: that run (a regrade of the same submission on the neuron backend) is what counts. With no
such worker the provisional run stays on the staff pages until staff clear it or a worker comes
(a staff regrade on "Trainium2 hardware" is the same run)."""
from __future__ import annotations

import logging

from sqlalchemy import select

from grader.vocabulary import PLATFORM_OF_QUEUE, Backend, TimedFlag
from store import specs
from store.db import session_scope
from store.models import GradingRun

from . import enqueue
from .nightly import available_backends

log = logging.getLogger(__name__)

FLAG = TimedFlag.BORDERLINE_HARDWARE.prefix


def provisional_tests(flags) -> list[str]:
    """The tests of a report's flags that are provisional under borderline = "hardware"."""
    return [f.removeprefix(FLAG) for f in flags if f.startswith(FLAG)]


def confirm_on_hardware(run_id: int, flags) -> int | None:
    """After a simulated run is stored: its hardware run's id, queued now, or None (no test is
    provisional, the spec's generation has no hardware queue, no worker of it is alive, or the
    submission has a hardware run after this one already)."""
    tests = provisional_tests(flags)
    if not tests:
        return None
    with session_scope() as s:
        run = s.get(GradingRun, run_id)
        if run is None or run.backend != Backend.SIM:
            return None
        platform = specs.spec_of(run.submission.assignment).platform
        if platform not in PLATFORM_OF_QUEUE.values():
            log.info("run %s: provisional (%s), but no hardware queue runs %s: left to course staff", run_id,
                     ", ".join(tests), platform)
            return None
        if Backend.NEURON not in available_backends():
            log.info("run %s: provisional (%s), but no Trainium worker is alive: left to course staff", run_id,
                     ", ".join(tests))
            return None
        later = s.scalar(select(GradingRun.id).where(GradingRun.submission_id == run.submission_id,
                                                     GradingRun.backend == Backend.NEURON, GradingRun.id > run.id))
        if later is not None:
            return None
        fresh = enqueue.regrade(s, run.submission, Backend.NEURON)
        log.info("run %s: provisional (%s): timed again on Trainium as run %s", run_id, ", ".join(tests), fresh.id)
        return fresh.id
