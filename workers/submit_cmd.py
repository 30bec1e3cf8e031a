"""`grader submit PATH`: hand a submission to the service, follow it, print the report.

With --server it speaks the site's JSON API (bearer token); without, it uses this machine's
service directly (the database and queue `grader serve` runs)."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import grader
from grader import render

POLL_S = 1.0


def submit_command(args) -> int:
    path = Path(args.path)
    try:
        data = path.read_bytes()
    except OSError as err:
        print(f"grader: cannot read {path}: {err.strerror or err}", file=sys.stderr)
        return 2
    if args.server:
        return _via_api(args, path.name, data)
    return _via_database(args, path.name, data)


def _show_progress(status: str, done: int, total: int, position) -> str:
    if status == "queued":
        return f"queued (position {position})" if position else "queued"
    if status == "running":
        return f"running: {done}/{total} tests" if total else "running"
    return status


def _finish(report_json: dict, args) -> int:
    report = grader.Report.from_json(report_json)
    print(render.render_terminal(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report_json, indent=2))
    return 0


# --------------------------------------------------------------------------- JSON API

def _via_api(args, filename: str, data: bytes) -> int:
    import requests
    if not args.token:
        print("grader: --server needs an API token: pass --token or set NKI_GRADER_TOKEN "
              "(create one on the site's account page)", file=sys.stderr)
        return 2
    base = args.server.rstrip("/")
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {args.token}"
    try:
        answer = session.post(f"{base}/api/v1/assignments/{args.assignment}/submissions",
                              files={"file": (filename, data)}, timeout=120)
    except requests.RequestException as err:
        print(f"grader: cannot reach {base}: {err}", file=sys.stderr)
        return 2
    if answer.status_code != 201:
        try:
            body = answer.json()
            message = f"{body.get('error', answer.reason)} {body.get('remedy', '')}".strip()
        except ValueError:
            message = f"HTTP {answer.status_code} {answer.reason}"
        print(f"grader: {filename}: {message}", file=sys.stderr)
        return 2
    created = answer.json()
    status_url = _absolute(base, created["status_url"])
    report_url = _absolute(base, created["report_url"])
    print(f"run {created['run_id']}: {created['status']}", file=sys.stderr)
    deadline = time.monotonic() + args.timeout
    last = None
    while True:
        state = session.get(status_url, timeout=60).json()
        line = _show_progress(state["status"], state.get("done") or 0, state.get("total") or 0,
                              state.get("queue_position"))
        if line != last:
            print(line, file=sys.stderr, flush=True)
            last = line
        if state["status"] not in ("queued", "running"):
            break
        if time.monotonic() > deadline:
            print(f"grader: run {created['run_id']} still {state['status']} after {args.timeout:.0f} s; "
                  f"follow it at {status_url}", file=sys.stderr)
            return 1
        time.sleep(POLL_S)
    report = session.get(report_url, timeout=60)
    if report.status_code != 200:
        print(f"grader: run {created['run_id']} ended {state['status']} without a report", file=sys.stderr)
        return 1
    return _finish(report.json(), args)


def _absolute(base: str, url: str) -> str:
    return url if url.startswith(("http://", "https://")) else base + url


# --------------------------------------------------------------------------- this machine

def _via_database(args, filename: str, data: bytes) -> int:
    from sqlalchemy import select
    from store import session_scope, upgrade
    from store.models import Assignment, User
    from . import enqueue
    upgrade()
    with session_scope() as s:
        assignment = s.scalar(select(Assignment).where(Assignment.name == args.assignment))
        if assignment is None and args.assignment in grader.available_specs():
            assignment = _local_assignment(s, args.assignment)
        if assignment is None:
            names = ", ".join(s.scalars(select(Assignment.name).order_by(Assignment.name))) or "none yet"
            print(f"grader: no assignment named {args.assignment!r} on this service (have: {names}); "
                  f"pass --assignment NAME, or create it on the site's staff console", file=sys.stderr)
            return 2
        user = s.scalar(select(User).where(User.email == args.email.lower()))
        if user is None:          # the machine's own operator: an account of their own, made on first use
            user = User(email=args.email.lower(), name=args.email.split("@")[0], role="student")
            s.add(user)
        try:
            run = enqueue.submit(s, user, assignment, filename, data)
        except grader.GraderInputError as err:
            print(f"grader: {filename}: {err}", file=sys.stderr)
            return 2
        run_id = run.id
        if not enqueue.queue_stats(s)["workers_alive"]:
            print("grader: no worker is alive yet; the run waits until one starts (`grader worker`)",
                  file=sys.stderr)
    print(f"run {run_id}: queued", file=sys.stderr)
    deadline = time.monotonic() + args.timeout
    last = None
    while True:
        with session_scope() as s:
            run = enqueue.run_by_id(s, run_id)
            line = _show_progress(run.status, run.progress_done, run.progress_total, enqueue.queue_position(s, run))
            status, report = run.status, run.report
        if line != last:
            print(line, file=sys.stderr, flush=True)
            last = line
        if status not in ("queued", "running"):
            break
        if time.monotonic() > deadline:
            print(f"grader: run {run_id} still {status} after {args.timeout:.0f} s", file=sys.stderr)
            return 1
        time.sleep(POLL_S)
    if report is None:
        print(f"grader: run {run_id} ended {status} without a report", file=sys.stderr)
        return 1
    return _finish(report, args)


def _local_assignment(session, spec_name: str):
    """First local submit to a bundled spec: a course "local" and an assignment of that name."""
    from sqlalchemy import select
    from store.models import Assignment, Course
    from . import specs
    toml, spec = specs.read_spec_file(spec_name)
    course = session.scalar(select(Course).where(Course.name == "local")) or Course(name="local")
    assignment = Assignment(course=course, name=spec_name, title=spec.title, spec_name=spec_name,
                            spec_version=spec.spec_version, thresholds_version=spec.thresholds_version,
                            spec_hash=specs.spec_hash(toml), spec_toml=toml, backend="sim")
    session.add(assignment)
    session.flush()
    return assignment
