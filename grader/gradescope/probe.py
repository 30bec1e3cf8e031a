"""`python -I -m grader.gradescope.probe`: started through the real sandbox (sandbox.run_child)
before a Gradescope grade, to see what a student's process could reach there. It tries to read
the secret files it is told of and the autograder's private entries, to create a file in the
results folder, to read the grader's environment and memory, and to open a network socket, and
sends back what worked. It also leaves behind what a hostile kernel would: a grandchild in a
session of its own (named as job.json says, so the grader can look for it once the job is over)
and files in /tmp and /dev/shm. It holds nothing secret: job.json names paths only."""
from __future__ import annotations

import json
import os


def _readable(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            fh.read(1)
        return True
    except OSError:
        return False


def _openable(path: str) -> bool:
    try:
        os.close(os.open(path, os.O_RDONLY))
        return True
    except OSError:
        return False


def _writable_dir(path: str) -> bool:
    target = os.path.join(path, f".nki-probe-{os.getpid()}")
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return False
    os.close(fd)
    try:
        os.unlink(target)
    except OSError:
        pass
    return True


def _writable_file(path: str) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    except OSError:
        return False
    os.close(fd)
    return True


def _reachable(path: str) -> bool:
    """Could this process read the entry, or go into it (a directory)?"""
    return os.access(path, os.R_OK) or (os.path.isdir(path) and os.access(path, os.X_OK))


def _leave_behind(name: str) -> list[str]:
    """Fork, setsid and fork: a grandchild called `name`, out of the job's process group, that
    sleeps (for two minutes at most); and files in /tmp and /dev/shm. The paths it made."""
    import ctypes
    import time
    made = []
    for where in ("/tmp", "/dev/shm"):
        try:
            os.mkdir(f"{where}/{name}")
            with open(f"{where}/{name}/file", "w") as fh:
                fh.write("left behind")
            made.append(f"{where}/{name}")
        except OSError:
            pass            # not there for this process (the package view has no /dev/shm)
    ready_r, ready_w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            ctypes.CDLL(None).prctl(15, name.encode(), 0, 0, 0)      # PR_SET_NAME
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.write(ready_w, b"x")
            os.closerange(3, 1024)          # the job's pipes among them: the grader waits for no one
            time.sleep(120)
        os._exit(0)
    os.close(ready_w)
    os.read(ready_r, 1)
    os.close(ready_r)
    return made


def _inet_socket() -> bool:
    import socket
    try:
        socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
        return True
    except OSError:
        return False


def run(job: dict) -> tuple[dict, bytes]:
    pid = int(job["grader_pid"])
    results = job["results_dir"]
    found = {
        "uid": os.getuid(),
        "secrets_readable": [p for p in job["secrets"] if _readable(p)],
        "private_reachable": [p for p in job.get("private", []) if _reachable(p)],
        "results_writable": _writable_dir(results) or _writable_file(os.path.join(results, "results.json")),
        "grader_memory": _readable(f"/proc/{pid}/environ") or _openable(f"/proc/{pid}/mem"),
        "inet_socket": _inet_socket(),
        "left_behind": _leave_behind(job["survivor"]) if job.get("survivor") else [],
    }
    return {"status": "ok", **found}, b""


def _write(fd: int, header: dict, _artifact: bytes) -> None:
    with os.fdopen(fd, "wb") as out:
        out.write(json.dumps(header).encode() + b"\n")


def _error(err: BaseException, _job: dict) -> tuple[dict, bytes]:
    return {"status": "error", "error": f"{type(err).__name__}: {err}"[:2000]}, b""


def main() -> None:
    from grader.jobs import serve_job
    serve_job(run, _write, _error)


if __name__ == "__main__":
    main()
