"""Queue load, on a fresh embedded PostgreSQL and Redis with real Celery workers, in three parts:

1. Throughput and concurrency: one sim worker running as many grades at once as `grader
   worker` runs by default (workers/capacity.py: one per core with --answer-pool, one per 1.6
   cores without; --concurrency N to choose), grading real submissions of asst4-trainium2 (the spec
   students are graded with: full grades on the simulator) or, with --spec tiny, a tiny spec
   whose grades take 0.1-0.2 s (a quick run, but fixed per-grade costs dominate it). Each kind of
   submission (good, slow, failing) is graded alone, one at a time, before and again after a
   mixed burst of them enqueued at once (load from elsewhere that drifts hits both sides). Prints grades per hour per core for the burst, and how much each
   kind's grade latency (start to finish) grew against being graded alone (target: at most 20%).
   Where the machine lets the bench count CPU (root: a cgroup counts the worker and every
   sandboxed child), it also prints each kind's CPU-seconds and cores kept busy alone, the
   burst's CPU against the same grades' alone, what other processes and the hypervisor (steal)
   took meanwhile, and the growth that CPU demand alone implies (grades that each keep more
   than one core busy cannot all have a core of their own). --answer-pool N grades with answers
   made ahead (NKI_ANSWER_POOL_SIZE), made before the worker starts; --plain also grades the
   same submissions alone and in the same burst as plain `grader.grade` processes, without
   Celery, PostgreSQL or Redis: what the machine allows, the floor for the service's figures.
2. 300 small submissions (tiny spec) enqueued at once against 2 single-process workers:
   throughput, enqueue-to-start p50/p99, lost and duplicated runs (target 0 and 0);
3. the same with one worker killed (kill -9) halfway, the reaper in `grader beat` handing its run
   to the other worker.

    python bench/queue_load.py [--spec asst4-trainium2|tiny] [--burst N] [--alone N]
                               [--answer-pool N] [--plain] [--concurrency N] [--only-burst] [--runs 300]

On 2 cores, the asst4-trainium2 burst (6 grades, each kind alone once before and once after)
takes about 8 minutes (5 with --answer-pool 1), --plain about as long again.

lost: a run not graded by the end. duplicated: a run whose grade started more than once with no
worker death to explain it (a run in flight on the killed worker is graded again by design, and
counted separately as "re-graded after the kill")."""
from __future__ import annotations

import argparse
import json
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
sys.path.insert(0, str(ROOT / "bench"))
from cpu_meter import CpuGroup, Machine  # noqa: E402

TINY_SPEC = ROOT / "tests" / "workers" / "specs" / "tiny.toml"
SPECS = {"asst4-trainium2": ROOT / "grader" / "specs" / "asst4-trainium2.toml", "tiny": TINY_SPEC}
DEFAULTS = {"asst4-trainium2": (6, 1), "tiny": (60, 3)}    # burst size, rounds of each kind alone
KERNEL = (ROOT / "reference_kernels" / "conv2d_optimized.py").read_bytes()
# The burst's mix: a good kernel; a slow one (the relaxed reference, a row at a time, each row
# reloading its inputs: 25.7 us against the good one's 18.9 on the tiny spec, both within its
# thresholds; on asst4-trainium2 it misses the optimized tier of the float16 tests and every
# extra-credit threshold); a failing one (every tap reads the same window: wrong values, found
# after a full execution of each correctness test's first configuration).
MIX = {"good": KERNEL,
       "slow": (ROOT / "reference_kernels" / "conv2d_relaxed.py").read_bytes(),
       "failing": KERNEL.replace(b"kw:kw + out_width]", b"0:out_width]")}
assert MIX["failing"] != KERNEL, "the failing kernel's edit no longer applies to conv2d_optimized.py"
FAST_REAPER = {"NKI_HEARTBEAT_S": "1", "NKI_HEARTBEAT_STALE_S": "10", "NKI_REAPER_INTERVAL_S": "2"}
POOL_USES = 100_000          # the bench's answer sets never run out, so no set is made during a burst


def start(args: list[str], log: Path, env: dict, group: CpuGroup | None = None) -> subprocess.Popen:
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "workers.cli", *args], cwd=ROOT, env=env,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=group.join if group else None)


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
    parser.add_argument("--spec", choices=sorted(SPECS), default="asst4-trainium2",
                        help="part 1's assignment: asst4-trainium2 (real grades, default) or tiny (quick)")
    parser.add_argument("--burst", type=int, help="mixed submissions in part 1's burst (default 6; tiny: 60)")
    parser.add_argument("--alone", type=int, help="times each kind is graded alone before the burst and again after it (default 1; tiny: 3)")
    parser.add_argument("--answer-pool", type=int, default=0, metavar="N",
                        help="part 1 grades with N answer sets made ahead (default 0: every grade works its answers out)")
    parser.add_argument("--plain", action="store_true",
                        help="part 1 again as plain grading processes, without the service: the machine's floor")
    parser.add_argument("--concurrency", type=int, help="part 1's grades at once (default: the worker's own)")
    parser.add_argument("--only-burst", action="store_true", help="part 1 only")
    parser.add_argument("--runs", type=int, default=300, help="submissions in parts 2 and 3")
    parser.add_argument("--plain-grade", nargs=3, help=argparse.SUPPRESS)   # KERNEL SPEC POOL-DIR|-: one plain grade
    args = parser.parse_args()
    if args.plain_grade:
        return grade_plain(*args.plain_grade)
    burst, alone = (args.burst or DEFAULTS[args.spec][0]), (args.alone or DEFAULTS[args.spec][1])
    if burst < 1 or alone < 1 or args.answer_pool < 0 or (args.concurrency or 1) < 1:
        parser.error("--burst, --alone and --concurrency must be at least 1, --answer-pool at least 0")
    folder = Path(tempfile.mkdtemp(prefix="nki-queue-load-"))
    bench = CpuGroup(f"nki-queue-load-{os.getpid()}")
    bench.join()                              # PostgreSQL, Redis, workers and grades: all counted as ours
    from store.db import EmbeddedPostgres
    from workers.broker import EmbeddedRedis
    from store import upgrade
    from store.db import engine_from_env
    from workers.capacity import sim_grades_at_once, usable_cores
    pg = EmbeddedPostgres(folder / "pg", delete_on_stop=True)
    redis = EmbeddedRedis(folder / "redis").start()
    os.environ.update({"DATABASE_URL": pg.url, "REDIS_URL": redis.url, "NKI_GRADER_HOME": str(folder / "home"),
                       **FAST_REAPER})
    upgrade(engine_from_env(pg.url))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    at_once = args.concurrency or sim_grades_at_once(answers_made_ahead=args.answer_pool > 0)
    part1 = Part1(args.spec, SPECS[args.spec], burst, alone, at_once, usable_cores(), bench)
    try:
        print(f"queue_load: part 1 on {args.spec}, parts 2-3 on the tiny spec ({TINY_SPEC.name}); embedded "
              f"PostgreSQL and Redis, {os.cpu_count()} cores, {usable_cores()} usable; "
              f"CPU counted: {'yes' if bench.path else 'no (needs root and cgroups)'}")
        if args.answer_pool:
            pool_dir = folder / "answer-pool"
            made_s = make_pool(SPECS[args.spec], pool_dir, args.answer_pool)
            print(f"  {args.answer_pool} answer set(s) made ahead in {made_s:.0f} s (each serves every grade of the bench)")
            env.update(NKI_ANSWER_POOL_SIZE=str(args.answer_pool), NKI_ANSWER_POOL_USES=str(POOL_USES),
                       NKI_ANSWER_POOL_DIR=str(pool_dir))
            part1.pool_dir = str(pool_dir)
        part1.report("the service", burst_phase(part1, folder, env))
        if args.plain:
            part1.report("plain processes, no service", plain_phase(part1, folder))
        if not args.only_burst:
            run_phase("steady", args.runs, False, folder, env)
            run_phase("one worker killed halfway", args.runs, True, folder, env)
    finally:
        redis.stop()
        pg.stop()
        shutil.rmtree(folder, ignore_errors=True)
        bench.remove()
    return 0


def make_pool(spec_path: Path, pool_dir: Path, size: int) -> float:
    import grader
    t0 = time.monotonic()
    grader.AnswerPool(pool_dir, size, POOL_USES).fill(grader.load_spec(str(spec_path)))
    return time.monotonic() - t0


class Part1:
    """What part 1 grades and how, and what it found: `alone` and `burst` are lists of
    (kind, wall seconds, CPU-seconds or None, score total)."""

    def __init__(self, name: str, spec_path: Path, burst: int, alone: int, at_once: int, cores: int,
                 group: CpuGroup) -> None:
        self.name, self.spec_path, self.at_once, self.cores, self.group = name, spec_path, at_once, cores, group
        self.kinds = [list(MIX)[i % len(MIX)] for i in range(burst)]
        self.alone_rounds = alone
        self.pool_dir: str | None = None

    def report(self, where: str, found: "Found") -> None:
        kinds = self.kinds
        print(f"\n[burst on {where}: {len(kinds)} mixed {self.name} submissions ({', '.join(MIX)}), "
              f"{'answers made ahead' if self.pool_dir else 'answers worked out in each grade'}, "
              f"{self.at_once} grades at once, {self.cores} usable cores]")
        scores = {}
        for kind, _, _, score in found.alone + found.burst:
            scores.setdefault(kind, set()).add(score)
        mixed = {k: v for k, v in scores.items() if len(v) > 1}
        if mixed:
            raise SystemExit(f"queue_load: the same submission got different scores: {mixed}")
        demand = {}
        for kind in MIX:
            rows = [r for r in found.alone if r[0] == kind]
            wall = statistics.median(r[1] for r in rows)
            cpu = [r[2] for r in rows if r[2] is not None]
            line = f"  {kind:8s} alone: {wall:6.1f} s"
            if cpu:
                demand[kind] = statistics.median(cpu) / wall
                line += f", {statistics.median(cpu):6.1f} CPU-s ({demand[kind]:.2f} cores busy)"
            print(line + f", score {scores[kind].pop():g}")
        n = len(kinds)
        print(f"  burst graded in {found.span:.1f} s: {3600 * n / found.span:.0f} grades/hour, "
              f"{3600 * n / found.span / self.cores:.0f} grades/hour/core")
        worst = 0.0
        for kind in MIX:
            a = statistics.median(r[1] for r in found.alone if r[0] == kind)
            b = statistics.median(r[1] for r in found.burst if r[0] == kind)
            worst = max(worst, b / a - 1)
            print(f"  {kind:8s} grade latency median alone {a:6.2f} s, in the burst {b:6.2f} s: {100 * (b / a - 1):+.0f}%")
        print(f"  worst latency growth {100 * worst:+.0f}% (target <= +20%)")
        if found.burst_cpu is not None and len(demand) == len(MIX):
            alone_cpu = sum(statistics.median(r[2] for r in found.alone if r[0] == k) for k in kinds)
            print(f"  CPU: the burst took {found.burst_cpu:.0f} CPU-s, the same grades alone {alone_cpu:.0f} "
                  f"({100 * (found.burst_cpu / alone_cpu - 1):+.0f}%: the work itself slowed by sharing the machine)")
            wall = sum(statistics.median(r[1] for r in found.alone if r[0] == k) for k in kinds)
            asked = self.at_once * alone_cpu / wall
            print(f"  a grade alone keeps {alone_cpu / wall:.2f} cores busy on average: {self.at_once} at once ask for "
                  f"{asked:.2f} of {self.cores} cores, so CPU alone implies about "
                  f"{100 * max(0.0, asked / self.cores - 1):+.0f}% latency (at least: other load keeps a grade "
                  f"alone from every core it could use)")
            print(f"  the burst's grades had {found.burst_cpu / found.span:.2f} cores on average; on a machine of "
                  f"their own, demand and slowdown together imply about "
                  f"{100 * (found.burst_cpu / alone_cpu * max(1.0, asked / self.cores) - 1):+.0f}% latency")
            wanted = min(asked, self.cores)
            left = self.cores - (found.others_burst[0] or 0.0)
            if left < wanted:                     # other load took cores the burst asked for
                scale = left / wanted
                growth = ", ".join(
                    f"{kind} {100 * (statistics.median(r[1] for r in found.burst if r[0] == kind) * scale / statistics.median(r[1] for r in found.alone if r[0] == kind) - 1):+.0f}%"
                    for kind in MIX)
                print(f"  other load left the burst {left:.2f} of the {wanted:.2f} cores it asked for; its latencies scaled "
                      f"to those cores: {growth}")
        for label, (busy, steal) in (("alone", found.others_alone), ("burst", found.others_burst)):
            if busy is not None:
                print(f"  meanwhile, {label}: other processes kept {busy:.2f} cores busy, the hypervisor stole {steal:.2f}")


class Found:
    def __init__(self) -> None:
        self.alone: list[tuple] = []
        self.burst: list[tuple] = []
        self.span = 0.0
        self.burst_cpu: float | None = None
        self.others_alone: tuple = (None, None)
        self.others_burst: tuple = (None, None)


class Meter:
    """Our CPU-seconds (the bench's cgroup, or a sub-group) and the rest of the machine's over an interval."""

    def __init__(self, ours: CpuGroup, everything: CpuGroup) -> None:
        self.ours, self.everything = ours, everything
        self.t0, self.ours0, self.all0, (self.busy0, self.steal0) = (time.monotonic(), ours.seconds(),
                                                                     everything.seconds(), Machine.sample())

    def cpu(self) -> float | None:
        now = self.ours.seconds()
        return None if now is None else now - self.ours0

    def others(self) -> tuple:
        """(cores other processes kept busy, cores stolen) on average since the start; (None, None) uncounted."""
        now = self.everything.seconds()
        if now is None:
            return None, None
        busy, steal = Machine.sample()
        wall = time.monotonic() - self.t0
        return max(0.0, busy - self.busy0 - (now - self.all0)) / wall, (steal - self.steal0) / wall


def weighted(*spans: tuple) -> tuple:
    """(busy, steal) of other processes over several intervals, each given as ((busy, steal), wall)."""
    if any(busy is None for (busy, _), _ in spans):
        return None, None
    total = sum(wall for _, wall in spans)
    return (sum(busy * wall for (busy, _), wall in spans) / total,
            sum(steal * wall for (_, steal), wall in spans) / total)


def fresh_assignment(spec_path: Path = TINY_SPEC):
    """A clean slate for a phase: an assignment under `spec_path` and one student. Returns (user
    id, assignment id, spec)."""
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
        assignment = specs.new_assignment(s, str(spec_path), course=Course(name="load"), name=spec_path.stem)
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


def burst_phase(part1: Part1, folder: Path, env: dict) -> Found:
    from sqlalchemy import func, select
    from store.db import session_scope
    from store.models import Assignment, GradingRun, User, WorkerHeartbeat
    from workers import enqueue

    user_id, assignment_id, _ = fresh_assignment(part1.spec_path)
    group = CpuGroup("worker", parent=part1.group)
    worker = start(["worker", "--queue", "sim", "--name", "burst@bench", "--concurrency", str(part1.at_once)],
                   folder / "burst-worker.log", env, group if group.path else None)

    def submit(kinds: list[str]) -> list[int]:
        with session_scope() as s:
            user, assignment = s.get(User, user_id), s.get(Assignment, assignment_id)
            return [enqueue.submit(s, user, assignment, "conv2d.py", MIX[kind]).id for kind in kinds]

    def graded(run_ids: list[int]) -> list[tuple[float, float]]:
        """(latency, score total) of each run, in the order of run_ids."""
        with session_scope() as s:
            rows = {r.id: r for r in s.scalars(select(GradingRun).where(GradingRun.id.in_(run_ids)))}
            bad = [rows[i].status for i in run_ids if rows[i].status != "done"]
            if bad:
                raise SystemExit(f"queue_load: {len(bad)} burst runs ended {sorted(set(bad))}, not done; see {folder}")
            return [((rows[i].finished_at - rows[i].started_at).total_seconds(), rows[i].report["score"]["total"])
                    for i in run_ids]

    def one_worker_alive():
        with session_scope() as s:
            return s.scalar(select(func.count()).select_from(WorkerHeartbeat)) == 1
    found = Found()
    try:
        wait(one_worker_alive, 300, "the burst worker to start")
        def alone() -> tuple:                     # each kind alone, one grade at a time
            meter = Meter(group, part1.group)
            for _ in range(part1.alone_rounds):
                for kind in MIX:
                    before, done = group.seconds(), finished_count()
                    ids = submit([kind])
                    wait(lambda: finished_count() >= done + 1, 1800, f"a {kind} grade")
                    cpu = None if before is None else group.seconds() - before
                    (latency, score), = graded(ids)
                    found.alone.append((kind, latency, cpu, score))
            return meter.others(), time.monotonic() - meter.t0
        before = alone()
        done_before = finished_count()
        meter = Meter(group, part1.group)
        ids = submit(part1.kinds)
        wait(lambda: finished_count() >= done_before + len(ids), 3 * 3600, "the burst to be graded")
        found.span, found.burst_cpu, found.others_burst = time.monotonic() - meter.t0, meter.cpu(), meter.others()
        found.others_alone = weighted(before, alone())      # alone again after: load that drifts hits both sides
    finally:
        stop(worker)
    found.burst = [(kind, latency, None, score) for kind, (latency, score) in zip(part1.kinds, graded(ids))]
    return found


def plain_phase(part1: Part1, folder: Path) -> Found:
    """Part 1's grades as plain processes (grade_plain), each in a CPU group of its own: alone, the
    burst with part1.at_once running at a time, alone again."""
    kernels = {}
    for kind, source in MIX.items():
        (folder / kind).mkdir(exist_ok=True)
        kernels[kind] = folder / kind / "conv2d.py"
        kernels[kind].write_bytes(source)

    def launch(kind: str, index: int):
        group = CpuGroup(f"plain-{index}", parent=part1.group)
        out = folder / f"plain-{index}.json"
        process = subprocess.Popen([sys.executable, __file__, "--plain-grade", str(kernels[kind]),
                                    str(part1.spec_path), part1.pool_dir or "-"],
                                   cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out.open("wb"),
                                   stderr=(folder / f"plain-{index}.log").open("wb"),
                                   preexec_fn=group.join if group.path else None)
        return kind, process, group, time.monotonic(), out

    def finish(kind, process, group, started, out) -> tuple:
        wall = time.monotonic() - started
        if process.returncode != 0:
            raise SystemExit(f"queue_load: a plain {kind} grade failed; see {folder}/plain-*.log")
        return kind, wall, group.seconds(), json.loads(out.read_text())["total"]

    def run(kinds: list[str], at_once: int, first: int) -> list[tuple]:
        pending, running, done = list(enumerate(kinds, first)), [], {}
        while pending or running:
            while pending and len(running) < at_once:
                index, kind = pending.pop(0)
                running.append((index, launch(kind, index)))
            time.sleep(0.2)
            for entry in list(running):
                if entry[1][1].poll() is not None:
                    running.remove(entry)
                    done[entry[0]] = finish(*entry[1])
        return [done[i] for i in sorted(done)]

    def alone(first: int) -> tuple:
        meter = Meter(part1.group, part1.group)
        found.alone += run(list(MIX) * part1.alone_rounds, 1, first)
        return meter.others(), time.monotonic() - meter.t0

    found = Found()
    before = alone(0)
    meter = Meter(part1.group, part1.group)
    found.burst = run(part1.kinds, part1.at_once, len(found.alone))
    found.span, found.others_burst = time.monotonic() - meter.t0, meter.others()
    found.others_alone = weighted(before, alone(len(found.alone) + len(found.burst)))
    cpus = [r[2] for r in found.burst]
    found.burst_cpu = None if None in cpus else sum(cpus)
    return found


def grade_plain(kernel: str, spec_path: str, pool_dir: str) -> int:
    """One grade in this process, as `grader grade` would (answers drawn from pool_dir unless "-");
    prints its score as JSON."""
    import grader
    spec = grader.load_spec(spec_path)
    submission = grader.submission_from_bytes("conv2d.py", Path(kernel).read_bytes(), spec)
    answers = None if pool_dir == "-" else grader.AnswerPool(pool_dir, 1, POOL_USES).draw(spec)
    report = grader.grade(submission, spec, grader.GradeOptions(backend="sim", answers=answers))
    print(json.dumps({"total": report.score.total}))
    return 0


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
