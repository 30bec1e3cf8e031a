"""A fork server for sandboxed children: `python -I -m grader.zygote FD PARENT [MODULE ...]`, and the
grader's end of it (`ZYGOTE.spawn`, used by grader.sandbox).

Starting a fresh Python and importing NumPy and nkisim costs about 0.45 s of CPU (bench/startup.py), paid by every
configuration the grader runs: most of the sandbox's overhead. The zygote pays it once. It
imports the named modules (never student code), then waits on the control socket FD for job
requests, each a JSON message {module, cwd, env} with four descriptors: a reply socket and
the write ends of the job's stdout, stderr and result pipes; and for a trusted job up to two more,
the memory it shares with the grader (grader.sharedmem; the job gets them as fds 4 and 5, listed in
GRADER_SHARED_FD).

For every request it forks a monitor, which forks the job process and reports on the reply
socket the job's pid, then its exit code (as `subprocess` gives it: negative for a signal) and
the CPU seconds the job cost (user + system: the job's, with every process it waited for, and
the monitor's own, which exists only for the job).
The job process starts a session of its own, takes the pipes as fds 1, 2 and 3, closes every
other descriptor, replaces its environment with the job's and runs the module as __main__,
exactly as `python -I -m MODULE` would; grader.child confines itself first thing as always.

The zygote holds no secrets: the grader starts it with the minimal child environment and
sends it nothing but paths and that environment. Nothing it starts outlives the grader: it
exits when the grader (process PARENT, watched through a pidfd) exits or closes the control
socket; each monitor has a parent-death signal (SIGKILL) tied to the zygote, and each job one
tied to its monitor, so the chain falls with the grader (grader.sandbox.enter then has the
job kill its PID namespace and remove its job directory).
"""
from __future__ import annotations

import atexit
import ctypes
import fcntl
import gc
import importlib
import json
import os
import resource
import runpy
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time

CLONE_NEWPID = 0x20000000
RESULT_FD = 3
SHARED_FD = 4            # a job's first shared descriptor, when it has any (the executor's, grader.sharedmem)
MAX_SHARED = 2
MAX_REQUEST = 1 << 20
PR_SET_PDEATHSIG = 1

_libc = ctypes.CDLL(None, use_errno=True)


def set_parent_death_signal(sig: int, parent: int) -> bool:
    """Have the kernel send `sig` to this process when its parent exits; False when the
    parent (pid `parent`) is already gone, the race a later prctl cannot see."""
    _libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    return os.getppid() == parent


def writer_gone(alive: int) -> bool:
    """Has every writer of the pipe `alive` exited? The check a PID namespace's first process
    makes after its prctl, instead of getppid(), which says 0 there whether its parent (outside
    the namespace) lives or not. Closes `alive`."""
    os.set_blocking(alive, False)
    try:
        return os.read(alive, 1) == b""          # EOF: no writer left
    except BlockingIOError:
        return False
    finally:
        os.close(alive)


# ----- the grader's end ---------------------------------------------------------------------

def _read_line(sock: socket.socket, buffer: bytes, deadline: float | None) -> tuple[bytes | None, bytes]:
    """The next line from a monitor's reply socket and what follows it; (None, ...) when the
    monitor closed it first. Raises socket.timeout at the deadline (time.monotonic)."""
    while b"\n" not in buffer:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise socket.timeout
        sock.settimeout(left)
        chunk = sock.recv(64)
        if not chunk:
            return None, buffer
        buffer += chunk
    line, rest = buffer.split(b"\n", 1)
    return line, rest


class _ZygoteChild:
    """A job process the zygote forked: its pid, and its exit code from the monitor's report."""

    def __init__(self, pid: int, reply: socket.socket, pending: bytes) -> None:
        self.pid, self._reply, self._buffer = pid, reply, pending
        self.returncode: int | None = None
        self.cpu_seconds: float | None = None      # user + system, once it has ended

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is not None:
            return self.returncode
        try:
            line, self._buffer = _read_line(self._reply, self._buffer,
                                            None if timeout is None else time.monotonic() + timeout)
        except socket.timeout:
            raise subprocess.TimeoutExpired("job", timeout) from None
        # a monitor gone without a word: count the job killed
        code, _, cpu = (line or b"").partition(b" ")
        self.returncode = -signal.SIGKILL if line is None else int(code)
        self.cpu_seconds = float(cpu) if cpu else None
        self._reply.close()
        return self.returncode


class Zygote:
    """The grader's end of grader.zygote: started on first use in each process (a prefork
    worker gets its own), restarted if it died; None from spawn means use a fresh process."""

    # everything either child imports before its work: an import left to the job costs every
    # configuration again (grader.sandbox alone ~25 ms, ctypes.util asking ldconfig for libc)
    PRELOAD = ("numpy", "ml_dtypes", "threadpoolctl", "nkisim", "nkisim.nki", "nkisim.nki06", "nkisim.execute",
               "nkisim.program", "nkisim.platforms", "nkisim.runtime", "nkisim.split", "nkisim.cost",
               "nkisim.cost.profile", "grader.sandbox", "grader.jobs", "grader.wire", "grader.dialect", "grader.child",
               "grader.executor")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._control: socket.socket | None = None
        self._proc: subprocess.Popen | None = None
        self._owner = 0

    def _start(self) -> None:
        from . import sandbox          # not at import: sandbox imports this module
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-m", "grader.zygote", str(theirs.fileno()), str(os.getpid()), *self.PRELOAD],
                env=sandbox.minimal_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, pass_fds=(theirs.fileno(),), start_new_session=True)
        self._control, self._owner = ours, os.getpid()

    def _ensure(self, fresh: bool = False) -> socket.socket:
        """The control socket of a running zygote (a new one if `fresh` or none is alive)."""
        with self._lock:
            if fresh or not self._alive():
                self.stop()
                self._start()
            return self._control

    def warm(self) -> None:
        """Start the zygote now, so its imports overlap the grader's own preparations."""
        self._ensure()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._alive() else None

    def _alive(self) -> bool:
        return self._owner == os.getpid() and self._proc is not None and self._proc.poll() is None

    def spawn(self, module: str, workdir: str, env: dict[str, str], fds: tuple[int, ...]) -> _ZygoteChild | None:
        """Start `module` as a job: `fds` are its stdout, stderr and result pipes, and optionally
        up to MAX_SHARED shared descriptors (the job gets them from fd 4 on, listed in GRADER_SHARED_FD)."""
        message = json.dumps({"module": module, "cwd": workdir, "env": env}).encode()
        for attempt in (1, 2):                  # again with a new zygote if this one just died
            child = self._request(self._ensure(fresh=attempt == 2), message, fds)
            if child is not None:
                return child
        return None

    @staticmethod
    def _request(control: socket.socket, message: bytes, fds: tuple[int, ...]) -> _ZygoteChild | None:
        """Send one job; the monitor's first line is the job's pid. None if nothing answers."""
        reply, theirs = socket.socketpair()
        with theirs:
            try:
                socket.send_fds(control, [message], [theirs.fileno(), *fds])
            except OSError:
                reply.close()
                return None
        try:
            line, rest = _read_line(reply, b"", time.monotonic() + 10.0)
        except OSError:                         # socket.timeout included
            line, rest = None, b""
        if line is None:
            reply.close()
            return None
        return _ZygoteChild(int(line), reply, rest)

    def stop(self) -> None:
        if self._owner == os.getpid():
            if self._control is not None:
                self._control.close()       # the zygote exits when its socket closes
            if self._proc is not None:
                try:
                    self._proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
        self._control = self._proc = None


ZYGOTE = Zygote()
atexit.register(ZYGOTE.stop)



# ----- the server's end ---------------------------------------------------------------------

def _become_job(job: dict, out: int, err: int, result: int, monitor: int, shared: tuple[int, ...] = (),
                alive: int | None = None) -> None:
    """In the forked job process: never returns. `alive`: the read end of a pipe the monitor
    holds open, when the job is the first process of a PID namespace the monitor made (its
    parent is outside it, so getppid() says 0 whether the monitor lives or not)."""
    try:
        if not set_parent_death_signal(signal.SIGKILL, 0 if alive is not None else monitor):
            os._exit(128 + signal.SIGKILL)
        if alive is not None and writer_gone(alive):         # the monitor died before the prctl
            os._exit(128 + signal.SIGKILL)
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.dup2(result, RESULT_FD)
        # moved above every target number first: one of them may be another's source
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, SHARED_FD + MAX_SHARED) for fd in shared]
        for number, fd in enumerate(high, SHARED_FD):
            os.dup2(fd, number)
        os.closerange(RESULT_FD + len(shared) + 1, os.sysconf("SC_OPEN_MAX"))
        os.chdir(job["cwd"])
        os.environ.clear()
        os.environ.update(job["env"])
        os.environ["GRADER_RESULT_FD"] = str(RESULT_FD)
        os.environ["GRADER_PARENT_PID"] = str(monitor)
        if shared:
            os.environ["GRADER_SHARED_FD"] = ",".join(str(SHARED_FD + i) for i in range(len(shared)))
        sys.argv = [job["module"]]
        # a fresh copy runs as __main__, as under -m; its imports stay preloaded
        sys.modules.pop(job["module"], None)
        runpy.run_module(job["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    except BaseException:       # noqa: BLE001 - reported on the job's own stderr, like a crash
        import traceback
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _own_pid_namespace(job: dict) -> dict | None:
    """Make the job's PID namespace here, so that the job itself is its first process: without
    this the job makes it and forks once more (grader.sandbox._reap_namespace), and every page
    that fork's child touches is copied again (~6 ms of CPU per job). Only as root, where no
    user namespace has to come first. Returns the job's confinement, rewritten to say the
    namespace is made, or None (the job makes its own)."""
    raw = job["env"].get("GRADER_SANDBOX")
    if raw is None or os.geteuid() != 0:
        return None
    conf = json.loads(raw)
    if not conf.get("flags", 0) & CLONE_NEWPID or _libc.unshare(CLONE_NEWPID) != 0:
        return None
    conf["flags"] &= ~CLONE_NEWPID
    conf["pid_namespace_made"] = True
    job["env"]["GRADER_SANDBOX"] = json.dumps(conf)
    return conf


def _monitor(job: dict, fds: list[int], zygote: int) -> None:
    """In the forked monitor: start the job, report its pid and exit code. Never returns."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        reply, out, err, result, *shared = fds
        monitor = os.getpid()
        conf = _own_pid_namespace(job)
        alive_r = alive_w = None
        if conf is not None:
            alive_r, alive_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(reply)
            if alive_w is not None:
                os.close(alive_w)
            _become_job(job, out, err, result, monitor, tuple(shared), alive_r)
        if conf is not None:
            os.close(alive_r)
            _clean_up_if_orphaned(pid, dict(conf, job=job["cwd"]), zygote)
        for fd in (out, err, result, *shared):
            os.close(fd)
        os.write(reply, f"{pid}\n".encode())
        _, status, usage = os.wait4(pid, 0)     # the job's CPU time, its namespace's processes included
        own = resource.getrusage(resource.RUSAGE_SELF)      # this fork's: it starts at zero
        cpu = usage.ru_utime + usage.ru_stime + own.ru_utime + own.ru_stime
        os.write(reply, f"{os.waitstatus_to_exitcode(status)} {cpu:.6f}\n".encode())
    finally:
        os._exit(0)


def _clean_up_if_orphaned(pid: int, conf: dict, zygote: int) -> None:
    """The monitor of a job whose PID namespace it made stands in for the reaper the job would
    have had: should the zygote die (the grader gone), it kills the namespace and removes the
    job directory and cgroups, as the grader would have."""
    def orphaned(*_):
        from grader.sandbox import end_namespace
        end_namespace(pid, conf)
        os._exit(0)

    signal.signal(signal.SIGTERM, orphaned)
    if not set_parent_death_signal(signal.SIGTERM, zygote):
        orphaned()


def _watch(parent: int) -> int | None:
    """A pidfd that becomes readable when the grader exits (None where pidfds are missing)."""
    try:
        fd = os.pidfd_open(parent)
    except (OSError, AttributeError):
        return None
    if os.getppid() != parent:          # it died before the pidfd was opened
        os._exit(0)
    return fd


def serve(control: socket.socket, parent: int) -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)      # monitors are reaped by the kernel
    zygote = os.getpid()
    events = selectors.DefaultSelector()
    events.register(control, selectors.EVENT_READ)
    grader = _watch(parent)
    if grader is not None:
        events.register(grader, selectors.EVENT_READ)
    while True:
        if any(key.fileobj == grader for key, _ in events.select()):
            return                                      # the grader is gone
        try:
            message, fds, _, _ = socket.recv_fds(control, MAX_REQUEST, 4 + MAX_SHARED)
        except (OSError, InterruptedError):
            return
        if not message:
            return                                      # the grader closed the socket
        if not 4 <= len(fds) <= 4 + MAX_SHARED:
            for fd in fds:
                os.close(fd)
            continue
        job = json.loads(message)
        if os.fork() == 0:
            if not set_parent_death_signal(signal.SIGKILL, zygote):
                os._exit(0)
            control.close()
            _monitor(job, fds, zygote)
        for fd in fds:
            os.close(fd)


def main() -> None:
    control = socket.socket(fileno=int(sys.argv[1]))
    parent = int(sys.argv[2])
    for name in sys.argv[3:]:
        try:
            importlib.import_module(name)
        except Exception:       # noqa: BLE001 - a job that needs it will import it and fail there
            pass
    jobs = sys.modules.get("grader.jobs")
    if jobs is not None:
        try:
            jobs.blas_controller()      # the BLAS libraries found once, not by every job
        except Exception:       # noqa: BLE001 - each job finds them itself then
            pass
    gc.freeze()         # the preloaded objects stay out of every collection: forks share their pages
    serve(control, parent)


if __name__ == "__main__":
    main()
