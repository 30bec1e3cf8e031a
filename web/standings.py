"""Leaderboard standings: each active student's counted run (store/runs.py: the one best-run
rule, also written on the page), ranked by the same rule; hardware and simulated runs apart.

Standings are computed by two SQL queries and kept per process, tagged with the assignment's
standings stamp (`assignments.standings_changed_at`; under late-days its course's stamps, since
the budget is shared: web/late.py standings_stamp), which every write that can change them
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

from grader.vocabulary import TIMED_KINDS, TestKind, values
from store import runs

log = logging.getLogger(__name__)

RULE = runs.RULE

# who is ranked: active students of the assignment's course (its staff's test runs are not)
_RANKED_PEOPLE = text("""
SELECT u.id, u.nickname FROM users u
JOIN enrollments e ON e.user_id = u.id
JOIN assignments a ON a.course_id = e.course_id
WHERE u.id = ANY(:user_ids) AND u.active AND a.id = :assignment_id AND e.role = 'student'
""")

_TIMED_P99S = text("""
SELECT run_id, test_name, kind, p99_us, points FROM test_results
WHERE run_id = ANY(:run_ids) AND kind = ANY(:timed)
""")


@dataclass(frozen=True)
class Standing:
    rank: int
    user_id: int
    nickname: str | None
    run_id: int
    total: float                       # extra credit included: what ranks
    max_total: float | None            # the regular maximum (extra credit comes on top)
    p99_sum: float | None
    p99s: dict[str, float | None]      # timed test name -> p99 us
    finished_at: object
    extra_credit: float = 0.0          # the part of `total` extra-credit tests earned
    days_late: int = 0                 # the counted run's, when the late rule counts it late

    @property
    def regular(self) -> float:
        return self.total - self.extra_credit


def compute(session: Session, assignment_id: int, backend: str) -> list[Standing]:
    counted = runs.best_runs(session, assignment_id, backend)
    people = dict(session.execute(_RANKED_PEOPLE, {"user_ids": list(counted), "assignment_id": assignment_id}).all()) \
        if counted else {}
    board = runs.ranked(c for c in counted.values() if c.user_id in people)
    p99s: dict[int, dict[str, float | None]] = {c.run_id: {} for c in board}
    extra = dict.fromkeys(p99s, 0.0)
    if board:
        for t in session.execute(_TIMED_P99S, {"run_ids": list(p99s), "timed": list(values(TIMED_KINDS))}):
            p99s[t.run_id][t.test_name] = t.p99_us
            if t.kind == TestKind.EXTRA_CREDIT:
                extra[t.run_id] += t.points or 0.0
    # a late rule's factor scales the whole run (store/runs.py), its extra credit too
    return [Standing(i + 1, c.user_id, people[c.user_id], c.run_id, c.total, c.max_total, c.p99_sum,
                     p99s[c.run_id], c.finished_at, extra[c.run_id] * c.factor, c.days_late)
            for i, c in enumerate(board)]


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
