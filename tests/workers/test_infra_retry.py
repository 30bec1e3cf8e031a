"""A grade whose executor another program kills is an infrastructure fault on a real worker:
the run is handed back to the queue and graded again, and once the attempts run out it ends as
a grader error with no score and no test rows, never a test failed with 0 (issue 42, item 4).
A real Celery worker on the embedded PostgreSQL and Redis; the executor is found in the
process table below the worker and killed with SIGKILL; every wait is bounded."""
from __future__ import annotations

import os
import signal

import psutil
import pytest
from service_waits import wait_for, wait_for_run

from grader.vocabulary import RunStatus
from workers import enqueue

SPEC = """
assignment = "infra-retry"
title = "An executor killed from outside"
spec_version = "1"
thresholds_version = "t1"
platform = "trn2"
precheck = false
time_budget_s = 600

[files.kernels]
archive_path = "part1/kernels.py"
functions = { matrix_transpose = ["a_tensor"] }

[tolerances]
float32 = { rtol = 1e-5, atol = 1e-8 }

[[tests]]
name = "transpose"
title = "Correctness: transpose"
kind = "correctness"
file = "kernels"
problem = "transpose"
points = 3
configs = [{ m = 128, n = 128, dtype = "float32" }]
"""

# A correct transpose that first copies a 12 MiB tile 100,000 times: traced in about a second,
# executed in about a minute, so each attempt's executor is surely found running.
LONG_KERNEL = b'''
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def matrix_transpose(a_tensor):
    M, N = a_tensor.shape
    out = nl.ndarray((N, M), dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    work = nisa.memset(shape=(128, 24576), value=1.0, dtype=nl.float32)
    for i in nl.sequential_range(100000):
        work = nisa.tensor_copy(work)
    tile = nl.ndarray((128, 128), dtype=a_tensor.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=a_tensor[0:128, 0:128])
    nisa.dma_copy(dst=out[0:128, 0:128], src=nisa.tensor_copy(nisa.nc_transpose(tile)))
    return out
'''


@pytest.fixture
def long_assignment(db, tmp_path):
    from store import specs
    from store.models import Course
    (tmp_path / "infra.toml").write_text(SPEC)
    a = specs.new_assignment(db, str(tmp_path / "infra.toml"), course=Course(name="CS149"), name="infra", backend="sim")
    db.commit()
    return a


def executor_below(root: int, not_pids: set[int]) -> psutil.Process | None:
    """An executor running below `root` (its working directory is an executor's job directory,
    <job root>/exec-*/exec: through the fork server every job's command line is the server's)."""
    for proc in psutil.Process(root).children(recursive=True):
        try:
            cwd = proc.cwd()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if proc.pid not in not_pids and os.path.basename(cwd) == "exec" \
                and os.path.basename(os.path.dirname(cwd)).startswith("exec-"):
            return proc
    return None


def test_an_executor_killed_from_outside_is_retried_then_a_grader_error(db, long_assignment, student, celery_worker):
    worker = celery_worker("sim", NKI_MAX_ATTEMPTS=2)
    run = enqueue.submit(db, student, long_assignment, "kernels.py", LONG_KERNEL)
    killed: set[int] = set()
    for attempt in (1, 2):
        executor = wait_for(lambda: executor_below(worker.pid, killed), 300,
                            f"attempt {attempt}'s executor to start", interval=0.05)
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
