"""`grader serve`: the whole service on one machine. Embedded PostgreSQL and Redis (unless
DATABASE_URL / REDIS_URL), migrations, a sim worker, beat (nightly + reaper) and the web app
under gunicorn on 127.0.0.1:PORT. The parts write to <instance>/logs/, so the terminal shows
only a short summary (URL, the first admin's one-time sign-in link, the instance and logs
folders, how to stop); Ctrl-C (or SIGTERM) stops every part, children first, then Redis and
PostgreSQL."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from grader.vocabulary import Queue

STOP_GRACE_S = 30.0


def register(sub) -> None:
    p = sub.add_parser("serve", help="run the whole service on this machine (Ctrl-C stops it)")
    p.add_argument("--port", type=int, default=8000,
                   help="the web site's port on 127.0.0.1 (default 8000; choose another if it is taken)")
    p.add_argument("--workers", type=int, help="simulator grades at once (default: one per CPU core, as memory allows)")
    p.set_defaults(func=serve)


class Child:
    """One part of the service in its own process group, its output appended to its log file."""

    def __init__(self, name: str, argv: list[str], log: Path) -> None:
        self.name, self.log = name, log
        with log.open("ab") as out:
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    def last_lines(self, n: int = 20) -> str:
        try:
            lines = self.log.read_text(errors="replace").splitlines()[-n:]
        except OSError:
            return ""
        return "\n".join("    " + line for line in lines)

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.alive():
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
            except ProcessLookupError:
                return

    def reap(self, deadline: float) -> None:
        try:
            self.process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            print(f"grader serve: {self.name} did not stop in {STOP_GRACE_S:.0f} s; killing it", file=sys.stderr)
        try:
            os.killpg(self.process.pid, signal.SIGKILL)      # anything left in its group
        except ProcessLookupError:
            pass
        self.process.wait()


def _wait_http(url: str, child: Child, timeout: float = 120.0) -> bool:
    import requests
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and child.alive():
        try:
            requests.get(url, timeout=5)
            return True
        except requests.RequestException:
            time.sleep(0.3)
    return False


def _summary(base_url: str, link: str, pg, logs: Path, children: list[Child]) -> str:
    """The one block a person needs: where the site is, the admin's way in, where things live, how to stop."""
    from store.db import instance_dir
    if pg is not None:
        where = (f"  Instance folder: {instance_dir()}\n"
                 f"                   (other terminals' `grader queue`, `submit`, `nightly` find it; "
                 f"to be explicit: export NKI_GRADER_HOME={instance_dir()})\n")
    else:
        where = "  Database:        DATABASE_URL\n"
    names = ", ".join(c.log.name for c in children)
    return (f"\nnki-grader is serving at {base_url}\n"
            f"  First admin sign-in (one-time link): {link}\n"
            f"{where}"
            f"  Logs folder:     {logs}  ({names})\n"
            f"  To stop:         press Ctrl-C here; Ctrl-C stops everything "
            f"(the site, the workers, the embedded databases).\n")


def _control_socket() -> str:
    """gunicorn's control socket in this instance's folder (its default, ~/.gunicorn, is shared by
    every instance of the user); a folder too deep for a unix socket path gets a private temp one."""
    import tempfile
    from store.db import instance_dir
    path = instance_dir() / "gunicorn.ctl"
    if len(str(path)) < 100:
        return str(path)
    return str(Path(tempfile.mkdtemp(prefix="nki-gunicorn-")) / "gunicorn.ctl")


def _port_taken(port: int) -> str:
    """Why 127.0.0.1:port cannot be ours ('' when it can)."""
    import errno
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as err:
            return "address in use" if err.errno == errno.EADDRINUSE else (err.strerror or str(err))
    return ""


def _free_port_near(port: int) -> int:
    for candidate in range(port + 1, min(port + 50, 65535)):
        if not _port_taken(candidate):
            return candidate
    return 8080


def serve(args) -> int:
    from store import session_scope, upgrade
    from store.db import instance_dir, start_embedded
    from store.instance import remember
    from web.bootstrap import first_admin_login_link
    from workers.broker import EmbeddedRedis
    from workers.answers import made_ahead
    from workers.capacity import sim_grades_at_once

    if args.workers is not None and args.workers < 1:
        print(f"grader: --workers {args.workers}: give at least 1 (or leave it out: one per CPU core)", file=sys.stderr)
        return 2
    if not 0 < args.port < 65536:
        print(f"grader: --port {args.port} is not a TCP port (1-65535)", file=sys.stderr)
        return 2
    taken = _port_taken(args.port)
    if taken:                         # before anything starts or is printed: no URL that is not ours
        print(f"grader serve: port {args.port} on 127.0.0.1 is in use by another program ({taken}); "
              f"choose another with --port, e.g. `grader serve --port {_free_port_near(args.port)}`", file=sys.stderr)
        return 2
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):     # Ctrl-C, a service manager, a closed terminal
        signal.signal(sig, lambda *_: stop.set())

    pg = redis = None
    children: list[Child] = []
    try:
        if not os.environ.get("DATABASE_URL"):
            pg = start_embedded()
            os.environ["DATABASE_URL"] = pg.url
            print(f"PostgreSQL (embedded): {pg.pgdata}")
        if not os.environ.get("REDIS_URL"):
            redis = EmbeddedRedis(instance_dir() / "redis").start()
            os.environ["REDIS_URL"] = redis.url
            print(f"Redis (embedded): {redis.dir}")
        upgrade()
        if pg is not None:
            remember(instance_dir())
        python = sys.executable
        logs = instance_dir() / "logs"
        logs.mkdir(exist_ok=True)
        from workers.cli import root_note
        if os.geteuid() == 0:
            print(f"grader serve: {root_note()}")
        print(f"grader serve: starting the workers, beat and the web site; their output goes to {logs}/", flush=True)
        quiet = ["--quiet", "--loglevel", "WARNING"]           # warnings and errors only, in the logs
        grades_at_once = {Queue.SIM: args.workers or sim_grades_at_once(made_ahead()), Queue.NIGHTLY: 1, Queue.STAFF: 1}
        for queue, concurrency in grades_at_once.items():
            children.append(Child(f"{queue.value} worker", [python, "-m", "workers.cli", "worker", "--queue", queue,
                                                            *quiet, "--concurrency", str(concurrency)],
                                  logs / f"worker-{queue.value}.log"))
        children.append(Child("beat", [python, "-m", "workers.cli", "beat", *quiet], logs / "beat.log"))
        base_url = f"http://127.0.0.1:{args.port}"
        web = Child("web", [python, "-m", "gunicorn", "--bind", f"127.0.0.1:{args.port}", "--workers", "2",
                            "--threads", "4", "--log-level", "warning", "--control-socket",
                            _control_socket(), "web:create_app()"], logs / "web.log")
        children.append(web)
        if _wait_http(base_url + "/", web):
            with session_scope() as s:
                link = first_admin_login_link(s, base_url)
            print(_summary(base_url, link, pg, logs, children), flush=True)
        else:
            print(f"grader serve: the web site did not come up; the end of {web.log}:\n{web.last_lines()}",
                  file=sys.stderr)
            stop.set()
        while not stop.wait(0.5):
            dead = [c for c in children if not c.alive()]
            if dead:
                print(f"grader serve: the {dead[0].name} exited with status {dead[0].process.returncode}; "
                      f"stopping everything. The end of {dead[0].log}:\n{dead[0].last_lines()}", file=sys.stderr)
                return 1
        return 0
    finally:
        for child in children:
            child.stop()
        deadline = time.monotonic() + STOP_GRACE_S
        for child in children:
            child.reap(deadline)
        if redis is not None:
            redis.stop()
        if pg is not None:
            pg.stop()
        print("grader serve: stopped", flush=True)
