"""The console's front page: the queue, workers alive, and the assignments."""
from __future__ import annotations

import datetime as dt

from flask import flash, redirect, render_template, request, url_for
from flask_login import current_user
from sqlalchemy import select

import grader
from grader.vocabulary import Backend

from store.models import Assignment, Course
from workers import enqueue

from .. import db
from ..errors import UserError
from ..forms import AssignmentForm, CourseForm
from . import bp


def backends_without_worker(stats: dict) -> dict[Backend, str]:
    """Each backend no live worker serves (enqueue.queue_stats' heartbeats): {backend: what to
    start}. A run there waits until such a worker starts."""
    served = {q.strip() for w in stats["workers"] for q in w["queues"].split(",")}
    where = {Backend.NEURON: " on a Trainium2 machine (docs/trainium.md)"}
    return {b: f"No worker alive serves the {b.queue} queue: runs graded on {b.title} wait until one starts "
               f"(grader worker --queue {b.queue}{where.get(b, '')}; the staff console's Queue section lists "
               "the workers alive)."
            for b in Backend if b.queue not in served}


@bp.route("/")
def console():
    session = db.session()
    query = select(Assignment).order_by(Assignment.name)
    if not current_user.is_admin:
        query = query.where(Assignment.course_id.in_(current_user.staff_course_ids))
    assignments = session.scalars(query).all()
    specs = [(name, grader.load_spec(name)) for name in grader.available_specs()]
    # the default is the newest spec for Trainium2 (alphabetical order would pick last year's Trainium1 one)
    default = next((name for name, s in sorted(specs, key=lambda ns: ns[1].title, reverse=True)
                    if s.platform == "trn2"), specs[0][0] if specs else None)
    stats = enqueue.queue_stats(session)
    if not current_user.is_admin:              # other courses' grades are counted, not described
        mine = {a.name for a in assignments}
        stats["running"] = [d for d in stats["running"] if d["what"] != "student grade" or d["assignment"] in mine]
    form = AssignmentForm(title=dict((name, s.title) for name, s in specs).get(default, ""))
    courses = session.scalars(select(Course).order_by(Course.name)).all()
    form.course.choices = [c.name for c in courses if current_user.is_instructor_of(c.id)]
    return render_template("staff/console.html", stats=stats, assignments=assignments,
                           form=form, available_specs=[(name, s.title, s.platform) for name, s in specs],
                           default_spec=default, course_form=CourseForm(),
                           open_course_form=request.args.get("create") == "course",
                           no_worker=backends_without_worker(stats),
                           spec_titles={name: s.title for name, s in specs},
                           now_utc=f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M}")


@bp.route("/courses", methods=["POST"])
def create_course():
    """A new course: a site admin's own action, never a side effect of a form that names one."""
    if not current_user.is_admin:
        raise UserError("Only a site admin creates courses.", "Ask a site admin to create the course.", 403)
    form = CourseForm()
    if not form.validate_on_submit():
        raise UserError("The course was not created: give it a name of at most 200 characters.",
                        "Correct the form and try again.")
    session = db.session()
    name = form.course_name.data.strip()
    if session.scalar(select(Course.id).where(Course.name == name)) is not None:
        raise UserError(f"There is a course called {name!r} already.", "Choose it from the lists instead.", 409)
    session.add(Course(name=name, leaderboard_visibility="signed_in"))
    session.commit()
    flash(f"Course {name} created: enroll its people on the roster page, then create its assignments.", "success")
    return redirect(url_for("staff.console"), 303)
