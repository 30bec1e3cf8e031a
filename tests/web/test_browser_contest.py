"""A contest board in a real browser (Debian's Chromium driven by Playwright, the app served in
this process: test_browser_report.py's fixtures): the ranking order, a TA disqualifying a run
from the board, and every ranked run's code opened by another participant after the end."""
from __future__ import annotations

import datetime as dt

from test_browser_report import chromium, shot, signed_in, site  # noqa: F401  (fixtures)
from test_contest import contest, contest_reports, stored  # noqa: F401  (fixtures)
from contest_kernels import KERNELS


def test_the_contest_board_ranks_disqualifies_and_reveals(site, chromium, db, course_setup, contest,
                                                         contest_reports):
    alice, bob = course_setup["alice"], course_setup["bob"]
    slow = stored(db, bob, contest, contest_reports["honest"], "honest", 20)
    fast = stored(db, alice, contest, contest_reports["faster"], "faster", 10)
    stored(db, bob, contest, contest_reports["distinguishing"], "distinguishing", 5)     # never ranked

    student = signed_in(chromium, site, "bob")
    student.goto(f"{site}/leaderboard/cup")
    assert student.locator("[data-contest-board] tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.run)") == [str(fast.id), str(slow.id)]
    assert "geometric mean" in student.inner_text("[data-rule]")
    assert student.locator("[data-code]").count() == 1          # his own only, before the end
    shot(student, "contest-board-before-end")

    ta = signed_in(chromium, site, "tara")
    ta.goto(f"{site}/leaderboard/cup")
    row = ta.locator(f"tr[data-run='{slow.id}']")
    row.locator("input[name=reason]").fill("benchmark-only fast path")
    row.locator("button:has-text('Disqualify')").click()
    ta.wait_for_selector("[data-disqualified]")
    assert "benchmark-only fast path" in ta.inner_text("[data-disqualified]")
    assert "bobby disqualified" in ta.inner_text("[data-disqualified]")
    assert ta.locator("[data-contest-board] tbody tr").count() == 1
    shot(ta, "contest-board-disqualified")

    contest.contest_ends_at = dt.datetime.now(dt.timezone.utc)
    db.commit()
    student.goto(f"{site}/leaderboard/cup")
    assert "The contest ended" in student.inner_text("[data-contest-end]")
    with student.expect_navigation():
        student.click(f"tr[data-run='{fast.id}'] [data-code]")
    assert student.inner_text("body").strip() == KERNELS["faster"].strip()
