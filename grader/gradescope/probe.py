"""`python -I -m grader.gradescope.probe`: started through the real sandbox (sandbox.run_child)
before a Gradescope grade, to see what a student's process could reach there. It tries to read
the secret files it is told of, to create a file in the results folder, to read the grader's
environment and memory, and to open a network socket, and sends back what worked. It holds
nothing secret: job.json names paths only."""
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
        "results_writable": _writable_dir(results) or _writable_file(os.path.join(results, "results.json")),
        "grader_memory": _readable(f"/proc/{pid}/environ") or _openable(f"/proc/{pid}/mem"),
        "inet_socket": _inet_socket(),
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
