"""Every grading run, filtered and searched; one run in full; actions on it."""
from __future__ import annotations

import json

from flask import Response, current_app, flash, jsonify, redirect, render_template, request, url_for
from flask_login import current_user
from sqlalchemy import func, or_, select
from sqlalchemy.orm import defer, joinedload

import grader
from grader import render
from grader.vocabulary import Backend, RunStatus
from store.models import BACKENDS, RUN_STATUSES, Assignment, GradingRun, Submission, User
from workers import enqueue

from .. import db, runs
from ..errors import UserError
from ..forms import FlagForm, SimpleActionForm
from ..leaderboard import standings_changed
from . import bp

PAGE_SIZE = 50


def _filtered(args):
    query = (select(GradingRun, Submission, User, Assignment)
             .join(Submission, GradingRun.submission_id == Submission.id)
             .join(User, Submission.user_id == User.id)
             .join(Assignment, Submission.assignment_id == Assignment.id)
             .options(defer(GradingRun.report), defer(Submission.data)))   # megabytes each; the list shows neither
    if not current_user.is_admin:
        query = query.where(Assignment.course_id.in_(current_user.staff_course_ids))
    if args.get("assignment"):
        query = query.where(Assignment.name == args["assignment"])
    if args.get("status") in RUN_STATUSES:
        query = query.where(GradingRun.status == args["status"])
    if args.get("backend") in BACKENDS:
        query = query.where(GradingRun.backend == args["backend"])
    if args.get("flagged") in ("yes", "no"):
        query = query.where(GradingRun.flagged.is_(args["flagged"] == "yes"))
    text = (args.get("q") or "").strip()
    if text:
        like = f"%{text.replace('%', '').replace('_', '')}%"
        query = query.where(or_(User.email.ilike(like), User.name.ilike(like), User.nickname.ilike(like),
                                Submission.filename.ilike(like), Submission.sha256.startswith(text.lower())))
    return query


@bp.route("/submissions")
def submissions():
    session = db.session()
    query = _filtered(request.args)
    total = session.scalar(select(func.count()).select_from(query.subquery()))
    page = max(1, request.args.get("page", 1, type=int))
    rows = session.execute(query.order_by(GradingRun.id.desc()).limit(PAGE_SIZE).offset((page - 1) * PAGE_SIZE)).all()
    names = select(Assignment.name).order_by(Assignment.name)
    if not current_user.is_admin:
        names = names.where(Assignment.course_id.in_(current_user.staff_course_ids))
    names = session.scalars(names).all()
    counted = runs.counted_ids(session, [(run, sub) for run, sub, _, _ in rows])
    # a run after its submission's first grades the same upload again: a regrade, staff's or Gradescope's
    first = dict(session.execute(select(GradingRun.submission_id, func.min(GradingRun.id))
                                 .where(GradingRun.submission_id.in_({sub.id for _, sub, _, _ in rows}))
                                 .group_by(GradingRun.submission_id)).all()) if rows else {}
    regrades = {run.id for run, sub, _, _ in rows if first.get(sub.id, run.id) != run.id}
    return render_template("staff/submissions.html", rows=rows, total=total, page=page, counted=counted,
                           regrades=regrades, replaced=_replaced_on_page(session, rows),
                           pages=max(1, -(-total // PAGE_SIZE)), args=request.args, assignments=names,
                           statuses=RUN_STATUSES, backends=BACKENDS)


@bp.route("/runs/<int:run_id>")
def run_detail(run_id: int):
    session = db.session()
    run = _staff_run(session.scalar(select(GradingRun).where(GradingRun.id == run_id)
                                    .options(joinedload(GradingRun.submission).defer(Submission.data))), run_id)
    view = runs.view_of_run(run)
    return render_template("staff/run.html", run=run, **(runs.report_page(view, for_staff=True) if view else {}),
                           counted=runs.counted_run(session, run),
                           report_json=json.dumps(run.report, indent=2) if run.report else "",
                           status=runs.status_json(session, run), flag_form=FlagForm(),
                           action_form=SimpleActionForm(), replaced_by=_replaced_by(session, run),
                           against=_against_the_other_backend(session, run, view))


def _against_the_other_backend(session, run: GradingRun, view) -> dict | None:
    """The same submission's latest graded run on the other backend (a borderline = "hardware"
    grade on Trainium, or the simulated run it checks), held against this one: the simulated
    p99s with their bands against the measured ones (grader.agreement); None without such a run."""
    if view is None or run.backend not in (Backend.SIM, Backend.NEURON):
        return None
    other_backend = Backend.NEURON if run.backend == Backend.SIM else Backend.SIM
    other = session.scalar(select(GradingRun).where(
        GradingRun.submission_id == run.submission_id, GradingRun.backend == other_backend,
        GradingRun.status == RunStatus.DONE, GradingRun.report.is_not(None)).order_by(GradingRun.id.desc()).limit(1))
    other_view = runs.view_of_run(other) if other else None
    if other_view is None:
        return None
    simulated, measured = (view, other_view) if run.backend == Backend.SIM else (other_view, view)
    rows = grader.agreement(simulated, grader.measured_p99s(measured))
    return {"run": other, "rows": rows, "summary": grader.agreement_summary(rows),
            "other_is": "measurement" if run.backend == Backend.SIM else "simulated grade"} if rows else None


def _replaced_on_page(session, rows) -> dict[int, int]:
    """{run id: the later graded run of the same Gradescope submission that counts instead}, for
    the page's Gradescope runs (one query; the later run may be on another page)."""
    subs = {sub.id for _, sub, _, _ in rows if sub.gradescope_submission_id}
    if not subs:
        return {}
    latest = {(sid, backend): top for sid, backend, top in session.execute(
        select(GradingRun.submission_id, GradingRun.backend, func.max(GradingRun.id))
        .where(GradingRun.submission_id.in_(subs), GradingRun.status == RunStatus.DONE)
        .group_by(GradingRun.submission_id, GradingRun.backend))}
    return {run.id: top for run, sub, _, _ in rows
            if (top := latest.get((sub.id, run.backend))) is not None and top > run.id}


def _replaced_by(session, run: GradingRun) -> int | None:
    """A later graded run of the same Gradescope submission, which counts instead (store/runs.py)."""
    if not run.submission.gradescope_submission_id:
        return None
    later = session.scalar(select(func.max(GradingRun.id)).where(
        GradingRun.submission_id == run.submission_id, GradingRun.backend == run.backend,
        GradingRun.status == RunStatus.DONE))
    return later if later is not None and later > run.id else None


@bp.route("/runs/<int:run_id>/file")
def run_file(run_id: int):
    run = _staff_run(db.session().get(GradingRun, run_id), run_id)
    name = run.submission.filename.replace('"', "")
    return Response(run.submission.data, mimetype="application/octet-stream",
                    headers={"Content-Disposition": f'attachment; filename="{name}"'})


@bp.route("/runs/<int:run_id>/results.json")
def run_gradescope(run_id: int):
    run = _staff_run(db.session().get(GradingRun, run_id), run_id)
    view = runs.view_of_run(run)
    if view is None:
        raise UserError(f"Run {run_id} has no report yet.", "Wait until it is graded.", 409)
    return jsonify(render.to_gradescope(view))


def _staff_run(run: GradingRun | None, run_id: int) -> GradingRun:
    """The run, if it belongs to a course the viewer is staff of; any other run is as missing."""
    if run is None or not current_user.is_staff_of(run.submission.assignment.course_id):
        raise UserError(f"There is no run {run_id} in your courses.", "Pick one from the submissions list.", 404)
    return run


def _action_run(run_id: int) -> GradingRun:
    run = _staff_run(db.session().get(GradingRun, run_id), run_id)      # who may, before what was sent
    if not SimpleActionForm().validate_on_submit() and not FlagForm().validate_on_submit():
        raise UserError("The form was incomplete.", "Use the buttons on the run's page.", 400)
    return run


@bp.route("/runs/<int:run_id>/rerun", methods=["POST"])
def rerun(run_id: int):
    fresh = enqueue.rerun(_action_run(run_id))
    flash(f"Run {run_id} queued again as run {fresh.id}.", "success")
    return redirect(url_for("staff.run_detail", run_id=fresh.id), 303)


@bp.route("/runs/<int:run_id>/cancel", methods=["POST"])
def cancel(run_id: int):
    status = enqueue.cancel(_action_run(run_id))
    flash(f"Run {run_id} is {status}" + (" (its worker stops at its next heartbeat)." if status == RunStatus.RUNNING else "."),
          "success")
    return redirect(url_for("staff.run_detail", run_id=run_id), 303)


@bp.route("/runs/<int:run_id>/flag", methods=["POST"])
def flag(run_id: int):
    run = _action_run(run_id)
    reason = (request.form.get("reason") or "").strip() or "flagged by staff"
    run.flagged, run.flag_reason = True, reason
    return _flag_saved(run, f"Run {run_id} flagged: hidden from the leaderboard and grade exports.")


@bp.route("/runs/<int:run_id>/unflag", methods=["POST"])
def unflag(run_id: int):
    run = _action_run(run_id)
    run.flagged, run.flag_reason = False, None
    return _flag_saved(run, f"Run {run_id} unflagged: it counts again.")


def _flag_saved(run: GradingRun, message: str):
    assignment_id = run.submission.assignment_id
    standings_changed(db.session(), assignment_ids=[assignment_id])
    flash(message + " The leaderboard shows it from the next view.", "success")
    return redirect(url_for("staff.run_detail", run_id=run.id), 303)
