"""Student pages: the assignments, one assignment (upload, allowance, history), a run's live
status and its report."""
from __future__ import annotations

import json

from flask import Blueprint, Response, jsonify, redirect, render_template, request, url_for
from flask_login import current_user, login_required
from sqlalchemy import select
from sqlalchemy.orm import defer, joinedload

import grader
from grader.vocabulary import RunStatus
from store import runs as store_runs
from store.models import GradingRun, Submission, User
from workers import enqueue

from . import courses, db, late, runs, starter, throttle
from .charts import Guide, Point, time_chart
from .errors import UserError
from .forms import UploadForm

bp = Blueprint("student", __name__)

SVG_HEADERS = {"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
               "X-Content-Type-Options": "nosniff"}


@bp.route("/")
@login_required
def home():
    session = db.session()
    assignments = courses.visible_assignments(session, current_user)
    deadlines = {a.id: courses.deadline_for(session, current_user.id, a) for a in assignments}
    return render_template("student/home.html", assignments=assignments, deadlines=deadlines)


def _history(session, user_id: int, assignment) -> list[GradingRun]:
    return list(session.scalars(
        select(GradingRun).join(Submission)
        .where(Submission.user_id == user_id, Submission.assignment_id == assignment.id)
        .order_by(GradingRun.queued_at.desc(), GradingRun.id.desc())
        .options(defer(GradingRun.report), joinedload(GradingRun.submission).defer(Submission.data))))


def _regrades(history: list[GradingRun]) -> set[int]:
    """The runs of `history` that grade a submission again: every run after its submission's
    first (a student's upload makes one submission and its first run; only staff regrade one,
    all at once or one run, and Gradescope's regrade of one of its submissions)."""
    first: dict[int, int] = {}
    for r in history:
        first[r.submission_id] = min(r.id, first.get(r.submission_id, r.id))
    return {r.id for r in history if r.id != first[r.submission_id]}


def upload_hint(spec) -> dict:
    """What the upload form asks for, from the assignment's spec: its kernel files by name, an
    archive of them when there are several, and the NKI dialect they are written in."""
    from nkisim.dialects import dialect_named
    names = [fs.archive_path.rsplit("/", 1)[-1] for fs in spec.files.values()]
    return {"files": names, "archive": len(names) > 1, "dialect": dialect_named(spec.dialect).label}


def _upload_remedy(spec) -> str:
    hint = upload_hint(spec)
    files = " or ".join(hint["files"])
    return f"Choose {files}{' or an archive of them' if hint['archive'] else ''}, then press Upload."


def _render_assignment(assignment, form, error=None, status=200, static=None):
    session = db.session()
    history = _history(session, current_user.id, assignment)
    graded = [r for r in reversed(history) if r.status == RunStatus.DONE and r.score_total is not None]
    max_total = graded[-1].max_total if graded else None
    chart = time_chart([Point(r.finished_at or r.queued_at, r.score_total, r.flagged) for r in graded],
                       title="Your score over time", guides=(Guide("maximum", max_total, "#2e7d32", True),)
                       if max_total else ())
    deadline = courses.deadline_for(session, current_user.id, assignment)
    counted = store_runs.best_run(session, assignment.id, assignment.backend, current_user.id)
    lateness = {r.id: late.note(assignment, late.days_late(r.submission.submitted_at, deadline), counted, r.id)
                for r in history}
    spec = courses.spec_of(assignment)
    return render_template(
        "student/assignment.html", assignment=assignment, form=form, error=error, static=static, history=history,
        chart=chart, allowance=courses.allowance(session, current_user.id, assignment),
        deadline=deadline, counted=counted, lateness=lateness, late_rule=late.describe(assignment),
        past_deadline=deadline is not None and courses.now() > deadline,
        late_days=late.late_days_status(session, assignment, current_user.id),
        starters=starter.starters(spec), starter_archive=starter.archive_name(assignment.name),
        upload_hint=upload_hint(spec),
        regrades=_regrades(history),
        rule=store_runs.RULE), status


@bp.route("/a/<name>")
@login_required
def assignment(name: str):
    return _render_assignment(courses.assignment_for(db.session(), current_user, name), UploadForm())


@bp.route("/a/<name>/starter/<file>")
@login_required
def starter_file(name: str, file: str):
    """A starter file of the assignment's spec (web/starter.py), or all of them as one zip at
    their archive paths."""
    assignment = courses.assignment_for(db.session(), current_user, name)
    files = starter.starters(courses.spec_of(assignment))
    if file == starter.archive_name(name) and files:
        data, mimetype = starter.archive(files), "application/zip"
    else:
        data = next((s.data for s in files if s.filename == file), None)
        mimetype = "text/x-python"
        if data is None:
            offered = ", ".join([s.filename for s in files] + ([starter.archive_name(name)] if files else []))
            raise UserError(f"{name} has no starter file {file!r}.",
                            f"Download one of: {offered}." if offered else "This assignment has no starter files; "
                            "ask course staff for them.", 404)
    return Response(data, mimetype=mimetype, headers={"Content-Disposition": f'attachment; filename="{file}"',
                                                      "X-Content-Type-Options": "nosniff"})


@bp.route("/a/<name>/submit", methods=["POST"])
@throttle.uploads
@login_required
def upload(name: str):
    session = db.session()
    assignment = courses.assignment_for(session, current_user, name)
    form = UploadForm()
    if not form.validate_on_submit():
        # the field says what is missing, the spec what to choose
        error = UserError("No file was received.", " ".join([*form.file.errors, _upload_remedy(courses.spec_of(assignment))]))
        return _render_assignment(assignment, form, error, 400)
    filename, data = form.file.data.filename or "", form.file.data.read()
    # the users row is locked until submit() commits: two uploads at once cannot both pass the limit
    user = session.scalars(select(User).where(User.id == current_user.id).with_for_update()).one()
    try:
        courses.check_may_submit(session, current_user, assignment)
        _check_late_confirmed(session, assignment)
        run = enqueue.submit(session, user, assignment, filename, data)
    except UserError as err:
        session.rollback()
        if err.status == 429:             # only the grading must wait: the file is checked now
            return _render_assignment(assignment, form, err, err.status,
                                      static=_static_check(assignment, filename, data))
        return _render_assignment(assignment, form, err, err.status)
    except grader.GraderInputError as err:
        session.rollback()
        return _render_assignment(assignment, form, UserError(err.reason, err.remedy), 400)
    return redirect(url_for("student.run_page", run_id=run.id), 303)


def _check_late_confirmed(session, assignment) -> None:
    """Under late-days, an upload after the student's deadline may spend their late days: the
    upload form's box says they know (the JSON API and Gradescope spend them without asking)."""
    deadline = courses.deadline_for(session, current_user.id, assignment)
    if (assignment.late_rule == "late-days" and deadline is not None and courses.now() > deadline
            and not current_user.is_staff_of(assignment.course_id) and request.form.get("spend_late_days") != "yes"):
        raise UserError(f"The deadline for {assignment.name} passed at {deadline:%Y-%m-%d %H:%M} UTC: this upload "
                        "would be late, and may spend your late days.",
                        "Tick \"Spend my late days on this upload if they raise my grade\" and upload again, "
                        "or keep your late days for another assignment.", 409)


def _static_check(assignment, filename: str, data: bytes) -> dict:
    """What the static check says of an upload that may not be graded yet: {"ok", "problems",
    "warnings"}; problems are what would make the grade fail or score the file 0."""
    spec = courses.spec_of(assignment)
    try:
        sub = grader.submission_from_bytes(filename, data, spec)
    except grader.GraderInputError as err:
        return {"ok": False, "problems": [str(err)], "warnings": []}     # reason and remedy, each once
    findings = grader.static_findings(sub, spec)
    said = [f"{f['file']} line {f['line']}: {f['message']}" for f in findings]
    problems = [line for line, f in zip(said, findings) if f["severity"] != "warning"]
    warnings = [line for line, f in zip(said, findings) if f["severity"] == "warning"]
    return {"ok": not problems, "problems": problems, "warnings": warnings}


@bp.route("/runs/<int:run_id>")
@login_required
def run_page(run_id: int):
    session = db.session()
    run = runs.visible_run(session, current_user, run_id)
    return render_template("student/run.html", run=run, status=runs.status_json(session, run),
                           lateness=late.run_lateness(session, run))


@bp.route("/runs/<int:run_id>/status")
@login_required
def run_status(run_id: int):
    session = db.session()
    return jsonify(runs.status_json(session, runs.visible_run(session, current_user, run_id)))


@bp.route("/runs/<int:run_id>/report")
@login_required
def report(run_id: int):
    run = runs.visible_run(db.session(), current_user, run_id, with_report=True)
    view = runs.view_of_run(run)
    if view is None:
        raise UserError(f"Run {run_id} has no report yet (it is {run.status}).",
                        "Wait for it on its status page; the report appears when grading is done.", 409)
    return render_template("student/report.html", run=run, **runs.report_page(
        view, for_staff=current_user.is_staff_of(run.submission.assignment.course_id)))


@bp.route("/runs/<int:run_id>/report.json")
@login_required
def report_json(run_id: int):
    """The report as a file to keep (the same JSON the API and `grader grade --json` give)."""
    run = runs.visible_run(db.session(), current_user, run_id, with_report=True)
    if run.report is None:
        raise UserError(f"Run {run_id} has no report yet (it is {run.status}).",
                        "Wait for it on its status page; the report appears when grading is done.", 409)
    body = json.dumps(runs.student_report_json(run), indent=2)
    return Response(body, mimetype="application/json",
                    headers={"Content-Disposition": f'attachment; filename="run-{run_id}-report.json"'})


@bp.route("/runs/<int:run_id>/timeline/<test_name>.svg")
@login_required
def timeline(run_id: int, test_name: str):
    """The engine timeline as an image of its own: shown through <img>, an SVG cannot run
    scripts, whatever the kernel's source lines put into it."""
    run = runs.visible_run(db.session(), current_user, run_id, with_report=True)
    view = runs.view_of_run(run)
    svg = runs.profile_svg(view, test_name) if view else None
    if svg is None:
        raise UserError(f"Run {run_id} has no timeline for {test_name!r}.", "Timelines exist for simulated timed tests.", 404)
    return Response(svg, mimetype="image/svg+xml", headers=SVG_HEADERS)
