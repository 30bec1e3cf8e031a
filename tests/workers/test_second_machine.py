"""A worker on a second machine (issue 46): `grader serve --listen` exposes its embedded
PostgreSQL and Redis on TCP with a password, and a `grader worker` whose home folder is empty,
given only the DATABASE_URL and REDIS_URL serve printed and the secret key, grades a submission
that a third process (`grader submit`, its own empty home too) queued. The first machine runs no
simulator worker (`--workers 0`), so the grade can only be the second machine's. Real processes
throughout; each one the test starts ends with it."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from service_processes import die_with_parent
from service_waits import wait_for, wait_for_run
from test_serve_lifecycle import ROOT, Instance, _free_port, _wait_up
from worker_helpers import OPTIMIZED, TINY_SPEC

def _machine_env(home: Path, **extra: str) -> dict:
    """Another machine's environment: the code (PATH, the interpreter) and nothing of the first
    instance; HOME and NKI_GRADER_HOME an empty folder of its own."""
    env = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "TMPDIR") if k in os.environ}
    env.update(HOME=str(home), NKI_GRADER_HOME=str(home / "instance"), XDG_CONFIG_HOME=str(home / ".config"),
               PYTHONUNBUFFERED="1", **extra)
    return env


@pytest.fixture
def exposed():
    """`grader serve --listen 127.0.0.1 --workers 0` on free ports, up; its printed URLs."""
    made = Instance()
    web, db_port, redis_port = _free_port(), _free_port(), _free_port()
    log = made.tmp / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--port", str(web), "--workers", "0",
                                 "--listen", "127.0.0.1", "--db-port", str(db_port), "--redis-port", str(redis_port)],
                                cwd=ROOT, env=made.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=die_with_parent(signal.SIGTERM))
    made.serves.append(proc)
    try:
        text = _wait_up(proc, log)
        urls = dict(re.findall(r"^\s+(DATABASE_URL|REDIS_URL)=(\S+)$", text, re.M))
        assert set(urls) == {"DATABASE_URL", "REDIS_URL"}, text
        yield made, urls, (db_port, redis_port), proc
    finally:
        made.close()


@pytest.mark.slow
def test_worker_with_an_empty_home_grades_over_tcp(exposed):
    import redis
    from sqlalchemy import create_engine, text
    from store import specs
    from store.db import normalize_url, session_factory
    from store.models import Course, User
    instance, urls, ports, serve = exposed
    password = (instance.home / "listen-password").read_text().strip()
    assert password in urls["DATABASE_URL"] and password in urls["REDIS_URL"]
    assert f"127.0.0.1:{ports[0]}" in urls["DATABASE_URL"] and f"127.0.0.1:{ports[1]}" in urls["REDIS_URL"]
    assert (instance.home / "listen-password").stat().st_mode & 0o077 == 0
    assert f"DATABASE_URL={urls['DATABASE_URL']}" in (instance.home / "worker.env").read_text()

    # the password guards both over TCP
    wrong_db = urls["DATABASE_URL"].replace(password, "not-the-password")
    with pytest.raises(Exception, match="password authentication failed"):
        create_engine(normalize_url(wrong_db)).connect().close()
    with pytest.raises(redis.AuthenticationError):
        redis.Redis.from_url(urls["REDIS_URL"].replace(password, "not-the-password"), socket_timeout=10).ping()
    assert redis.Redis.from_url(urls["REDIS_URL"], socket_timeout=10).ping()

    engine = create_engine(normalize_url(urls["DATABASE_URL"]))
    session = session_factory(engine)()
    machines = Path(tempfile.mkdtemp(prefix="nki-test-machines-"))
    worker = None
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT inet_server_port()")).scalar() == ports[0]
        specs.new_assignment(session, str(TINY_SPEC), course=Course(name="CS149"), name="tiny", backend="sim")
        session.add(User(email="student@example.edu", name="A Student", nickname="ada"))
        session.commit()

        second, third = machines / "second", machines / "third"
        second.mkdir()
        third.mkdir()
        (third / "conv2d.py").write_bytes(OPTIMIZED)
        key = (instance.home / "secret_key").read_text().strip()
        remote = dict(urls, NKI_GRADER_SECRET_KEY=key)
        name = f"second-{os.getpid()}@test"
        with (machines / "worker.log").open("wb") as out:
            worker = subprocess.Popen([sys.executable, "-m", "workers.cli", "worker", "--queue", "sim", "--name", name,
                                       "--concurrency", "1"], cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out,
                                      stderr=subprocess.STDOUT, start_new_session=True,
                                      env=_machine_env(second, NKI_ANSWER_POOL_SIZE="1", **remote),
                                      preexec_fn=die_with_parent(signal.SIGTERM))
        submitted = subprocess.run([sys.executable, "-m", "workers.cli", "submit",
                                    str(third / "conv2d.py"), "--assignment", "tiny",
                                    "--email", "student@example.edu", "--timeout", "240",
                                    "--json", str(third / "report.json")],
                                   cwd=ROOT, env=_machine_env(third, **remote), capture_output=True, text=True,
                                   timeout=300)
        worker_log = (machines / "worker.log").read_text(errors="replace")
        assert submitted.returncode == 0, f"{submitted.stdout}\n{submitted.stderr}\nworker:\n{worker_log[-4000:]}"
        run_id = int(re.search(r"^run (\d+): queued", submitted.stderr, re.M).group(1))
        run = wait_for_run(session, run_id, ("done",), timeout=30)
        assert run.worker.startswith(name), run.worker          # the second machine's, the only one
        assert run.score_total == run.max_total == 7.5
        assert json.loads((third / "report.json").read_text())["tests"][0]["status"] == "passed"
        assert f"run {run_id}: grading ended" in worker_log

        # this machine's own clients still reach its databases on their local sockets (PostgreSQL's
        # socket is named after its TCP port) and see the second machine's worker
        queue = instance.grader("queue", "--json")
        assert queue.returncode == 0, queue.stderr
        assert name in [w["name"] for w in json.loads(queue.stdout)["workers"]]
        # a `grader submit` here, without REDIS_URL, reaches the Redis that now wants a password
        # (from the server's own redis.conf) and its task goes out at once, not by the reaper's
        # re-send two minutes later; the second machine grades it
        here = instance.grader("submit", str(third / "conv2d.py"), "--assignment", "tiny",
                               "--email", "student@example.edu", "--timeout", "240")
        assert here.returncode == 0, here.stderr
        assert "not sent" not in here.stderr and "Traceback" not in here.stderr, here.stderr
        local_run = int(re.search(r"^run (\d+): queued", here.stderr, re.M).group(1))
        assert wait_for_run(session, local_run, ("done",), timeout=30).worker.startswith(name)
        assert len(list((instance.home / "redis").glob("*.sock"))) == 1      # no second Redis on its data

        # the second machine made what it needs in its own folder; the first instance's stayed its own
        import grader
        if grader.answer_pool_is_private():
            wait_for(lambda: any((second / "instance" / "answer-pool").glob("*/*/set.json")), 60,
                     "the second machine's own answer pool")
        assert not (second / "instance" / "pgdata").exists() and not (second / "instance" / "redis").exists()

        # a clean stop of the exposing serve still leaves nothing of its instance running
        session.close()
        engine.dispose()
        serve.send_signal(signal.SIGTERM)
        stopped = time.monotonic()
        assert serve.wait(60) == 0
        instance.assert_nothing_left(stopped)
    finally:
        session.close()
        engine.dispose()
        if worker is not None:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGTERM)
                try:
                    worker.wait(60)
                except subprocess.TimeoutExpired:
                    pass
            try:
                os.killpg(worker.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            worker.wait()
        shutil.rmtree(machines, ignore_errors=True)


def test_listen_is_refused_before_anything_starts_when_it_cannot_be_done():
    """An address that is not this machine's, or one port for both, is said in one line and
    nothing is made (no instance folder)."""
    made = Instance()
    try:
        for args, said in ((["--listen", "192.0.2.7"], "not an address of this machine"),
                           (["--listen", "127.0.0.1", "--db-port", "7000", "--redis-port", "7000"],
                            "give them different ports"),
                           (["--listen", "127.0.0.1", "--db-port", "70000"], "--db-port 70000 is not a TCP port")):
            out = made.grader("serve", "--port", str(_free_port()), *args)
            assert out.returncode == 2 and said in out.stderr, out.stderr
            assert not made.home.exists()
        # a port another program holds: found once the instance's own leftovers are stopped (they
        # may hold it), refused in one line, with nothing said to have stopped
        import socket
        with socket.socket() as holder:
            holder.bind(("127.0.0.1", 0))
            holder.listen()
            busy = holder.getsockname()[1]
            out = made.grader("serve", "--port", str(_free_port()), "--listen", "127.0.0.1", "--db-port", str(busy))
        assert out.returncode == 2 and f"PostgreSQL's port {busy} on 127.0.0.1 is in use" in out.stderr, out.stderr
        assert "stopped" not in out.stdout + out.stderr, out.stdout
    finally:
        made.close()


@pytest.mark.slow
def test_an_embedded_instance_moves_to_a_postgresql_reached_over_tcp():
    """docs/operators.md's move: `grader backup` of an embedded instance, `grader restore` with
    DATABASE_URL naming a PostgreSQL on TCP behind a password (an embedded one listening, as
    `serve --listen` makes it), then `grader migrate` there; the people and runs are there, and no
    output shows the password."""
    from sqlalchemy import create_engine, select
    from store.db import EmbeddedPostgres, normalize_url, session_factory
    from store.models import GradingRun, User
    from test_backup import KEY, Place, make_instance
    from service.supervision import stop_instance_processes
    place = Place()
    server = None
    try:
        source = place.tmp / "source"
        make_instance(source)
        backup = place.tmp / "b.tar"
        made = place.grader("backup", str(backup), home=source)
        assert made.returncode == 0, made.stderr
        server = EmbeddedPostgres(place.tmp / "server" / "pgdata")
        port, password = _free_port(), "pw-over-tcp-0123456789"
        server.listen_on("127.0.0.1", port, password)
        url = server.tcp_url("127.0.0.1", port, password)
        site = place.tmp / "site"
        place.env.update(DATABASE_URL=url, NKI_GRADER_HOME=str(site))
        out = place.grader("restore", str(backup))
        assert out.returncode == 0, out.stderr
        assert password not in out.stdout + out.stderr
        assert (site / "secret_key").read_text() == KEY
        migrated = place.grader("migrate")
        assert migrated.returncode == 0 and "database schema is current" in migrated.stdout, migrated.stderr
        assert password not in migrated.stdout + migrated.stderr
        engine = create_engine(normalize_url(url))
        session = session_factory(engine)()
        try:
            assert session.scalars(select(User.email)).all() == ["ada@example.edu"]
            assert {r.status for r in session.scalars(select(GradingRun))} == {"queued"}
        finally:
            session.close()
            engine.dispose()
    finally:
        if server is not None:
            server.stop()
        for folder in (place.tmp / "source", place.tmp / "server"):
            if folder.is_dir():
                stop_instance_processes(folder, parts_grace_s=1.0)
        shutil.rmtree(place.tmp, ignore_errors=True)
