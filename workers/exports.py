"""Grades out of the site: one CSV line per enrolled student (their counted run, by the one
best-run rule of store/runs.py), and Gradescope results.json files of those runs. A late run
counts as the assignment's late rule says: its total (CSV `total`, results.json `score`) is the
scaled one, per-test points are the run's own.

A contest (an assignment in contest mode) adds its own standing to each line, by the board's rule
(store/contest.py): the rank, the geometric-mean score and the run that earned them, or the
disqualification and its reason; the points columns stay the counted run's.

The simulator against hardware: one CSV line per timed test of each submission graded on both
backends (its latest simulated and latest hardware grade, grader.agreement), naming kernels by
their sha256 and runs by id, never a student: a file staff may hand to whoever keeps the cost
model (docs/cost-model.md)."""
from __future__ import annotations

import csv
import io
import json
import zipfile
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

import grader
from grader import render
from grader.vocabulary import Backend, RunStatus, TestKind, values
from store import contest as contests
from store import runs as store_runs
from store.models import Assignment, DeadlineExtension, Enrollment, GradingRun, Submission, User

CSV_COLUMNS = ("email", "name", "nickname", "total", "max_total", *values(TestKind),
               "run_id", "graded_at", "deadline", "runs", "flagged_runs", "thresholds_version",
               "days_late", "late_factor")      # the counted run's lateness and what the late rule kept (total is after it)
CONTEST_COLUMNS = ("contest_rank", "contest_score_us", "contest_run_id", "disqualified")   # a contest's only


@dataclass(frozen=True)
class ContestPlace:
    """A student's standing in a contest, as its board has it."""
    rank: int | None               # None: not ranked (no fully correct run, or disqualified)
    score_us: float | None         # the geometric mean of the benchmark p99s of the ranked run
    run_id: int | None             # the run the board ranks (not always the counted run)
    of: int                        # how many the board ranks
    disqualified: str = ""         # "run N: reason" for each disqualified run, "; " between


@dataclass
class GradeLine:
    user: User
    best: GradingRun | None        # the counted run (store/runs.py), with its report loaded
    runs: int                      # graded runs on the assignment's backend
    flagged: int
    deadline: object
    counted: store_runs.CountedRun | None = None     # how the rule counted `best` (late days, scaled total)
    contest: ContestPlace | None = None               # a contest's standing (None: a course assignment)


def grade_lines(session: Session, assignment: Assignment) -> list[GradeLine]:
    """One line per student enrolled in the assignment's course; the run that counts for each is
    the leaderboard's (store/runs.py), on the backend the assignment is graded on."""
    students = session.scalars(select(User).join(Enrollment, Enrollment.user_id == User.id)
                               .where(Enrollment.course_id == assignment.course_id, Enrollment.role == "student")
                               .order_by(User.email)).all()
    extensions = dict(session.execute(select(DeadlineExtension.user_id, DeadlineExtension.deadline)
                                      .where(DeadlineExtension.assignment_id == assignment.id)).all())
    counts = session.execute(select(Submission.user_id, func.count(), func.count().filter(GradingRun.flagged))
                             .join(GradingRun, GradingRun.submission_id == Submission.id)
                             .where(Submission.assignment_id == assignment.id, GradingRun.status == RunStatus.DONE,
                                    GradingRun.backend == assignment.backend)
                             .group_by(Submission.user_id)).all()
    counted = store_runs.best_runs(session, assignment.id, assignment.backend, [u.id for u in students])
    best = {r.id: r for r in session.scalars(select(GradingRun).where(
        GradingRun.id.in_([c.run_id for c in counted.values()])))}        # one query loads every report
    lines = {u.id: GradeLine(u, None, 0, 0, extensions.get(u.id, assignment.deadline)) for u in students}
    for user_id, runs, flagged in counts:
        if user_id in lines:
            lines[user_id].runs, lines[user_id].flagged = runs, flagged
    for user_id, run in counted.items():
        lines[user_id].best, lines[user_id].counted = best[run.run_id], run
    if assignment.mode == "contest":
        _place(session, assignment, lines)
    return list(lines.values())


def _place(session: Session, assignment: Assignment, lines: dict[int, GradeLine]) -> None:
    board = contests.compute(session, assignment, assignment.backend)
    ranked = {e.user_id: e for e in board.entries}
    out: dict[int, list[str]] = {}
    for d in board.disqualified:
        out.setdefault(d.user_id, []).append(f"run {d.run_id}: {d.reason}")
    for user_id, line in lines.items():
        entry = ranked.get(user_id)
        line.contest = ContestPlace(entry.rank if entry else None, entry.run.score_us if entry else None,
                                    entry.run.run_id if entry else None, len(board.entries),
                                    "; ".join(out.get(user_id, ())))


def _view(line: GradeLine) -> grader.ReportView | None:
    """The counted run's report as every output shows it (grader.view_of)."""
    return grader.view_of(grader.Report.from_json(line.best.report)) if line.best and line.best.report else None


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(cell):
    """A text cell a spreadsheet would run as a formula ('=HYPERLINK(...)' in a roster name) gets a
    leading apostrophe, which spreadsheets show as text; numbers pass as they are."""
    if isinstance(cell, str) and cell.startswith(FORMULA_STARTS):
        return "'" + cell
    return cell


def grades_csv(lines: list[GradeLine], tests=()) -> str:
    """One line per student; after the totals, a contest's standing (CONTEST_COLUMNS, for a contest's
    lines), then each of the spec's `tests` (TestSpec) in spec order: its points, and for timed
    tests its p99 in microseconds, from the counted run."""
    out = io.StringIO()
    writer = csv.writer(out)

    def write(row) -> None:            # every cell through spreadsheet_safe: names and nicknames are people's text
        writer.writerow([spreadsheet_safe(cell) for cell in row])
    contest = any(line.contest is not None for line in lines)
    per_test = list(CONTEST_COLUMNS) if contest else []
    for t in tests:
        per_test.append(f"{t.name} points")
        if t.timed:
            per_test.append(f"{t.name} p99_us")
    write(CSV_COLUMNS + tuple(per_test))
    for line in lines:
        view = _view(line)
        earned = {g.kind: g.earned for g in view.points.groups} if view else {}
        place = line.contest
        cells = [] if place is None else [place.rank or "", "" if place.score_us is None else round(place.score_us, 3),
                                          place.run_id or "", place.disqualified]
        for t in tests:
            result = view.test(t.name) if view else None
            cells.append(result.points if result else "")
            if t.timed:
                cells.append(round(result.p99_us, 1) if result and result.p99_us is not None else "")
        counted = line.counted
        write([line.user.email, line.user.name, line.user.nickname or "",
               (counted.total if counted else view.points.total) if view else 0, view.points.max_total if view else "",
               *(earned.get(kind, 0) for kind in TestKind), line.best.id if line.best else "",
               line.best.finished_at.isoformat() if line.best and line.best.finished_at else "",
               line.deadline.isoformat() if line.deadline else "", line.runs, line.flagged,
               view.provenance.thresholds_version if view else "",
               counted.days_late if counted else "", round(counted.factor, 4) if counted else ""] + cells)
    return out.getvalue()


AGREEMENT_COLUMNS = ("submission_sha256", "simulated_run_id", "hardware_run_id", "test", "title", "bound",
                     "simulated_p99_us", "band", "measured_p99_us", "error", "within_band")


@dataclass(frozen=True)
class Compared:
    """One timed test of a submission graded on both backends (its latest grade on each)."""
    submission_sha256: str
    simulated_run_id: int
    hardware_run_id: int
    agreement: grader.Agreement


def agreement_rows(session: Session, assignment: Assignment, progress=None) -> list[Compared]:
    """Each submission's latest graded run on each backend, where it has both, compared test by
    test. Only those runs' reports are read (one submission at a time), not every run's."""
    graded = (GradingRun.status == RunStatus.DONE, GradingRun.report.is_not(None))
    on_hardware = (select(GradingRun.submission_id).join(Submission)
                   .where(Submission.assignment_id == assignment.id, GradingRun.backend == Backend.NEURON, *graded))
    latest: dict[int, dict[str, int]] = {}
    for submission_id, backend, run_id in session.execute(
            select(GradingRun.submission_id, GradingRun.backend, func.max(GradingRun.id))
            .where(GradingRun.submission_id.in_(on_hardware), GradingRun.backend.in_((Backend.SIM, Backend.NEURON)),
                   *graded).group_by(GradingRun.submission_id, GradingRun.backend)):
        latest.setdefault(submission_id, {})[backend] = run_id
    both = sorted(sid for sid, runs in latest.items() if len(runs) == 2)
    lines = []
    for done, sid in enumerate(both, start=1):
        sim, hw = session.get(GradingRun, latest[sid][Backend.SIM]), session.get(GradingRun, latest[sid][Backend.NEURON])
        measured = grader.measured_p99s(grader.view_of(grader.Report.from_json(hw.report)))
        lines += [Compared(sim.submission.sha256, sim.id, hw.id, r)
                  for r in grader.agreement(grader.view_of(grader.Report.from_json(sim.report)), measured)]
        for run in (sim, hw):                     # one submission's reports in memory at a time
            session.expunge(run)
        if progress:
            progress(done, len(both))
    return lines


def agreement_csv(rows: list[Compared]) -> str:
    """AGREEMENT_COLUMNS, a line per compared test; a simulated p99 without a band (an older
    grade's) leaves band and within_band empty: not known."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(AGREEMENT_COLUMNS)
    for row in rows:
        r = row.agreement
        cells = (row.submission_sha256, row.simulated_run_id, row.hardware_run_id, r.test, r.title, r.bound or "",
                 round(r.simulated_us, 3), "" if r.band is None else round(r.band, 4), round(r.measured_us, 3),
                 round(r.error, 4), "" if r.band is None else "yes" if r.within else "no")
        writer.writerow([spreadsheet_safe(cell) for cell in cells])     # titles are a course's text
    return out.getvalue()


def gradescope_zip(lines: list[GradeLine]) -> bytes:
    """<email>/results.json of every student's counted run (its run id in extra_data)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for line in lines:
            view = _view(line)
            if view is not None:
                late = line.counted if line.counted and line.counted.days_late else None
                notes = (f"Uploaded {late.days_late} day{'' if late.days_late == 1 else 's'} late: the late rule "
                         f"counts {late.factor:.0%} of its {late.raw_total:g} points.",) if late else ()
                extra = {"run_id": line.best.id}
                if line.contest is not None:
                    notes += (_contest_note(line.contest),)
                    place = line.contest
                    extra["contest"] = {"rank": place.rank, "score_us": place.score_us, "run_id": place.run_id,
                                        "disqualified": place.disqualified or None}
                results = render.to_gradescope(view, extra_data=extra, notes=notes)
                if late:                  # the top-level score overrides the tests' sum (render.to_gradescope)
                    results["score"] = line.counted.total
                archive.writestr(f"{line.user.email}/results.json", json.dumps(results, indent=2))
    return buffer.getvalue()


def _contest_note(place: ContestPlace) -> str:
    if place.disqualified:
        return f"Disqualified from the contest ({place.disqualified}): not ranked."
    if place.rank is None:
        return "Not ranked in the contest: no fully correct run (the board's rule)."
    return (f"Contest rank {place.rank} of {place.of}: geometric mean of the benchmark p99s {place.score_us:.2f} us "
            f"(run {place.run_id}).")
