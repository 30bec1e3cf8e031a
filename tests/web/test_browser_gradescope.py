"""Gradescope runs on the staff pages, in a real browser (test_browser_report.py's fixtures): the
Gradescope autograder's own client (grader/gradescope/service.py) submits over HTTP with a
Gradescope submission id and Gradescope's submission time, a real Celery worker grades, and a TA
reads the submissions list and the run pages. A regrade of the same Gradescope submission after
its grade was cancelled grades it again and replaces the cancelled run; a regrade once it is
graded gets that grade back and adds no run."""
from __future__ import annotations

import datetime as dt

from sqlalchemy import func, select

from service_waits import wait_for_run
from test_browser_report import chromium, shot, signed_in, site  # noqa: F401  (fixtures)
from webtest_helpers import OPTIMIZED

GRADESCOPE_ID = "880001"


def _gradescope_time() -> tuple[str, str]:
    """Gradescope's created_at as its metadata writes it (Pacific offset, microseconds), two hours
    ago, and the same instant as the staff pages print it (UTC, to the second)."""
    pacific = dt.timezone(dt.timedelta(hours=-8))
    when = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=2)).replace(microsecond=123456)
    return when.astimezone(pacific).isoformat(), f"{when:%Y-%m-%d %H:%M:%S} UTC"


def test_staff_pages_mark_a_gradescope_run_and_a_regrade_replaces_it(site, chromium, db, course_setup,
                                                                    celery_worker):
    from grader.gradescope.service import Client
    from store.models import GradingRun, Submission
    from workers.course_tokens import new_token
    token = new_token(db, course_setup["course"], "gradescope")
    db.commit()
    client = Client(site, token)
    created_at, shown = _gradescope_time()
    who = {"email": "alice@example.edu", "name": "Alice", "sid": "S1", "gradescope_submission_id": GRADESCOPE_ID,
           "created_at": created_at}

    first = client.submit("tiny", who, "conv2d.py", OPTIMIZED)          # no worker yet: it waits in the queue
    assert first["same_run"] is False and first["gradescope_submission_id"] == GRADESCOPE_ID

    staff = signed_in(chromium, site, "tara")
    staff.goto(f"{site}/staff/runs/{first['run_id']}")
    staff.get_by_role("button", name="Cancel").click()                  # a TA cancels the stuck grade
    staff.wait_for_selector("span.status.cancelled")
    regrade = client.submit("tiny", who, "conv2d.py", OPTIMIZED)        # Gradescope's "Regrade" of it
    assert regrade["same_run"] is False and regrade["run_id"] != first["run_id"]
    celery_worker("sim")
    wait_for_run(db, regrade["run_id"], ("done",))
    again = client.submit("tiny", who, "conv2d.py", OPTIMIZED)          # and again, once graded: its grade
    assert again["same_run"] is True and again["run_id"] == regrade["run_id"]
    submission_id = db.get(GradingRun, regrade["run_id"]).submission_id
    assert db.scalar(select(func.count()).select_from(GradingRun).where(GradingRun.submission_id == submission_id)) == 2
    assert db.scalar(select(func.count()).select_from(Submission)) == 1

    staff.goto(f"{site}/staff/submissions")
    rows = staff.locator("table[data-submissions] tbody tr")
    assert rows.count() == 2                                            # the second regrade added no run
    newer, older = rows.nth(0), rows.nth(1)
    assert newer.locator("a").first.inner_text() == f"#{regrade['run_id']}"
    assert older.locator("a").first.inner_text() == f"#{first['run_id']}"
    for row in (newer, older):
        marked = row.locator(f"[data-gradescope='{GRADESCOPE_ID}']")
        assert marked.inner_text() == f"from Gradescope, submission {GRADESCOPE_ID}, submitted there {shown}"
    assert newer.locator("[data-counted]").count() == 1 and newer.locator("[data-regrade]").count() == 1
    assert newer.locator("[data-replaced]").count() == 0
    assert older.locator("[data-counted]").count() == 0
    assert older.locator("[data-replaced]").inner_text() == \
        f"replaced by #{regrade['run_id']}, a later grade of this Gradescope submission"
    shot(staff, "gradescope-staff-submissions")

    staff.goto(f"{site}/staff/runs/{regrade['run_id']}")
    marked = staff.inner_text("[data-gradescope]")
    assert f"submission {GRADESCOPE_ID}" in marked
    assert f"submitted on Gradescope {shown} (the deadline is held to this time)" in marked
    assert "replaced by" not in marked and "counts" in staff.inner_text("[data-score]")
    shot(staff, "gradescope-staff-run")

    staff.goto(f"{site}/staff/runs/{first['run_id']}")
    assert f"submitted on Gradescope {shown}" in staff.inner_text("[data-gradescope]")
    staff.click("[data-replaced] a")
    staff.wait_for_url(f"{site}/staff/runs/{regrade['run_id']}")
