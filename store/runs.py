"""Which run counts: the one best-run rule of the service.

For a student on an assignment and backend, the counted run is, among their runs that
- finished grading (status done, with a total score),
- are not flagged (held for staff review),
- were uploaded by their deadline (the assignment's, or their own extension; none: no limit),
  a Gradescope submission by Gradescope's submission time (Submission.gradescope_created_at),
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
from dataclasses import dataclass
from typing import Iterable

from sqlalchemy import bindparam, text
from sqlalchemy.orm import Session

from grader.vocabulary import RunStatus, TestKind

RULE = ("Each student's best graded run counts: the highest total score, ties broken by the lowest sum of "
        "performance-test p99 latencies, then by who got there first. Only runs uploaded by the student's "
        "deadline (with any extension) count, a Gradescope submission by Gradescope's submission time and "
        "by its latest grade; flagged runs (held for staff review) are hidden. Simulated "
        "and hardware results are ranked separately; simulated p99s rank by the estimates themselves, "
        "whatever the simulator's error band their reports show.")

# p99 sums are only added up for each student's runs at their best total: ties are rare, so
# the sum is computed for about one run per student, not for every run.
_BEST_RUNS = """
WITH counted AS (
    SELECT s.user_id, r.id AS run_id, r.score_total, r.max_total, r.finished_at,
           max(r.score_total) OVER (PARTITION BY s.user_id) AS best_total
    FROM grading_runs r
    JOIN submissions s ON s.id = r.submission_id
    JOIN assignments a ON a.id = s.assignment_id
    LEFT JOIN deadline_extensions e ON e.assignment_id = a.id AND e.user_id = s.user_id
    WHERE s.assignment_id = :assignment_id AND r.backend = :backend AND r.status = :graded
      AND NOT r.flagged AND r.score_total IS NOT NULL
      AND (coalesce(e.deadline, a.deadline) IS NULL
           OR coalesce(s.gradescope_created_at, s.uploaded_at) <= coalesce(e.deadline, a.deadline))
      AND (s.gradescope_submission_id IS NULL
           OR r.id = (SELECT max(g.id) FROM grading_runs g
                      WHERE g.submission_id = s.id AND g.backend = r.backend AND g.status = :graded))
      {only_users}),
at_best AS (
    SELECT c.*, (SELECT sum(t.p99_us) FROM test_results t
                 WHERE t.run_id = c.run_id AND t.kind = :timed_kind) AS p99_sum
    FROM counted c WHERE c.score_total = c.best_total)
SELECT DISTINCT ON (user_id) user_id, run_id, score_total, max_total, finished_at, p99_sum FROM at_best
ORDER BY user_id, p99_sum ASC NULLS LAST, finished_at ASC, run_id ASC
"""
_ALL = text(_BEST_RUNS.format(only_users=""))
_SOME = text(_BEST_RUNS.format(only_users="AND s.user_id IN :user_ids")).bindparams(
    bindparam("user_ids", expanding=True))


@dataclass(frozen=True)
class CountedRun:
    """A student's counted run, with what the rule compared."""
    user_id: int
    run_id: int
    total: float
    max_total: float | None
    p99_sum: float | None          # sum of performance-test p99s (us); None: none measured
    finished_at: dt.datetime

    def rank_key(self) -> tuple:
        """Smaller is better: the order the rule picks a run by, and the leaderboard ranks by."""
        return (-self.total, self.p99_sum is None, self.p99_sum or 0.0, self.finished_at, self.run_id)


def best_runs(session: Session, assignment_id: int, backend: str,
              user_ids: Iterable[int] | None = None) -> dict[int, CountedRun]:
    """user id -> counted run, for everyone with one (or only for `user_ids`)."""
    params = {"assignment_id": assignment_id, "backend": backend, "graded": RunStatus.DONE.value,
              "timed_kind": TestKind.PERFORMANCE.value}
    if user_ids is None:
        rows = session.execute(_ALL, params)
    else:
        wanted = list(user_ids)
        if not wanted:
            return {}
        rows = session.execute(_SOME, {**params, "user_ids": wanted})
    return {r.user_id: CountedRun(r.user_id, r.run_id, r.score_total, r.max_total, r.p99_sum, r.finished_at)
            for r in rows}


def best_run(session: Session, assignment_id: int, backend: str, user_id: int) -> CountedRun | None:
    """One student's counted run, or None while nothing of theirs counts."""
    return best_runs(session, assignment_id, backend, [user_id]).get(user_id)


def ranked(counted: Iterable[CountedRun]) -> list[CountedRun]:
    """Counted runs best first: students ranked by the rule that picked each one's run."""
    return sorted(counted, key=CountedRun.rank_key)
