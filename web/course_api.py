"""The course API: an outside system submits for any student of one course with a course submit
token (a Gradescope autograder in service mode, grader/gradescope/service.py).

    POST /api/v1/course/assignments/<name>/submissions   file, email, name, sid, gradescope_submission_id
    GET  /api/v1/course/runs/<id>                         status, as /api/v1/runs/<id>
    GET  /api/v1/course/runs/<id>/report                  the report (never the seed)

The student is found by email, or created and enrolled in the token's course (Gradescope's
roster is the course's), so the run is theirs: it shows in the TA console and counts on the
leaderboard like an upload on the site. Gradescope enforces its own deadlines and accepts every
regrade, so the site's deadline and hourly limit do not apply here. Only the token's SHA-256
is stored; `grader course-token create|list|revoke` (workers/course_tokens.py) manages them."""
from __future__ import annotations

import functools

from flask import g, jsonify, request, url_for
from sqlalchemy import select

import grader
from grader.vocabulary import RunStatus
from store.models import FINAL_STATUSES, Assignment, Enrollment, GradingRun, Submission, User
from workers import enqueue
from workers.course_tokens import course_for_token

from . import db, runs
from .api import bp
from .errors import UserError


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
        g.course_id = row.course_id
        db.session().commit()
        return view(*args, **kwargs)
    return wrapper


# ----- routes -----

def _student(session, course_id: int) -> User:
    email = (request.form.get("email") or "").strip().lower()
    if "@" not in email or len(email) > 320:
        raise UserError("The submission names no student email.", "Send the student's email as the field 'email'.")
    user = session.scalar(select(User).where(User.email == email).with_for_update())
    if user is None:
        user = User(email=email, name=(request.form.get("name") or "")[:200], role="user")
        session.add(user)
        session.flush()
    if not user.active:
        raise UserError(f"The account {email} is deactivated on the grading service.",
                        "Ask course staff to reactivate it.", 403)
    enrolled = session.scalar(select(Enrollment).where(Enrollment.user_id == user.id,
                                                       Enrollment.course_id == course_id))
    if enrolled is None:
        session.add(Enrollment(user_id=user.id, course_id=course_id, role="student"))
        session.flush()
    return user


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


@bp.route("/course/assignments/<name>/submissions", methods=["POST"])
@course_token_required
def course_submit(name: str):
    session = db.session()
    assignment = session.scalar(select(Assignment).where(Assignment.name == name,
                                                         Assignment.course_id == g.course_id))
    if assignment is None:
        raise UserError(f"This token's course has no assignment called {name!r}.",
                        "Build the autograder with the assignment's name on the service (--service-assignment).", 404)
    upload = request.files.get("file")
    if upload is None:
        raise UserError("No file in the request.", "Send the submission as the multipart field 'file'.", 400)
    user = _student(session, g.course_id)
    try:
        run = enqueue.submit(session, user, assignment, upload.filename or "", upload.read())
    except grader.GraderInputError:
        session.rollback()
        raise
    return jsonify(run_id=run.id, status=run.status, student=user.email,
                   status_url=url_for("api.course_run_status", run_id=run.id, _external=True),
                   report_url=url_for("api.course_run_report", run_id=run.id, _external=True)), 201


@bp.route("/course/runs/<int:run_id>")
@course_token_required
def course_run_status(run_id: int):
    session = db.session()
    run = _course_run(run_id)
    return jsonify({**runs.status_json(session, run), "counted": _counted(session, run)})


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
    return jsonify(runs.student_report_json(run))
