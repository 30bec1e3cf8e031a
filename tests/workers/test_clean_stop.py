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


def test_tests_skipped_because_the_worker_stops_are_not_shown_as_the_students(db, assignment, student):
    """At a clean stop the grader skips the tests it has not run; those are the stop's, not the
    kernel's, so they are not stored as the run's progress (the site's run page and a following
    `grader submit` would show "skipped 0/2.5" until the hand-back); a test that finished before
    the stop is."""
    from grader.events import ProgressEvent
    from grader.report import TestResult
    from store import lifecycle
    from workers import tasks
    run = enqueue.submit(db, student, assignment, "conv2d.py", spinning_kernel())
    claim = lifecycle.claim(db, run.id, "stopping@test:1", run.celery_task_id, stale_after_s=90)
    db.commit()
    on_progress = tasks._progress_writer(claim)
    passed = TestResult(name="small", kind="correctness", status="passed", points=2.5, max_points=2.5, title="Small")
    skipped = TestResult(name="large", kind="correctness", status="skipped", points=0, max_points=2.5, title="Large")
    assert not tasks._stop.requested
    on_progress(ProgressEvent(done=1, total=2, result=passed))
    tasks._stop.requested = True              # what the worker's SIGTERM handler sets
    try:
        on_progress(ProgressEvent(done=2, total=2, result=skipped))
    finally:
        tasks._stop.requested = False
    db.expire_all()
    row = db.get(type(run), run.id)
    assert row.progress_done == 1 and [t["status"] for t in row.progress_tests] == ["passed"], row.progress_tests


def test_a_following_submit_shows_a_handed_back_run_graded_again_from_its_first_test(capsys):
    """`grader submit` follows a run whose worker stops mid-grade: its finished tests go (the
    hand-back clears them), and when the next worker grades it, each test is shown again."""
    from workers.submit_cmd import _Follower
    first = {"name": "small", "title": "Small", "status": "passed", "points": 2.5, "max_points": 2.5}
    second = dict(first, name="large", title="Large")
    follower = _Follower()
    follower.show(RunStatus.RUNNING, None, None, 2, [first, second])
    follower.show(RunStatus.QUEUED, 1, None, 2, [])                 # handed back
    follower.show(RunStatus.RUNNING, None, None, 2, [first])        # the next worker's first test
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("[1/2] Small: passed") and lines[1].startswith("[2/2] Large: passed")
    assert lines[2].startswith("handed back to the queue") and "from the first test" in lines[2]
    assert lines[3].startswith("queued") and lines[4].startswith("[1/2] Small: passed"), lines
