"""The session's PostgreSQL and Redis (tests/conftest.py) end with the pytest that started them,
however it ends: a SIGKILLed or crashed pytest left both running, orphaned, with their
temporary folders. Real servers, a real SIGKILL."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
from service_processes import die_with_parent
from service_waits import wait_for

TESTS = Path(__file__).resolve().parent

SESSION = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[1])
    from pathlib import Path
    from service_processes import ended_with_this_process
    from workers.broker import EmbeddedRedis
    folder = Path(sys.argv[2])
    ended_with_this_process(folder)
    server = EmbeddedRedis(folder).start()
    print(server.process.pid, flush=True)
    time.sleep(600)
""")


def _ended(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE     # adopted by an init that reaps late
    except psutil.NoSuchProcess:
        return True


def test_a_session_server_ends_with_a_killed_test_process(tmp_path):
    folder = tmp_path / "redis"
    folder.mkdir()
    with subprocess.Popen([sys.executable, "-c", SESSION, str(TESTS), str(folder)], stdout=subprocess.PIPE,
                          text=True, preexec_fn=die_with_parent(signal.SIGKILL)) as session:
        redis = int(session.stdout.readline())
        try:
            assert not _ended(redis), "the session's Redis did not start"
            session.kill()
            session.wait()
            wait_for(lambda: _ended(redis), timeout=60, what="the killed session's Redis to end")
        finally:
            if not _ended(redis):         # the defence failed: the test itself leaves nothing behind
                os.kill(redis, signal.SIGKILL)
        wait_for(lambda: not folder.exists(), timeout=30, what="the killed session's folder to be removed")
