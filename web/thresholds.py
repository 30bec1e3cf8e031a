"""Adopting a new thresholds version for an assignment, and what a change would do first.

Adopting rewrites the thresholds in the spec TOML kept on the assignment (tomlkit keeps its
comments and layout), bumps thresholds_version and records the version. Rescoring the graded
runs afterwards is a staff task a worker runs (workers/staff_tasks.py)."""
from __future__ import annotations

import json
import math

import tomlkit
from sqlalchemy import select
from sqlalchemy.orm import Session

import grader
from grader.vocabulary import TIERS, RunStatus, Tier
from store import lifecycle
from store.models import Assignment, GradingRun, Submission, TestResultRow, ThresholdsVersion
from workers import specs

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
    current = courses.spec_thresholds(assignment.spec_toml)
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


def rewrite_spec(toml_text: str, thresholds: dict[str, dict[str, float]], version: str) -> str:
    doc = tomlkit.parse(toml_text)
    doc["thresholds_version"] = version
    for test in doc.get("tests", []):
        if test.get("name") in thresholds:
            table = tomlkit.inline_table()
            table.update({level: thresholds[test["name"]][level] for level in LEVELS})
            test["thresholds_us"] = table
    return tomlkit.dumps(doc)


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
    new_toml = rewrite_spec(assignment.spec_toml, thresholds, version)
    spec = specs.from_toml(new_toml)         # checks the new TOML before anything changes
    if row is None:
        row = ThresholdsVersion(assignment_id=assignment.id, version=version, source=source)
        session.add(row)
    row.thresholds = thresholds
    row.adopted_at = now()
    assignment.spec_toml = new_toml
    assignment.spec_hash = spec.spec_hash
    assignment.thresholds_version = spec.thresholds_version


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
    old = courses.spec_thresholds(assignment.spec_toml)
    titles = {t.name: t.title or t.name for t in courses.timed_tests(assignment)}
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
