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
import pytest
from service_processes import die_with_parent
from service_waits import wait_for

from service.supervision import has_ended

TESTS = Path(__file__).resolve().parent

SESSION = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[1])
    from pathlib import Path
    from service_processes import ended_with_this_process
    folder = Path(sys.argv[2])
    ended_with_this_process(folder)
    if sys.argv[3] == "redis":
        from workers.broker import EmbeddedRedis
        print(EmbeddedRedis(folder).start().process.pid, flush=True)
    else:                                # as tests/conftest.py's pg_server: its data folder inside
        from store.db import EmbeddedPostgres
        server = EmbeddedPostgres(folder / "data", delete_on_stop=True)
        print(server.pgdata.joinpath("postmaster.pid").read_text().split()[0], flush=True)
    time.sleep(600)
""")


def _ended(pid: int) -> bool:
    try:
        return has_ended(psutil.Process(pid))
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("kind", ["redis", "postgres"])
def test_a_session_server_ends_with_a_killed_test_process(tmp_path, kind):
    folder = tmp_path / kind
    folder.mkdir()
    with subprocess.Popen([sys.executable, "-c", SESSION, str(TESTS), str(folder), kind], stdout=subprocess.PIPE,
                          text=True, preexec_fn=die_with_parent(signal.SIGKILL)) as session:
        server = int(session.stdout.readline())
        try:
            assert not _ended(server), f"the session's {kind} server did not start"
            session.kill()
            session.wait()
            wait_for(lambda: _ended(server), timeout=60, what=f"the killed session's {kind} server to end")
        finally:
            if not _ended(server):         # the defence failed: the test itself leaves nothing behind
                os.kill(server, signal.SIGKILL)
        wait_for(lambda: not folder.exists(), timeout=30, what="the killed session's folder to be removed")


def test_stopping_the_servers_working_in_a_folder_shuts_postgresql_down_fast_and_keeps_its_data(tmp_path):
    """What the watcher does, on its own: without it the removed folder alone would end a
    postmaster too, a minute later, when it finds its lock file gone."""
    from store.db import EmbeddedPostgres
    from workers.broker import EmbeddedRedis
    from service.supervision import stop_servers_working_in
    pg = EmbeddedPostgres(tmp_path / "data")
    redis = EmbeddedRedis(tmp_path / "redis").start()
    postmaster = int((pg.pgdata / "postmaster.pid").read_text().split()[0])
    try:
        found = {p.pid for p in stop_servers_working_in(tmp_path, grace_s=60)}
        assert {postmaster, redis.process.pid} <= found
        assert _ended(postmaster) and _ended(redis.process.pid)
        assert not (pg.pgdata / "postmaster.pid").exists()        # a clean shutdown removes its lock file
        assert (pg.pgdata / "PG_VERSION").exists()
    finally:
        if not _ended(postmaster):
            os.kill(postmaster, signal.SIGKILL)
        redis.stop()                     # reaps it (this test started it), or stops it
