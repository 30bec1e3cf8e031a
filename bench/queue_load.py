"""Queue load: 300 small submissions enqueued at once against 2 simulator worker processes, on
a fresh embedded PostgreSQL and Redis. Prints throughput, enqueue-to-start p50/p99, and lost and
duplicated runs (target 0 and 0); then the same with one worker killed (kill -9) halfway, the
reaper in `grader beat` handing its run to the other worker.

    python bench/queue_load.py [--runs 300]

lost: a run not graded by the end. duplicated: a run whose grade started more than once with no
worker death to explain it (a run in flight on the killed worker is graded again by design, and
counted separately as "re-graded after the kill")."""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TINY_SPEC = ROOT / "tests" / "workers" / "specs" / "tiny.toml"
KERNEL = (ROOT / "reference_kernels" / "conv2d_optimized.py").read_bytes()
FAST_REAPER = {"NKI_HEARTBEAT_S": "1", "NKI_HEARTBEAT_STALE_S": "10", "NKI_REAPER_INTERVAL_S": "2"}


def start(args: list[str], log: Path, env: dict) -> subprocess.Popen:
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "workers.cli", *args], cwd=ROOT, env=env,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def stop(process: subprocess.Popen, sig=signal.SIGTERM) -> None:
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        return
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def wait(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"queue_load: gave up waiting for {what} after {timeout:.0f} s")
        time.sleep(0.5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="nki-queue-load-"))
    from store.db import EmbeddedPostgres
    from workers.broker import EmbeddedRedis
    from store import upgrade
    from store.db import engine_from_env
    pg = EmbeddedPostgres(folder / "pg", delete_on_stop=True)
    redis = EmbeddedRedis(folder / "redis").start()
    os.environ.update({"DATABASE_URL": pg.url, "REDIS_URL": redis.url, "NKI_GRADER_HOME": str(folder / "home"),
                       **FAST_REAPER})
    upgrade(engine_from_env(pg.url))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    try:
        print(f"queue_load: {args.runs} submissions of the optimized conv2d on the tiny spec "
              f"({TINY_SPEC.name}), 2 sim worker processes, embedded PostgreSQL and Redis, {os.cpu_count()} cores")
        run_phase("steady", args.runs, False, folder, env)
        run_phase("one worker killed halfway", args.runs, True, folder, env)
    finally:
        redis.stop()
        pg.stop()
        shutil.rmtree(folder, ignore_errors=True)
    return 0


def run_phase(label: str, n: int, kill_halfway: bool, folder: Path, env: dict) -> None:
    from sqlalchemy import func, select, text
    from store.db import session_scope
    from store.models import Assignment, Course, GradingRun, User, WorkerHeartbeat
    from workers import enqueue, specs
    from workers.broker import client_for

    with session_scope() as s:                       # a clean slate for each phase
        s.execute(text("TRUNCATE grading_runs, submissions, test_results, worker_heartbeats, assignments, "
                       "courses, users RESTART IDENTITY CASCADE"))
    client_for(os.environ["REDIS_URL"]).flushall()
    toml, spec = specs.read_spec_file(str(TINY_SPEC))
    with session_scope() as s:
        user = User(email="load@example.edu")
        assignment = Assignment(course=Course(name="load"), name="tiny", spec_name="tiny", spec_version="1",
                                thresholds_version="t1", spec_hash=specs.spec_hash(toml), spec_toml=toml)
        s.add_all([user, assignment])
        s.commit()
        user_id, assignment_id = user.id, assignment.id
    workers = [start(["worker", "--queue", "sim", "--name", f"load{i}@bench", "--concurrency", "1"],
                     folder / f"{label[:6]}-w{i}.log", env) for i in range(2)]
    beat = start(["beat", "--schedule", str(folder / "beat-schedule")], folder / f"{label[:6]}-beat.log", env)

    def count(*statuses):
        with session_scope() as s:
            return s.scalar(select(func.count()).select_from(GradingRun).where(GradingRun.status.in_(statuses)))
    def alive():
        with session_scope() as s:
            return s.scalar(select(func.count()).select_from(WorkerHeartbeat)) == 2
    killed_at = None
    try:
        wait(alive, 300, "both workers to start")            # the queue is measured, not worker start-up
        with session_scope() as s:
            user, assignment = s.get(User, user_id), s.get(Assignment, assignment_id)
            t0 = time.monotonic()
            for _ in range(n):
                enqueue.submit(s, user, assignment, "conv2d.py", KERNEL)
            enqueue_s = time.monotonic() - t0

        if kill_halfway:
            wait(lambda: count("done") >= n // 2, 3600, "half the runs")
            stop(workers[0], signal.SIGKILL)
            killed_at = count("done")
        wait(lambda: count("done", "failed", "infra_error", "cancelled") >= n, 3600, "every run to finish")
    finally:
        for p in [*workers, beat]:
            stop(p)
    with session_scope() as s:
        runs = s.scalars(select(GradingRun)).all()
        waits = [(r.started_at - r.queued_at).total_seconds() for r in runs if r.started_at]
        first_queued = min(r.queued_at for r in runs)
        last_done = max(r.finished_at for r in runs if r.finished_at)
        lost = sum(1 for r in runs if r.status != "done" or r.report is None)
        regraded = sum(1 for r in runs if r.attempts > 1)
        results = {r.id: len(r.test_results) for r in runs}
    span = (last_done - first_queued).total_seconds()
    duplicated = sum(1 for k in results.values() if k != len(spec.tests))
    if not kill_halfway:
        duplicated += regraded                     # with no worker death nothing may start twice
    print(f"\n[{label}]")
    print(f"  enqueued {n} in {enqueue_s:.1f} s ({n / enqueue_s:.0f}/s, each committed then published)")
    print(f"  graded {n - lost} in {span:.1f} s: throughput {n / span:.2f} runs/s "
          f"({60 * n / span:.0f}/min)")
    print(f"  enqueue-to-start p50 {percentile(waits, 50):.1f} s, p99 {percentile(waits, 99):.1f} s "
          f"(max {max(waits):.1f} s)")
    if kill_halfway:
        print(f"  worker load0 killed with SIGKILL after {killed_at} runs were done; "
              f"re-graded after the kill: {regraded}")
    print(f"  lost {lost}, duplicated {duplicated}  (target 0 and 0)")


if __name__ == "__main__":
    sys.exit(main())
