"""Child processes of a test never outlive it, even when pytest itself is killed."""
from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

PR_SET_PDEATHSIG = 1
SERVER_GRACE_S = 20.0


def die_with_parent(sig: int = signal.SIGTERM):
    """preexec_fn: the child receives `sig` when the test process dies."""
    def arm() -> None:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig))
    return arm


def ended_with_this_process(folder: Path) -> subprocess.Popen:
    """A watcher in a session of its own that, once this process has ended however it ended,
    stops every process working in `folder`. For the session's PostgreSQL and Redis: their
    servers daemonize or start sessions of their own, so a parent-death signal cannot reach
    them. The fixture closes the watcher's stdin after stopping the server itself; then the
    watcher finds nothing and ends."""
    return subprocess.Popen([sys.executable, __file__, str(Path(folder).resolve())], stdin=subprocess.PIPE,
                            start_new_session=True)


if __name__ == "__main__":
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)           # the stop that ends pytest must not end the watcher first
    while os.read(0, 4096):                          # end of file: the test process has ended
        pass
    from service.supervision import stop_servers_working_in
    stop_servers_working_in(Path(sys.argv[1]), grace_s=SERVER_GRACE_S)
    shutil.rmtree(sys.argv[1], ignore_errors=True)     # a private temporary folder of the ended session
