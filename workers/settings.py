"""Service knobs, read from the environment (documented in docs/operators.md, Settings)."""
from __future__ import annotations

import os
from dataclasses import dataclass


def _float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw in (None, ""):
        return default
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number; set it to seconds (e.g. {name}={default:g})") from None


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
    nightly_hour_utc: int
    drift_percent: float          # a reference p99 moving more than this from last night is drift
    worker_alive_s: float         # a worker heartbeat older than this counts as dead


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
        nightly_hour_utc=int(_float("NKI_NIGHTLY_HOUR_UTC", 3)),
        drift_percent=_float("NKI_NIGHTLY_DRIFT_PCT", 10.0),
        worker_alive_s=_float("NKI_WORKER_ALIVE_S", 60.0),
    )
