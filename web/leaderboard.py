"""The leaderboard of an assignment, public or for signed-in users as its course says."""
from __future__ import annotations

from flask import Blueprint, current_app, render_template, request
from flask_login import current_user

from store.models import BACKENDS

from . import courses, db
from .errors import UserError
from .extensions import login_manager
from .standings import RULE, StandingsCache

bp = Blueprint("leaderboard", __name__)
BACKEND_TITLES = {"sim": "simulated (nkisim)", "neuron": "Trainium2 hardware"}


def standings_cache() -> StandingsCache:
    return current_app.extensions.setdefault("nki_grader.standings", StandingsCache())


def standings_for(assignment, backend: str):
    if backend not in BACKENDS:
        raise UserError(f"Unknown backend {backend!r}.", f"Use one of: {', '.join(BACKENDS)}.", 400)
    return standings_cache().get(db.session(), assignment.id, backend,
                                 current_app.config["LEADERBOARD_CACHE_SECONDS"])


def may_view(assignment) -> bool:
    return assignment.course.leaderboard_visibility == "public" or current_user.is_authenticated


@bp.route("/leaderboard/<name>")
def board(name: str):
    assignment = courses.get_assignment(db.session(), name)
    if not may_view(assignment):
        return login_manager.unauthorized()
    backend = request.args.get("backend", assignment.backend)
    standings = standings_for(assignment, backend)
    size = current_app.config["LEADERBOARD_PAGE_SIZE"]
    page = max(1, request.args.get("page", 1, type=int))
    pages = max(1, -(-len(standings) // size))
    me = current_user.id if current_user.is_authenticated else None
    mine = next((s for s in standings if s.user_id == me), None)
    return render_template("leaderboard/board.html", assignment=assignment, backend=backend,
                           backend_titles=BACKEND_TITLES, rows=standings[(page - 1) * size: page * size],
                           page=page, pages=pages, count=len(standings), mine=mine, me=me, rule=RULE,
                           timed=courses.timed_tests(assignment))
