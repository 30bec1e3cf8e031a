"""An assignment as staff run it: create one, thresholds versions and rescoring, deadline
extensions, grade exports."""
from __future__ import annotations

import datetime as dt
import json

from flask import flash, redirect, render_template, request, url_for
from flask_login import current_user
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

import grader
from grader.vocabulary import Backend, Tier
from store import specs
from store.models import Course, DeadlineExtension, ThresholdsVersion, User
from workers import enqueue

from .. import accounts, courses, db, late, thresholds
from ..errors import UserError
from ..forms import AssignmentForm, ExtensionForm, SimpleActionForm, ThresholdsForm, TitleForm, VisibilityForm
from ..leaderboard import standings_changed
from . import bp, course_specs, tasks
from .console import backends_without_worker
from .nightly import implied_for, not_proposed_for


def _form_problems(form) -> str:
    """Each invalid field with its label and what was wrong with it, for one error line."""
    return "; ".join(f"{form[name].label.text}: {' '.join(errors)}" for name, errors in form.errors.items())


@bp.route("/assignments", methods=["POST"])
def create_assignment():
    session = db.session()
    named = (request.form.get("course") or "").strip()
    course = session.scalar(select(Course).where(Course.name == named)) if named else None
    if not (current_user.is_admin or (course is not None and current_user.is_instructor_of(course.id))):
        raise UserError(f"You may not create assignments in {named or 'that course'!r}.",
                        "The course's instructors create its assignments; a site admin creates any.", 403)
    if course is None:                # never made on the fly: a typo would start a course of its own
        raise UserError(f"There is no course called {named or '(none)'!r}.",
                        "Choose an existing course; a site admin creates new ones (Create a course, on the "
                        "staff console).")
    form = AssignmentForm()
    uploaded = course_specs.uploaded_spec(request.files.get("spec_file"))
    if uploaded is not None:          # the course's own spec: data naming bundled or installed problems only
        form.spec.data = form.spec.data or uploaded.assignment
    elif form.is_submitted() and form.spec.data not in grader.available_specs():
        raise UserError(f"There is no bundled spec {form.spec.data!r}.",
                        f"Choose one of: {', '.join(grader.available_specs())}, or upload a spec file of your own.")
    if not form.validate_on_submit():
        raise UserError(f"The assignment was not created: {_form_problems(form)}.", "Correct the form and try again.")
    spec = uploaded or grader.load_spec(form.spec.data)
    spec_name = uploaded.assignment if uploaded is not None else form.spec.data
    if form.backend.data == Backend.NEURON and spec.platform != "trn2":
        raise UserError(f"The spec {spec_name} holds thresholds measured on {spec.platform}, not Trainium2: "
                        "grading it on Trainium2 hardware would hold students to the wrong numbers.",
                        "Choose the simulator, or a spec written for Trainium2.")
    rule, factors, late_days = late.read_rule(request.form, course.late_days)
    _check_deadline_not_past(form.deadline.data, request.form.get("past_deadline_ok") == "yes")
    course.leaderboard_visibility = form.visibility.data
    course.late_days = late_days
    assignment = specs.new_assignment(session, spec, spec_name=spec_name, course=course, name=form.name.data,
                                      title=(form.title.data or "").strip() or spec.title, backend=form.backend.data, deadline=form.deadline.data,
                                      runs_per_hour=form.runs_per_hour.data, active=True)
    assignment.late_rule, assignment.late_factors = rule, factors
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        raise UserError(f"An assignment called {form.name.data!r} exists already.", "Choose another name.", 409)
    flash(f"Assignment {assignment.name} created.", "success")
    return redirect(url_for("staff.assignment", name=assignment.name), 303)


def _check_deadline_not_past(deadline: dt.datetime | None, confirmed: bool, action: str = "create it again") -> None:
    """A deadline already past is almost always a typo (the year, AM/PM): refused unless confirmed.
    `action`: what the staff member does again once they tick the box."""
    now = dt.datetime.now(dt.timezone.utc)
    if deadline is not None and deadline < now and not confirmed:
        raise UserError(f"The deadline {deadline:%Y-%m-%d %H:%M} UTC is in the past (it is {now:%Y-%m-%d %H:%M} UTC "
                        "now): every upload would be late.",
                        f"Correct the deadline, or tick \"The deadline is in the past on purpose\" and {action}.",
                        409)


@bp.app_template_global("run_lateness")
def _run_lateness(run) -> str:
    """A run's lateness note, for staff pages listing runs (web/late.py)."""
    return late.run_lateness(db.session(), run)


@bp.route("/assignments/<name>/deadline", methods=["POST"])
def set_deadline(name: str):
    """The deadline and late rule after creation. Which runs count is computed when read
    (store/runs.py), so the leaderboard, pages and exports follow at once; nothing is rescored."""
    session = db.session()
    assignment = courses.staff_assignment(session, current_user, name)
    if not current_user.is_instructor_of(assignment.course_id):
        raise UserError("Only the course's instructors change its deadlines and late rules.",
                        "Ask an instructor of the course.", 403)
    form = late.DeadlineForm()
    if not form.validate_on_submit():
        raise UserError(f"The deadline was not changed: {_form_problems(form)}.",
                        "Write it YYYY-MM-DD HH:MM in UTC, or leave it empty for no deadline.")
    field = form.deadline
    rule, factors, late_days = late.read_rule(request.form, assignment.course.late_days, assignment.late_rule)
    old = assignment.deadline
    if field.data != old:      # moving a deadline into the past is as likely a typo as creating one there
        _check_deadline_not_past(field.data, request.form.get("past_deadline_ok") == "yes", "save it again")
    assignment.deadline, assignment.late_rule, assignment.late_factors = field.data, rule, factors
    budget_moved = assignment.course.late_days != late_days
    assignment.course.late_days = late_days
    if budget_moved:       # the course's budget counts on each of its late-days assignments
        session.flush()
        others = [a.id for a in assignment.course.assignments]
    else:
        others = [assignment.id]
    standings_changed(session, assignment_ids=others)      # commits; boards recompute at their next view
    when = f"{field.data:%Y-%m-%d %H:%M} UTC" if field.data else "no deadline"
    flash(f"{name}: {when}; late work: {late.RULE_TITLES[rule]}"
          + (f" ({', '.join(f'{f:g}' for f in factors)})" if factors else "")
          + (f"; {late_days} late day{'' if late_days == 1 else 's'} per student in {assignment.course.name}"
             if rule == "late-days" or budget_moved else "") + ". Which runs count follows at once.", "success")
    return redirect(url_for("staff.assignment", name=name), 303)


@bp.route("/assignments/<name>")
def assignment(name: str):
    session = db.session()
    assignment = courses.staff_assignment(session, current_user, name)
    versions = session.scalars(select(ThresholdsVersion).where(ThresholdsVersion.assignment_id == assignment.id)
                               .order_by(ThresholdsVersion.created_at.desc())).all()
    extensions = session.execute(select(DeadlineExtension, User).join(User, DeadlineExtension.user_id == User.id)
                                 .where(DeadlineExtension.assignment_id == assignment.id)
                                 .order_by(User.email)).all()
    spec = courses.spec_of(assignment)
    in_force = spec.thresholds()
    derived = {t.name for t in courses.timed_tests(assignment) if t.thresholds_from_references}
    implied = {name: levels for name, levels in implied_for(session, assignment).items() if name in derived}
    # a relaxed reference too close to the optimized one proposes no relaxed threshold: the one in force stays
    not_proposed = {name: why for name, why in not_proposed_for(session, assignment).items() if name in derived}
    # only the tests whose thresholds come from the reference kernels are proposed from the nightly
    proposal = {name: {tier.value: round(implied.get(name, {}).get(tier, levels[tier]), 1) for tier in Tier}
                for name, levels in in_force.items()}
    for levels in proposal.values():       # a relaxed threshold kept in force never under a proposed optimized one
        levels[Tier.RELAXED.value] = max(levels[Tier.RELAXED.value], levels[Tier.OPTIMIZED.value])
    form = ThresholdsForm(thresholds=json.dumps(proposal, indent=2),
                          version=f"{dt.date.today().isoformat()}-nightly" if implied else "")
    return render_template("staff/assignment.html", assignment=assignment, versions=versions, in_force=in_force,
                           titles=spec.titles(), now_utc=f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M}",
                           implied=implied, not_proposed=not_proposed, extensions=extensions, thresholds_form=form,
                           extension_form=ExtensionForm(), action_form=SimpleActionForm(),
                           visibility_form=VisibilityForm(), title_form=TitleForm(title=assignment.title),
                           spec_title=spec.title, late_rule=late.describe(assignment), late_titles=late.RULE_TITLES,
                           deadline_form=late.DeadlineForm(deadline=assignment.deadline),
                           no_worker=backends_without_worker(
                               enqueue.queue_stats(session)).get(Backend(assignment.backend)))


@bp.route("/assignments/<name>/title", methods=["POST"])
def set_title(name: str):
    """The assignment's own title (created from the spec's): what students read on every page."""
    session = db.session()
    assignment = courses.staff_assignment(session, current_user, name)
    form = TitleForm()
    if not form.validate_on_submit():
        raise UserError(f"The title was not changed: {_form_problems(form)}.",
                        "Give a title of 1 to 200 characters.")
    old, assignment.title = assignment.title, form.title.data.strip()
    session.commit()
    flash(f"The title of {name} is now {assignment.title!r} (was {old!r}).", "success")
    return redirect(url_for("staff.assignment", name=name), 303)


@bp.route("/assignments/<name>/thresholds", methods=["POST"])
def adopt_thresholds(name: str):
    session = db.session()
    assignment = courses.staff_assignment(session, current_user, name)
    form = ThresholdsForm()
    if not form.validate_on_submit():
        raise UserError(f"The thresholds were not adopted: {_form_problems(form)}.", "Correct the form and try again.")
    values = thresholds.parse_thresholds(form.thresholds.data, assignment)
    thresholds.check_new_version(session, assignment, form.version.data)
    preview = thresholds.change_preview(session, assignment, values)
    if preview["needs_confirmation"] and request.form.get("confirmed") != "yes":
        return render_template("staff/thresholds_confirm.html", assignment=assignment, form=form,
                               preview=preview, source=request.form.get("source", "")), 409
    thresholds.adopt(session, assignment, form.version.data, values,
                     source="nightly" if request.form.get("source") == "nightly" else "spec")
    session.commit()
    moved = "; ".join(f"{c['title']} {c['level']} {c['old']:g} -> {c['new']:g} us ({c['percent']:+.1f}%)"
                      for c in preview["changes"]) or "no threshold moved"
    message = (f"Thresholds version {form.version.data} is in force ({moved}; {preview['runs_changing']} graded "
               f"run{'' if preview['runs_changing'] == 1 else 's'} change tier).")
    standings_changed(session, assignment_ids=[assignment.id])
    if form.rescore.data:                      # a worker rescores; the task's page follows it
        task = tasks.start(assignment, "rescore")
        tasks.flash_started(task, message)
        return redirect(url_for("staff.task_page", task_id=task.id), 303)
    flash(message, "success")
    return redirect(url_for("staff.assignment", name=name), 303)


@bp.route("/assignments/<name>/extensions", methods=["POST"])
def grant_extension(name: str):
    session = db.session()
    assignment = courses.staff_assignment(session, current_user, name)
    form = ExtensionForm()
    if not form.validate_on_submit():
        raise UserError(f"The extension was not granted: {_form_problems(form)}.", "Correct the form and try again.")
    user = session.scalar(select(User).where(User.email == form.email.data.strip().lower()))
    if user is None or assignment.course_id not in accounts.course_roles(session, user.id):
        raise UserError(f"No one in {assignment.course.name} has the email {form.email.data!r}.",
                        "Import them with the course's roster first.", 404)
    row = session.scalar(select(DeadlineExtension).where(DeadlineExtension.user_id == user.id,
                                                         DeadlineExtension.assignment_id == assignment.id))
    if row is None:
        row = DeadlineExtension(user_id=user.id, assignment_id=assignment.id)
        session.add(row)
    row.deadline, row.granted_by_id = form.deadline.data, current_user.id
    standings_changed(session, assignment_ids=[assignment.id])   # commits; late runs may count now
    flash(f"{user.email} may submit {name} until {row.deadline:%Y-%m-%d %H:%M} UTC.", "success")
    return redirect(url_for("staff.assignment", name=name), 303)


@bp.route("/assignments/<name>/visibility", methods=["POST"])
def set_visibility(name: str):
    """Who may see the course's leaderboards: signed-in users only, or everyone."""
    session = db.session()
    assignment = courses.staff_assignment(session, current_user, name)
    if not current_user.is_instructor_of(assignment.course_id):
        raise UserError("Only the course's instructors change who sees its leaderboards.",
                        "Ask an instructor of the course.", 403)
    form = VisibilityForm()
    if not form.validate_on_submit():
        raise UserError("The leaderboard's visibility must be signed_in or public.", "Choose one of the two.")
    assignment.course.leaderboard_visibility = form.visibility.data
    session.commit()
    flash(f"The leaderboards of {assignment.course.name} are now visible to "
          f"{'everyone' if form.visibility.data == 'public' else 'signed-in users'}.", "success")
    return redirect(url_for("staff.assignment", name=name), 303)


