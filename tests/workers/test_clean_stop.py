"""A clean stop hands the grades under way back to the queue at once (issue 46): SIGTERM to a
worker's process group (as `grader serve` stops its parts) or to its main process alone (as
Docker's init does) ends the worker within seconds, the run it was grading is queued again with a
message on the broker and its attempt not counted, and the next worker takes it up at once,
instead of the run showing "running" on a gone worker until the reaper finds it silent. Real
Celery workers, PostgreSQL and Redis; every wait is bounded."""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
from service_waits import wait_for_run
from worker_helpers import spinning_kernel

from grader.vocabulary import RunStatus
from workers import enqueue

STOPPED_WITHIN_S = 30.0      # the grade's budget is an hour: the worker must not wait for it


@pytest.mark.parametrize("how", ["group", "main process"])
def test_a_run_grading_at_a_clean_stop_is_queued_again_at_once(db, assignment, student, celery_worker, how):
    from store.models import GradingRun
    from workers.reaper import broker_task_ids
    worker = celery_worker("sim", NKI_HEARTBEAT_S=0.5, NKI_GRADE_BUDGET_S=3600)
    run = enqueue.submit(db, student, assignment, "conv2d.py", spinning_kernel())
    wait_for_run(db, run.id, (RunStatus.RUNNING,))
    sent = time.monotonic()
    if how == "group":
        worker.kill(signal.SIGTERM)
    else:
        os.kill(worker.pid, signal.SIGTERM)
    try:
        worker.process.wait(STOPPED_WITHIN_S)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the worker still runs {STOPPED_WITHIN_S:.0f} s after SIGTERM ({how}), waiting on "
                             f"its grade:\n{worker.output()[-4000:]}") from None
    took = time.monotonic() - sent
    db.expire_all()
    row = db.get(GradingRun, run.id)
    assert row.status == RunStatus.QUEUED and row.worker is None and row.heartbeat_at is None, worker.output()[-3000:]
    assert row.attempts == 0 and row.progress_done == 0            # a stop is nobody's fault
    assert "stopped during the grade; re-queued" in row.error
    assert row.celery_task_id in broker_task_ids()                  # a message waits: no reaper needed
    assert f"run {run.id}: handed back to the queue after" in worker.output()
    print(f"worker stopped {took:.1f} s after SIGTERM ({how})")

    again = celery_worker("sim", NKI_HEARTBEAT_S=0.5, NKI_GRADE_BUDGET_S=3600)
    resumed = wait_for_run(db, run.id, (RunStatus.RUNNING,), timeout=60)
    assert resumed.attempts == 1 and again.name in resumed.worker
    assert enqueue.cancel(resumed) == RunStatus.RUNNING
    wait_for_run(db, run.id, (RunStatus.CANCELLED,), timeout=120)
