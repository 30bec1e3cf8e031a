"""JSON API for scripts (`grader submit PATH --server URL --token T`): per-user bearer
tokens, one error shape {"error", "remedy"} (web/errors.py)."""
from __future__ import annotations

import functools

from flask import Blueprint, g, jsonify, request, url_for
from sqlalchemy import select

import grader
from grader.vocabulary import RunStatus, TestKind
from store.models import User
from workers import enqueue

from . import accounts, contest, courses, db, late, runs, throttle
from .errors import UserError
from .leaderboard import standings_for

bp = Blueprint("api", __name__, url_prefix="/api/v1")


def token_required(view):
    @functools.wraps(view)
    def wrapper(*args, **kwargs):
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise UserError("This API needs an API token.", "Send 'Authorization: Bearer <token>'; create a "
                            "token on your account page.", 401)
        session = db.session()
        user = accounts.bearer_user(session)
        if user is None:
            raise UserError("The API token is unknown or revoked.", "Create a new token on your account page.", 401)
        session.commit()
        g.api_user = accounts.account_for(session, user)
        return view(*args, **kwargs)
    return wrapper


@bp.route("/assignments/<name>/submissions", methods=["POST"])
@throttle.uploads
@token_required
def submit(name: str):
    session = db.session()
    account = g.api_user
    assignment = courses.assignment_for(session, account, name)
    upload = request.files.get("file")
    if upload is None:
        raise UserError("No file in the request.", "Send the submission as the multipart field 'file'.", 400)
    user = session.scalars(select(User).where(User.id == account.id).with_for_update()).one()
    courses.check_may_submit(session, account, assignment)
    try:
        run = enqueue.submit(session, user, assignment, upload.filename or "", upload.read())
    except grader.GraderInputError:
        session.rollback()
        raise
    body = runs.status_json(session, run)
    return jsonify(run_id=run.id, status=run.status, queue_position=body["queue_position"],
                   status_url=url_for("api.run_status", run_id=run.id, _external=True),
                   report_url=url_for("api.run_report", run_id=run.id, _external=True)), 201


@bp.route("/runs/<int:run_id>")
@token_required
def run_status(run_id: int):
    session = db.session()
    run = runs.visible_run(session, g.api_user, run_id)
    return jsonify({**runs.status_json(session, run), "lateness": late.lateness_json(session, run)})


@bp.route("/runs/<int:run_id>/report")
@token_required
def run_report(run_id: int):
    run = runs.visible_run(db.session(), g.api_user, run_id, with_report=True)
    if run.status != RunStatus.DONE or not run.report:
        raise UserError(f"Run {run_id} is {run.status}; its report is not ready.",
                        "Poll the status URL until status is 'done'.", 409)
    return jsonify(runs.student_report_json(run))


@bp.route("/assignments/<name>/leaderboard")
@token_required
def leaderboard(name: str):
    assignment = courses.assignment_for(db.session(), g.api_user, name)
    backend = request.args.get("backend", assignment.backend)
    if contest.is_contest(assignment):          # the contest board's rule and reveal (web/contest.py)
        return jsonify(contest.board_json(assignment, backend, g.api_user))
    return jsonify(assignment=assignment.name, backend=backend, mode="course", rows=[
        {"rank": s.rank, "nickname": s.nickname, "total": s.total, "max_total": s.max_total,
         TestKind.EXTRA_CREDIT.value: s.extra_credit,             # the points those tests earned, in total
         "p99_sum_us": s.p99_sum, "p99_us": s.p99s, "run_id": s.run_id if s.user_id == g.api_user.id else None}
        for s in standings_for(assignment, backend)])


@bp.route("/assignments/<name>/runs/<int:run_id>/code")
@token_required
def contest_code(name: str, run_id: int):
    """A contest run's submitted file, by the board's rule (web/contest.readable_run)."""
    session = db.session()
    assignment = courses.assignment_for(session, g.api_user, name)
    if not contest.is_contest(assignment):
        raise UserError(f"{name!r} is not a contest.", "Only a contest's code is shared; read your own runs' reports "
                        "from /api/v1/runs/<id>/report.", 404)
    return contest.code_response(contest.readable_run(session, assignment, g.api_user, run_id))
from . import course_api  # noqa: E402,F401  (course submit tokens: routes on this blueprint)
