"""Late policy (store/runs.py, web/late.py): each rule on real runs in the real database, as the
counted-run rule, the leaderboard, the student's pages and the exports see it; deadlines edited
after creation; a past deadline refused at creation unless confirmed; late uploads accepted or
refused per the rule."""
from __future__ import annotations

import csv
import datetime as dt
import io
import json
import zipfile

import pytest
from sqlalchemy import select

from store import runs as store_runs
from store.models import Assignment, GradingRun
from webtest_helpers import csrf_of, export_in_process, measured, multipart, OPTIMIZED, store_graded_run

T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.timezone.utc)      # the deadline in the counting tests
HOUR = dt.timedelta(hours=1)
DAY = dt.timedelta(days=1)


def post_form(client, page_url: str, action: str, data: dict):
    token = csrf_of(client.get(page_url).get_data(as_text=True))
    return client.post(action, data={"csrf_token": token, **data})


def run_at(db, user, assignment, report, uploaded: dt.datetime) -> GradingRun:
    stored = store_graded_run(db, user, assignment, report, finished_at=uploaded + dt.timedelta(minutes=2))
    stored.submission.uploaded_at = uploaded
    db.commit()
    return stored


def set_rule(db, assignment, rule: str, factors=(), late_days=None):
    assignment.late_rule, assignment.late_factors = rule, list(factors)
    if late_days is not None:
        assignment.course.late_days = late_days
    db.commit()


def counted(db, assignment, user):
    db.expire_all()
    return store_runs.best_run(db, assignment.id, "sim", user.id)


def test_graded_not_counted_is_the_default_and_a_later_deadline_counts_the_late_run(client_for, db, course_setup,
                                                                                    tiny_reports):
    a, alice = course_setup["assignment"], course_setup["alice"]
    a.deadline = T0
    db.commit()
    assert a.late_rule == "graded-not-counted"
    on_time = run_at(db, alice, a, measured(tiny_reports["optimized"], 55.0), T0 - 10 * 60 * dt.timedelta(seconds=1))
    late = run_at(db, alice, a, measured(tiny_reports["optimized"], 20.0), T0 + 2 * HOUR)
    assert late.score_total > on_time.score_total            # the better run is the late one
    assert counted(db, a, alice).run_id == on_time.id

    student = client_for("alice")
    page = student.get("/a/tiny").get_data(as_text=True)
    assert f'data-late="{late.id}">late by 1 day: graded, not counted' in page
    assert f'data-late="{on_time.id}"' not in page
    assert "never count" in page                                # the rule, in words
    run_page = student.get(f"/runs/{late.id}").get_data(as_text=True)
    assert "late by 1 day: graded, not counted" in run_page
    staff = client_for("ada")
    assert f'data-late="{late.id}"' in staff.get("/staff/submissions?assignment=tiny").get_data(as_text=True)
    assert "late by 1 day" in staff.get(f"/staff/runs/{late.id}").get_data(as_text=True)

    # the deadline moved a day later (into the past: it must be confirmed); the late run now counts
    moved = {"deadline": f"{T0 + DAY:%Y-%m-%d %H:%M}", "late_rule": "graded-not-counted"}
    refused = post_form(staff, "/staff/assignments/tiny", "/staff/assignments/tiny/deadline", moved)
    assert refused.status_code == 409 and "in the past" in refused.get_data(as_text=True)
    assert counted(db, a, alice).run_id == on_time.id
    saved = post_form(staff, "/staff/assignments/tiny", "/staff/assignments/tiny/deadline",
                      {**moved, "past_deadline_ok": "yes"})
    assert saved.status_code == 303
    db.expire_all()
    assert db.get(Assignment, a.id).deadline == T0 + DAY
    assert counted(db, a, alice).run_id == late.id
    board = student.get("/leaderboard/tiny").get_data(as_text=True)
    assert f'data-total="{late.score_total:g}"' in board or f"{late.score_total:g}" in board
    assert 'data-late title' not in board                        # on time now: no lateness on the board


def test_tas_may_not_change_the_deadline(client_for, course_setup):
    response = post_form(client_for("tara"), "/staff/assignments/tiny", "/staff/assignments/tiny/deadline",
                         {"deadline": "2030-01-01 00:00", "late_rule": "none"})
    assert response.status_code == 403


def test_credit_steps_scale_late_runs_on_the_board_the_pages_and_the_exports(client_for, db, course_setup,
                                                                            tiny_reports):
    a, alice, bob = course_setup["assignment"], course_setup["alice"], course_setup["bob"]
    a.deadline = T0
    set_rule(db, a, "credit-steps", [0.9, 0.5])
    full = measured(tiny_reports["optimized"], 20.0)
    alice_on_time = run_at(db, alice, a, measured(tiny_reports["optimized"], 55.0), T0 - HOUR)
    alice_late = run_at(db, alice, a, full, T0 + HOUR)                  # day 1: 90%
    bob_two_days = run_at(db, bob, a, full, T0 + DAY + HOUR)           # day 2: 50%
    run_at(db, bob, a, full, T0 + 2 * DAY + HOUR)                       # day 3: past the steps, nothing

    alice_counts, bob_counts = counted(db, a, alice), counted(db, a, bob)
    scaled = 0.9 * alice_late.score_total
    expected = alice_late.id if scaled > alice_on_time.score_total else alice_on_time.id
    assert alice_counts.run_id == expected
    assert bob_counts.run_id == bob_two_days.id and bob_counts.days_late == 2
    assert bob_counts.total == pytest.approx(0.5 * bob_two_days.score_total)
    assert bob_counts.factor == pytest.approx(0.5)

    student = client_for("bob")
    page = student.get("/a/tiny").get_data(as_text=True)
    assert "late by 2 days: earns 50% of its points" in page
    assert "late by 3 days: past the late steps, earns nothing" in page
    assert "90% 1 day late, 50% 2 days late" in page
    board = student.get("/leaderboard/tiny").get_data(as_text=True)
    assert "late 2 d" in board

    ta = client_for("tara")
    rows = {r["email"]: r for r in csv.DictReader(io.StringIO(export_in_process(ta, "tiny", "grades_csv").decode()))}
    assert float(rows["bob@example.edu"]["total"]) == pytest.approx(bob_counts.total)
    assert rows["bob@example.edu"]["days_late"] == "2" and float(rows["bob@example.edu"]["late_factor"]) == 0.5
    assert float(rows["alice@example.edu"]["total"]) == pytest.approx(alice_counts.total)
    archive = zipfile.ZipFile(io.BytesIO(export_in_process(ta, "tiny", "gradescope_zip")))
    results = json.loads(archive.read("bob@example.edu/results.json"))
    assert results["score"] == pytest.approx(bob_counts.total)
    assert "2 days late" in results["output"]


def test_late_days_go_where_they_raise_the_grade_most(client_for, db, course_setup, tiny_reports):
    a, alice, course = course_setup["assignment"], course_setup["alice"], course_setup["course"]
    b = Assignment(course=course, name="tiny-b", title="Tiny B", spec_name=a.spec_name, spec_row=a.spec_row,
                   backend="sim", runs_per_hour=3, deadline=T0, late_rule="late-days")
    db.add(b)
    a.deadline = T0
    set_rule(db, a, "late-days", late_days=2)
    full, partial = measured(tiny_reports["optimized"], 20.0), measured(tiny_reports["optimized"], 55.0)
    nothing = measured(tiny_reports["optimized"], None, correct=False)
    a_on_time = run_at(db, alice, a, partial, T0 - HOUR)
    a_late = run_at(db, alice, a, full, T0 + DAY + HOUR)               # needs 2 days, gains full - partial
    b_on_time = run_at(db, alice, b, nothing, T0 - HOUR)
    b_late = run_at(db, alice, b, full, T0 + HOUR)                     # needs 1 day, gains everything
    # B's late run gains more over its on-time one than A's does
    assert b_late.score_total - b_on_time.score_total > a_late.score_total - a_on_time.score_total > 0

    # two days: both cannot be covered; B's one day raises the grade more than A's two
    assert store_runs.late_days_spent(db, course.id) == {(alice.id, b.id): 1}
    assert counted(db, a, alice).run_id == a_on_time.id
    b_counts = counted(db, b, alice)
    assert b_counts.run_id == b_late.id and b_counts.total == b_late.score_total     # not scaled
    page = client_for("alice").get("/a/tiny-b").get_data(as_text=True)
    assert "You have spent <strong>1</strong> of your 2 late days in this course, 1 of them on this assignment" in page
    assert "counts, with 1 late day" in page
    assert "counts only with 2 late days" in client_for("alice").get("/a/tiny").get_data(as_text=True)

    # a third day (set on A's deadline form, course-wide) covers both
    staff = client_for("ada")
    saved = post_form(staff, "/staff/assignments/tiny", "/staff/assignments/tiny/deadline",
                      {"deadline": f"{T0:%Y-%m-%d %H:%M}", "late_rule": "late-days", "late_days": "3"})
    assert saved.status_code == 303, saved.get_data(as_text=True)
    assert store_runs.late_days_spent(db, course.id) == {(alice.id, a.id): 2, (alice.id, b.id): 1}
    assert counted(db, a, alice).run_id == a_late.id


def test_the_split_of_late_days_is_the_best_one():
    # assignment -> days late -> best fraction of the maximum with that lateness
    gains = {1: {0: 0.5, 1: 0.6, 3: 1.0}, 2: {0: 0.0, 2: 0.9}, 3: {1: 0.2}}
    assert store_runs._split(3, gains) == {1: 0, 2: 2, 3: 1}        # 0.5 + 0.9 + 0.2 beats 0.6 + 0.9, 1.0 + 0
    assert store_runs._split(4, gains) == {1: 1, 2: 2, 3: 1}
    assert store_runs._split(1, {1: {0: 0.5, 1: 0.5}}) == {1: 0}     # a day that gains nothing is not spent


def _upload(client, name: str = "tiny", **fields):
    token = csrf_of(client.get(f"/a/{name}").get_data(as_text=True))
    body, content_type = multipart({"csrf_token": token, **fields}, "file", "conv2d.py", OPTIMIZED)
    return client.post(f"/a/{name}/submit", data=body, content_type=content_type)


def test_late_uploads_are_refused_only_under_none_and_late_days_ask_first(client_for, db, course_setup):
    a = course_setup["assignment"]
    a.deadline = dt.datetime.now(dt.timezone.utc) - HOUR
    set_rule(db, a, "none")
    alice = client_for("alice")
    refused = _upload(alice)
    assert refused.status_code == 403 and "deadline" in refused.get_data(as_text=True)

    set_rule(db, a, "graded-not-counted")
    page = alice.get("/a/tiny").get_data(as_text=True)
    assert "data-past-deadline" in page and "spend_late_days" not in page
    accepted = _upload(alice)
    assert accepted.status_code == 303
    run_page = alice.get(accepted.headers["Location"]).get_data(as_text=True)
    assert "late by 1 day: graded, not counted" in run_page

    set_rule(db, a, "late-days", late_days=2)
    bob = client_for("bob")
    assert 'name="spend_late_days"' in bob.get("/a/tiny").get_data(as_text=True)
    asked = _upload(bob)
    assert asked.status_code == 409 and "Spend my late days" in asked.get_data(as_text=True)
    assert _upload(bob, spend_late_days="yes").status_code == 303


def test_a_past_deadline_is_refused_at_creation_unless_confirmed_and_the_rule_is_kept(client_for, db, course_setup):
    admin = client_for("ada")
    past = dt.datetime.now(dt.timezone.utc) - DAY
    data = {"course": "CS149", "name": "late1", "spec": "asst4-trainium2", "backend": "sim", "runs_per_hour": "4",
            "visibility": "signed_in", "deadline": f"{past:%Y-%m-%d %H:%M}", "late_rule": "credit-steps",
            "late_factors": "0.9, 0.8, 0.5"}
    refused = post_form(admin, "/staff/", "/staff/assignments", data)
    assert refused.status_code == 409 and "in the past" in refused.get_data(as_text=True)
    assert db.scalar(select(Assignment).where(Assignment.name == "late1")) is None
    bad = post_form(admin, "/staff/", "/staff/assignments", {**data, "past_deadline_ok": "yes", "late_factors": "0.9, 1.5"})
    assert bad.status_code == 400 and "between 0 and 1" in bad.get_data(as_text=True)
    made = post_form(admin, "/staff/", "/staff/assignments", {**data, "past_deadline_ok": "yes"})
    assert made.status_code == 303
    db.expire_all()
    created = db.scalar(select(Assignment).where(Assignment.name == "late1"))
    assert created.late_rule == "credit-steps" and created.late_factors == [0.9, 0.8, 0.5]
    future = post_form(admin, "/staff/", "/staff/assignments",
                       {**data, "name": "late2", "deadline": f"{past + 8 * DAY:%Y-%m-%d %H:%M}", "late_rule": "late-days"})
    assert future.status_code == 400 and "at least one late day" in future.get_data(as_text=True)
