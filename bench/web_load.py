"""Load on the web site: 1,000 students with 20,000 graded submissions in a fresh embedded
PostgreSQL, the site under gunicorn on this machine, 32 concurrent clients. Prints p50/p99
latency of the leaderboard page, a report page and the status API (target: leaderboard p99
<= 50 ms). Prints figures, asserts nothing.

    python bench/web_load.py [--students 1000] [--runs 20000] [--clients 32] [--seconds 30]
                             [--think 0.25] [--gunicorn-workers 4] [--gunicorn-threads 2]

Reports are real: the student template is graded once by the grader, then re-scored by
grader.rescore at many p99s, so every stored report has the shape the worker stores."""
from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import hashlib
import multiprocessing
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SPEC = "asst4-trainium2"
PASSWORD = "load test password"
KINDS = ("leaderboard", "report", "status_api")


def variant_reports(count: int):
    """`count` reports of the asst4 spec: one real grade, re-scored at p99s around the thresholds."""
    import grader
    spec = grader.load_spec(SPEC)
    source = (ROOT / "student_template" / "conv2d.py").read_bytes()
    base = grader.grade(grader.submission_from_bytes("conv2d.py", source, spec),
                        spec, grader.GradeOptions(backend="sim", seed=1))
    rng = random.Random(0)
    reports = []
    for _ in range(count):
        tests = []
        for t in base.tests:
            if t.kind == "correctness":
                tests.append(dataclasses.replace(t, status="passed", points=t.max_points))
            elif t.thresholds_us:
                tests.append(dataclasses.replace(t, status="failed",
                                                 p99_us=t.thresholds_us["optimized"] * rng.uniform(0.8, 1.5)))
            else:
                tests.append(t)
        reports.append(grader.rescore(dataclasses.replace(base, tests=tests, flags=[]), spec))
    return reports


def seed(engine, students: int, runs: int) -> dict:
    from sqlalchemy import insert, text
    from store.models import (ApiToken, Course, Enrollment, GradingRun, Submission, TestResultRow,
                              User)
    from web.accounts import token_hash
    from werkzeug.security import generate_password_hash
    from store import specs
    from store.db import session_factory

    reports = variant_reports(60)
    now = dt.datetime.now(dt.timezone.utc)
    password_hash = generate_password_hash(PASSWORD)
    with session_factory(engine)() as session:
        course = Course(name="CS149", leaderboard_visibility="public")
        assignment = specs.new_assignment(session, SPEC, course=course, name="asst4", backend="sim",
                                          runs_per_hour=6, active=True)
        session.commit()
        course_id, assignment_id = course.id, assignment.id
    with engine.begin() as conn:
        conn.execute(insert(User), [{"id": i, "email": f"s{i}@example.edu", "name": f"Student {i}", "role": "user",
                                     "nickname": f"kernel_{i}", "active": True, "password_hash": password_hash}
                                    for i in range(1, students + 1)])
        conn.execute(insert(Enrollment), [{"user_id": i, "course_id": course_id, "role": "student"}
                                          for i in range(1, students + 1)])
        data = b"# a submission\n" * 20
        conn.execute(insert(Submission), [{"id": r, "user_id": 1 + r % students, "assignment_id": assignment_id,
                                           "filename": "conv2d.py", "data": data,
                                           "sha256": hashlib.sha256(data + str(r).encode()).hexdigest(),
                                           "size": len(data)} for r in range(1, runs + 1)])
        for start in range(1, runs + 1, 2000):
            chunk = range(start, min(runs, start + 1999) + 1)
            conn.execute(insert(GradingRun), [_run_row(r, reports[r % len(reports)], now) for r in chunk])
            conn.execute(insert(TestResultRow), [
                {"run_id": r, "test_name": t.name, "kind": t.kind, "status": t.status, "points": t.points,
                 "max_points": t.max_points, "p99_us": t.p99_us}
                for r in chunk for t in reports[r % len(reports)].tests])
        tokens = {}
        for user_id in range(1, students + 1):
            tokens[user_id] = f"nkig_load_{user_id}"
        conn.execute(insert(ApiToken), [{"user_id": u, "token_hash": token_hash(t), "label": "load"}
                                        for u, t in tokens.items()])
        for table in ("users", "submissions", "grading_runs"):
            conn.execute(text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))"))
        conn.execute(text("ANALYZE"))
    return {"tokens": tokens}


def _run_row(run_id: int, report, now) -> dict:
    return {"id": run_id, "submission_id": run_id, "status": "done", "backend": "sim", "queue": "sim", "attempts": 1,
            "seed": run_id * 7919, "report": report.to_json(include_seed=False), "score_total": report.score.total,
            "max_total": report.score.max_total, "thresholds_version": report.thresholds_version,
            "flagged": run_id % 97 == 0, "finished_at": now - dt.timedelta(seconds=run_id),
            "progress_done": len(report.tests), "progress_total": len(report.tests)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def client_process(base: str, users: list[int], runs_total: int, students: int, seconds: float, think: float,
                   ready, results) -> None:
    """One process holding several clients (threads): each signs in as its student, waits for
    every client to be ready, then requests the three pages in turn for `seconds`, pausing
    `think` seconds between requests as a person reading a page would."""
    import threading
    sessions = [_signed_in(base, u) for u in users]
    for session, user_id in zip(sessions, users):       # warm every gunicorn worker's caches and imports
        _client_loop(session, base, user_id, runs_total, students, time.monotonic() + 1.0, 0.0)
    ready.wait()
    deadline = time.monotonic() + seconds
    timings: list[dict] = []

    def run(session, user_id):
        timings.append(_client_loop(session, base, user_id, runs_total, students, deadline, think))
    threads = [threading.Thread(target=run, args=(s, u)) for s, u in zip(sessions, users)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results.put(timings)


def _signed_in(base: str, user_id: int):
    import requests
    session = requests.Session()
    page = session.get(f"{base}/login").text
    csrf = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', page).group(1)
    session.post(f"{base}/login", data={"email": f"s{user_id}@example.edu", "password": PASSWORD,
                                        "csrf_token": csrf}, allow_redirects=False)
    return session


def _client_loop(session, base, user_id, runs_total, students, deadline, think) -> dict:
    import requests
    own_runs = [r for r in range(1, runs_total + 1) if 1 + r % students == user_id]
    api = {"Authorization": f"Bearer nkig_load_{user_id}"}
    timings: dict[str, list[float]] = {k: [] for k in KINDS}
    errors, i = 0, user_id                 # clients start at different pages
    while time.monotonic() < deadline:
        kind = KINDS[i % 3]
        run_id = own_runs[i % len(own_runs)]
        url, headers = {"leaderboard": (f"{base}/leaderboard/asst4", None),
                        "report": (f"{base}/runs/{run_id}/report", None),
                        "status_api": (f"{base}/api/v1/runs/{run_id}", api)}[kind]
        start = time.perf_counter()
        try:
            ok = session.get(url, headers=headers, timeout=60).status_code == 200
        except requests.RequestException:       # a reset or timeout counts as an error, timed as it was
            ok = False
        timings[kind].append(time.perf_counter() - start)
        errors += not ok
        i += 1
        if think:
            time.sleep(think)
    timings["errors"] = [errors]
    return timings


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=20000)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--think", type=float, default=0.25,
                        help="seconds each client waits between requests (0: as fast as it can)")
    parser.add_argument("--client-processes", type=int, default=4, help="processes the clients run in (as threads)")
    parser.add_argument("--gunicorn-workers", type=int, default=4)
    parser.add_argument("--gunicorn-threads", type=int, default=2)
    args = parser.parse_args()

    from store import upgrade
    from store.db import EmbeddedPostgres, engine_from_env
    home = Path(tempfile.mkdtemp(prefix="web-load-"))
    pg = EmbeddedPostgres(home / "pgdata", delete_on_stop=True)
    gunicorn = None
    try:
        engine = engine_from_env(pg.url)
        upgrade(engine)
        started = time.perf_counter()
        seed(engine, args.students, args.runs)
        print(f"seeded {args.students} students, {args.runs} graded runs in {time.perf_counter() - started:.1f} s")
        port = free_port()
        env = dict(os.environ, DATABASE_URL=pg.url, NKI_GRADER_HOME=str(home), PYTHONUNBUFFERED="1")
        gunicorn = subprocess.Popen([sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}",
                                     "--workers", str(args.gunicorn_workers), "--threads", str(args.gunicorn_threads),
                                     "web:create_app()"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True)
        base = f"http://127.0.0.1:{port}"
        _wait_up(base)
        for path in ("/leaderboard/asst4",):                       # first hit: imports and caches
            __import__("requests").get(base + path)
        results = run_clients(base, args)
        _print(results, args)
    finally:
        if gunicorn is not None:
            os.killpg(gunicorn.pid, signal.SIGTERM)
            gunicorn.wait(60)
        pg.stop()
    return 0


def run_clients(base: str, args) -> list[dict]:
    context = multiprocessing.get_context("spawn")
    processes = min(args.clients, args.client_processes)
    users = [1 + (i * 31) % args.students for i in range(args.clients)]
    groups = [users[p::processes] for p in range(processes)]
    ready, results = context.Barrier(processes + 1), context.Queue()
    workers = [context.Process(target=client_process, args=(base, group, args.runs, args.students, args.seconds,
                                                             args.think, ready, results)) for group in groups]
    for w in workers:
        w.start()
    ready.wait()                                  # every client signed in: the measured period starts
    timings = [t for _ in workers for t in results.get()]
    for w in workers:
        w.join()
    return timings


def _wait_up(base: str, timeout: float = 120) -> None:
    import requests
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            requests.get(base + "/login", timeout=5)
            return
        except requests.RequestException:
            time.sleep(0.3)
    raise SystemExit("gunicorn did not come up")


def _print(results, args) -> None:
    print(f"{args.clients} concurrent clients ({args.think:g} s between a client's requests), {args.seconds:.0f} s, gunicorn {args.gunicorn_workers} workers x "
          f"{args.gunicorn_threads} threads, {os.cpu_count()} CPUs shared by server, database and clients")
    print(f"{'request':<14}{'count':>8}{'p50 ms':>10}{'p99 ms':>10}{'req/s':>9}")
    for kind in KINDS:
        values = [v for r in results for v in r[kind]]
        print(f"{kind:<14}{len(values):>8}{percentile(values, 50) * 1000:>10.1f}{percentile(values, 99) * 1000:>10.1f}"
              f"{len(values) / args.seconds:>9.1f}")
    print(f"failed requests (not 200, reset or timed out): {sum(r['errors'][0] for r in results)}")
    leaderboard_p99 = percentile([v for r in results for v in r["leaderboard"]], 99) * 1000
    print(f"leaderboard p99 {leaderboard_p99:.1f} ms (target <= 50 ms): {'met' if leaderboard_p99 <= 50 else 'NOT met'}")


if __name__ == "__main__":
    sys.exit(main())
