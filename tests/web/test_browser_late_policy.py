"""The late policy in a real browser (test_browser_report.py's fixtures): an instructor moves the
deadline and picks credit steps on the assignment's page; the student's history then shows the
late run with what it earns, and the leaderboard counts it scaled."""
from __future__ import annotations

import datetime as dt
import re

from test_browser_report import chromium, shot, signed_in, site  # noqa: F401  (fixtures)
from webtest_helpers import measured, store_graded_run


def test_an_instructor_sets_credit_steps_and_the_student_sees_the_late_run(site, chromium, db, course_setup,
                                                                         tiny_reports):
    from store import runs as store_runs
    a, alice = course_setup["assignment"], course_setup["alice"]
    deadline = dt.datetime.now(dt.timezone.utc).replace(second=0, microsecond=0) - dt.timedelta(days=2)
    a.deadline = deadline
    db.commit()
    late = store_graded_run(db, alice, a, measured(tiny_reports["optimized"], 20.0))
    late.submission.uploaded_at = deadline + dt.timedelta(hours=3)          # one started day late
    db.commit()
    assert store_runs.best_run(db, a.id, "sim", alice.id) is None           # graded, not counted (the default)

    staff = signed_in(chromium, site, "ada")
    staff.goto(f"{site}/staff/assignments/tiny")
    form = staff.locator("[data-deadline-form]")
    assert form.locator("input[name=deadline]").input_value() == f"{deadline:%Y-%m-%d %H:%M}"
    form.locator("input[name=late_rule][value=credit-steps]").check()
    form.locator("input[name=late_factors]").fill("0.8, 0.4")
    form.locator("input[type=submit]").click()
    staff.wait_for_selector("text=late work: late runs count for part of their points, by days late (0.8, 0.4)")
    assert "80% 1 day late, 40% 2 days late" in staff.inner_text("[data-late-rule-now]")
    shot(staff, "late-policy-staff")

    student = signed_in(chromium, site, "alice")
    student.goto(f"{site}/a/tiny")
    assert student.inner_text(f"[data-late='{late.id}']") == "late by 1 day: earns 80% of its points"
    assert student.is_visible("[data-past-deadline]")
    shot(student, "late-policy-student")
    student.goto(f"{site}/leaderboard/tiny")
    row = student.locator("tr", has=student.locator("[data-late]"))
    assert re.search(r"late 1 d", row.inner_text())
    db.expire_all()
    counted = store_runs.best_run(db, a.id, "sim", alice.id)
    assert counted.run_id == late.id and abs(counted.total - 0.8 * late.score_total) < 1e-9
