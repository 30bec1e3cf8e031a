"""Leaderboard standings: each student's best graded run, ranked.

The rule (also written on the page): only finished, unflagged runs of active students count;
hardware and simulated runs are ranked apart; a student's best run is the highest total,
ties broken by the lower sum of performance p99s, then the earlier run; students are ranked
the same way.

Standings are computed by one SQL query and kept per process, tagged with the assignment's
standings stamp (`assignments.standings_changed_at`), which every write that can change them
moves in its own transaction (a finished grade, a flag, a rescore, a nickname). A view whose
stamp differs from the cached entry's recomputes before answering, so a finished grade is on
the board at the next request in every process. An entry older than max_age with an unmoved
stamp is still served while one background thread recomputes it (a safety net for writes
outside the application), so under load no request waits for the query."""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable

from sqlalchemy import text
from sqlalchemy.orm import Session

log = logging.getLogger(__name__)

RULE = ("Each student's best graded run counts: the highest total score, ties broken by the lowest sum of "
        "performance-test p99 latencies, then by who got there first. Flagged runs (held for staff "
        "review) are hidden. Simulated and hardware results are ranked separately.")

# p99 sums are only added up for each student's runs at their best total: ties are rare, so
# the sum is computed for about one run per student, not for every run.
_BEST_RUNS = text("""
WITH counted AS (
    SELECT s.user_id, r.id AS run_id, r.score_total, r.max_total, r.finished_at,
           max(r.score_total) OVER (PARTITION BY s.user_id) AS best_total
    FROM grading_runs r
    JOIN submissions s ON s.id = r.submission_id
    JOIN users u ON u.id = s.user_id
    WHERE s.assignment_id = :assignment_id AND r.backend = :backend AND r.status = 'done'
      AND NOT r.flagged AND r.score_total IS NOT NULL AND u.active
      AND EXISTS (SELECT 1 FROM enrollments e JOIN assignments a ON a.course_id = e.course_id
                  WHERE a.id = s.assignment_id AND e.user_id = s.user_id AND e.role = 'student')),
at_best AS (
    SELECT c.*, (SELECT sum(t.p99_us) FROM test_results t
                 WHERE t.run_id = c.run_id AND t.kind = 'performance') AS p99_sum
    FROM counted c WHERE c.score_total = c.best_total),
best AS (
    SELECT DISTINCT ON (user_id) * FROM at_best
    ORDER BY user_id, p99_sum ASC NULLS LAST, finished_at ASC, run_id ASC)
SELECT b.*, u.nickname FROM best b JOIN users u ON u.id = b.user_id
ORDER BY b.score_total DESC, b.p99_sum ASC NULLS LAST, b.finished_at ASC, b.run_id ASC
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


@dataclass
class _Entry:
    computed_at: float
    stamp: object                # the assignment's standings stamp when computed
    standings: list[Standing]
    rendered: dict               # whatever views derive from the standings (page HTML), same lifetime
    refreshing: bool = False


class StandingsCache:
    """(assignment, backend) -> standings, recomputed at most every max_age seconds."""

    def __init__(self, sessions: Callable[[], Session]):
        self._sessions = sessions
        self._lock = threading.Lock()
        self._entries: dict[tuple[int, str], _Entry] = {}

    def get(self, session: Session, assignment_id: int, backend: str, max_age: float, stamp=None) -> _Entry:
        key = (assignment_id, backend)
        with self._lock:
            entry = self._entries.get(key)
            current = entry is not None and entry.stamp == stamp
            fresh = current and time.monotonic() - entry.computed_at < max_age
            if current and not fresh and max_age > 0 and not entry.refreshing:
                entry.refreshing = True
                threading.Thread(target=self._refresh, args=(key, stamp), daemon=True).start()
        if current and (fresh or max_age > 0):
            return entry                  # nothing written since; an old one while its refresh runs
        entry = _Entry(time.monotonic(), stamp, compute(session, assignment_id, backend), {})
        with self._lock:
            self._entries[key] = entry
        return entry

    def _refresh(self, key: tuple[int, str], stamp) -> None:
        try:
            with self._sessions() as session:
                entry = _Entry(time.monotonic(), stamp, compute(session, *key), {})
        except Exception:                 # the next request tries again (the database may be restarting)
            log.exception("recomputing the leaderboard %s failed", key)
            with self._lock:
                if key in self._entries:
                    self._entries[key].refreshing = False
            return
        with self._lock:
            if key in self._entries and self._entries[key].stamp == stamp:
                self._entries[key] = entry

    def forget(self, assignment_id: int | None = None) -> None:
        """Drop this process's entries at once (other processes see the moved stamp)."""
        with self._lock:
            for key in [k for k in self._entries if assignment_id is None or k[0] == assignment_id]:
                del self._entries[key]
