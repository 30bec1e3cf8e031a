"""A contest's ranking, as the board's pages use it: the rule itself is store/contest.py's, the one
place the board, the JSON API and the grade exports rank a contest by."""
from __future__ import annotations

from store.contest import (RULE, Board, ContestRun, Disqualified, Entry, best, best_over_time,  # noqa: F401
                           compute, contest_runs, ended, geometric_mean, judge)
