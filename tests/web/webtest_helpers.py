"""Helpers the web tests share: signing in through the real form, CSRF tokens from pages,
and finished runs stored as the worker stores them."""
from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TINY_SPEC = ROOT / "tests" / "workers" / "specs" / "tiny.toml"
OPTIMIZED = (ROOT / "reference_kernels" / "conv2d_optimized.py").read_bytes()
RELAXED = (ROOT / "reference_kernels" / "conv2d_relaxed.py").read_bytes()
PASSWORD = "correct horse battery"


def login(client, email: str, password: str = PASSWORD):
    page = client.get("/login")
    token = csrf_of(page.get_data(as_text=True))
    return client.post("/login", data={"email": email, "password": password, "csrf_token": token})


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', html) or \
        re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match, "page has no CSRF token"
    return match.group(1)


def store_graded_run(db, user, assignment, report, filename="conv2d.py", data=OPTIMIZED, flagged=False,
                     seed=424242, finished_at=None):
    """A finished run as the worker stores one (workers.runs.finish writes the same columns)."""
    import hashlib
    from store.models import GradingRun, Submission, TestResultRow
    submission = Submission(user_id=user.id, assignment_id=assignment.id, filename=filename, data=data,
                            sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    stored = report.to_json(include_seed=False)
    run = GradingRun(submission=submission, status="done", backend=report.backend, queue="sim", attempts=1,
                     seed=seed, report=stored, score_total=report.score.total, max_total=report.score.max_total,
                     thresholds_version=report.thresholds_version, flagged=flagged,
                     flag_reason="flagged in test" if flagged else None,
                     finished_at=finished_at or dt.datetime.now(dt.timezone.utc),
                     progress_done=len(report.tests), progress_total=len(report.tests))
    run.test_results = [TestResultRow(test_name=t.name, kind=t.kind, status=t.status, points=t.points,
                                      max_points=t.max_points, p99_us=t.p99_us) for t in report.tests]
    db.add(run)
    db.commit()
    return run
