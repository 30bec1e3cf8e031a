"""Waiting on real conditions (database rows, broker state), never on a guessed sleep."""
from __future__ import annotations

import time


def wait_for(condition, timeout: float = 120.0, what: str = "condition", interval: float = 0.2):
    """Poll a real condition until it holds; fail (not hang) after a generous deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def wait_for_run(db, run_id: int, statuses: tuple[str, ...], timeout: float = 180.0):
    """Wait until the grading run reaches one of `statuses`; return the fresh row."""
    from store.models import GradingRun
    state = {}

    def reached():
        db.expire_all()
        run = db.get(GradingRun, run_id)
        state["run"] = run
        return run if run.status in statuses else None
    try:
        return wait_for(reached, timeout, f"run {run_id} to become one of {statuses}")
    except AssertionError:
        run = state.get("run")
        raise AssertionError(f"run {run_id} still {run.status!r} after {timeout:.0f} s (wanted {statuses}); "
                             f"error: {run.error}") from None
