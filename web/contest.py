"""A contest's pages (an assignment with mode 'contest'; store/contest.py ranks it): the
board with its scoring rule, a participant's best-over-time chart, ranked runs' code once the
contest has ended, and the staff's contest settings and disqualifications.

The routes sit on the leaderboard's blueprint (web/leaderboard.py imports this module); the JSON
API (web/api.py) gives the same board (board_json) and code (readable_run) by the same rules.
Code is the one thing here that is secret before the end: only the run's owner and the course's
staff may read it until contest_ends_at; afterwards anyone who may view the board reads the code
of the runs the board ranks (a run it does not rank stays private)."""
from __future__ import annotations

import datetime as dt

from flask import Response, flash, redirect, render_template, request, url_for
from flask_login import current_user

from grader.vocabulary import BACKEND_TITLES
from store import contest as standings
from store.models import ASSIGNMENT_MODES, BACKENDS, GradingRun, Submission, User

from . import charts, courses, db
from .errors import UserError
from .extensions import login_manager
from .forms import SimpleActionForm, UTCDateTimeField
from .leaderboard import bp, may_view, pseudonym, short_title, standings_changed

REASON_LIMIT = 500


def is_contest(assignment) -> bool:
    return assignment.mode == "contest"


def _viewable(name: str):
    """The contest, when the viewer may see its board (else the same refusal as the board's)."""
    assignment = courses.get_assignment(db.session(), name)
    if not may_view(assignment):
        if current_user.is_authenticated:
            raise UserError(f"The leaderboard of {name!r} is for the people of {assignment.course.name}.",
                            "Ask course staff to add you to the roster.", 403)
        raise _Unauthorized()
    if not is_contest(assignment):
        raise UserError(f"{name!r} is not a contest.", "Its leaderboard is the course ranking.", 404)
    return assignment


class _Unauthorized(Exception):
    pass


def _is_staff(assignment) -> bool:
    return current_user.is_authenticated and current_user.is_staff_of(assignment.course_id)


def board(assignment, backend: str):
    """The contest's board (web/leaderboard.board sends a contest here)."""
    session = db.session()
    result = standings.compute(session, assignment, backend)
    me = current_user.id if current_user.is_authenticated else None
    return render_template("leaderboard/contest.html", assignment=assignment, backend=backend,
                           backend_titles=BACKEND_TITLES, board=result, rule=standings.RULE, me=me,
                           ended=standings.ended(assignment), staff=_is_staff(assignment),
                           pseudonym=pseudonym, short_title=short_title, action_form=SimpleActionForm())


@bp.route("/leaderboard/<name>/participants/<int:user_id>")
def participant(name: str, user_id: int):
    try:
        assignment = _viewable(name)
    except _Unauthorized:
        return login_manager.unauthorized()
    session = db.session()
    user = session.get(User, user_id)
    if user is None:
        raise UserError(f"There is no participant {user_id} in {name!r}.", "Follow a link from the board.", 404)
    backend = request.args.get("backend", assignment.backend)
    runs = standings.contest_runs(session, assignment, backend, [user_id])
    points = standings.best_over_time(runs)
    chart = charts.time_chart([charts.Point(when, score) for when, score in points],
                              title="Best score so far (geometric mean of benchmark p99s, lower is better)",
                              unit=" us", y_from_zero=True)
    mine = current_user.is_authenticated and current_user.id == user_id
    return render_template("leaderboard/contest_participant.html", assignment=assignment, backend=backend,
                           person=user.nickname or pseudonym(user_id), chart=chart, points=points,
                           runs=runs if mine or _is_staff(assignment) else [r for r in runs if r.score_us is not None],
                           ended=standings.ended(assignment), rule=standings.RULE)


@bp.route("/leaderboard/<name>/runs/<int:run_id>/code")
def code(name: str, run_id: int):
    """A run's submitted file: its owner and staff always; anyone who may view the board once
    the contest has ended, for runs the board ranks."""
    try:
        assignment = _viewable(name)
    except _Unauthorized:
        return login_manager.unauthorized()
    viewer = current_user if current_user.is_authenticated else None
    return code_response(readable_run(db.session(), assignment, viewer, run_id))


def code_shown(assignment, viewer, user_id: int) -> bool:
    """Whether the board links the code of `user_id`'s ranked run for `viewer` (an Account or
    None): always for its owner and the course's staff, for everyone once the contest ended."""
    return standings.ended(assignment) or (viewer is not None and (
        viewer.id == user_id or viewer.is_staff_of(assignment.course_id)))


def readable_run(session, assignment, viewer, run_id: int) -> GradingRun:
    """The contest's run `run_id`, when `viewer` may read its code (the board's code route and the
    JSON API's: one rule); otherwise the refusal both give."""
    run = session.get(GradingRun, run_id)
    if run is None or run.submission.assignment_id != assignment.id:
        raise UserError(f"There is no run {run_id} in {assignment.name!r}.", "Follow a link from the board.", 404)
    owner = run.submission.user_id
    if viewer is not None and (viewer.id == owner or viewer.is_staff_of(assignment.course_id)):
        return run
    if not standings.ended(assignment):
        raise UserError("Submitted code is hidden until the contest ends.",
                        f"It is revealed to every participant at {_end_text(assignment)}.", 403)
    ranked = {e.run.run_id for e in standings.compute(session, assignment, run.backend).entries}
    if run_id not in ranked:
        raise UserError("Only the code of runs ranked on the board is revealed.",
                        "Open a ranked run's code from the board.", 404)
    return run


def code_response(run: GradingRun) -> Response:
    sub: Submission = run.submission
    return Response(sub.data, mimetype="text/plain; charset=utf-8",
                    headers={"Content-Disposition": f'inline; filename="{sub.filename}"',
                             "X-Content-Type-Options": "nosniff"})


def board_json(assignment, backend: str, viewer) -> dict:
    """The board as the JSON API gives it to `viewer`: the same ranking, the same disqualified
    list, a code URL where the board shows a code link (and the run id with it), nothing more."""
    if backend not in BACKENDS:
        raise UserError(f"Unknown backend {backend!r}.", f"Use one of: {', '.join(BACKENDS)}.", 400)
    result = standings.compute(db.session(), assignment, backend)

    def shown(user_id: int) -> bool:
        return code_shown(assignment, viewer, user_id)
    end = assignment.contest_ends_at
    return {"assignment": assignment.name, "backend": backend, "mode": "contest", "rule": standings.RULE,
            "ends_at": end.isoformat() if end else None, "ended": standings.ended(assignment),
            "benchmarks": [t.name for t in result.benchmarks],
            "rows": [{"rank": e.rank, "nickname": e.nickname or pseudonym(e.user_id), "score_us": e.run.score_us,
                      "p99_us": dict(e.run.p99s), "submitted_at": e.run.submitted_at.isoformat(),
                      "run_id": e.run.run_id if shown(e.user_id) else None,
                      "code_url": url_for("api.contest_code", name=assignment.name, run_id=e.run.run_id,
                                          _external=True) if shown(e.user_id) else None}
                     for e in result.entries],
            "disqualified": [{"nickname": d.nickname or pseudonym(d.user_id), "reason": d.reason,
                              "at": d.at.isoformat() if d.at else None} for d in result.disqualified]}


def _end_text(assignment) -> str:
    end = assignment.contest_ends_at
    return f"{end:%Y-%m-%d %H:%M} UTC" if end else "the end the staff set (none yet)"


def _staff_contest(name: str):
    if not current_user.is_authenticated:
        raise _Unauthorized()
    return courses.staff_assignment(db.session(), current_user, name)


@bp.route("/leaderboard/<name>/contest", methods=["POST"])
def settings(name: str):
    """Staff: course assignment or contest, and the contest's end (UTC)."""
    try:
        assignment = _staff_contest(name)
    except _Unauthorized:
        return login_manager.unauthorized()
    if not SimpleActionForm().validate_on_submit():
        raise UserError("The form expired.", "Reload the assignment page and try again.", 400)
    mode = request.form.get("mode", "")
    if mode not in ASSIGNMENT_MODES:
        raise UserError(f"Unknown mode {mode!r}.", f"Choose one of: {', '.join(ASSIGNMENT_MODES)}.")
    field = UTCDateTimeField().bind(SimpleActionForm(), "contest_ends_at")
    try:
        field.process_formdata([request.form.get("contest_ends_at", "")])
    except ValueError as e:
        raise UserError(f"The contest's end was not changed: {e}.", "Write it as YYYY-MM-DD HH:MM, in UTC.")
    if mode == "contest" and field.data is None:
        raise UserError("A contest needs an end time.", "Give the end as YYYY-MM-DD HH:MM, in UTC: submitted code "
                        "is revealed to every participant then, and later submissions are not ranked.")
    assignment.mode, assignment.contest_ends_at = mode, field.data
    standings_changed(db.session(), assignment_ids=[assignment.id])
    flash(f"{name} is now {'a contest ending ' + _end_text(assignment) if mode == 'contest' else 'a course assignment'}.",
          "success")
    return redirect(url_for("staff.assignment", name=name), 303)


@bp.route("/leaderboard/<name>/runs/<int:run_id>/disqualify", methods=["POST"])
def disqualify(name: str, run_id: int):
    """Staff: take a run (and so its participant) out of the contest, with a reason the board shows;
    an empty reason with `lift` puts it back."""
    try:
        assignment = _staff_contest(name)
    except _Unauthorized:
        return login_manager.unauthorized()
    if not SimpleActionForm().validate_on_submit():
        raise UserError("The form expired.", "Reload the board and try again.", 400)
    session = db.session()
    run = session.get(GradingRun, run_id)
    if not is_contest(assignment):
        raise UserError(f"{name!r} is not a contest.", "Flag a course run for review on its staff page instead.", 404)
    if run is None or run.submission.assignment_id != assignment.id:
        raise UserError(f"There is no run {run_id} in {name!r}.", "Disqualify a run from the board.", 404)
    if request.form.get("lift") == "yes":
        run.disqualified_reason = run.disqualified_by_id = run.disqualified_at = None
        message = f"Run {run_id} is no longer disqualified."
    else:
        reason = " ".join((request.form.get("reason") or "").split())
        if not reason or len(reason) > REASON_LIMIT:
            raise UserError("A disqualification needs a reason of 1 to 500 characters.",
                            "Say why: the board shows it beside the participant.")
        run.disqualified_reason, run.disqualified_by_id = reason, current_user.id
        run.disqualified_at = dt.datetime.now(dt.timezone.utc)
        message = f"Run {run_id} is disqualified: {reason}"
    standings_changed(session, assignment_ids=[assignment.id])
    flash(message, "success")
    return redirect(url_for("leaderboard.board", name=name, backend=run.backend), 303)
