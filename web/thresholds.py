"""Adopting a new thresholds version for an assignment, and what a change would do first.

Adopting stores a new spec (the one in force with these thresholds and thresholds_version, its
TOML rewritten by grader.spec.with_thresholds) and puts it in force (store/specs.py); the old
spec row stays for the runs graded under it. Rescoring the graded
runs afterwards is a staff task a worker runs (workers/staff_tasks.py)."""
from __future__ import annotations

import json
import math

from sqlalchemy import select
from sqlalchemy.orm import Session

from grader.vocabulary import TIERS, RunStatus, Tier
from store import specs
from store.models import Assignment, GradingRun, Submission, TestResultRow, ThresholdsVersion

from . import courses
from .accounts import now
from .errors import UserError

LEVELS = TIERS


def parse_thresholds(text: str, assignment: Assignment) -> dict[str, dict[str, float]]:
    """The TA's JSON, checked against the assignment's timed tests. Tests left out keep the
    thresholds in force."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(f"The thresholds are not valid JSON: {err.msg} (line {err.lineno}, column {err.colno}).",
                        'Write them as {"perf_224_pool1_float16": {"optimized": 1002, "relaxed": 1365}, ...}.')
    if not isinstance(data, dict) or not data:
        raise UserError("The thresholds must be a JSON object with at least one test.",
                        'Write them as {"test name": {"optimized": us, "relaxed": us}}.')
    timed = {t.name for t in courses.timed_tests(assignment)}
    current = courses.spec_of(assignment).thresholds()
    merged = {name: dict(levels) for name, levels in current.items()}
    for name, levels in data.items():
        if name not in timed:
            raise UserError(f"{name!r} is not a timed test of {assignment.name}.",
                            f"Use these test names: {', '.join(sorted(timed))}.")
        if not isinstance(levels, dict) or set(levels) - set(LEVELS):
            raise UserError(f"{name}: give an object with 'optimized' and 'relaxed' (microseconds).",
                            'For example {"optimized": 1002, "relaxed": 1365}.')
        merged.setdefault(name, {}).update(levels)
        values = [merged[name].get(level) for level in LEVELS]
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
                   for v in values):
            raise UserError(f"{name}: thresholds must be positive numbers of microseconds.", "Fix the numbers.")
        if values[0] > values[1]:
            raise UserError(f"{name}: the optimized threshold ({values[0]}) is above the relaxed one ({values[1]}).",
                            "The optimized threshold is the stricter (smaller) one.")
    return merged


def check_new_version(session: Session, assignment: Assignment, version: str) -> ThresholdsVersion | None:
    """Refuses a version name already in force or adopted before; returns its proposed row, if any."""
    if version == assignment.thresholds_version:
        raise UserError(f"{version!r} is the thresholds version in force already.", "Give the new version a new name.")
    row = session.scalar(select(ThresholdsVersion).where(ThresholdsVersion.assignment_id == assignment.id,
                                                         ThresholdsVersion.version == version))
    if row is not None and row.adopted_at is not None:
        raise UserError(f"Thresholds version {version!r} was adopted before.", "Give the new version a new name.")
    return row


def adopt(session: Session, assignment: Assignment, version: str, thresholds: dict, source: str = "spec") -> None:
    """Put thresholds in force as `version` (the caller commits, then may rescore)."""
    row = check_new_version(session, assignment, version)
    specs.adopt_thresholds(session, assignment, thresholds, version)    # checked before anything else changes
    if row is None:
        row = ThresholdsVersion(assignment_id=assignment.id, version=version, source=source)
        session.add(row)
    row.thresholds = thresholds
    row.adopted_at = now()


# ----- what a change does, before it is made -----

TIGHTEN_CONFIRM_PERCENT = 10.0      # tightening any threshold by more than this asks for confirmation


def tier_of(p99_us: float | None, levels: dict) -> str:
    if p99_us is None:
        return "none"
    if p99_us <= levels[Tier.OPTIMIZED]:
        return Tier.OPTIMIZED
    return Tier.RELAXED if p99_us <= levels[Tier.RELAXED] else "none"


def change_preview(session: Session, assignment: Assignment, new: dict[str, dict[str, float]]) -> dict:
    """Each threshold that moves (old, new, percent), how many graded runs would change tier in a
    test, and whether any threshold tightens by more than TIGHTEN_CONFIRM_PERCENT."""
    spec = courses.spec_of(assignment)
    old, titles = spec.thresholds(), spec.titles()
    changes = []
    for name, levels in new.items():
        for level in LEVELS:
            before, after = old.get(name, {}).get(level), levels[level]
            if before is None or before == after:
                continue
            changes.append({"test": name, "title": titles.get(name, name), "level": level, "old": before,
                            "new": after, "percent": 100.0 * (after - before) / before})
    moved = {c["test"] for c in changes}
    runs_changing = 0
    if moved:
        rows = session.execute(
            select(TestResultRow.run_id, TestResultRow.test_name, TestResultRow.p99_us)
            .join(GradingRun, GradingRun.id == TestResultRow.run_id).join(Submission)
            .where(Submission.assignment_id == assignment.id, GradingRun.status == RunStatus.DONE,
                   TestResultRow.test_name.in_(moved)))
        runs_changing = len({run_id for run_id, test, p99 in rows
                             if tier_of(p99, old[test]) != tier_of(p99, new[test])})
    return {"changes": changes, "runs_changing": runs_changing,
            "needs_confirmation": any(c["percent"] < -TIGHTEN_CONFIRM_PERCENT for c in changes)}
