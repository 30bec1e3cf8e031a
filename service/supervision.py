"""What `grader serve` does so that nothing of its instance outlives it, however it ends.

* The instance lock (store.instance.InstanceLock): serve holds an exclusive flock on
  <instance>/serve.lock while it runs, its text saying who holds it and in which state
  (store.instance.serve_holder reads it; `grader backup`, `restore` and `migrate` take it too). A second
  serve of the same instance is refused plainly; client commands refuse an instance no serve holds.
* The mark: serve puts MARKER=<instance folder> in its environment before it starts anything, so
  every process it starts, and theirs, carries it (PostgreSQL overwrites its environment block
  with its process titles, so its processes are found by their working directory, the data
  folder, instead).
* The guardian (service/guardian.py): a process in a session of its own that waits for serve's
  end on a pipe only serve holds, then stops whatever of the instance still runs, holding the
  lock until it is done: a serve killed with SIGKILL leaves nothing for long.
* Leftovers: a serve that gets the lock first stops what a dead serve (and a dead guardian) of
  the instance left, and says so in one line.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from store.instance import InstanceBusy, InstanceLock, LEFTOVER_WAIT_S  # noqa: F401 (serve and the guardian take them from here)

MARKER = "NKI_GRADER_SERVED_INSTANCE"
PARTS_GRACE_S = 8.0             # SIGTERM to SIGKILL, for the workers, beat and web site of a dead serve
SERVER_GRACE_S = 5.0            # the same for Redis and PostgreSQL, after their fast shutdown signal


# ----- the processes of an instance ----------------------------------------------------------------

@dataclass
class Found:
    parts: list[psutil.Process]        # workers, beat, the web site and whatever they started
    redis: list[psutil.Process]
    postgres: list[psutil.Process]

    def __bool__(self) -> bool:
        return bool(self.parts or self.redis or self.postgres)

    def everything(self) -> list[psutil.Process]:
        return self.parts + self.redis + self.postgres


def instance_processes(folder: Path, exclude: set[int] = frozenset()) -> Found:
    """Every process of the instance now running but those in `exclude` (and this one)."""
    folder = Path(folder).resolve()
    mark, pgdata, redis_dir = str(folder), str(folder / "pgdata"), str(folder / "redis")
    found = Found([], [], [])
    skip = set(exclude) | {os.getpid()}
    for proc in psutil.process_iter(["name"]):
        if proc.pid in skip:
            continue
        try:
            name = proc.info["name"] or ""
            if name.startswith("postgres") and proc.cwd() == pgdata:
                found.postgres.append(proc)
            elif name.startswith("redis") and proc.cwd() == redis_dir:
                found.redis.append(proc)
            elif proc.environ().get(MARKER) == mark:
                (found.postgres if name.startswith("postgres") else
                 found.redis if name.startswith("redis") else found.parts).append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def _signal(procs: list[psutil.Process], sig: int) -> None:
    for proc in procs:
        try:
            proc.send_signal(sig)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass


def _end(procs: list[psutil.Process], first: int, grace_s: float, only_roots: bool = False) -> None:
    """Send `first` (to the processes none of the others started, when `only_roots`: a Celery
    worker ends its own pool), wait up to `grace_s`, then SIGKILL what is left and reap it."""
    if not procs:
        return
    pids = {p.pid for p in procs}
    roots = [p for p in procs if not only_roots or _parent(p) not in pids]
    _signal(roots, first)
    alive = _wait_ended(procs, grace_s)
    _signal(alive, signal.SIGKILL)
    _wait_ended(alive, 5.0)


def has_ended(proc: psutil.Process) -> bool:
    """Gone, or a zombie: its parent is dead, and whoever adopted it may reap it late."""
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_ended(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Those of `procs` still running after up to `timeout` seconds (looked at every 50 ms)."""
    deadline = time.monotonic() + timeout
    alive = [p for p in procs if not has_ended(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if not has_ended(p)]
    return alive


def _parent(proc: psutil.Process) -> int | None:
    try:
        return proc.ppid()
    except psutil.Error:
        return None


def _postmaster(folder: Path, postgres: list[psutil.Process]) -> list[psutil.Process]:
    try:
        pid = int((folder / "pgdata" / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return []
    return [p for p in postgres if p.pid == pid]


def stop_instance_processes(folder: Path, exclude: set[int] = frozenset(), parts_grace_s: float = PARTS_GRACE_S,
                            rounds: int = 3) -> Found:
    """Stop every process of the instance: its parts first, then Redis, then PostgreSQL (a fast
    shutdown from its postmaster, so its data stays whole), each SIGKILLed after its grace. Looks
    again after each round, as a dying part may start another; returns what the first look found."""
    folder = Path(folder).resolve()
    first = None
    for _ in range(rounds):
        found = instance_processes(folder, exclude)
        first = first or found
        if not found:
            break
        _end(found.parts, signal.SIGTERM, parts_grace_s, only_roots=True)
        _end(found.redis, signal.SIGTERM, SERVER_GRACE_S)
        master = _postmaster(folder, found.postgres)
        if master:
            _end(master, signal.SIGINT, SERVER_GRACE_S)          # fast shutdown: ends its backends too
        _end([p for p in found.postgres if not has_ended(p)], signal.SIGQUIT, SERVER_GRACE_S)
    return first or Found([], [], [])


def working_in(folder: Path) -> list[psutil.Process]:
    """Every process but this one whose working directory is `folder` or below it."""
    folder = str(Path(folder).resolve())
    found = []
    for proc in psutil.process_iter():
        try:
            cwd = proc.cwd()
        except psutil.Error:
            continue
        if proc.pid != os.getpid() and (cwd == folder or cwd.startswith(folder + os.sep)):
            found.append(proc)
    return found


def stop_servers_working_in(folder: Path, grace_s: float = SERVER_GRACE_S) -> list[psutil.Process]:
    """Stop the PostgreSQL and Redis servers (and whatever else) working in `folder`, not of a
    serve instance's layout: each postmaster with its fast shutdown (it ends its backends), the
    rest with SIGTERM, each SIGKILLed after `grace_s`. Returns what it found."""
    found = working_in(folder)
    postgres = [p for p in found if _name(p).startswith("postgres")]
    _end([p for p in found if p not in postgres], signal.SIGTERM, grace_s)
    _end(postgres, signal.SIGINT, grace_s, only_roots=True)
    return found


def _name(proc: psutil.Process) -> str:
    try:
        return proc.name()
    except psutil.Error:
        return ""


def describe(found: Found) -> str:
    names = (["PostgreSQL"] if found.postgres else []) + (["Redis"] if found.redis else [])
    if found.parts:
        names.append(f"{len(found.parts)} worker, beat or web site process{'es' if len(found.parts) > 1 else ''}")
    total = len(found.everything())
    return ", ".join(names) + f" ({total} process{'es' if total > 1 else ''})"


def die_with_serve() -> None:
    """preexec_fn of serve's children: SIGTERM when serve's main thread ends (Linux's parent-death
    signal), a second line behind the guardian should both be killed at once."""
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))


PR_SET_PDEATHSIG = 1


# ----- the guardian --------------------------------------------------------------------------------

class Guardian:
    """The process that stops the instance's processes once serve has ended (service/guardian.py)."""

    def __init__(self, folder: Path, lock: InstanceLock, log: Path) -> None:
        read, self._write = os.pipe()
        try:
            with log.open("ab") as out:
                self.process = subprocess.Popen(
                    [sys.executable, "-m", "service.guardian", str(folder), str(lock.fd)], stdin=read,
                    stdout=out, stderr=subprocess.STDOUT, pass_fds=(lock.fd,), start_new_session=True)
        finally:
            os.close(read)

    def alive(self) -> bool:
        return self.process.poll() is None

    def release(self, timeout: float = 60.0) -> None:
        """Serve is done: the guardian looks once more, finds nothing, and ends."""
        if self._write >= 0:
            os.close(self._write)
            self._write = -1
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
