"""A fork server for sandboxed children: `python -I -m grader.zygote FD [MODULE ...]`.

Starting a fresh Python and importing NumPy and nkisim costs about 0.15 s, paid by every
configuration the grader runs: most of the sandbox's overhead. The zygote pays it once. It
imports the named modules (never student code), then waits on the control socket FD for job
requests, each a JSON message {module, cwd, env} with four descriptors: a reply socket and
the write ends of the job's stdout, stderr and result pipes.

For every request it forks a monitor, which forks the job process and reports on the reply
socket the job's pid, then its exit code (as `subprocess` gives it: negative for a signal).
The job process starts a session of its own, takes the pipes as fds 1, 2 and 3, closes every
other descriptor, replaces its environment with the job's and runs the module as __main__,
exactly as `python -I -m MODULE` would; grader.child confines itself first thing as always.

The zygote holds no secrets: the grader starts it with the minimal child environment and
sends it nothing but paths and that environment. It exits when the control socket closes,
which the kernel does when the grader exits.
"""
from __future__ import annotations

import importlib
import json
import os
import runpy
import signal
import socket
import sys

RESULT_FD = 3
MAX_REQUEST = 1 << 20


def _become_job(job: dict, out: int, err: int, result: int) -> None:
    """In the forked job process: never returns."""
    try:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.dup2(result, RESULT_FD)
        os.closerange(RESULT_FD + 1, os.sysconf("SC_OPEN_MAX"))
        os.chdir(job["cwd"])
        os.environ.clear()
        os.environ.update(job["env"])
        os.environ["GRADER_RESULT_FD"] = str(RESULT_FD)
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


def _monitor(job: dict, fds: list[int]) -> None:
    """In the forked monitor: start the job, report its pid and exit code. Never returns."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        reply, out, err, result = fds
        pid = os.fork()
        if pid == 0:
            os.close(reply)
            _become_job(job, out, err, result)
        for fd in (out, err, result):
            os.close(fd)
        os.write(reply, f"{pid}\n".encode())
        _, status = os.waitpid(pid, 0)
        os.write(reply, f"{os.waitstatus_to_exitcode(status)}\n".encode())
    finally:
        os._exit(0)


def serve(control: socket.socket) -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)      # monitors are reaped by the kernel
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, MAX_REQUEST, 4)
        except (OSError, InterruptedError):
            return
        if not message:
            return                                      # the grader closed the socket
        if len(fds) != 4:
            for fd in fds:
                os.close(fd)
            continue
        job = json.loads(message)
        if os.fork() == 0:
            control.close()
            _monitor(job, fds)
        for fd in fds:
            os.close(fd)


def main() -> None:
    control = socket.socket(fileno=int(sys.argv[1]))
    for name in sys.argv[2:]:
        try:
            importlib.import_module(name)
        except Exception:       # noqa: BLE001 - a job that needs it will import it and fail there
            pass
    serve(control)


if __name__ == "__main__":
    main()
