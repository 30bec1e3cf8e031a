"""`python -m service.guardian FOLDER LOCK_FD`: started by `grader serve` in a session of its own.

Its stdin is a pipe whose other end only serve holds, so it reaches end of file when serve ends,
however it ends (Ctrl-C, SIGTERM, SIGKILL, a crash). Then it stops whatever of the instance
still runs (service.supervision.stop_instance_processes) and ends, holding serve's instance lock
(LOCK_FD, inherited) until it is done, so a new serve waits for it rather than racing it. The
signals that stop serve are ignored here: a closed terminal or a service manager's SIGTERM to
every process must not end the guardian before it has done its work."""
from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    from .supervision import InstanceLock, describe, stop_instance_processes   # before serve can end
    folder, fd = Path(argv[0]), int(argv[1])
    while os.read(0, 4096):         # serve writes nothing: this returns b"" when serve has ended
        pass
    lock = InstanceLock(fd)            # serve's descriptor, inherited: already locked
    lock.set_state("stopping")
    found = stop_instance_processes(folder)
    if found:
        print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} grader serve ended without stopping everything; "
              f"the guardian stopped {describe(found)}", flush=True)
    lock.release()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
