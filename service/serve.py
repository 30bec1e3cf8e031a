"""`grader serve`: the whole service on one machine. Embedded PostgreSQL and Redis (unless
DATABASE_URL / REDIS_URL), migrations, a sim worker, beat (nightly + reaper) and the web app
under gunicorn on 127.0.0.1:PORT; with --listen ADDRESS the embedded PostgreSQL and Redis also
take TCP connections there, behind a password made once per instance, for workers on other
machines (the URLs they need are printed and written to <instance>/worker.env). The parts write
to <instance>/logs/ at --log-level (serve's own start and stop to serve.log), so the terminal shows only a short summary (URL, the first
admin's one-time sign-in link, the instance and logs folders, how to stop); Ctrl-C (or SIGTERM,
SIGHUP) stops every part, children first (the workers hand their grades under way back to the
queue), then Redis and PostgreSQL, from serve's first instant on. Nothing outlives serve however it ends: it holds
the instance's lock, marks every process it starts, and leaves a guardian to stop them should it
be killed (service/supervision.py)."""
from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from grader.vocabulary import Queue

STOP_GRACE_S = 30.0


def register(sub) -> None:
    p = sub.add_parser("serve", help="run the whole service on this machine (Ctrl-C stops it)")
    p.add_argument("--port", type=int, default=8000,
                   help="the web site's port on 127.0.0.1 (default 8000; choose another if it is taken)")
    p.add_argument("--workers", type=int, help="simulator grades at once (default: as many as the cores run without slowing each "
                                               "grade, one per core with answers made ahead and one per 1.6 without, as "
                                               "memory allows; 0: none here, grades go to workers on other machines)")
    p.add_argument("--listen", metavar="ADDRESS",
                   help="let workers on other machines in: the embedded PostgreSQL and Redis also listen on this "
                        "address (this machine's IP on the network they share, or 0.0.0.0 for every interface), "
                        "with a password made once for the instance; serve prints the DATABASE_URL and REDIS_URL "
                        "they need. Default: both stay on local sockets only")
    p.add_argument("--db-port", type=int, default=5432, help="with --listen: PostgreSQL's TCP port (default 5432)")
    p.add_argument("--redis-port", type=int, default=6379, help="with --listen: Redis's TCP port (default 6379)")
    p.add_argument("--log-level", type=str.upper, choices=LOG_LEVELS, default="INFO",
                   help="what the parts write to <instance>/logs/: INFO (default) has serve's start and stop, each "
                        "grade's start and end with its run id and duration, and every web request; WARNING only "
                        "what went wrong; DEBUG everything")
    p.set_defaults(func=serve)


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


class ServeLog:
    """<instance>/logs/serve.log: what serve itself did (started, serving, stopping and why,
    stopped), one timestamped line each, beside its parts' logs."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def say(self, text: str) -> None:
        try:
            with self.path.open("a") as out:
                out.write(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] pid {os.getpid()}: {text}\n")
        except OSError:
            pass            # a full disk must not stop the stop


class Child:
    """One part of the service in its own process group, its output appended to its log file."""

    def __init__(self, name: str, argv: list[str], log: Path) -> None:
        # imported here, not at the top: supervision takes the store and SQLAlchemy with it (0.9 s
        # of every `grader` command's start; bench/startup.py), and only serve starts children
        from .supervision import die_with_serve
        self.name, self.log = name, log
        with log.open("ab") as out:
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                            start_new_session=True, preexec_fn=die_with_serve)

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


def _wait_http(url: str, child: Child, check, timeout: float = 120.0) -> bool:
    """Whether the site answers at `url` before `child` (its server) ends or the timeout;
    `check()` between tries (a stop request ends the wait)."""
    import requests
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and child.alive():
        check()
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
    names = ", ".join(["serve.log"] + [c.log.name for c in children])
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


def _port_taken(port: int, host: str = "127.0.0.1") -> str:
    """Why host:port (127.0.0.1 unless told) cannot be ours ('' when it can). SO_REUSEADDR, as gunicorn binds: the
    closing connections (TIME_WAIT) of a serve just stopped do not make the port taken, and a
    program listening on it still does."""
    import errno
    import socket
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as err:
            return "address in use" if err.errno == errno.EADDRINUSE else (err.strerror or str(err))
    return ""


def _free_port_near(port: int, host: str = "127.0.0.1") -> int:
    for candidate in range(port + 1, min(port + 50, 65535)):
        if not _port_taken(candidate, host):
            return candidate
    return 8080


def listen_problem(args) -> str:
    """Why --listen cannot be done as given ('' when it can, or is not asked for)."""
    import socket
    if not args.listen:
        return ""
    if os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL"):
        return ("--listen exposes the embedded PostgreSQL and Redis, and DATABASE_URL and REDIS_URL point at "
                "external ones: give workers on other machines those URLs instead (or unset them)")
    if args.db_port == args.redis_port:
        return f"--db-port and --redis-port are both {args.db_port}: give them different ports"
    try:
        with socket.socket(socket.AF_INET6 if ":" in args.listen else socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((args.listen, 0))
    except (OSError, UnicodeError) as err:
        return (f"--listen {args.listen}: not an address of this machine ({err.strerror or err}); give one of its "
                f"IP addresses (`ip -brief address` lists them), or 0.0.0.0 for every interface")
    return ""


def listened_ports(args) -> list[tuple[str, int]]:
    """The embedded servers --listen puts on TCP, with their ports."""
    if not args.listen:
        return []
    return ([] if os.environ.get("DATABASE_URL") else [("PostgreSQL", args.db_port)]) + \
        ([] if os.environ.get("REDIS_URL") else [("Redis", args.redis_port)])


PASSWORD_FILE = "listen-password"


def listen_password(folder: Path) -> str:
    """The password of the instance's exposed PostgreSQL and Redis: made once, kept in the
    instance folder (readable by its owner only), the same at every start."""
    import secrets
    path = folder / PASSWORD_FILE
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    tmp = folder / f".{PASSWORD_FILE}.{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_urlsafe(24) + "\n")       # URL-safe: it goes into the URLs as is
    os.replace(tmp, path)
    return path.read_text().strip()


def _reachable_host(address: str) -> str:
    """The host name other machines use for `address` (every interface: this machine's name)."""
    import socket
    return socket.getfqdn() if address in ("0.0.0.0", "::") else address


def _remote_block(folder: Path, urls: dict[str, str]) -> str:
    """What a worker on another machine needs, written to <instance>/worker.env too (owner only)."""
    env = folder / "worker.env"
    lines = [f"{name}={url}" for name, url in urls.items()]
    fd = os.open(env, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write("# grader serve --listen: the environment of `grader worker` on another machine\n"
                  + "\n".join(lines) + "\n")
    return ("  Workers on other machines: same code version, then in their environment\n"
            + "".join(f"                   {line}\n" for line in lines)
            + f"                   (also in {env}; the web site's key, only for a second web site: "
              f"{folder / 'secret_key'})\n")


class StopRequested(BaseException):
    """Ctrl-C, SIGTERM or SIGHUP: raised at the next step of start-up, or by the serving loop,
    so the stop begins (a BaseException: no library's `except Exception` swallows it)."""


class StopSignals:
    """SIGINT, SIGTERM and SIGHUP from serve's first instant. The handler only notes the signal;
    `check()`, called between the steps of start-up, in its waits and in the serving loop,
    raises StopRequested there. Never raised from the handler itself: an exception that lands
    anywhere (inside a library holding a lock, a destructor that swallows it) could leave a
    lock held or the request lost, and the stop would hang or never come. Each step is bounded
    (seconds), so the stop begins within one."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)   # Ctrl-C, a service manager, a closed terminal

    def __init__(self) -> None:
        self.requested: int | None = None

    def install(self) -> None:
        for sig in self.SIGNALS:
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum, _frame) -> None:
        self.requested = self.requested or signum

    def check(self) -> None:
        if self.requested:
            raise StopRequested(self.requested)


def _refuse(message: str) -> int:
    print(f"grader serve: {message}", file=sys.stderr)
    return 2


def serve(args) -> int:
    if args.workers is not None and args.workers < 0:
        print(f"grader: --workers {args.workers}: give 0 or more (or leave it out: as many as the cores allow)", file=sys.stderr)
        return 2
    for option, port in (("--port", args.port), ("--db-port", args.db_port), ("--redis-port", args.redis_port)):
        if not 0 < port < 65536:
            print(f"grader: {option} {port} is not a TCP port (1-65535)", file=sys.stderr)
            return 2
    problem = listen_problem(args)
    if problem:
        print(f"grader serve: {problem}", file=sys.stderr)
        return 2
    signals = StopSignals()
    signals.install()
    try:
        return _serve(args, signals)
    except StopRequested:
        return 0


def _serve(args, signals: StopSignals) -> int:
    from store.db import instance_path
    from store.instance import was_served
    from .supervision import Guardian, InstanceBusy, InstanceLock, MARKER, describe, stop_instance_processes

    folder = instance_path()
    taken = _port_taken(args.port)
    if taken and not was_served(folder):     # before anything starts or is printed: no URL that is not ours
        return _refuse(_port_message(args.port, taken))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        lock = InstanceLock.acquire(folder)
    except InstanceBusy as err:
        return _refuse(str(err))
    os.environ["NKI_GRADER_HOME"] = str(folder)
    guardian = None
    parts = Started()
    journal = None
    try:
        lock.set_state("starting")
        left = stop_instance_processes(folder)
        signals.check()
        if left:
            print(f"grader serve: stopped what an earlier serve of this instance left running: {describe(left)}",
                  flush=True)
        taken = taken and _port_taken(args.port)
        if taken:
            return _refuse(_port_message(args.port, taken))
        for what, port in listened_ports(args):
            taken = _port_taken(port, args.listen)
            if taken:
                return _refuse(f"{what}'s port {port} on {args.listen} is in use by another program ({taken}); "
                               f"choose another with --{'db' if what == 'PostgreSQL' else 'redis'}-port, e.g. "
                               f"{_free_port_near(port, args.listen)}")
        logs = folder / "logs"
        logs.mkdir(exist_ok=True)
        journal = ServeLog(logs / "serve.log")
        journal.say(f"starting: instance {folder}, port {args.port}, log level {args.log_level}"
                    + "".join(f", {what} on {args.listen}:{port}" for what, port in listened_ports(args))
                    + (f"; {describe(left)} left by an earlier serve were stopped" if left else ""))
        os.environ[MARKER] = str(folder)          # every process started from here on carries it
        guardian = Guardian(folder, lock, logs / "guardian.log")
        signals.check()
        return _start_and_serve(args, signals, folder, lock, guardian, parts)
    finally:
        if journal is not None:
            why = signal.Signals(signals.requested).name if signals.requested else "a part ended or start-up failed"
            journal.say(f"stopping ({why}): the workers hand their grades under way back to the queue")
        started_stop = time.monotonic()
        parts.stop()
        stop_instance_processes(folder, exclude={guardian.process.pid} if guardian else set(),
                                parts_grace_s=5.0)      # whatever the orderly stop missed
        if guardian is not None:
            guardian.release()
        if journal is not None:
            journal.say(f"stopped in {time.monotonic() - started_stop:.1f} s")
        lock.release()
        if journal is not None or signals.requested:   # a refusal before the start said all there was
            print("grader serve: stopped", flush=True)


def _port_message(port: int, taken: str) -> str:
    return (f"port {port} on 127.0.0.1 is in use by another program ({taken}); "
            f"choose another with --port, e.g. `grader serve --port {_free_port_near(port)}`")


def _start_and_serve(args, signals: StopSignals, folder: Path, lock, guardian, parts: "Started") -> int:
    from store import session_scope, upgrade
    from store.db import start_embedded
    from store.instance import remember
    from web.bootstrap import first_admin_login_link
    from workers.broker import EmbeddedRedis
    from workers.answers import made_ahead
    from workers.capacity import sim_grades_at_once

    children: list[Child] = parts.children
    password = listen_password(folder) if args.listen else None
    host = _reachable_host(args.listen) if args.listen else None
    if not os.environ.get("DATABASE_URL"):
        parts.pg = start_embedded()
        signals.check()
        if args.listen:
            parts.pg.listen_on(args.listen, args.db_port, password)
            parts.remote["DATABASE_URL"] = parts.pg.tcp_url(host, args.db_port, password)
            signals.check()
        os.environ["DATABASE_URL"] = parts.pg.url
        print(f"PostgreSQL (embedded): {parts.pg.pgdata}"
              + (f", also on {args.listen}:{args.db_port}" if args.listen else ""))
    if not os.environ.get("REDIS_URL"):
        listen = (args.listen, args.redis_port) if args.listen else None
        parts.redis = EmbeddedRedis(folder / "redis", listen=listen, password=password).start()
        signals.check()
        if args.listen:
            parts.remote["REDIS_URL"] = parts.redis.tcp_url(host)
        os.environ["REDIS_URL"] = parts.redis.url
        print(f"Redis (embedded): {parts.redis.dir}"
              + (f", also on {args.listen}:{args.redis_port}" if args.listen else ""))
    upgrade()
    signals.check()
    if parts.pg is not None:
        remember(folder)
    python = sys.executable
    logs = folder / "logs"
    from workers.cli import root_note
    if os.geteuid() == 0:
        print(f"grader serve: {root_note()}")
    print(f"grader serve: starting the workers, beat and the web site; their output goes to {logs}/", flush=True)
    quiet = ["--quiet", "--loglevel", args.log_level, "--instance", str(folder)]     # no banners; lines in the logs
    sim = sim_grades_at_once(made_ahead()) if args.workers is None else args.workers
    grades_at_once = {**({Queue.SIM: sim} if sim else {}), Queue.NIGHTLY: 1, Queue.STAFF: 1}
    for queue, concurrency in grades_at_once.items():
        children.append(Child(f"{queue.value} worker", [python, "-m", "workers.cli", "worker", "--queue", queue,
                                                        *quiet, "--concurrency", str(concurrency)],
                              logs / f"worker-{queue.value}.log"))
        signals.check()
    children.append(Child("beat", [python, "-m", "workers.cli", "beat", *quiet], logs / "beat.log"))
    signals.check()
    base_url = f"http://127.0.0.1:{args.port}"
    # every request at INFO (gunicorn's access log, on its stdout: web.log)
    access = ["--access-logfile", "-"] if args.log_level in ("DEBUG", "INFO") else []
    web = Child("web", [python, "-m", "gunicorn", "--bind", f"127.0.0.1:{args.port}", "--workers", "2",
                        "--threads", "4", "--log-level", args.log_level.lower(), *access, "--control-socket",
                        _control_socket(), "web:create_app()"], logs / "web.log")
    children.append(web)
    signals.check()
    if not _wait_http(base_url + "/", web, signals.check):
        print(f"grader serve: the web site did not come up; the end of {web.log}:\n{web.last_lines()}",
              file=sys.stderr)
        return 1
    with session_scope() as s:
        link = first_admin_login_link(s, base_url)
    lock.set_state("serving", base_url)
    ServeLog(logs / "serve.log").say(f"serving at {base_url}: {', '.join(c.name for c in children)}")
    remote = {name: parts.remote.get(name) or os.environ[name] for name in ("DATABASE_URL", "REDIS_URL")}
    print(_summary(base_url, link, parts.pg, logs, children)
          + (_remote_block(folder, remote) if args.listen else ""), flush=True)
    while True:
        time.sleep(0.5)
        signals.check()
        dead = [c for c in children if not c.alive()]
        if dead:
            print(f"grader serve: the {dead[0].name} exited with status {dead[0].process.returncode}; "
                  f"stopping everything. The end of {dead[0].log}:\n{dead[0].last_lines()}", file=sys.stderr)
            return 1
        if not guardian.alive():
            print(f"grader serve: its guardian (which stops everything if serve is killed) exited with status "
                  f"{guardian.process.returncode}; stopping everything. See {logs / 'guardian.log'}", file=sys.stderr)
            return 1


@dataclasses.dataclass
class Started:
    """What serve has started so far, stopped in order: the children first (each its whole
    process group), then Redis and PostgreSQL."""
    pg: object = None
    redis: object = None
    children: list = dataclasses.field(default_factory=list)
    remote: dict = dataclasses.field(default_factory=dict)     # --listen: the URLs other machines use

    def stop(self) -> None:
        for child in self.children:
            child.stop()
        deadline = time.monotonic() + STOP_GRACE_S
        for child in self.children:
            child.reap(deadline)
        if self.redis is not None:
            self.redis.stop()
        if self.pg is not None:
            self.pg.stop()
