"""Grading runs as pages show them: who may see one, its live status, and its report as the
grader's report view (grader.view_of), which the report pages draw."""
from __future__ import annotations

import re
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session, defer, joinedload

import grader
from grader import render
from grader.report_view import Points
from grader.vocabulary import RunStatus, TestKind, TestStatus, Tier
from store import runs as store_runs
from store.models import FINAL_STATUSES, GradingRun, Submission
from workers import enqueue

from .accounts import Account
from .charts import TimingRow, p99_chart
from .errors import UserError


def visible_run(session: Session, user: Account, run_id: int, with_report: bool = False) -> GradingRun:
    """The run if user owns it or is staff. Others get the same 404 as a missing run, so run
    ids reveal nothing about other students. The uploaded bytes (up to 16 MiB) and, unless
    asked for, the report JSON are not loaded: status polling reads neither."""
    options = [joinedload(GradingRun.submission).defer(Submission.data)]
    if not with_report:
        options.append(defer(GradingRun.report))
    run = session.scalar(select(GradingRun).where(GradingRun.id == run_id).options(*options))
    if run is None or not (run.submission.user_id == user.id or user.is_staff_of(run.submission.assignment.course_id)):
        raise UserError(f"There is no run {run_id} of yours.", "Open your runs from the assignment page.", 404)
    return run


def status_json(session: Session, run: GradingRun) -> dict:
    """A run's live state: status, place in its queue, the tests finished so far (as they finish)
    and an estimate of the seconds left from recent grades of the same assignment."""
    finished = run.status in FINAL_STATUSES
    estimate = None if finished else enqueue.estimate_remaining_s(session, run)
    return {"run_id": run.id, "status": run.status, "status_title": RunStatus(run.status).title, "final": finished,
            "queue_position": None if finished else enqueue.queue_position(session, run),
            "done": run.progress_done, "total": run.progress_total,
            "waiting": None if finished else enqueue.waiting_reason(session, run),
            "tests": list(run.progress_tests or []),
            "estimate_s": None if estimate is None else round(estimate),
            "score": run.score_total if run.status == RunStatus.DONE else None,
            "max_score": run.max_total if run.status == RunStatus.DONE else None,
            "score_text": score_text(run)}


def score_text(run: GradingRun) -> str | None:
    """'65/70 (regular 60/70 + extra credit 5)' for a graded run, in the report view's words:
    a total with extra credit on top must not hide the regular points lost."""
    if run.status != RunStatus.DONE or run.score_total is None:
        return None
    extra = sum(t.points for t in run.test_results if t.kind == TestKind.EXTRA_CREDIT)
    return Points((), run.score_total, run.max_total or 0.0, extra).total_text


def counted_run(session: Session, run: GradingRun) -> store_runs.CountedRun | None:
    """The run that counts for this run's student, assignment and backend (store/runs.py's one
    rule), or None while none does."""
    return store_runs.best_run(session, run.submission.assignment_id, run.backend, run.submission.user_id)


def counted_ids(session: Session, rows) -> set[int]:
    """Of (run, submission) pairs, the ids of the runs that count: one best-run query per
    assignment and backend on the page, for the students listed."""
    wanted: dict[tuple[int, str], set[int]] = {}
    for run, sub in rows:
        wanted.setdefault((sub.assignment_id, run.backend), set()).add(sub.user_id)
    return {c.run_id for (assignment_id, backend), users in wanted.items()
            for c in store_runs.best_runs(session, assignment_id, backend, users).values()}


def report_of(run: GradingRun) -> grader.Report | None:
    return grader.Report.from_json(run.report) if run.report else None


def student_report_json(run: GradingRun) -> dict:
    """The report as students and the API get it: never the seed, whatever was stored."""
    data = dict(render.to_json(view_of_run(run)))
    data.pop("seed", None)
    return data


# ----- what the report page draws: the grader's report view, nothing derived here -----

def view_of_run(run: GradingRun) -> grader.ReportView | None:
    report = report_of(run)
    return grader.view_of(report) if report else None


def profile_svg(view: grader.ReportView, test_name: str) -> str | None:
    test = view.test(test_name)
    return test.profile.svg if test and test.profile else None


def timing_chart(view: grader.ReportView):
    rows = [TimingRow(t.title, t.p99_us, _us(t.threshold(Tier.OPTIMIZED)), _us(t.threshold(Tier.RELAXED)))
            for t in view.tests if t.timed]
    return p99_chart(rows) if rows else None


def _us(threshold) -> float | None:
    return threshold.us if threshold is not None else None


# a message's first line "CONFIG: Type: ..." (a kernel's exception on one configuration): the
# configuration is the test's, the rest is the error, which several tests often share word for word
_ON_CONFIG = re.compile(r"^(?P<config>[^\n]{1,300}?): (?P<error>(?:[A-Za-z_][\w.]*(?:Error|Exception|Exit|Failure|Interrupt)"
                        r"|\[err_\w+\])(?::|$).*)$")


@dataclass(frozen=True)
class ErrorBlock:
    """One error as the page shows it: once, as preformatted text, with the tests it stopped."""
    number: int
    text: str                               # the grader's lines, breaks and indentation kept
    tests: tuple[tuple[str, str], ...]      # (test title, the configuration it failed on, or "")


@dataclass(frozen=True)
class ErrorRef:
    """What a test's row says of its error: the block's number, its configuration and the error's kind."""
    number: int
    config: str
    kind: str


def error_blocks(view: grader.ReportView) -> tuple[list[ErrorBlock], dict[str, ErrorRef]]:
    """The kernel errors of the tests that ended in error (an exception on a configuration, or any
    message of several lines), each distinct text once, in test order, and per test name the
    block its row points to."""
    texts: dict[str, list[tuple[str, str]]] = {}
    refs: dict[str, tuple[str, str, str]] = {}
    for t in view.tests:
        if t.status != TestStatus.ERROR or not t.message.strip():
            continue
        first, _, more = t.message.partition("\n")
        match = _ON_CONFIG.match(first)
        if not (match or more):           # a one-line word such as "not run: ..." stays on its row
            continue
        config, text = (match["config"], match["error"] + ("\n" + more if more else "")) if match else ("", t.message)
        texts.setdefault(text, []).append((t.title, config))
        refs[t.name] = (text, config, text.split(":", 1)[0] if match else "")
    numbers = {text: i for i, text in enumerate(texts, start=1)}
    blocks = [ErrorBlock(numbers[text], text, tuple(tests)) for text, tests in texts.items()]
    return blocks, {name: ErrorRef(numbers[text], config, kind) for name, (text, config, kind) in refs.items()}


def report_page(view: grader.ReportView, for_staff: bool) -> dict:
    """What _report.html needs besides the run: the view, its chart, whose words for flags, and
    its errors (each shown once)."""
    errors, error_of = error_blocks(view)
    return {"view": view, "chart": timing_chart(view), "for_staff": for_staff, "errors": errors,
            "error_of": error_of}
