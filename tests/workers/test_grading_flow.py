"""A submission goes queued -> running -> done through a real Celery worker process on the
embedded PostgreSQL and Redis, and what is stored is what the grader reported."""
from __future__ import annotations

from worker_helpers import OPTIMIZED
from service_waits import wait_for_run

import grader
from workers import enqueue


def test_queued_to_done_stores_report_results_and_private_seed(db, assignment, student, celery_worker):
    run = enqueue.submit(db, student, assignment, "conv2d.py", OPTIMIZED)
    assert run.status == "queued" and run.id is not None
    assert enqueue.queue_position(db, run) == 1
    celery_worker("sim")
    run = wait_for_run(db, run.id, ("done",))
    assert run.attempts == 1 and run.worker and run.started_at and run.finished_at
    assert run.score_total == run.max_total == 7.5, [(t['name'], t['status'], t['message'], t['output'][-2000:]) for t in run.report['tests']]
    assert run.progress_done == run.progress_total == 2
    assert run.seed is not None and "seed" not in run.report or run.report.get("seed") is None
    report = grader.Report.from_json(run.report)
    assert [t.name for t in report.tests] == ["conv_tiny", "perf_tiny"]
    rows = {t.test_name: t for t in run.test_results}
    assert rows["conv_tiny"].status == "passed" and rows["perf_tiny"].p99_us > 0
    assert enqueue.queue_position(db, run) is None


def test_bad_upload_stores_nothing(db, assignment, student):
    from sqlalchemy import func, select
    from store.models import GradingRun, Submission
    import pytest
    with pytest.raises(grader.GraderInputError) as err:
        enqueue.submit(db, student, assignment, "conv2d.py", b"def fused_conv2d_maxpool(X, W, bias, pool_size:\n")
    assert err.value.remedy
    assert db.scalar(select(func.count()).select_from(Submission)) == 0
    assert db.scalar(select(func.count()).select_from(GradingRun)) == 0
