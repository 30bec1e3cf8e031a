"""Grades out of the site: one CSV line per enrolled student (the best run graded before their
deadline), and Gradescope results.json files of those runs."""
from __future__ import annotations

import csv
import io
import json
import zipfile
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session, defer, undefer

import grader
from grader import render
from store.models import Assignment, DeadlineExtension, Enrollment, GradingRun, Submission, User

CSV_COLUMNS = ("email", "name", "nickname", "total", "max_total", "correctness", "performance", "extra_credit",
               "run_id", "graded_at", "deadline", "runs", "flagged_runs", "thresholds_version")


@dataclass
class GradeLine:
    user: User
    best: GradingRun | None
    runs: int
    flagged: int
    deadline: object


def grade_lines(session: Session, assignment: Assignment) -> list[GradeLine]:
    students = session.scalars(select(User).join(Enrollment, Enrollment.user_id == User.id)
                               .where(Enrollment.course_id == assignment.course_id, Enrollment.role == "student")
                               .order_by(User.email)).all()
    extensions = dict(session.execute(select(DeadlineExtension.user_id, DeadlineExtension.deadline)
                                      .where(DeadlineExtension.assignment_id == assignment.id)).all())
    runs = session.execute(select(Submission.user_id, Submission.uploaded_at, GradingRun)
                           .join(GradingRun, GradingRun.submission_id == Submission.id)
                           .where(Submission.assignment_id == assignment.id, GradingRun.status == "done")
                           .options(defer(GradingRun.report))).all()     # reports: only the best, below
    lines = {u.id: GradeLine(u, None, 0, 0, extensions.get(u.id, assignment.deadline)) for u in students}
    for user_id, uploaded_at, run in runs:
        line = lines.get(user_id)
        if line is None:
            continue
        line.runs += 1
        if run.flagged:
            line.flagged += 1
            continue
        if line.deadline is not None and uploaded_at > line.deadline:
            continue
        if line.best is None or (run.score_total or 0) > (line.best.score_total or 0):
            line.best = run
    best_ids = [line.best.id for line in lines.values() if line.best is not None]
    session.scalars(select(GradingRun).where(GradingRun.id.in_(best_ids))
                    .options(undefer(GradingRun.report))).all()           # one query loads them all
    return list(lines.values())


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(cell):
    """A text cell a spreadsheet would run as a formula ('=HYPERLINK(...)' in a roster name) gets a
    leading apostrophe, which spreadsheets show as text; numbers pass as they are."""
    if isinstance(cell, str) and cell.startswith(FORMULA_STARTS):
        return "'" + cell
    return cell


def grades_csv(lines: list[GradeLine], tests=()) -> str:
    """One line per student; after the totals, each of the spec's `tests` (TestSpec) in spec order:
    its points, and for timed tests its p99 in microseconds, from the counted run."""
    out = io.StringIO()
    writer = csv.writer(out)

    def write(row) -> None:            # every cell through spreadsheet_safe: names and nicknames are people's text
        writer.writerow([spreadsheet_safe(cell) for cell in row])
    per_test = []
    for t in tests:
        per_test.append(f"{t.name} points")
        if t.timed:
            per_test.append(f"{t.name} p99_us")
    write(CSV_COLUMNS + tuple(per_test))
    for line in lines:
        report = grader.Report.from_json(line.best.report) if line.best and line.best.report else None
        score = report.score if report else None
        by_name = {r.name: r for r in report.tests} if report else {}
        cells = []
        for t in tests:
            result = by_name.get(t.name)
            cells.append(result.points if result else "")
            if t.timed:
                cells.append(round(result.p99_us, 1) if result and result.p99_us is not None else "")
        write([line.user.email, line.user.name, line.user.nickname or "",
                         score.total if score else 0, score.max_total if score else "",
                         score.correctness if score else 0, score.performance if score else 0,
                         score.extra_credit if score else 0, line.best.id if line.best else "",
                         line.best.finished_at.isoformat() if line.best and line.best.finished_at else "",
                         line.deadline.isoformat() if line.deadline else "", line.runs, line.flagged,
                         report.thresholds_version if report else ""] + cells)
    return out.getvalue()


def gradescope_zip(lines: list[GradeLine]) -> bytes:
    """<email>/results.json for every student with a counted run."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for line in lines:
            if line.best is not None and line.best.report:
                results = render.to_gradescope(grader.Report.from_json(line.best.report))
                archive.writestr(f"{line.user.email}/results.json", json.dumps(results, indent=2))
    return buffer.getvalue()
