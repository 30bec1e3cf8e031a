"""A TA's cancel reaches a queued run at once and a running one through its heartbeat; a Trn2
worker gives each pool process its own NeuronCore, so timed runs never share one."""
from __future__ import annotations

import os
import signal
import sys

import psutil
from worker_helpers import OPTIMIZED, spinning_kernel
from service_waits import wait_for, wait_for_run

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "doubles"))

from fixtures import sdk  # noqa: E402,F401

from workers import enqueue


def test_cancel_queued_and_running(db, assignment, student, celery_worker):
    worker = celery_worker("sim", NKI_HEARTBEAT_S=0.5, NKI_GRADE_BUDGET_S=3600)
    spin = enqueue.submit(db, student, assignment, "conv2d.py", spinning_kernel())
    waiting = enqueue.submit(db, student, assignment, "conv2d.py", OPTIMIZED)
    wait_for_run(db, spin.id, ("running",))
    assert enqueue.cancel(waiting) == "cancelled"
    assert enqueue.cancel(spin) == "running"              # asked; the worker stops it
    try:
        spin = wait_for_run(db, spin.id, ("cancelled",), timeout=120)
    except AssertionError as err:
        raise AssertionError(f"{err}\nworker log, with its pool process's stacks:\n{stacks_of_pool(worker)}") from None
    assert spin.report["status"] == "cancelled"
    after = enqueue.submit(db, student, assignment, "conv2d.py", OPTIMIZED)
    assert wait_for_run(db, after.id, ("done",)).score_total == 7.5
    db.refresh(waiting)
    assert waiting.started_at is None                   # the cancelled queued run never ran


def stacks_of_pool(worker) -> str:
    """The worker's log once each pool process has printed its threads' stacks (SIGUSR2,
    workers/tasks.py): where a grade that did not stop was."""
    before = worker.output().count("most recent call first")
    for child in psutil.Process(worker.pid).children():
        child.send_signal(signal.SIGUSR2)
    try:
        wait_for(lambda: worker.output().count("most recent call first") > before, timeout=30,
                 what="the pool process's stacks in the worker's log")
    except AssertionError:
        pass                                # the log as it is, then
    return worker.output()[-12000:]


def test_trn2_pool_processes_never_share_a_core(db, assignment, student, celery_worker, sdk):
    """A Trn2 worker of the course's SDK line (its contract doubles) with two of its cores."""
    assignment.backend = "neuron"
    db.commit()
    celery_worker("trn2", concurrency=2, python=sdk.legacy, NKI_NEURON_CORES="3,5", **sdk.settings("legacy"))
    runs = [enqueue.submit(db, student, assignment, "conv2d.py", OPTIMIZED) for _ in range(4)]
    assert {r.queue for r in runs} == {"trn2"}
    runs = [wait_for_run(db, r.id, ("done",), timeout=300) for r in runs]
    cores = {r.id: r.worker.rsplit(":core", 1)[1] for r in runs}
    assert set(cores.values()) <= {"3", "5"}
    for a in runs:
        for b in runs:
            overlap = a.id != b.id and a.started_at < b.finished_at and b.started_at < a.finished_at
            assert not (overlap and cores[a.id] == cores[b.id]), "two grades overlapped on one NeuronCore"


def test_a_pool_process_prints_its_threads_stacks_to_the_log_on_sigusr2(celery_worker):
    """What an operator (and the cancel test, when it fails) uses to see where a grade is stuck."""
    worker = celery_worker("sim")
    assert "most recent call first" not in worker.output()
    printed = stacks_of_pool(worker)
    assert "most recent call first" in printed and "billiard" in printed
    assert worker.process.poll() is None                # and the worker goes on
