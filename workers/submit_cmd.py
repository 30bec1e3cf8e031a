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
from grader.vocabulary import Backend, RunStatus

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


def _waiting_line(status: str, position, estimate_s) -> str:
    """The one line said while a run waits or starts; per-test lines follow as tests finish."""
    about = f", about {_duration(estimate_s)} left" if estimate_s is not None else ""
    if status == RunStatus.QUEUED:
        return f"{status} (position {position}{about})" if position else f"{status}{about}"
    if status == RunStatus.RUNNING:
        return f"{status}{about}"
    return said(status)


def said(status: str) -> str:
    """A run status as people read it ('grader error', not 'infra_error'); a word this client
    does not know (a newer server's) as it came."""
    return RunStatus(status).title if status in set(RunStatus) else status


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


class _Follower:
    """Prints what changed since the last look: the waiting line once per change, then one line
    per finished test, the same line `grader grade` prints."""

    def __init__(self) -> None:
        self.last_line = None
        self.tests_shown = 0

    def show(self, status: str, position, estimate_s, total: int, tests: list[dict]) -> None:
        if len(tests) < self.tests_shown:
            # handed back (its worker stopped cleanly) or re-queued by the reaper: graded anew
            print("handed back to the queue (its worker stopped): it is graded again from the first test",
                  file=sys.stderr, flush=True)
            self.tests_shown, self.last_line = 0, None
        if status in (RunStatus.QUEUED, RunStatus.RUNNING) and not tests:
            line = _waiting_line(status, position, None if status == RunStatus.RUNNING else estimate_s)
            if line != self.last_line:
                print(line, file=sys.stderr, flush=True)
                self.last_line = line
        for i in range(self.tests_shown, len(tests)):
            print(render.format_test_line(i + 1, total or len(tests), tests[i]), file=sys.stderr, flush=True)
        self.tests_shown = max(self.tests_shown, len(tests))


def _error(subject: str, message: str, remedy: str = "") -> int:
    """The CLI's one error shape: 'grader: SUBJECT: message. remedy' (subject: the file, the token,
    the server, the assignment), each part once."""
    message = message.strip()
    if remedy and remedy.strip() and remedy.strip() not in message:
        if not message.endswith((".", "!", "?")):
            message += "."
        message = f"{message} {remedy.strip()}"
    said = message if message.startswith(subject) else f"{subject}: {message}"     # the subject once
    print(f"grader: {render.escape_control(said)}", file=sys.stderr)
    return 2


def _finish(report_json: dict, args) -> int:
    report = grader.Report.from_json(report_json)
    print(render.render_terminal(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report_json, indent=2))
    return 0


# --------------------------------------------------------------------------- JSON API

def _via_api(args, filename: str, data: bytes) -> int:
    import requests
    base = args.server.rstrip("/")
    if not args.token:
        return _error("token", "--server needs an API token",
                      "Pass --token or set NKI_GRADER_TOKEN (create one on the site's account page).")
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {args.token}"
    print(f"grader: talking to the site at {base}", file=sys.stderr)
    try:
        answer = session.post(f"{base}/api/v1/assignments/{args.assignment}/submissions",
                              files={"file": (filename, data)}, timeout=120)
    except requests.RequestException as err:
        return _unreachable(base, err)
    if answer.status_code != 201:
        return _api_refusal(answer, filename, args.assignment)
    created = answer.json()
    status_url = _absolute(base, created["status_url"])
    report_url = _absolute(base, created["report_url"])
    print(f"run {created['run_id']}: {created['status']}", file=sys.stderr)
    deadline = time.monotonic() + args.timeout
    follower = _Follower()
    while True:
        try:
            state = session.get(status_url, timeout=60).json()
        except (requests.RequestException, ValueError) as err:
            return _unreachable(base, err, f"Run {created['run_id']} goes on; follow it at {status_url}.")
        follower.show(state["status"], state.get("queue_position"), state.get("estimate_s"),
                      state.get("total") or 0, state.get("tests") or [])
        if state["status"] not in (RunStatus.QUEUED, RunStatus.RUNNING):
            break
        if time.monotonic() > deadline:
            print(f"grader: run {created['run_id']} still {state['status']} after {args.timeout:.0f} s; "
                  f"follow it at {status_url}", file=sys.stderr)
            return 1
        time.sleep(POLL_S)
    report = session.get(report_url, timeout=60)
    if report.status_code != 200:
        print(f"grader: run {created['run_id']} ended {said(state['status'])} without a report", file=sys.stderr)
        return 1
    return _finish(report.json(), args)


def _unreachable(base: str, err: Exception, after: str = "") -> int:
    import requests
    if isinstance(err, requests.Timeout):
        why = "it did not answer in time"
    elif isinstance(err, requests.ConnectionError):
        why = "no connection could be made (wrong address, or the site is down)"
    elif isinstance(err, ValueError):
        why = "it did not answer with the grader's JSON API (is this the grader site's address?)"
    else:
        why = type(err).__name__
    return _error("server", f"cannot reach {base}: {why}",
                  after or "Check --server (the site's address, e.g. https://grader.example.edu) and try again.")


def _api_refusal(answer, filename: str, assignment: str) -> int:
    """A refused submission, said about what was wrong: the token, the assignment, or the file."""
    try:
        body = answer.json()
        message, remedy = str(body.get("error") or answer.reason), str(body.get("remedy") or "")
    except ValueError:
        message, remedy = f"HTTP {answer.status_code} {answer.reason}", ""
    if answer.status_code == 401:
        subject = "token"
    elif answer.status_code in (403, 404):
        subject = f"assignment {assignment!r}"
    elif answer.status_code == 429:
        subject = "server"
    else:
        subject = filename
    return _error(subject, message, remedy)


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
            user = User(email=args.email.lower(), name=args.email.split("@")[0], role="user")
            s.add(user)
        try:
            run = enqueue.submit(s, user, assignment, filename, data)
        except grader.GraderInputError as err:
            return _error(filename, err.reason, err.remedy)
        run_id = run.id
        if not enqueue.queue_stats(s)["workers_alive"]:
            print("grader: no worker is alive yet; the run waits until one starts (`grader worker`)",
                  file=sys.stderr)
    print(f"run {run_id}: queued", file=sys.stderr)
    deadline = time.monotonic() + args.timeout
    follower = _Follower()
    from sqlalchemy.exc import OperationalError
    while True:
        try:
            with session_scope() as s:
                run = enqueue.run_by_id(s, run_id)
                follower.show(run.status, enqueue.queue_position(s, run), enqueue.estimate_remaining_s(s, run),
                              run.progress_total, list(run.progress_tests or []))
                status, report = run.status, run.report
        except OperationalError:
            # the service stopped (an upgrade's step 2, Ctrl-C on serve): the run is kept
            print(f"grader: lost the service's database while following run {run_id} (did its `grader serve` "
                  f"stop?); the run is kept and graded once the service runs again: see it on the site, or "
                  f"with `grader queue`", file=sys.stderr)
            return 1
        if status not in (RunStatus.QUEUED, RunStatus.RUNNING):
            break
        if time.monotonic() > deadline:
            print(f"grader: run {run_id} still {status} after {args.timeout:.0f} s", file=sys.stderr)
            return 1
        time.sleep(POLL_S)
    if report is None:
        print(f"grader: run {run_id} ended {said(status)} without a report", file=sys.stderr)
        return 1
    return _finish(report, args)


def _local_assignment(session, spec_name: str):
    """First local submit to a bundled spec: a course "local" and an assignment of that name."""
    from sqlalchemy import select
    from store import specs
    from store.models import Course
    course = session.scalar(select(Course).where(Course.name == "local")) or Course(name="local")
    assignment = specs.new_assignment(session, spec_name, course=course, name=spec_name, backend=Backend.SIM)
    session.flush()
    return assignment
