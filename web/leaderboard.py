"""The leaderboard of an assignment, public or for signed-in users as its course says.

The ranked table is rendered once per standings computation and page, and shared by every
viewer; only the frame around it (who is signed in, which row is theirs) is per request."""
from __future__ import annotations

from flask import Blueprint, current_app, render_template, request
from flask_login import current_user
from markupsafe import Markup

from grader import vocabulary
from store import lifecycle
from store.models import BACKENDS

from . import courses, db, late
from .errors import UserError
from .extensions import login_manager
from .standings import RULE, StandingsCache

bp = Blueprint("leaderboard", __name__)
BACKEND_TITLES = vocabulary.BACKEND_TITLES
KIND_TITLES = vocabulary.KIND_TITLES


def pseudonym(user_id: int) -> str:
    """What a student without a nickname is called on the board: distinct, and names nobody."""
    return f"student {user_id}"


def column_groups(timed: list) -> list[tuple[str, list]]:
    """The timed tests' columns grouped by kind, graded kinds first (performance, then extra
    credit: vocabulary.TIMED_KINDS' order), each in the spec's order."""
    return [(kind.value, tests) for kind in vocabulary.TIMED_KINDS
            if (tests := [t for t in timed if t.kind == kind])]


def short_title(test) -> str:
    """A timed test's column head: its title without the kind ('224x224, no maxpool, float16')."""
    title = test.title or test.name
    head, sep, rest = title.partition(": ")
    return rest if sep and rest else title


def standings_cache() -> StandingsCache:
    cache = current_app.extensions.get("nki_grader.standings")
    if cache is None:
        cache = current_app.extensions["nki_grader.standings"] = StandingsCache(db.factory())
    return cache


def standings_entry(assignment, backend: str):
    if backend not in BACKENDS:
        raise UserError(f"Unknown backend {backend!r}.", f"Use one of: {', '.join(BACKENDS)}.", 400)
    session = db.session()      # under late-days the stamp is the course's (a shared budget: web/late.py)
    return standings_cache().get(session, assignment.id, backend, current_app.config["LEADERBOARD_CACHE_SECONDS"],
                                 late.standings_stamp(session, assignment))


def standings_changed(session, *, assignment_ids=None, user_id=None) -> None:
    """After a write here that can change standings: move the stamp (every process recomputes at
    its next view) and commit."""
    lifecycle.mark_standings_changed(session, assignment_ids=assignment_ids, user_id=user_id)
    session.commit()
    standings_cache().forget(None if assignment_ids is None or len(assignment_ids) != 1 else assignment_ids[0])


def standings_for(assignment, backend: str):
    return standings_entry(assignment, backend).standings


def may_view(assignment) -> bool:
    """A public board: anyone. Otherwise the people of the course (students while the
    assignment is open, its staff always) and site admins."""
    return assignment.course.leaderboard_visibility == "public" or (
        current_user.is_authenticated and courses.can_open(db.session(), current_user, assignment))


@bp.route("/leaderboard/<name>")
def board(name: str):
    assignment = courses.get_assignment(db.session(), name)
    if not may_view(assignment):
        if current_user.is_authenticated:
            raise UserError(f"The leaderboard of {name!r} is for the people of {assignment.course.name}.",
                            "Ask course staff to add you to the roster.", 403)
        return login_manager.unauthorized()
    backend = request.args.get("backend", assignment.backend)
    if assignment.mode == "contest":          # ranked by its own rule (web/contest.py)
        if backend not in BACKENDS:
            raise UserError(f"Unknown backend {backend!r}.", f"Use one of: {', '.join(BACKENDS)}.", 400)
        return contest.board(assignment, backend)
    entry = standings_entry(assignment, backend)
    standings = entry.standings
    size = current_app.config["LEADERBOARD_PAGE_SIZE"]
    pages = max(1, -(-len(standings) // size))
    page = min(max(1, request.args.get("page", 1, type=int)), pages)
    table = entry.rendered.get((page, assignment.spec_hash))
    if table is None:
        table = entry.rendered[(page, assignment.spec_hash)] = Markup(render_template(
            "leaderboard/_table.html", rows=standings[(page - 1) * size: page * size],
            groups=column_groups(courses.timed_tests(assignment)), kind_titles=KIND_TITLES, short_title=short_title,
            pseudonym=pseudonym))
    me = current_user.id if current_user.is_authenticated else None
    mine = next((s for s in standings if s.user_id == me), None) if me else None
    return render_template("leaderboard/board.html", assignment=assignment, backend=backend,
                           backend_titles=BACKEND_TITLES, table=table, page=page, pages=pages,
                           count=len(standings), mine=mine, me=me, rule=RULE, pseudonym=pseudonym)


from . import contest  # noqa: E402  (its routes join this blueprint; it imports the helpers above)
