"""Queue load, on a fresh embedded PostgreSQL and Redis with real Celery workers, in three parts:

1. Throughput and concurrency: one sim worker running as many grades at once as the machine has
   cores (`grader worker`'s default). Each kind of submission (good, slow, failing) is first
   graded alone, one at a time; then a mixed burst of them is enqueued at once. Prints grades per
   hour per core for the burst, and how much each kind's grade latency (start to finish) grew
   against being graded alone (target: at most 20%).
2. 300 small submissions enqueued at once against 2 single-process workers: throughput,
   enqueue-to-start p50/p99, lost and duplicated runs (target 0 and 0);
3. the same with one worker killed (kill -9) halfway, the reaper in `grader beat` handing its run
   to the other worker.

    python bench/queue_load.py [--runs 300] [--burst 60] [--concurrency N] [--only-burst]

lost: a run not graded by the end. duplicated: a run whose grade started more than once with no
worker death to explain it (a run in flight on the killed worker is graded again by design, and
counted separately as "re-graded after the kill")."""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TINY_SPEC = ROOT / "tests" / "workers" / "specs" / "tiny.toml"
KERNEL = (ROOT / "reference_kernels" / "conv2d_optimized.py").read_bytes()
# The burst's mix: a good kernel; a slow one (the relaxed reference, a row at a time, each row
# reloading its inputs: 25.7 us against the good one's 18.9 on the tiny spec, both within its
# thresholds); a failing one (every tap reads the same window: wrong values, found after a full
# execution).
MIX = {"good": KERNEL,
       "slow": (ROOT / "reference_kernels" / "conv2d_relaxed.py").read_bytes(),
       "failing": KERNEL.replace(b"kw:kw + out_width]", b"0:out_width]")}
assert MIX["failing"] != KERNEL, "the failing kernel's edit no longer applies to conv2d_optimized.py"
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
    parser.add_argument("--runs", type=int, default=300, help="submissions in parts 2 and 3")
    parser.add_argument("--burst", type=int, default=60, help="mixed submissions in part 1's burst")
    parser.add_argument("--concurrency", type=int, help="part 1's grades at once (default: the worker's own)")
    parser.add_argument("--only-burst", action="store_true", help="part 1 only")
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
        print(f"queue_load: the tiny spec ({TINY_SPEC.name}), embedded PostgreSQL and Redis, "
              f"{os.cpu_count()} cores; then {args.runs} submissions of the optimized conv2d, 2 sim worker processes")
        burst_phase(args.burst, args.concurrency, folder, env)
        if not args.only_burst:
            run_phase("steady", args.runs, False, folder, env)
            run_phase("one worker killed halfway", args.runs, True, folder, env)
    finally:
        redis.stop()
        pg.stop()
        shutil.rmtree(folder, ignore_errors=True)
    return 0


def fresh_assignment():
    """A clean slate for a phase: the tiny assignment and one student. Returns (user id,
    assignment id, spec)."""
    from sqlalchemy import text
    from store.db import session_scope
    from store import specs
    from store.models import Course, User
    from workers.broker import client_for

    with session_scope() as s:
        s.execute(text("TRUNCATE grading_runs, submissions, test_results, worker_heartbeats, assignments, "
                       "courses, users, specs RESTART IDENTITY CASCADE"))
    client_for(os.environ["REDIS_URL"]).flushall()
    with session_scope() as s:
        user = User(email="load@example.edu")
        assignment = specs.new_assignment(s, str(TINY_SPEC), course=Course(name="load"), name="tiny")
        s.add(user)
        s.commit()
        return user.id, assignment.id, specs.spec_of(assignment)


def finished_count() -> int:
    from sqlalchemy import func, select
    from store.db import session_scope
    from store.models import GradingRun
    with session_scope() as s:
        return s.scalar(select(func.count()).select_from(GradingRun).where(
            GradingRun.status.in_(("done", "failed", "infra_error", "cancelled"))))


def burst_phase(n: int, concurrency: int | None, folder: Path, env: dict) -> None:
    from sqlalchemy import func, select
    from store.db import session_scope
    from store.models import Assignment, GradingRun, User, WorkerHeartbeat
    from workers import enqueue
    from workers.capacity import sim_grades_at_once, usable_cores

    user_id, assignment_id, _ = fresh_assignment()
    at_once = concurrency or sim_grades_at_once()
    worker = start(["worker", "--queue", "sim", "--name", "burst@bench", "--concurrency", str(at_once)],
                   folder / "burst-worker.log", env)

    def submit(kinds: list[str]) -> list[int]:
        with session_scope() as s:
            user, assignment = s.get(User, user_id), s.get(Assignment, assignment_id)
            return [enqueue.submit(s, user, assignment, "conv2d.py", MIX[kind]).id for kind in kinds]

    def latencies(run_ids: list[int]) -> list[float]:
        with session_scope() as s:
            rows = s.execute(select(GradingRun.started_at, GradingRun.finished_at, GradingRun.status)
                             .where(GradingRun.id.in_(run_ids))).all()
        bad = [status for _, _, status in rows if status != "done"]
        if bad:
            raise SystemExit(f"queue_load: {len(bad)} burst runs ended {sorted(set(bad))}, not done; see {folder}")
        return [(finished - started).total_seconds() for started, finished, _ in rows]

    def one_worker_alive():
        with session_scope() as s:
            return s.scalar(select(func.count()).select_from(WorkerHeartbeat)) == 1
    alone: dict[str, list[float]] = {kind: [] for kind in MIX}
    try:
        wait(one_worker_alive, 300, "the burst worker to start")
        for _ in range(3):                           # each kind alone, one grade at a time
            for kind in MIX:
                ids = submit([kind])
                wait(lambda: finished_count() >= sum(map(len, alone.values())) + 1, 600, f"a {kind} grade")
                alone[kind] += latencies(ids)
        kinds = [list(MIX)[i % len(MIX)] for i in range(n)]
        done_before = finished_count()
        t0 = time.monotonic()
        ids = submit(kinds)
        wait(lambda: finished_count() >= done_before + n, 3600, "the burst to be graded")
        span = time.monotonic() - t0
    finally:
        stop(worker)
    in_burst = latencies(ids)
    by_kind = {kind: [t for t, k in zip(in_burst, kinds) if k == kind] for kind in MIX}
    cores = usable_cores()
    print(f"\n[burst: {n} mixed submissions ({', '.join(MIX)}), one worker grading {at_once} at once, "
          f"{cores} usable cores]")
    print(f"  graded in {span:.1f} s: {3600 * n / span:.0f} grades/hour, {3600 * n / span / cores:.0f} "
          f"grades/hour/core")
    worst = 0.0
    for kind in MIX:
        a, b = statistics.median(alone[kind]), statistics.median(by_kind[kind])
        worst = max(worst, b / a - 1)
        print(f"  {kind:8s} grade latency median alone {a:6.2f} s, in the burst {b:6.2f} s: {100 * (b / a - 1):+.0f}%")
    print(f"  worst latency growth {100 * worst:+.0f}% (target <= +20%)")


def run_phase(label: str, n: int, kill_halfway: bool, folder: Path, env: dict) -> None:
    from sqlalchemy import func, select
    from store.db import session_scope
    from store.models import Assignment, GradingRun, User, WorkerHeartbeat
    from workers import enqueue

    user_id, assignment_id, spec = fresh_assignment()
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
