"""Which running service a command talks to.

`grader serve` (and a standalone worker or beat) makes an instance: a folder holding the embedded
PostgreSQL and Redis, `$NKI_GRADER_HOME` or ./instance. The commands that only talk to a service
(`grader queue`, `grader submit` without --server, `grader nightly`) must find that instance, not
make a new empty one wherever they happen to be run. They look, in order, at:

1. `DATABASE_URL` (an external database: that is the instance),
2. `$NKI_GRADER_HOME`,
3. the instance the last `grader serve` on this account recorded (`~/.config/nki-grader/last-instance`),
4. `./instance`,

and take the first that holds a database; if none does, they refuse with how to point at one.

While `grader serve` runs it holds an exclusive lock on <instance>/serve.lock (InstanceLock), whose
text says who holds it (serve_holder): a client command finds out from the lock, not from a
database that may still answer after its serve died, whether anything serves the instance.
`grader backup`, `restore` and `migrate` hold the same lock while they work on an instance no
serve runs, so a serve does not start under them."""
from __future__ import annotations

import fcntl
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

POINTER_NAME = "last-instance"
LOCK_NAME = "serve.lock"
LEFTOVER_WAIT_S = 60.0          # for a guardian still stopping a dead serve's processes, or a backup finishing
SERVING = ("starting", "serving")      # the holder states of a live `grader serve`
# who holds the lock in each other state (the commands that work on an instance no serve runs)
HOLDER_NAMES = {"stopping": "the guardian of a `grader serve` that ended", "backing up": "`grader backup`",
                "restoring": "`grader restore`", "migrating": "`grader migrate`"}


class NoInstanceError(RuntimeError):
    """No running service could be found; `str()` says where we looked and how to point at one."""


@dataclass(frozen=True)
class Instance:
    folder: Path | None          # None: an external DATABASE_URL
    found_by: str                # how it was chosen, said to the user

    def describe(self) -> str:
        if self.folder is None:
            url = make_url(os.environ["DATABASE_URL"])
            return f"the service whose database is {url.render_as_string(hide_password=True)} ({self.found_by})"
        return f"the instance at {self.folder} ({self.found_by})"


def pointer_file() -> Path:
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "nki-grader" / POINTER_NAME


def holds_database(folder: Path) -> bool:
    return (folder / "pgdata" / "PG_VERSION").is_file()


def remember(folder: Path) -> None:
    """Called by `grader serve`: later commands in other terminals find this instance."""
    target = pointer_file()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        tmp.write_text(str(Path(folder).resolve()) + "\n")
        tmp.replace(target)
    except OSError:
        pass        # a read-only home: commands still find it through NKI_GRADER_HOME or ./instance


def _recorded() -> Path | None:
    try:
        text = pointer_file().read_text().strip()
    except OSError:
        return None
    return Path(text) if text else None


def find_existing() -> Instance:
    """The instance a client command talks to; never creates one."""
    if os.environ.get("DATABASE_URL"):
        return Instance(None, "DATABASE_URL")
    looked: list[str] = []
    home = os.environ.get("NKI_GRADER_HOME")
    if home:
        folder = Path(home).resolve()
        if holds_database(folder):
            return Instance(folder, "NKI_GRADER_HOME")
        raise NoInstanceError(
            f"NKI_GRADER_HOME={home} holds no nki-grader database (no {folder / 'pgdata'}); "
            f"point it at the folder `grader serve` printed, or start the service there with "
            f"`NKI_GRADER_HOME={home} grader serve`")
    recorded = _recorded()
    if recorded is not None:
        if holds_database(recorded):
            return Instance(recorded, f"recorded by the last `grader serve` in {pointer_file()}")
        looked.append(f"{recorded} (recorded in {pointer_file()}, no database there now)")
    here = Path("instance").resolve()
    if holds_database(here):
        return Instance(here, "./instance")
    looked.append(f"{here}")
    raise NoInstanceError(
        "no nki-grader service found (looked at " + "; ".join(looked) + "). Start one with "
        "`grader serve`, or point this command at a running one: set NKI_GRADER_HOME to the folder "
        "`grader serve` printed, or DATABASE_URL (and REDIS_URL) for an external deployment, or "
        "use `grader submit --server URL` for a site")


def use_existing() -> Instance:
    """Find the instance and make this process's store and broker use it."""
    found = find_existing()
    if found.folder is not None:
        os.environ["NKI_GRADER_HOME"] = str(found.folder)
    return found


@dataclass(frozen=True)
class ServeHolder:
    """Who holds an instance's lock: a serve starting or serving, or its guardian stopping what a
    serve that died left running."""
    pid: int
    state: str                   # "starting", "serving", "stopping"; "" when the text is unreadable
    url: str = ""


def lock_file(folder: Path) -> Path:
    return Path(folder) / LOCK_NAME


def read_holder(fd: int) -> ServeHolder:
    try:
        data = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
        return ServeHolder(int(data["pid"]), str(data["state"]), str(data.get("url", "")))
    except (ValueError, KeyError, TypeError, OSError):
        return ServeHolder(0, "")           # a holder in the middle of writing its text


def serve_holder(folder: Path) -> ServeHolder | None:
    """The holder of the instance's serve lock now, or None when no serve (nor its guardian) runs."""
    try:
        fd = os.open(lock_file(folder), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return read_holder(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def was_served(folder: Path) -> bool:
    """Whether `grader serve` ever ran this instance (a standalone worker's instance has no lock)."""
    return lock_file(folder).exists()


def database_left_running(folder: Path) -> int | None:
    """The pid of the instance's embedded PostgreSQL if it still runs (postmaster.pid names it)."""
    try:
        pid = int((Path(folder) / "pgdata" / "postmaster.pid").read_text().split()[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return None
    return pid


def not_served_reason(found: Instance) -> str:
    """'' when a serve runs the instance (or it is not one `grader serve` runs); else why a client
    command must not talk to it, and how to start it."""
    if found.folder is None or not was_served(found.folder) or serve_holder(found.folder) is not None:
        return ""
    left = database_left_running(found.folder)
    leftover = (f"; its database is still running (PostgreSQL pid {left}), left by a serve that did not stop "
                f"cleanly, and would take runs no worker serves" if left else "")
    return (f"found {found.describe()}, but its `grader serve` is not running{leftover}. Start it with "
            f"`NKI_GRADER_HOME={found.folder} grader serve` (it stops any leftovers first), or point this "
            f"command at another instance with NKI_GRADER_HOME")


class InstanceBusy(RuntimeError):
    """Another live process holds the instance: a `grader serve`, or a backup, restore or migrate."""

    def __init__(self, folder: Path, holder: ServeHolder) -> None:
        self.folder, self.holder = folder, holder
        at = f" at {holder.url}" if holder.url else ""
        doing = f"is {holder.state}" if holder.state else "holds"
        if holder.state in HOLDER_NAMES:
            message = (f"{HOLDER_NAMES[holder.state]} (pid {holder.pid}) {doing} this instance ({folder}); "
                       f"wait for it to finish, then try again")
        else:
            message = (f"another `grader serve` (pid {holder.pid}) {doing} this instance ({folder}){at}. Stop it "
                       f"first (Ctrl-C in its terminal, or `kill {holder.pid}`), or serve another instance: "
                       f"NKI_GRADER_HOME=<another folder> grader serve")
        super().__init__(message)

    @property
    def served(self) -> bool:
        return self.holder.state in SERVING


class InstanceLock:
    """The exclusive lock on <instance>/serve.lock, held for the life of the descriptor (which
    the guardian inherits: the lock is free only once both have ended). `grader serve` holds it
    while it runs; backup, restore and migrate hold it while they work on an instance no serve runs."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    @classmethod
    def acquire(cls, folder: Path, wait_s: float = LEFTOVER_WAIT_S, say=print) -> "InstanceLock":
        import psutil
        fd = os.open(lock_file(folder), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        deadline = time.monotonic() + wait_s
        said = False
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return cls(fd)
                except BlockingIOError:
                    pass
                holder = read_holder(fd)
                if holder.state in SERVING and psutil.pid_exists(holder.pid):
                    raise InstanceBusy(folder, holder)
                # a guardian stopping a dead serve's processes, a backup, a client looking, or a holder writing
                if holder.state in HOLDER_NAMES and not said:
                    say(f"grader serve: waiting for a serve of this instance that ended to finish stopping "
                        f"its processes (pid {holder.pid})" if holder.state == "stopping" else
                        f"grader: waiting for {HOLDER_NAMES[holder.state]} (pid {holder.pid}) to finish with "
                        f"this instance")
                    said = True
                if time.monotonic() > deadline:
                    raise InstanceBusy(folder, holder)
                time.sleep(0.1)
        except BaseException:
            os.close(fd)
            raise

    def set_state(self, state: str, url: str = "") -> None:
        text = json.dumps({"pid": os.getpid(), "state": state, "url": url}).encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, text, 0)

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> "InstanceLock":
        return self

    def __exit__(self, *_) -> None:
        self.release()
