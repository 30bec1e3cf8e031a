"""One database session per request, closed (and rolled back if uncommitted) at its end."""
from __future__ import annotations

from flask import Flask, current_app, g
from sqlalchemy.orm import Session, sessionmaker

import store
from store import problem_folders
from store.db import session_factory

_KEY = "nki_grader.sessions"


def init_app(app: Flask) -> None:
    engine = app.config.get("ENGINE") or store.engine_from_env(app.config.get("DATABASE_URL"))
    app.extensions[_KEY] = session_factory(engine)
    problem_folders.install(engine)         # specs pinning an admin's uploaded problem folder find it here
    app.teardown_appcontext(_close)


def factory() -> sessionmaker:
    """For work outside a request (a background refresh): `with factory()() as s: ...`."""
    return current_app.extensions[_KEY]


def session() -> Session:
    if "db" not in g:
        g.db = current_app.extensions[_KEY]()
    return g.db


def _close(_exc) -> None:
    s = g.pop("db", None)
    if s is not None:
        s.close()                  # rolls back whatever the view did not commit
