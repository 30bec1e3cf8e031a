"""A grade whose executor another program kills is an infrastructure fault on a real worker:
the run is handed back to the queue and graded again, and once the attempts run out it ends as
a grader error with no score and no test rows, never a test failed with 0 (issue 42, item 4).
A real Celery worker on the embedded PostgreSQL and Redis; the executor is found in the
process table below the worker and killed with SIGKILL; every wait is bounded."""
from __future__ import annotations

import os
import signal

import pytest
import tomlkit
from executor_kills import LONG_KERNEL, executors_under, transpose_spec
from service_waits import wait_for, wait_for_run

from grader.vocabulary import RunStatus
from workers import enqueue

@pytest.fixture
def long_assignment(db, tmp_path):
    from store import specs
    from store.models import Course
    (tmp_path / "infra.toml").write_text(tomlkit.dumps(transpose_spec("infra-retry", precheck=False,
                                                                      title="An executor killed from outside")))
    a = specs.new_assignment(db, str(tmp_path / "infra.toml"), course=Course(name="CS149"), name="infra", backend="sim")
    db.commit()
    return a


def test_an_executor_killed_from_outside_is_retried_then_a_grader_error(db, long_assignment, student, celery_worker):
    worker = celery_worker("sim", NKI_MAX_ATTEMPTS=2)
    run = enqueue.submit(db, student, long_assignment, "kernels.py", LONG_KERNEL.encode())
    killed: set[int] = set()
    for attempt in (1, 2):
        executor = wait_for(lambda: executors_under(worker.pid, killed), 300,
                            f"attempt {attempt}'s executor to start", interval=0.05)[0]
        os.kill(executor.pid, signal.SIGKILL)
        killed.add(executor.pid)
        if attempt == 1:       # handed back and claimed again: the first kill cost the student nothing
            wait_for(lambda: _claimed_again(db, run.id), 300, "the run to be claimed a second time")
    run = wait_for_run(db, run.id, (RunStatus.INFRA_ERROR,), timeout=300)
    assert RunStatus(run.status).title == "grader error"
    assert run.attempts == 2
    assert run.score_total is None and run.report is None and run.test_results == []
    assert "gave up after 2 attempts" in run.error and "ExecutorKilled" in run.error, run.error
    assert "killed by signal 9 (SIGKILL)" in run.error and "not the kernel's" in run.error, run.error


def _claimed_again(db, run_id: int) -> bool:
    """The second claim; fails at once should the first attempt have ended the run (a score)."""
    from store.models import GradingRun
    db.expire_all()
    row = db.get(GradingRun, run_id)
    assert row.status not in (RunStatus.DONE, RunStatus.FAILED), (row.status, row.score_total, row.error)
    return row.attempts == 2
