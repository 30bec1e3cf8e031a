"""A course's late days are one budget over its late-days assignments (store/runs.py
late_days_spent): a write on assignment B (a run finishing, its deadline, rule or an extension)
can move days to or from assignment A, so A's counted run changes with nothing of A's written.
A's leaderboard, kept per process between writes (web/standings.py), must show it at once."""
from __future__ import annotations

import datetime as dt
import hashlib
import re

from grader.render import format_points
from store import lifecycle
from store.models import Assignment, GradingRun, Submission
from webtest_helpers import OPTIMIZED, csrf_of, measured

T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.timezone.utc)      # both assignments' deadline
HOUR = dt.timedelta(hours=1)
DAY = dt.timedelta(days=1)


def graded(db, user, assignment, report, uploaded: dt.datetime) -> GradingRun:
    """A run uploaded at `uploaded`, claimed and finished as a worker does (store.lifecycle.finish
    moves the standings stamp of the run's own assignment)."""
    run = GradingRun(submission=Submission(user_id=user.id, assignment_id=assignment.id, filename="conv2d.py",
                                           data=OPTIMIZED, sha256=hashlib.sha256(OPTIMIZED).hexdigest(),
                                           size=len(OPTIMIZED), uploaded_at=uploaded))
    db.add(run)
    db.commit()
    claim = lifecycle.claim(db, run.id, "test-worker", None, stale_after_s=90)
    assert lifecycle.finish(db, claim, report.to_json(include_seed=False), seed=1)
    return run


def board_row(client, name: str, nickname: str) -> tuple[str, int]:
    """(total, days late) of a student's row on an assignment's leaderboard page."""
    page = client.get(f"/leaderboard/{name}").get_data(as_text=True)
    row = re.search(r"<td data-nickname>" + re.escape(nickname)
                    + r'</td>\s*<td class="num" data-total="([^"]+)">(.*?)</td>', page, re.S)
    assert row, f"{nickname} is not on the board of {name}"
    late = re.search(r"late (\d+) d", row.group(2))
    return row.group(1), int(late.group(1)) if late else 0


def post_form(client, page_url: str, action: str, data: dict):
    token = csrf_of(client.get(page_url).get_data(as_text=True))
    response = client.post(action, data={"csrf_token": token, **data})
    assert response.status_code == 303, response.get_data(as_text=True)[-2000:]


def test_a_write_on_one_assignment_moves_the_late_days_another_assignments_board_counts(app, client_for, db,
                                                                                          course_setup, tiny_reports):
    app.config["LEADERBOARD_CACHE_SECONDS"] = 3600     # boards kept between writes, as in production
    a, alice, course = course_setup["assignment"], course_setup["alice"], course_setup["course"]
    b = Assignment(course=course, name="tiny-b", title="Tiny B", spec_name=a.spec_name, spec_row=a.spec_row,
                   backend="sim", runs_per_hour=3, deadline=T0, late_rule="late-days")
    db.add(b)
    a.deadline, a.late_rule, course.late_days = T0, "late-days", 2
    db.commit()
    full, partial = measured(tiny_reports["optimized"], 20.0), measured(tiny_reports["optimized"], 55.0)
    nothing = measured(tiny_reports["optimized"], None, correct=False)
    graded(db, alice, a, partial, T0 - HOUR)
    graded(db, alice, a, full, T0 + DAY + HOUR)                    # 2 days late: the budget covers it
    graded(db, alice, b, nothing, T0 - HOUR)
    viewer, staff = client_for("bob"), client_for("ada")
    with_late, on_time = (format_points(full.score.total), 2), (format_points(partial.score.total), 0)
    assert board_row(viewer, "tiny", "alice_k") == with_late

    # B's late run (1 day late, from nothing to full marks) finishes: the two days are better spent there
    graded(db, alice, b, full, T0 + HOUR)
    assert board_row(viewer, "tiny-b", "alice_k") == (format_points(full.score.total), 1)
    assert board_row(viewer, "tiny", "alice_k") == on_time

    # B's deadline moved an hour later: its run is on time, A gets the days back
    later = {"deadline": f"{T0 + 2 * HOUR:%Y-%m-%d %H:%M}", "late_rule": "late-days", "past_deadline_ok": "yes"}
    post_form(staff, "/staff/assignments/tiny-b", "/staff/assignments/tiny-b/deadline", later)
    assert board_row(viewer, "tiny", "alice_k") == with_late
    post_form(staff, "/staff/assignments/tiny-b", "/staff/assignments/tiny-b/deadline",
              {**later, "deadline": f"{T0:%Y-%m-%d %H:%M}"})
    assert board_row(viewer, "tiny", "alice_k") == on_time

    # an extension on B for her: the same
    post_form(staff, "/staff/assignments/tiny-b", "/staff/assignments/tiny-b/extensions",
              {"email": "alice@example.edu", "deadline": f"{T0 + 2 * HOUR:%Y-%m-%d %H:%M}"})
    assert board_row(viewer, "tiny", "alice_k") == with_late
    post_form(staff, "/staff/assignments/tiny-b", "/staff/assignments/tiny-b/extensions",
              {"email": "alice@example.edu", "deadline": f"{T0:%Y-%m-%d %H:%M}"})
    assert board_row(viewer, "tiny", "alice_k") == on_time

    # B's rule no longer spends late days: A's late run has them again
    post_form(staff, "/staff/assignments/tiny-b", "/staff/assignments/tiny-b/deadline",
              {"deadline": f"{T0:%Y-%m-%d %H:%M}", "late_rule": "graded-not-counted"})
    assert board_row(viewer, "tiny", "alice_k") == with_late
