"""The console's front page: the queue, workers alive, and the assignments."""
from __future__ import annotations

from flask import render_template
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
    assignments = session.scalars(select(Assignment).order_by(Assignment.name)).all()
    return render_template("staff/console.html", stats=enqueue.queue_stats(session), assignments=assignments,
                           form=AssignmentForm(), available_specs=grader.available_specs())
