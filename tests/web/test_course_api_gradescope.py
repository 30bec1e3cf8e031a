"""The course API as a Gradescope autograder in service mode meets it (web/course_api.py), on the
real app, PostgreSQL, Redis and, where a grade must finish, a real Celery worker:

- who a course token submits for: its roster's students (or, if the token creates students,
  people of no course's staff as well), never a site admin or any course's staff;
- when a run counts: by Gradescope's submission time, checked against the service's clock, for
  the leaderboard, the grades CSV and the Gradescope export alike;
- the same Gradescope submission again: its grade, not a second one; a new grade replaces it;
- how many: the course token's hourly rate, never the student's allowance on the site."""
from __future__ import annotations

import csv
import datetime as dt
import io
import zipfile

import pytest
from sqlalchemy import func, select

from service_waits import wait_for_run
from webtest_helpers import OPTIMIZED, RELAXED

UTC = dt.timezone.utc


def _now() -> dt.datetime:
    return dt.datetime.now(UTC)


def _post(client, token: str, email: str, *, gradescope_id: str | None = None, created_at: str | None = None,
          data: bytes = OPTIMIZED, assignment: str = "tiny"):
    form = {"email": email, "file": (io.BytesIO(data), "conv2d.py")}
    if gradescope_id is not None:
        form["gradescope_submission_id"] = gradescope_id
    if created_at is not None:
        form["created_at"] = created_at
    return client.post(f"/api/v1/course/assignments/{assignment}/submissions",
                       headers={"Authorization": f"Bearer {token}"}, data=form)


def _token(db, course, **policy) -> str:
    from workers.course_tokens import new_token
    token = new_token(db, course, "gradescope", **policy)
    db.commit()
    return token


def _counts(db):
    from store.models import Enrollment, GradingRun, Submission, User
    db.expire_all()
    return (db.scalar(select(func.count()).select_from(User)), db.scalar(select(func.count()).select_from(Enrollment)),
            db.scalar(select(func.count()).select_from(Submission)),
            db.scalar(select(func.count()).select_from(GradingRun)))


# ----- who: the four attacks, and what a token that creates students may do -----

REFUSED = {
    "tara@example.edu": "is a TA of CS149",                       # this course's staff
    "ines@example.edu": "is an instructor of CS149",
    "ada@example.edu": "is a site admin",                       # a site admin (and instructor)
    "theo@example.edu": "is a TA of CS150",                       # another course's staff
    "carl@example.edu": "is a TA of CS150",                       # a student here, staff elsewhere
    "sam@example.edu": "is not a student on CS149's roster",    # another course's student
    "stranger@example.edu": "is not a student on CS149's roster",   # an unknown email
}


def test_a_roster_token_submits_for_its_roster_students_only(app, db, two_courses):
    token = _token(db, two_courses["course"])
    client = app.test_client()
    before = _counts(db)
    for email, why in REFUSED.items():
        refused = _post(client, token, email, gradescope_id=f"gs-{email}")
        assert refused.status_code == 403, (email, refused.get_data(as_text=True))
        body = refused.get_json()
        assert why in body["error"] and body["remedy"], (email, body)
    assert _counts(db) == before, "a refused submission stored nothing: no account, enrollment, submission or run"
    assert "roster" in _post(client, token, "stranger@example.edu").get_json()["remedy"]

    accepted = _post(client, token, "Alice@Example.edu", gradescope_id="gs-alice")
    assert accepted.status_code == 201, accepted.get_data(as_text=True)
    assert accepted.get_json()["student"] == "alice@example.edu"


def test_a_token_that_creates_students_still_refuses_staff_and_admins(app, db, two_courses):
    from store.models import Enrollment, User
    token = _token(db, two_courses["course"], creates_students=True)
    client = app.test_client()
    for email in ("tara@example.edu", "ines@example.edu", "ada@example.edu", "theo@example.edu", "carl@example.edu"):
        refused = _post(client, token, email, gradescope_id=f"gs-{email}")
        assert refused.status_code == 403 and REFUSED[email] in refused.get_json()["error"], email
    for email in ("stranger@example.edu", "sam@example.edu"):
        made = _post(client, token, email, gradescope_id=f"gs-{email}")
        assert made.status_code == 201, made.get_data(as_text=True)
        db.expire_all()
        user = db.scalar(select(User).where(User.email == email))
        assert user.role == "user"
        roles = {e.course_id: e.role for e in db.scalars(select(Enrollment).where(Enrollment.user_id == user.id))}
        assert roles[two_courses["course"].id] == "student"
    # sam stays a student of CS150 too; nobody became staff
    assert db.scalar(select(func.count()).select_from(Enrollment).where(Enrollment.role != "student")) == 5


def test_course_token_set_changes_the_policy(db, two_courses):
    import os
    import subprocess
    import sys
    from store.models import CourseSubmitToken
    from webtest_helpers import ROOT as REPO
    _token(db, two_courses["course"])
    row = db.scalar(select(CourseSubmitToken))
    run = [sys.executable, "-m", "service.cli", "course-token"]
    done = subprocess.run([*run, "set", str(row.id), "--create-students", "--runs-per-hour", "40"], cwd=REPO,
                          env=dict(os.environ), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "creates students, 40 runs/hour" in done.stdout
    listed = subprocess.run([*run, "list", "--course", "CS149"], cwd=REPO, env=dict(os.environ),
                            capture_output=True, text=True, timeout=300)
    assert "creates students, 40 runs/hour" in listed.stdout
    bad = subprocess.run([*run, "set", str(row.id), "--runs-per-hour", "0"], cwd=REPO, env=dict(os.environ),
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "whole number of runs >= 1" in bad.stderr


# ----- when: Gradescope's submission time -----

def test_gradescope_time_is_checked_against_the_service_clock(app, db, two_courses):
    from store.models import Submission
    token = _token(db, two_courses["course"])
    client = app.test_client()
    ahead = _post(client, token, "alice@example.edu", gradescope_id="g-future",
                  created_at=(_now() + dt.timedelta(hours=1)).isoformat())
    assert ahead.status_code == 422
    assert "later than the grading service's clock" in ahead.get_json()["error"]
    assert "clock" in ahead.get_json()["remedy"]
    naive = _post(client, token, "alice@example.edu", gradescope_id="g-naive", created_at="2026-11-20T10:00:00")
    assert naive.status_code == 422 and "time zone" in naive.get_json()["error"]
    assert _counts(db)[2] == 0

    # a Gradescope clock a minute ahead (within the tolerance): accepted, and never after the upload
    skewed = _post(client, token, "alice@example.edu", gradescope_id="g-skew",
                   created_at=(_now() + dt.timedelta(seconds=60)).isoformat())
    assert skewed.status_code == 201, skewed.get_data(as_text=True)
    db.expire_all()
    sub = db.scalar(select(Submission).where(Submission.gradescope_submission_id == "g-skew"))
    assert sub.gradescope_created_at <= sub.uploaded_at


def test_runs_count_by_gradescope_time_and_a_regrade_replaces_its_run(app, db, two_courses, celery_worker):
    """The deadline passed an hour ago; Gradescope's queue (or "Regrade All") sends alice's
    on-time submission and bob's late one now. Alice's counts on the board, the grades CSV and
    the Gradescope export; bob's does not. Sending alice's again is answered with its grade
    (after a cancelled one, with a new grade); a new grade of it replaces the earlier run."""
    from store import runs as store_runs
    from web import standings
    from workers import enqueue, exports
    from store.models import GradingRun, Submission
    assignment = two_courses["assignment"]
    assignment.deadline = _now() - dt.timedelta(hours=1)
    db.commit()
    token = _token(db, two_courses["course"])
    client = app.test_client()
    on_time = (_now() - dt.timedelta(hours=2)).isoformat()
    late = (_now() - dt.timedelta(minutes=30)).isoformat()
    first = _post(client, token, "alice@example.edu", gradescope_id="1001", created_at=on_time)
    assert first.status_code == 201 and first.get_json()["same_run"] is False
    # (no worker yet) a grade that did not finish: a Gradescope regrade starts one, on the same submission
    enqueue.cancel(db.get(GradingRun, first.get_json()["run_id"]))
    alice = _post(client, token, "alice@example.edu", gradescope_id="1001", created_at=on_time)
    assert alice.status_code == 201 and alice.get_json()["same_run"] is False
    assert db.get(GradingRun, alice.get_json()["run_id"]).submission_id == \
        db.get(GradingRun, first.get_json()["run_id"]).submission_id
    bob = _post(client, token, "bob@example.edu", gradescope_id="1002", created_at=late)
    assert bob.status_code == 201
    celery_worker("sim")
    alice_run = wait_for_run(db, alice.get_json()["run_id"], ("done",))
    wait_for_run(db, bob.get_json()["run_id"], ("done",))

    board = standings.compute(db, assignment.id, "sim")
    assert [(s.user_id, s.run_id) for s in board] == [(two_courses["alice"].id, alice_run.id)]
    lines = {line.user.email: line for line in exports.grade_lines(db, assignment)}
    assert lines["alice@example.edu"].best.id == alice_run.id and lines["bob@example.edu"].best is None
    rows = {r["email"]: r for r in csv.DictReader(io.StringIO(exports.grades_csv(list(lines.values()))))}
    assert rows["alice@example.edu"]["run_id"] == str(alice_run.id) and rows["bob@example.edu"]["run_id"] == ""
    with zipfile.ZipFile(io.BytesIO(exports.gradescope_zip(list(lines.values())))) as zf:
        assert zf.namelist() == ["alice@example.edu/results.json"]
    status = client.get(f"/api/v1/course/runs/{alice_run.id}", headers={"Authorization": f"Bearer {token}"})
    assert status.get_json()["counted"]["this_run"] is True
    _a_passwordless_student_gets_a_sign_in_link_with_her_report(app, db, token, two_courses["alice"], alice_run.id)

    # the same Gradescope submission again (a regrade, or a retry after an autograder error): its grade
    again = _post(client, token, "alice@example.edu", gradescope_id="1001", created_at=on_time)
    assert again.status_code == 200 and again.get_json()["same_run"] is True
    assert again.get_json()["run_id"] == alice_run.id
    assert db.scalar(select(func.count()).select_from(GradingRun)) == 3
    other_files = _post(client, token, "alice@example.edu", gradescope_id="1001", data=RELAXED)
    assert other_files.status_code == 409 and "other files" in other_files.get_json()["error"]

    # a new grade of the same submission (a rerun on the service) replaces the earlier one in the
    # count, though the earlier finished first with the same total (which the rule would prefer)
    fresh = enqueue.rerun(db.get(GradingRun, alice_run.id))
    wait_for_run(db, fresh.id, ("done",))
    db.expire_all()
    assert store_runs.best_run(db, assignment.id, "sim", two_courses["alice"].id).run_id == fresh.id
    assert [s.run_id for s in standings.compute(db, assignment.id, "sim")] == [fresh.id]
    sub = db.scalar(select(Submission).where(Submission.gradescope_submission_id == "1001"))
    assert len(sub.runs) == 3 and sub.gradescope_created_at < assignment.deadline < sub.uploaded_at


def _a_passwordless_student_gets_a_sign_in_link_with_her_report(app, db, token, alice, run_id):
    """A student the token enrolled has no password: the report the autograder asks for with
    sign_in_link=1 (a submission no group shares) carries a one-time link that signs her in;
    without the ask, or once she has a password, there is none."""
    from web import accounts
    auth = {"Authorization": f"Bearer {token}"}
    url = f"/api/v1/course/runs/{run_id}/report"
    alice.password_hash = None
    db.commit()
    assert "sign_in_path" not in app.test_client().get(url, headers=auth).get_json()
    linked = app.test_client().get(url + "?sign_in_link=1", headers=auth).get_json()
    assert linked["sign_in_path"].startswith("/login/link/") and linked["sign_in_hours"] > 0
    assert linked["score"]["max_total"] > 0                                # still the report itself
    from webtest_helpers import csrf_of

    def follow(browser):
        page = browser.get(linked["sign_in_path"])
        return browser.post(linked["sign_in_path"], data={"csrf_token": csrf_of(page.get_data(as_text=True))})
    signed_in = follow(app.test_client())
    assert signed_in.status_code == 302 and signed_in.headers["Location"].endswith("/account"), signed_in.status_code
    assert follow(app.test_client()).status_code == 400        # one use only
    db.expire_all()
    accounts.set_password(db.get(type(alice), alice.id), "a long enough password 1")
    db.commit()
    assert "sign_in_path" not in app.test_client().get(url + "?sign_in_link=1", headers=auth).get_json()


def test_staff_pages_mark_a_gradescope_run(app, db, two_courses, client_for):
    token = _token(db, two_courses["course"])
    created = _post(app.test_client(), token, "alice@example.edu", gradescope_id="777001",
                    created_at="2026-01-05T09:30:00-08:00")
    assert created.status_code == 201
    run_id = created.get_json()["run_id"]
    staff = client_for("tara")
    listing = staff.get("/staff/submissions").get_data(as_text=True)
    assert 'data-gradescope="777001"' in listing and "from Gradescope, submission 777001" in listing
    page = staff.get(f"/staff/runs/{run_id}").get_data(as_text=True)
    assert "data-gradescope" in page and "submission 777001" in page
    assert "submitted on Gradescope 2026-01-05 17:30:00 UTC (the deadline is held to this time)" in page
    # the student's own history shows Gradescope's time too (the one the deadline is held to)
    mine = client_for("alice").get(f"/a/{two_courses['assignment'].name}").get_data(as_text=True)
    cell = mine.split(f'data-submitted="{run_id}">', 1)[1].split("</td>", 1)[0]
    assert "2026-01-05" in cell and "on Gradescope" in cell, cell


# ----- how many: the course token's rate, never the student's allowance on the site -----

def test_gradescope_runs_use_the_course_tokens_rate_not_the_students_allowance(app, db, two_courses):
    from web import accounts
    assignment = two_courses["assignment"]
    assignment.runs_per_hour = 1                     # the site's allowance: one run an hour per student
    db.commit()
    token = _token(db, two_courses["course"], runs_per_hour=3)
    client = app.test_client()
    for n, who in enumerate(("alice", "alice", "bob")):
        sent = _post(client, token, f"{who}@example.edu", gradescope_id=f"r{n}")
        assert sent.status_code == 201, sent.get_data(as_text=True)
    over = _post(client, token, "bob@example.edu", gradescope_id="r3")
    assert over.status_code == 429
    assert "limit is 3 an hour" in over.get_json()["error"] and "--runs-per-hour" in over.get_json()["remedy"]
    # a submission already graded is answered at the limit: no new grade
    assert _post(client, token, "alice@example.edu", gradescope_id="r0").status_code == 200

    # alice's two Gradescope runs (one still queued) leave her hourly upload on the site free
    api_token = accounts.new_api_token(db, two_courses["alice"], "cli")
    db.commit()
    site = client.post("/api/v1/assignments/tiny/submissions", headers={"Authorization": f"Bearer {api_token}"},
                       data={"file": (io.BytesIO(OPTIMIZED), "conv2d.py")})
    assert site.status_code == 201, site.get_data(as_text=True)
    second = client.post("/api/v1/assignments/tiny/submissions", headers={"Authorization": f"Bearer {api_token}"},
                         data={"file": (io.BytesIO(OPTIMIZED), "conv2d.py")})
    assert second.status_code == 429                 # the site's own rule still holds for site uploads


@pytest.mark.parametrize("script_root", ["", "/grader"])
def test_links_are_paths_under_the_service_base_url(app, db, two_courses, script_root):
    """Never built from the Host header (a proxy's upstream name); a mounted service's prefix is
    the client's to add, as it did to reach the submit URL."""
    token = _token(db, two_courses["course"])
    created = app.test_client().post(
        "/api/v1/course/assignments/tiny/submissions", base_url=f"http://grader-upstream.invalid:8000{script_root}",
        headers={"Authorization": f"Bearer {token}"},
        data={"email": "alice@example.edu", "file": (io.BytesIO(OPTIMIZED), "conv2d.py")})
    assert created.status_code == 201, created.get_data(as_text=True)
    body = created.get_json()
    assert body["status_url"] == f"/api/v1/course/runs/{body['run_id']}"
    assert body["report_url"] == f"/api/v1/course/runs/{body['run_id']}/report"


# ----- which spec: the zip's against the service assignment's -----

def test_a_zip_on_another_spec_is_refused_naming_both(app, db, two_courses):
    """The asst4-trainium2 zip pointed at an assignment on another spec is refused, naming both;
    a zip on the assignment's spec, or on the spec it was derived from by adopting thresholds
    on the service, is graded."""
    import grader
    from grader.spec import SPEC_DIR
    from store import specs
    assignment = two_courses["assignment"]
    token = _token(db, two_courses["course"])
    client = app.test_client()
    foreign = grader.load_spec(str(SPEC_DIR / "asst4-trainium2.toml"))

    def send(spec, gradescope_id):
        return client.post("/api/v1/course/assignments/tiny/submissions", headers={"Authorization": f"Bearer {token}"},
                           data={"email": "alice@example.edu", "gradescope_submission_id": gradescope_id,
                                 "spec_hash": spec.spec_hash, "spec_name": spec.assignment,
                                 "spec_version": spec.spec_version, "file": (io.BytesIO(OPTIMIZED), "conv2d.py")})
    refused = send(foreign, "s1")
    assert refused.status_code == 409
    error = refused.get_json()["error"]
    assert f"asst4-trainium2 v{foreign.spec_version}, sha256 {foreign.spec_hash[:12]}" in error
    assert f"sha256 {assignment.spec_hash[:12]}" in error and "rebuild the autograder" in refused.get_json()["remedy"]
    assert _counts(db)[2] == 0

    original = specs.spec_of(assignment)
    assert send(original, "s2").status_code == 201
    test = next(t for t in original.tests if t.thresholds_us)
    specs.adopt_thresholds(db, assignment, {test.name: {"optimized": 1e6, "relaxed": 2e6}}, "adopted-here")
    db.commit()
    assert assignment.spec_hash != original.spec_hash
    assert send(original, "s3").status_code == 201            # the zip's spec is the one this derives from
