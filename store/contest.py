"""A contest's ranking (an assignment with mode 'contest'): KernelBot's `geom` rule, in one
place for the board and the JSON API (web/contest.py, web/api.py) and the grade exports
(workers/exports.py).

A run is ranked only when it is fully correct: graded (status done), not flagged, submitted by
the contest's end, every correctness test of the spec passed, and every timed test measured
(a p99, so its output was checked as strictly as a correctness run's: grader/grade.py checks
timed outputs with the same tolerances and the downgrade check). Its score is the geometric
mean of its timed tests' p99s (each test's p99 is its slowest configuration's), lower is better.
Each participant's best run counts, ties going to the earlier submission. A participant with a
disqualified run is not ranked at all; the board lists them with the reason."""
from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session

from grader.vocabulary import RunStatus, TestKind, TestStatus

from .models import Assignment, Enrollment, GradingRun, Submission, TestResultRow, User
from .specs import spec_of

RULE = ("Contest ranking (geometric mean, KernelBot's geom): only fully correct runs are ranked, ones "
        "that passed every correctness test and were measured on every timed benchmark (whose outputs are "
        "checked as strictly as the correctness runs'). A run's score is the geometric mean of its p99 "
        "latencies over the benchmarks, lower is better; each participant's best run counts, ties going to "
        "the earlier submission. Runs submitted after the contest's end, flagged runs (held for staff "
        "review) and participants with a disqualified run are not ranked. Submitted code is revealed to "
        "every participant when the contest ends.")


def geometric_mean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


@dataclass(frozen=True)
class ContestRun:
    run_id: int
    user_id: int
    submitted_at: dt.datetime
    score_us: float | None            # None: not fully correct (why says what)
    p99s: dict[str, float]
    why: str = ""


@dataclass(frozen=True)
class Entry:
    rank: int
    user_id: int
    nickname: str | None
    run: ContestRun


@dataclass(frozen=True)
class Disqualified:
    user_id: int
    nickname: str | None
    run_id: int
    reason: str
    at: dt.datetime | None


@dataclass
class Board:
    entries: list[Entry] = field(default_factory=list)
    disqualified: list[Disqualified] = field(default_factory=list)
    benchmarks: list = field(default_factory=list)     # the spec's timed tests, in order


def ended(assignment: Assignment, now: dt.datetime | None = None) -> bool:
    end = assignment.contest_ends_at
    return end is not None and (now or dt.datetime.now(dt.timezone.utc)) >= end


def judge(run: GradingRun, results: list[TestResultRow], correctness: list[str], timed: list[str],
          end: dt.datetime | None) -> ContestRun:
    """What the rule makes of one run."""
    sub = run.submission
    base = dict(run_id=run.id, user_id=sub.user_id, submitted_at=sub.submitted_at)
    by_name = {r.test_name: r for r in results}
    p99s = {n: by_name[n].p99_us for n in timed if n in by_name and by_name[n].p99_us is not None}
    if run.status != RunStatus.DONE:
        return ContestRun(**base, score_us=None, p99s=p99s, why=f"not graded ({run.status})")
    if run.flagged:
        return ContestRun(**base, score_us=None, p99s=p99s, why="flagged for staff review")
    if end is not None and sub.submitted_at > end:
        return ContestRun(**base, score_us=None, p99s=p99s, why="submitted after the contest's end")
    failed = [n for n in correctness if n not in by_name or by_name[n].status != TestStatus.PASSED]
    if failed:
        return ContestRun(**base, score_us=None, p99s=p99s, why=f"correctness not passed: {', '.join(failed)}")
    unmeasured = [n for n in timed if n not in p99s or not p99s[n] > 0
                  or by_name[n].status in (TestStatus.ERROR, TestStatus.SKIPPED)]
    if unmeasured or not timed:
        return ContestRun(**base, score_us=None, p99s=p99s, why=f"not measured: {', '.join(unmeasured) or 'no benchmark'}")
    return ContestRun(**base, score_us=geometric_mean([p99s[n] for n in timed]), p99s=p99s)


def contest_runs(session: Session, assignment: Assignment, backend: str,
                 user_ids: list[int] | None = None) -> list[ContestRun]:
    """Every finished run of the contest on `backend` (of `user_ids` only, when given), judged."""
    spec = spec_of(assignment)
    correctness = [t.name for t in spec.tests if t.kind == TestKind.CORRECTNESS]
    timed = [t.name for t in spec.tests if t.timed]
    query = (select(GradingRun).join(Submission).where(Submission.assignment_id == assignment.id,
                                                          GradingRun.backend == backend,
                                                          GradingRun.status == RunStatus.DONE)
             .order_by(GradingRun.id))
    if user_ids is not None:
        query = query.where(Submission.user_id.in_(user_ids))
    runs = list(session.scalars(query))
    rows: dict[int, list[TestResultRow]] = {r.id: [] for r in runs}
    if runs:
        for row in session.scalars(select(TestResultRow).where(TestResultRow.run_id.in_(list(rows)))):
            rows[row.run_id].append(row)
    return [judge(r, rows[r.id], correctness, timed, assignment.contest_ends_at)
            for r in runs if r.disqualified_reason is None]


def best(runs: list[ContestRun]) -> dict[int, ContestRun]:
    """user id -> their best ranked run (lowest score, then the earlier submission)."""
    chosen: dict[int, ContestRun] = {}
    for run in sorted((r for r in runs if r.score_us is not None),
                      key=lambda r: (r.score_us, r.submitted_at, r.run_id)):
        chosen.setdefault(run.user_id, run)
    return chosen


def compute(session: Session, assignment: Assignment, backend: str) -> Board:
    spec = spec_of(assignment)
    people = dict(session.execute(
        select(User.id, User.nickname).join(Enrollment, Enrollment.user_id == User.id)
        .where(Enrollment.course_id == assignment.course_id, Enrollment.role == "student", User.active)).all())
    dq_rows = session.execute(
        select(GradingRun, Submission.user_id).join(Submission)
        .where(Submission.assignment_id == assignment.id, GradingRun.backend == backend,
               GradingRun.disqualified_reason.is_not(None)).order_by(GradingRun.disqualified_at, GradingRun.id)).all()
    disqualified = [Disqualified(uid, people.get(uid), run.id, run.disqualified_reason, run.disqualified_at)
                    for run, uid in dq_rows if uid in people]
    out = {d.user_id for d in disqualified}
    chosen = [r for uid, r in best(contest_runs(session, assignment, backend)).items()
              if uid in people and uid not in out]
    chosen.sort(key=lambda r: (r.score_us, r.submitted_at, r.run_id))
    return Board([Entry(i + 1, r.user_id, people[r.user_id], r) for i, r in enumerate(chosen)],
                 disqualified, [t for t in spec.tests if t.timed])


def best_over_time(runs: list[ContestRun]) -> list[tuple[dt.datetime, float]]:
    """(submission time, the participant's best score so far) at each ranked run that improved it."""
    points, so_far = [], None
    for run in sorted((r for r in runs if r.score_us is not None), key=lambda r: (r.submitted_at, r.run_id)):
        if so_far is None or run.score_us < so_far:
            so_far = run.score_us
            points.append((run.submitted_at, so_far))
    return points
