"""Logs that say what happened (issue 46): a worker's log holds each grade's start and end with
its run id and duration, and `grader serve` writes, at its --log-level, its own start and stop
(serve.log), the workers' grade lines, the site's every request (web.log); a served instance is
backed up as it runs and gives its first admin a sign-in link through `grader admin-link`, the
way an operator under Docker Compose gets one; a grade under way when serve is stopped is queued
again in the store at once. Real processes; every wait is bounded."""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from service_processes import die_with_parent
from service_waits import wait_for, wait_for_run
from worker_helpers import OPTIMIZED, ROOT, spinning_kernel

from grader.vocabulary import RunStatus
from workers import enqueue

STAMP = r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+: INFO/ForkPoolWorker-\d+\]"


def test_a_workers_log_holds_each_grades_start_and_end_with_its_run_id(db, assignment, student, celery_worker):
    worker = celery_worker("sim")
    run = enqueue.submit(db, student, assignment, "conv2d.py", OPTIMIZED)
    done = wait_for_run(db, run.id, (RunStatus.DONE,))
    text = wait_for(lambda: f"run {run.id}: grading ended" in worker.output() and worker.output(), 30,
                    "the grade's end in the worker's log")
    assert re.search(rf"{STAMP} run {run.id}: grading started on {re.escape(worker.name)}:\d+ \(attempt 1, backend "
                     rf"sim, conv2d.py\)", text), text[-3000:]
    ended = re.search(rf"{STAMP} run {run.id}: grading ended after (\d+\.\d) s: done, score 7.5 of 7.5", text)
    assert ended, text[-3000:]
    took = (done.finished_at - done.started_at).total_seconds()
    assert abs(float(ended.group(1)) - took) < 2.0, (ended.group(0), took)
    assert f"worker {worker.name} started: queue sim" in text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_logs_its_start_stop_grades_and_requests_at_its_log_level():
    import requests
    tmp = Path(tempfile.mkdtemp(prefix="nki-test-logs-"))
    home = (tmp / "home").resolve()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "NKI_GRADER_SECRET_KEY")}
    env.update(NKI_GRADER_HOME=str(home), PYTHONUNBUFFERED="1", XDG_CONFIG_HOME=str(tmp / "config"))
    port = _free_port()
    log = tmp / "serve.out"

    def grader(*args):
        return subprocess.run([sys.executable, "-m", "service.cli", *args], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=600)
    with log.open("wb") as out:
        serve = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--port", str(port),
                                  "--log-level", "info"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True, preexec_fn=die_with_parent(signal.SIGTERM))
    try:
        def up():
            if serve.poll() is not None:
                raise AssertionError(f"grader serve exited:\n{log.read_text()[-4000:]}")
            return "Ctrl-C stops everything" in log.read_text(errors="replace")
        wait_for(up, 300, "grader serve to come up")
        logs = home / "logs"
        base = f"http://127.0.0.1:{port}"
        assert requests.get(f"{base}/", timeout=30).status_code < 500
        web = wait_for(lambda: '"GET / HTTP/1.1"' in (logs / "web.log").read_text() and (logs / "web.log").read_text(),
                       30, "the request in web.log")
        assert "[INFO] Listening at" in web

        submitted = grader("submit", str(ROOT / "student_template" / "conv2d.py"))
        assert submitted.returncode in (0, 1), submitted.stderr           # graded (the template scores low)
        run_id = int(re.search(r"run (\d+)", submitted.stderr + submitted.stdout).group(1))
        sim = (logs / "worker-sim.log").read_text()
        assert re.search(rf"run {run_id}: grading started on grader-sim-\d+@", sim), sim[-3000:]
        assert re.search(rf"run {run_id}: grading ended after \d+\.\d s: ", sim), sim[-3000:]
        assert "started: queue nightly" in (logs / "worker-nightly.log").read_text()    # INFO reached every worker

        backups = tmp / "backups"
        backups.mkdir()
        backed = grader("backup", str(backups))                       # while it serves
        assert backed.returncode == 0, backed.stderr
        assert "1 run," in backed.stdout and len(list(backups.iterdir())) == 1

        link = grader("admin-link")
        assert link.returncode == 0, link.stderr
        url = re.search(r"(http://\S+/login/link/\S+)", link.stdout).group(1)
        assert url.startswith(base)                                   # the serve's own address
        browser = requests.Session()
        page = browser.get(url, timeout=30)
        csrf = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', page.text).group(1)
        signed_in = browser.post(url, data={"csrf_token": csrf}, timeout=30)
        assert signed_in.status_code == 200 and "Sign out" in signed_in.text, signed_in.text[:2000]

        # a grade under way when serve is stopped goes back to the queue at once (a kernel that spins)
        spin = tmp / "conv2d.py"
        spin.write_bytes(spinning_kernel())
        followed = grader("submit", str(spin), "--timeout", "1")         # it gives up; the grade goes on
        assert followed.returncode == 1 and re.search(r"still (queued|running) after 1 s", followed.stderr), \
            followed.stderr
        spinning = int(re.search(r"run (\d+): queued", followed.stderr).group(1))
        wait_for(lambda: f"run {spinning}: grading started" in (logs / "worker-sim.log").read_text(), 120,
                 "the spinning kernel's grade to start")

        serve.send_signal(signal.SIGTERM)
        assert serve.wait(120) == 0, log.read_text()[-4000:]
        assert f"run {spinning}: handed back to the queue after" in (logs / "worker-sim.log").read_text()
        from store.db import EmbeddedPostgres, engine_from_env, session_factory
        from store.models import GradingRun
        pg = EmbeddedPostgres(home / "pgdata")            # the stopped instance's database, read here
        try:
            session = session_factory(engine_from_env(pg.url))()
            run = session.get(GradingRun, spinning)
            assert run.status == RunStatus.QUEUED and run.attempts == 0 and run.worker is None, (run.status, run.error)
            session.close()
        finally:
            pg.stop()
        journal = (logs / "serve.log").read_text()
        lines = journal.splitlines()
        assert re.search(r"starting: instance .* log level INFO", lines[0]), journal
        assert any(f"serving at {base}: sim worker, nightly worker, staff worker, beat, web" in x for x in lines)
        assert "stopping (SIGTERM)" in lines[-2] and re.search(r"stopped in \d+\.\d s$", lines[-1]), journal
        assert "worker grader-sim-" in (logs / "worker-sim.log").read_text().split("Warm shutdown")[-1]
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
        from service.supervision import stop_instance_processes
        stop_instance_processes(home, parts_grace_s=1.0)
        shutil.rmtree(tmp, ignore_errors=True)
