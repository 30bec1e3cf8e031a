"""A problem folder's check on the staff worker is bounded (NKI_PROBLEM_CHECK_LIMIT_S): a folder
whose reference.py runs on and on fails its check, saying where it got and what to do, and the
staff worker is free at once for the next task. The folder's own errors are reported as rows of
the check (an `except Exception` in grader.problems.check): the limit is not taken for one."""
from __future__ import annotations

import shutil
import time
from pathlib import Path

from sqlalchemy import select
from problem_archives import zipped_folder
from worker_helpers import finished_task

from store.models import ProblemFolder
from workers import staff_tasks

OUTSIDE = Path(__file__).resolve().parents[1] / "outside_problems"


def test_a_check_over_its_limit_fails_saying_so_and_frees_the_worker(db, assignment, celery_worker, tmp_path,
                                                                    monkeypatch):
    slow = tmp_path / "slow" / "softmax"
    shutil.copytree(OUTSIDE / "softmax", slow, ignore=shutil.ignore_patterns("__pycache__"))
    reference = slow / "reference.py"
    reference.write_text(reference.read_text().replace(
        "def make_inputs(config, rng):", "def make_inputs(config, rng):\n    import time\n    time.sleep(600)", 1))
    assert "time.sleep(600)" in reference.read_text()
    monkeypatch.setenv("NKI_GRADER_PROBLEM_CACHE", str(tmp_path / "problem-cache"))
    celery_worker("staff", NKI_PROBLEM_CHECK_LIMIT_S="4")
    began = time.monotonic()
    stuck = staff_tasks.start_problem_check(db, zipped_folder(slow), "slow.zip", None)
    row = finished_task(db, stuck.id, 300, "the slow check to end")
    assert row.status == "failed" and time.monotonic() - began < 300
    assert "its check ran over its 4 s limit (NKI_PROBLEM_CHECK_LIMIT_S), before any kernel was graded" in row.error
    assert "Run `grader problem check` on the folder" in row.error and row.upload is None
    assert db.scalars(select(ProblemFolder)).all() == []
    # the same worker does the next task at once (the limit ended the check, not the process)
    rescore = staff_tasks.start(db, "rescore", assignment, None)
    done = finished_task(db, rescore.id, 120, "the rescore after it")
    assert done.status == "done" and done.summary.startswith("Rescored 0 graded runs"), done.error
