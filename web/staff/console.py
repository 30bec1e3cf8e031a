"""The console's front page: the queue, workers alive, and the assignments."""
from __future__ import annotations

from flask import render_template
from flask_login import current_user
from sqlalchemy import select

import grader

from store.models import Assignment
from workers import enqueue

from .. import db
from ..forms import AssignmentForm
from . import bp


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
    return render_template("staff/console.html", stats=stats, assignments=assignments,
                           form=AssignmentForm(), available_specs=[(name, s.title, s.platform) for name, s in specs],
                           default_spec=default)
