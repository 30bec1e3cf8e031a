"""Which run counts: the one best-run rule of the service.

For a student on an assignment and backend, the counted run is, among their runs that
- finished grading (status done, with a total score),
- are not flagged (held for staff review),
- were uploaded by their deadline (the assignment's, or their own extension; none: no limit),
  a Gradescope submission by Gradescope's submission time (Submission.gradescope_created_at),
  or count late by the assignment's late rule (Assignment.late_rule: credit-steps scales a run
  d started days late by late_factors[d-1]; late-days lets a student's late days, spent where
  they raise the grade most, cover it; none and graded-not-counted never count a late run),
- for a Gradescope submission, are its latest graded run (a regrade replaces the earlier one),
the one with the highest total; ties broken by the lower sum of performance-test p99s (a run
without one after a run with one), then by the earlier finish, then by the lower run id.

The leaderboard ranks students by the same key. The leaderboard, the grades CSV and Gradescope
export, the course API (Gradescope service mode) and the student's own page all ask `best_runs`
or `best_run`, so a grade a TA uploads is the run the leaderboard shows. Who is listed
(active students on the board, enrolled ones in an export) is each caller's choice; which of
a person's runs counts is not."""
from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Iterable

from sqlalchemy import bindparam, text
from sqlalchemy.orm import Session

from grader.vocabulary import RunStatus, TestKind

RULE = ("Each student's best graded run counts: the highest total score, ties broken by the lowest sum of "
        "performance-test p99 latencies, then by who got there first. Only runs uploaded by the student's "
        "deadline (with any extension) count, unless the assignment's late rule counts late ones (shown on "
        "the assignment's page), a Gradescope submission by Gradescope's submission time and by its latest grade; flagged runs (held for staff review) are hidden. Simulated "
        "and hardware results are ranked separately; simulated p99s rank by the estimates themselves, "
        "whatever the simulator's error band their reports show.")

# A run's lateness: whole days (started days) after the student's deadline (theirs if extended),
# by the submission's time (Gradescope's for its submissions); 0 on time or without a deadline.
_CANDIDATES = """
SELECT s.user_id, s.assignment_id, r.id AS run_id, r.score_total AS raw_total, r.max_total, r.finished_at,
       CASE WHEN coalesce(e.deadline, a.deadline) IS NULL
                 OR coalesce(s.gradescope_created_at, s.uploaded_at) <= coalesce(e.deadline, a.deadline) THEN 0
            ELSE CAST(ceil(extract(epoch FROM coalesce(s.gradescope_created_at, s.uploaded_at)
                                              - coalesce(e.deadline, a.deadline)) / 86400.0) AS integer)
       END AS days_late
FROM grading_runs r
JOIN submissions s ON s.id = r.submission_id
JOIN assignments a ON a.id = s.assignment_id
LEFT JOIN deadline_extensions e ON e.assignment_id = a.id AND e.user_id = s.user_id
WHERE {scope} AND r.status = :graded AND NOT r.flagged AND r.score_total IS NOT NULL
  AND (s.gradescope_submission_id IS NULL
       OR r.id = (SELECT max(g.id) FROM grading_runs g
                  WHERE g.submission_id = s.id AND g.backend = r.backend AND g.status = :graded))
"""

# A late run counts when its days late are at most the student's allowance (the JSON map's, else
# :allowed), scaled by :factors[days late] (1 on time). p99 sums are only added up for each
# student's runs at their best total: ties are rare, so about one run per student.
_BEST_RUNS = """
WITH candidates AS ({candidates} {only_users}),
scaled AS (
    SELECT c.*, c.raw_total * CASE WHEN c.days_late = 0 THEN 1.0
                                   ELSE (CAST(:factors AS double precision[]))[c.days_late] END AS score_total
    FROM candidates c
    WHERE c.days_late <= coalesce(CAST(CAST(:allowed_by_user AS jsonb) ->> CAST(c.user_id AS text) AS integer),
                                  :allowed)),
counted AS (SELECT sc.*, max(sc.score_total) OVER (PARTITION BY sc.user_id) AS best_total FROM scaled sc),
at_best AS (
    SELECT c.*, (SELECT sum(t.p99_us) FROM test_results t
                 WHERE t.run_id = c.run_id AND t.kind = :timed_kind) AS p99_sum
    FROM counted c WHERE c.score_total = c.best_total)
SELECT DISTINCT ON (user_id) user_id, run_id, score_total, raw_total, days_late, max_total, finished_at, p99_sum
FROM at_best
ORDER BY user_id, p99_sum ASC NULLS LAST, finished_at ASC, run_id ASC
"""
_ONE_ASSIGNMENT = "s.assignment_id = :assignment_id AND r.backend = :backend"
_ALL = text(_BEST_RUNS.format(candidates=_CANDIDATES.format(scope=_ONE_ASSIGNMENT), only_users=""))
_SOME = text(_BEST_RUNS.format(candidates=_CANDIDATES.format(scope=_ONE_ASSIGNMENT),
                               only_users="AND s.user_id IN :user_ids")).bindparams(
    bindparam("user_ids", expanding=True))

# late-days: per student, assignment and days late, the best fraction of the maximum a run earns
_LATE_DAY_GAINS = text("""
SELECT c.user_id, c.assignment_id, c.days_late, max(c.raw_total / nullif(c.max_total, 0)) AS fraction
FROM ({candidates}) c GROUP BY c.user_id, c.assignment_id, c.days_late
""".format(candidates=_CANDIDATES.format(
    scope="a.course_id = :course_id AND a.late_rule = 'late-days' AND r.backend = a.backend")))


@dataclass(frozen=True)
class CountedRun:
    """A student's counted run, with what the rule compared."""
    user_id: int
    run_id: int
    total: float
    max_total: float | None
    p99_sum: float | None          # sum of performance-test p99s (us); None: none measured
    finished_at: dt.datetime
    days_late: int = 0             # started days after the student's deadline; 0 on time
    raw_total: float | None = None    # the run's own total, before a late rule scaled it (total)

    @property
    def factor(self) -> float:
        """What the late rule kept of the run's own total (1 on time)."""
        return self.total / self.raw_total if self.raw_total else 1.0

    def rank_key(self) -> tuple:
        """Smaller is better: the order the rule picks a run by, and the leaderboard ranks by."""
        return (-self.total, self.p99_sum is None, self.p99_sum or 0.0, self.finished_at, self.run_id)


def late_terms(session: Session, assignment_id: int, user_ids: Iterable[int] | None = None) -> dict:
    """How the assignment's late rule counts a late run, as the query's parameters: the per-day
    factors, the days late any student may count, and per student (late-days) their own."""
    rule, factors, course_id, budget = session.execute(text(
        "SELECT a.late_rule, a.late_factors, a.course_id, c.late_days FROM assignments a "
        "JOIN courses c ON c.id = a.course_id WHERE a.id = :id"), {"id": assignment_id}).one()
    if rule == "credit-steps":
        return {"factors": [float(f) for f in factors], "allowed": len(factors), "allowed_by_user": "{}"}
    if rule == "late-days":
        spent = late_days_spent(session, course_id, budget, user_ids)
        by_user = {str(u): days for (u, a), days in spent.items() if a == assignment_id}
        return {"factors": [1.0] * budget, "allowed": 0, "allowed_by_user": json.dumps(by_user)}
    return {"factors": [], "allowed": 0, "allowed_by_user": "{}"}      # none, graded-not-counted


def late_days_spent(session: Session, course_id: int, budget: int | None = None,
                    user_ids: Iterable[int] | None = None) -> dict[tuple[int, int], int]:
    """(user id, assignment id) -> late days spent there, for the course's late-days assignments.

    Spent automatically where they raise the student's grade most: the split of the budget over
    the assignments that maximises the sum of each counted run's fraction of its maximum; among
    equal splits the one spending fewest days.
    A day is only spent where it makes a late run count higher than what counts without it."""
    if budget is None:
        budget = session.execute(text("SELECT late_days FROM courses WHERE id = :id"), {"id": course_id}).scalar_one()
    if budget <= 0:
        return {}
    wanted = None if user_ids is None else set(user_ids)
    gains: dict[int, dict[int, dict[int, float]]] = {}      # user -> assignment -> days late -> best fraction
    for r in session.execute(_LATE_DAY_GAINS, {"course_id": course_id, "graded": RunStatus.DONE.value}):
        if wanted is None or r.user_id in wanted:
            gains.setdefault(r.user_id, {}).setdefault(r.assignment_id, {})[r.days_late] = r.fraction or 0.0
    spent: dict[tuple[int, int], int] = {}
    for user_id, per_assignment in gains.items():
        for assignment_id, days in _split(budget, per_assignment).items():
            if days:
                spent[(user_id, assignment_id)] = days
    return spent


def _split(budget: int, per_assignment: dict[int, dict[int, float]]) -> dict[int, int]:
    """Knapsack over assignments: days for each, at most `budget` in all, maximising the sum of
    the best fraction counted with that many days (ties: fewest days)."""
    order = sorted(per_assignment)
    def earned(a: int, k: int) -> float:
        return max((f for d, f in per_assignment[a].items() if d <= k), default=0.0)
    # best[b] = (score, -days used, choice per assignment so far), over assignments seen, b days left
    best: list[tuple[float, int, tuple[int, ...]]] = [(0.0, 0, ())] * (budget + 1)
    for a in order:
        step = []
        for b in range(budget + 1):
            options = []
            for k in range(b + 1):
                score, neg_used, choice = best[b - k]
                options.append((round(score + earned(a, k), 9), neg_used - k, choice + (k,)))
            step.append(max(options, key=lambda o: (o[0], o[1])))      # highest score, then fewest days
        best = step
    return dict(zip(order, best[budget][2]))


def best_runs(session: Session, assignment_id: int, backend: str,
              user_ids: Iterable[int] | None = None) -> dict[int, CountedRun]:
    """user id -> counted run, for everyone with one (or only for `user_ids`)."""
    params = {"assignment_id": assignment_id, "backend": backend, "graded": RunStatus.DONE.value,
              "timed_kind": TestKind.PERFORMANCE.value}
    if user_ids is None:
        params.update(late_terms(session, assignment_id))
        rows = session.execute(_ALL, params)
    else:
        wanted = list(user_ids)
        if not wanted:
            return {}
        params.update(late_terms(session, assignment_id, wanted))
        rows = session.execute(_SOME, {**params, "user_ids": wanted})
    return {r.user_id: CountedRun(r.user_id, r.run_id, r.score_total, r.max_total, r.p99_sum, r.finished_at,
                                  r.days_late, r.raw_total)
            for r in rows}


def best_run(session: Session, assignment_id: int, backend: str, user_id: int) -> CountedRun | None:
    """One student's counted run, or None while nothing of theirs counts."""
    return best_runs(session, assignment_id, backend, [user_id]).get(user_id)


def ranked(counted: Iterable[CountedRun]) -> list[CountedRun]:
    """Counted runs best first: students ranked by the rule that picked each one's run."""
    return sorted(counted, key=CountedRun.rank_key)
