"""Leaderboard standings: each student's best graded run, ranked.

The rule (also written on the page): only finished, unflagged runs of active students count;
hardware and simulated runs are ranked apart; a student's best run is the highest total,
ties broken by the lower sum of performance p99s, then the earlier run; students are ranked
the same way. Rows are computed by one SQL query and kept for a couple of seconds per
process, so a busy leaderboard costs one query per process every few seconds."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.orm import Session

RULE = ("Each student's best graded run counts: the highest total score, ties broken by the lowest sum of "
        "performance-test p99 latencies, then by who got there first. Flagged runs (held for staff "
        "review) are hidden. Simulated and hardware results are ranked separately.")

_BEST_RUNS = text("""
WITH candidates AS (
    SELECT DISTINCT ON (s.user_id)
           s.user_id, r.id AS run_id, r.score_total, r.max_total, r.finished_at, perf.p99_sum
    FROM grading_runs r
    JOIN submissions s ON s.id = r.submission_id
    JOIN users u ON u.id = s.user_id
    LEFT JOIN LATERAL (
        SELECT sum(t.p99_us) AS p99_sum FROM test_results t
        WHERE t.run_id = r.id AND t.kind = 'performance') perf ON true
    WHERE s.assignment_id = :assignment_id AND r.backend = :backend AND r.status = 'done'
      AND NOT r.flagged AND r.score_total IS NOT NULL AND u.active AND u.role = 'student'
    ORDER BY s.user_id, r.score_total DESC, perf.p99_sum ASC NULLS LAST, r.finished_at ASC, r.id ASC)
SELECT c.*, u.nickname FROM candidates c JOIN users u ON u.id = c.user_id
ORDER BY c.score_total DESC, c.p99_sum ASC NULLS LAST, c.finished_at ASC, c.run_id ASC
""")

_TIMED_P99S = text("""
SELECT run_id, test_name, p99_us FROM test_results
WHERE run_id = ANY(:run_ids) AND kind IN ('performance', 'extra_credit')
""")


@dataclass(frozen=True)
class Standing:
    rank: int
    user_id: int
    nickname: str | None
    run_id: int
    total: float
    max_total: float | None
    p99_sum: float | None
    p99s: dict[str, float | None]      # timed test name -> p99 us
    finished_at: object


def compute(session: Session, assignment_id: int, backend: str) -> list[Standing]:
    rows = session.execute(_BEST_RUNS, {"assignment_id": assignment_id, "backend": backend}).all()
    p99s: dict[int, dict[str, float | None]] = {r.run_id: {} for r in rows}
    if rows:
        for t in session.execute(_TIMED_P99S, {"run_ids": list(p99s)}):
            p99s[t.run_id][t.test_name] = t.p99_us
    return [Standing(i + 1, r.user_id, r.nickname, r.run_id, r.score_total, r.max_total, r.p99_sum,
                     p99s[r.run_id], r.finished_at) for i, r in enumerate(rows)]


class StandingsCache:
    """(assignment, backend) -> (computed at, standings), for at most max_age seconds."""

    def __init__(self):
        self._lock = threading.Lock()
        self._entries: dict[tuple[int, str], tuple[float, list[Standing]]] = {}

    def get(self, session: Session, assignment_id: int, backend: str, max_age: float) -> list[Standing]:
        key = (assignment_id, backend)
        with self._lock:
            entry = self._entries.get(key)
        if entry is not None and time.monotonic() - entry[0] < max_age:
            return entry[1]
        standings = compute(session, assignment_id, backend)
        with self._lock:
            self._entries[key] = (time.monotonic(), standings)
        return standings

    def forget(self, assignment_id: int | None = None) -> None:
        """After a flag, rescore or threshold change here (other processes catch up within max_age)."""
        with self._lock:
            for key in [k for k in self._entries if assignment_id is None or k[0] == assignment_id]:
                del self._entries[key]
