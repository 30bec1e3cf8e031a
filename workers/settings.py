"""Service knobs, read from the environment (documented in docs/operators.md, Settings)."""
from __future__ import annotations

import os
from dataclasses import dataclass

from store.db import instance_path


def _float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw in (None, ""):
        return default
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number; set it to seconds (e.g. {name}={default:g})") from None


def _count(name: str, default: int, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise ValueError(f"{name}={raw!r} is not a whole number >= {minimum}; set it to one (e.g. {name}={default})")
    return value


@dataclass(frozen=True)
class Settings:
    heartbeat_s: float            # how often a grading worker touches its run row
    stale_after_s: float          # a running row silent this long has lost its worker
    reaper_interval_s: float      # how often beat's reaper looks for such rows
    lost_after_s: float           # a queued row with no broker message this long is re-sent
    max_attempts: int             # claims before a run becomes infra_error (never the student's fault)
    grade_budget_s: float | None  # wall budget of one grade (None: the spec's)
    visibility_timeout_s: float   # Redis redelivers an unacked task after this: above the longest grade
    task_time_limit_s: float      # last resort: a pool process still in one task after this is killed
    problem_check_limit_s: float  # a problem folder's check still running after this fails, saying so
    nightly_hour_utc: int
    drift_percent: float          # a reference p99 moving more than this from last night is drift
    worker_alive_s: float         # a worker heartbeat older than this counts as dead
    answer_pool_size: int         # answer sets made ahead per spec (grader/answer_pool.py); 0: off
    answer_pool_uses: int         # grades one set serves before it is deleted
    answer_pool_max_age_s: float  # a set older than this is never drawn
    answer_pool_dir: str          # where the sets live: only the grader's user may enter it
    grade_threads: int            # threads one grade may use for its own work; 0: every usable core


def load() -> Settings:
    budget = os.environ.get("NKI_GRADE_BUDGET_S")
    return Settings(
        heartbeat_s=_float("NKI_HEARTBEAT_S", 5.0),
        stale_after_s=_float("NKI_HEARTBEAT_STALE_S", 90.0),
        reaper_interval_s=_float("NKI_REAPER_INTERVAL_S", 30.0),
        lost_after_s=_float("NKI_LOST_AFTER_S", 120.0),
        max_attempts=int(_float("NKI_MAX_ATTEMPTS", 3)),
        grade_budget_s=(_float("NKI_GRADE_BUDGET_S", 0) or None) if budget else None,
        visibility_timeout_s=_float("NKI_VISIBILITY_TIMEOUT_S", 6 * 3600.0),
        task_time_limit_s=_float("NKI_TASK_TIME_LIMIT_S", 2 * 3600.0),
        problem_check_limit_s=_float("NKI_PROBLEM_CHECK_LIMIT_S", 3600.0),
        nightly_hour_utc=int(_float("NKI_NIGHTLY_HOUR_UTC", 3)),
        drift_percent=_float("NKI_NIGHTLY_DRIFT_PCT", 10.0),
        worker_alive_s=_float("NKI_WORKER_ALIVE_S", 60.0),
        answer_pool_size=_count("NKI_ANSWER_POOL_SIZE", 0),
        answer_pool_uses=_count("NKI_ANSWER_POOL_USES", 10, minimum=1),
        answer_pool_max_age_s=_float("NKI_ANSWER_POOL_MAX_AGE_S", 24 * 3600.0),
        answer_pool_dir=os.environ.get("NKI_ANSWER_POOL_DIR")
        or str(instance_path() / "answer-pool"),
        grade_threads=_count("NKI_GRADE_THREADS", 0),
    )
