"""The course API: an outside system submits for the students of one course with a course
submit token (a Gradescope autograder in service mode, grader/gradescope/service.py).

    GET  /api/v1/course/assignments/<name>               its spec (what a service-mode zip is checked against)
    POST /api/v1/course/assignments/<name>/submissions   file, email, name, sid,
                                                          gradescope_submission_id, created_at
    GET  /api/v1/course/runs/<id>                         status, as /api/v1/runs/<id>
    GET  /api/v1/course/runs/<id>/report                  the report (never the seed)

Who: the student is found by email among the course's roster's students; a token created with
--create-students also makes an unknown email (or a person of no course's staff) a student of
the course. A site admin or any course's TA or instructor is refused, whatever the token.

Which spec: an autograder sends its zip's spec hash; one that is neither the assignment's spec
nor an ancestor of it (thresholds adopted on the service since) is refused, naming both.

When: the run counts by Gradescope's submission time (`created_at`, never later than the upload
plus CLOCK_TOLERANCE_S; clamped to the upload), held to the site's deadline and extensions by
the one best-run rule (store/runs.py). The same Gradescope submission id again (a regrade, a
retry after an autograder error) grades the same stored submission: a grade still going, or
one already made under the assignment's spec in force, is answered again; otherwise a new
grade replaces the earlier one.

How many: the site's per-student hourly allowance and in-flight rule are for uploads on the
site; Gradescope runs are limited per course, by the token's `runs_per_hour`.

Links in answers are paths under the service's base URL (what the client put before /api/),
never built from the Host header, so a reverse proxy's upstream name never reaches the client.
Only the token's SHA-256 is stored; `grader course-token create|list|set|revoke`
(workers/course_tokens.py) manages them."""
from __future__ import annotations

import datetime as dt
import functools
import hashlib

from flask import current_app, g, jsonify, request, url_for
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

import grader
from grader.vocabulary import IN_FLIGHT_RUN_STATUSES, RunStatus
from store.lifecycle import now
from store.models import (COURSE_ROLE_TITLES, FINAL_STATUSES, Assignment, Course, Enrollment, GradingRun,
                          StoredSpec, Submission, User)
from workers import enqueue
from workers.course_tokens import course_for_token

from . import accounts, db, late, runs
from .api import bp
from .errors import UserError

CLOCK_TOLERANCE_S = 300.0      # how far Gradescope's clock may run ahead of ours
NOT_A_STUDENT = ("Course staff: a course token grades students only. Try the autograder with a test student on "
                 "the course's roster; staff and admins submit on the grading service's site.")


# ----- authentication -----

def course_token_required(view):
    @functools.wraps(view)
    def wrapper(*args, **kwargs):
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise UserError("This API needs a course submit token.",
                            "Send 'Authorization: Bearer <token>'; an admin creates one with "
                            "`grader course-token create --course NAME`.", 401)
        row = course_for_token(db.session(), token.strip())
        if row is None:
            raise UserError("The course submit token is unknown or revoked.",
                            "Create a new one with `grader course-token create` and rebuild the autograder.", 401)
        g.course_id, g.creates_students, g.runs_per_hour = row.course_id, row.creates_students, row.runs_per_hour
        g.token_id = row.id
        db.session().commit()
        return view(*args, **kwargs)
    return wrapper


# ----- routes -----

def _student(session, course_id: int, creates_students: bool) -> User:
    """The course's student named by the form's email: on the roster, or made one when the token
    creates students; never a site admin or anyone's staff (UserError 403 saying which)."""
    email = (request.form.get("email") or "").strip().lower()
    if "@" not in email or len(email) > 320:
        raise UserError("The submission names no student email.", "Send the student's email as the field 'email'.")
    user = session.scalar(select(User).where(User.email == email).with_for_update())
    if user is not None:
        _refuse_staff(session, user)
        if not user.active:
            raise UserError(f"The account {email} is deactivated on the grading service.",
                            "Ask course staff to reactivate it.", 403)
        if session.scalar(select(Enrollment.id).where(Enrollment.user_id == user.id,
                                                      Enrollment.course_id == course_id)) is not None:
            return user
    if not creates_students:
        course = session.get(Course, course_id)
        raise UserError(f"{email} is not a student on {course.name}'s roster on the grading service.",
                        f"Course staff: add {email} to the course's roster (staff console, People: roster import, "
                        "role student), then regrade this submission on Gradescope. An admin may instead let the "
                        "token create students: `grader course-token set ID --create-students`.", 403)
    if user is None:
        user = User(email=email, name=(request.form.get("name") or "")[:200], role="user")
        session.add(user)
        session.flush()
    session.add(Enrollment(user_id=user.id, course_id=course_id, role="student"))
    session.flush()
    return user


def _refuse_staff(session, user: User) -> None:
    if user.role == "admin":
        raise UserError(f"{user.email} is a site admin of the grading service, not a student.", NOT_A_STUDENT, 403)
    staff = session.execute(select(Enrollment.role, Course.name).join(Course, Course.id == Enrollment.course_id)
                            .where(Enrollment.user_id == user.id, Enrollment.role != "student")
                            .order_by(Course.name)).first()
    if staff is not None:
        title = COURSE_ROLE_TITLES[staff.role]
        article = "an" if title[:1].lower() in "aeiou" else "a"      # "a TA", "an instructor"
        raise UserError(f"{user.email} is {article} {title} of {staff.name} on the grading service, "
                        "not a student.", NOT_A_STUDENT, 403)


def _gradescope_time(raw: str) -> dt.datetime | None:
    """Gradescope's submission time (submission_metadata.json's created_at), checked against
    our clock: at most CLOCK_TOLERANCE_S ahead of it, and never later than the upload. None
    when not sent (the upload's own time then counts)."""
    raw = raw.strip()
    if not raw:
        return None
    try:
        when = dt.datetime.fromisoformat(raw)
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise UserError(f"Gradescope's submission time {raw[:60]!r} is not an ISO 8601 time with a time zone.",
                        "Send submission_metadata.json's created_at as Gradescope writes it "
                        "(e.g. 2026-11-20T10:00:00.000000-08:00).", 422)
    arrived = now()
    ahead = (when - arrived).total_seconds()
    if ahead > CLOCK_TOLERANCE_S:
        raise UserError(f"Gradescope's submission time {raw} is {ahead:.0f} s later than the grading service's "
                        f"clock ({arrived:%Y-%m-%d %H:%M:%S} UTC), beyond its tolerance of {CLOCK_TOLERANCE_S:.0f} s.",
                        "Course staff: check the grading service's clock (it should follow NTP), then regrade "
                        "this submission on Gradescope.", 422)
    return min(when, arrived)


def _gradescope_id() -> str | None:
    raw = (request.form.get("gradescope_submission_id") or "").strip()
    if len(raw) > 64:
        raise UserError("The Gradescope submission id is longer than 64 characters.",
                        "Send submission_metadata.json's id as the field 'gradescope_submission_id'.", 422)
    return raw or None


def _check_rate(session) -> None:
    """The token's course has started fewer than runs_per_hour Gradescope grades in the last hour."""
    used = enqueue.gradescope_runs_last_hour(session, g.course_id)
    if used >= g.runs_per_hour:
        raise UserError(f"This course's Gradescope submissions started {used} grades on the grading service in the "
                        f"last hour: its course token's limit is {g.runs_per_hour} an hour.",
                        "Course staff: regrade this submission on Gradescope in a while; an admin can raise the "
                        f"limit with `grader course-token set {g.token_id} --runs-per-hour N`.", 429)


def _again(session, assignment: Assignment, earlier: Submission, data: bytes) -> tuple[GradingRun, bool]:
    """A Gradescope submission seen before: its grade going on, or made under the spec in force,
    again (True); else a new grade of the same stored submission, which replaces it (False)."""
    sha = hashlib.sha256(data).hexdigest()
    if sha != earlier.sha256:
        raise UserError(f"Gradescope submission {earlier.gradescope_submission_id} was uploaded before with other "
                        f"files (sha256 {earlier.sha256[:12]}, now {sha[:12]}).",
                        "Course staff: this should not happen on Gradescope; tell the grading service's "
                        "maintainers, with this submission's id.", 409)
    latest = earlier.runs[-1] if earlier.runs else None
    if latest is not None and latest.backend == assignment.backend and (
            latest.status in IN_FLIGHT_RUN_STATUSES
            or (latest.status == RunStatus.DONE and (latest.report or {}).get("spec_hash") == assignment.spec_hash)):
        return latest, True
    _check_rate(session)
    return enqueue.regrade(session, earlier, assignment.backend), False


def _check_spec(session, assignment: Assignment) -> None:
    """The autograder's spec (sent as spec_hash, spec_name, spec_version) is the assignment's, or one
    it was derived from by adopting thresholds here; any other is refused naming both (409)."""
    sent = (request.form.get("spec_hash") or "").strip().lower()
    if not sent:
        return                      # an autograder built before the check: the service's spec grades
    if sent in _lineage(session, assignment):
        return
    theirs = f"{(request.form.get('spec_name') or '?')[:100]} v{(request.form.get('spec_version') or '?')[:50]}"
    raise UserError(f"The autograder's spec ({theirs}, sha256 {sent[:12]}) is not the spec of {assignment.name} on "
                    f"the grading service ({assignment.spec_name} v{assignment.spec_version}, sha256 "
                    f"{assignment.spec_hash[:12]}).",
                    "Course staff: rebuild the autograder with the service assignment's spec, or point "
                    "--service-assignment at an assignment on the zip's spec; then regrade all submissions.", 409)


def _lineage(session, assignment: Assignment) -> list[str]:
    """The assignment's spec hash and those it was derived from (thresholds adopted here since)."""
    lineage, at = [], assignment.spec_hash
    while at is not None and at not in lineage:
        lineage.append(at)
        at = session.scalar(select(StoredSpec.derived_from).where(StoredSpec.hash == at))
    return lineage


def _link(endpoint: str, **values) -> str:
    """A path under the service's base URL: what the client put before /api/ resolves it."""
    return url_for(endpoint, **values)[len(request.script_root):]


def _course_run(run_id: int, with_report: bool = False) -> GradingRun:
    """A run of the token's course; any other is the same 404 as a missing one."""
    session = db.session()
    course_id = session.scalar(select(Assignment.course_id).join(Submission, Submission.assignment_id == Assignment.id)
                               .join(GradingRun, GradingRun.submission_id == Submission.id)
                               .where(GradingRun.id == run_id))
    if course_id is None or course_id != g.course_id:
        raise UserError(f"There is no run {run_id} in this token's course.", "Use the URLs the submission returned.",
                        404)
    return runs.visible_run(session, _CourseStaff(), run_id, with_report=with_report)


class _CourseStaff:
    """Who reads a run of the token's own course through runs.visible_run: its staff."""
    id = None

    def is_staff_of(self, course_id: int) -> bool:
        return course_id == g.course_id


def _course_assignment(session, name: str) -> Assignment:
    assignment = session.scalar(select(Assignment).where(Assignment.name == name,
                                                         Assignment.course_id == g.course_id))
    if assignment is None:
        raise UserError(f"This token's course has no assignment called {name!r}.",
                        "Build the autograder with the assignment's name on the service (--service-assignment).", 404)
    return assignment


@bp.route("/course/assignments/<name>")
@course_token_required
def course_assignment(name: str):
    """What `grader gradescope build` checks a service-mode zip against: the assignment's spec and
    the specs whose autograders it still accepts."""
    session = db.session()
    assignment = _course_assignment(session, name)
    return jsonify(assignment=assignment.name, spec_name=assignment.spec_name, spec_version=assignment.spec_version,
                   spec_hash=assignment.spec_hash, accepts=_lineage(session, assignment))


@bp.route("/course/assignments/<name>/submissions", methods=["POST"])
@course_token_required
def course_submit(name: str):
    session = db.session()
    assignment = _course_assignment(session, name)
    upload = request.files.get("file")
    if upload is None:
        raise UserError("No file in the request.", "Send the submission as the multipart field 'file'.", 400)
    _check_spec(session, assignment)
    user = _student(session, g.course_id, g.creates_students)
    data, filename = upload.read(), upload.filename or ""
    gradescope_id, created_at = _gradescope_id(), _gradescope_time(request.form.get("created_at") or "")
    earlier = enqueue.gradescope_submission(session, assignment, gradescope_id) if gradescope_id else None
    if earlier is not None:
        run, again = _again(session, assignment, earlier, data)
    else:
        _check_rate(session)
        try:
            run, again = enqueue.submit(session, user, assignment, filename, data, gradescope_submission_id=gradescope_id,
                                        gradescope_created_at=created_at), False
        except grader.GraderInputError:
            session.rollback()
            raise
        except IntegrityError:          # the same Gradescope submission, uploaded at this moment by another request
            session.rollback()
            earlier = enqueue.gradescope_submission(session, assignment, gradescope_id)
            if earlier is None:
                raise
            run, again = _again(session, assignment, earlier, data)
    session.commit()
    submission = run.submission
    return jsonify(run_id=run.id, status=run.status, student=submission.user.email, same_run=again,
                   gradescope_submission_id=submission.gradescope_submission_id,
                   counts_at=submission.submitted_at.isoformat(),
                   status_url=_link("api.course_run_status", run_id=run.id),
                   report_url=_link("api.course_run_report", run_id=run.id)), 200 if again else 201


@bp.route("/course/runs/<int:run_id>")
@course_token_required
def course_run_status(run_id: int):
    session = db.session()
    run = _course_run(run_id)
    return jsonify({**runs.status_json(session, run), "lateness": late.lateness_json(session, run),
                    "counted": _counted(session, run)})


def _counted(session, run: GradingRun) -> dict | None:
    """Once a run is finished: whether it is its student's counted run (store/runs.py), and which
    run is, so the autograder tells the student what the course's leaderboard shows."""
    if run.status not in FINAL_STATUSES:
        return None
    best = runs.counted_run(session, run)
    return {"this_run": best is not None and best.run_id == run.id,
            "run_id": best.run_id if best else None, "total": best.total if best else None,
            "max_total": best.max_total if best else None}


@bp.route("/course/runs/<int:run_id>/report")
@course_token_required
def course_run_report(run_id: int):
    run = _course_run(run_id, with_report=True)
    if run.status != RunStatus.DONE or not run.report:
        raise UserError(f"Run {run_id} is {run.status}; its report is not ready.",
                        "Poll the status URL until status is 'done'.", 409)
    data = runs.student_report_json(run)
    if request.args.get("sign_in_link") == "1" and run.submission.gradescope_submission_id:
        data.update(_sign_in_link(run.submission.user))
    return jsonify(data)


def _sign_in_link(user: User) -> dict:
    """A student the course token enrolled has no password, so no way onto the site to choose a
    nickname until staff send a link: the autograder asks for one with the report of a submission
    only that student sees (never a group's, whose other members would see it), and shows it
    there. One use, the site's link lifetime; it replaces the student's older unused links."""
    if user.password_hash or not user.active:
        return {}
    session = db.session()
    hours = current_app.config["LOGIN_LINK_HOURS"]
    token = accounts.new_login_token(session, user, hours)
    session.commit()
    return {"sign_in_path": _link("auth.login_link", token=token), "sign_in_hours": hours}
