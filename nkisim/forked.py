"""Work done in a forked copy of this process, beside what this process goes on doing: the
parts of a split program (nkisim.split), a timed run's latency estimate while the program
executes (grader.executor).

The forked process sees this process's memory as it was at the fork (copy on write), runs one
function, sends back what it returned (JSON, down a pipe) and leaves at once (os._exit: none of
this process's exit handlers run twice). It is killed should this process die first (a
timeout's kill), so nothing outlives it. Its CPU time is this process's children's, counted
once it is waited for.
"""
from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable


class Forked:
    """A forked process running one function (`start`)."""

    def __init__(self, pid: int, reader: int) -> None:
        self.pid, self.reader = pid, reader

    def report(self) -> tuple[dict | list | None, int]:
        """(what the function returned, None if the process ended without sending it; its wait
        status), once it has ended."""
        with os.fdopen(self.reader, "rb") as fh:
            head = fh.read(8)
            size = struct.unpack("<Q", head)[0] if len(head) == 8 else 0
            data = fh.read(size) if size else b""
        _, status = os.waitpid(self.pid, 0)
        if not data or len(data) != size:       # it died first, or while writing (killed: memory)
            return None, status
        try:
            return json.loads(data), status
        except ValueError:
            return None, status

    def kill(self) -> None:
        """End it now, unread (this process failed, or no longer needs its answer)."""
        try:
            os.kill(self.pid, 9)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        try:
            os.close(self.reader)
        except OSError:
            pass


def start(work: Callable[[], dict | list]) -> Forked:
    """Fork; the copy runs `work()` and sends back its value (JSON-able). Should `work` raise,
    nothing is sent: it reports its own errors in its value if they matter."""
    reader, writer = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(reader)
            _die_with(parent)
            data = json.dumps(work()).encode()
            with os.fdopen(writer, "wb") as fh:
                fh.write(struct.pack("<Q", len(data)) + data)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(writer)
    return Forked(pid, reader)


def _die_with(parent: int) -> None:
    """Linux: this process is killed should the process that forked it die first (a timeout's
    kill), including before this call."""
    try:
        import ctypes
        import signal
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)             # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)
