"""Grading runs as pages show them: who may see one, its live status, its report as the
grader's typed Report, and what the report page draws from it."""
from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session, defer, joinedload

import grader
from grader import render
from grader.vocabulary import TIMED_KINDS, RunStatus, TestKind, TestStatus, Tier
from store.models import FINAL_STATUSES, GradingRun, Submission
from workers import enqueue

from .accounts import Account
from .charts import TimingRow, p99_chart
from .errors import UserError


def visible_run(session: Session, user: Account, run_id: int, with_report: bool = False) -> GradingRun:
    """The run if user owns it or is staff. Others get the same 404 as a missing run, so run
    ids reveal nothing about other students. The uploaded bytes (up to 16 MiB) and, unless
    asked for, the report JSON are not loaded: status polling reads neither."""
    options = [joinedload(GradingRun.submission).defer(Submission.data)]
    if not with_report:
        options.append(defer(GradingRun.report))
    run = session.scalar(select(GradingRun).where(GradingRun.id == run_id).options(*options))
    if run is None or not (run.submission.user_id == user.id or user.is_staff_of(run.submission.assignment.course_id)):
        raise UserError(f"There is no run {run_id} of yours.", "Open your runs from the assignment page.", 404)
    return run


def status_json(session: Session, run: GradingRun) -> dict:
    """A run's live state: status, place in its queue, the tests finished so far (as they finish)
    and an estimate of the seconds left from recent grades of the same assignment."""
    finished = run.status in FINAL_STATUSES
    estimate = None if finished else enqueue.estimate_remaining_s(session, run)
    return {"run_id": run.id, "status": run.status,
            "queue_position": None if finished else enqueue.queue_position(session, run),
            "done": run.progress_done, "total": run.progress_total,
            "waiting": None if finished else enqueue.waiting_reason(session, run),
            "tests": list(run.progress_tests or []),
            "estimate_s": None if estimate is None else round(estimate),
            "score": run.score_total if run.status == RunStatus.DONE else None,
            "max_score": run.max_total if run.status == RunStatus.DONE else None}


def report_of(run: GradingRun) -> grader.Report | None:
    return grader.Report.from_json(run.report) if run.report else None


def student_report_json(run: GradingRun) -> dict:
    """The report as students and the API get it: never the seed, whatever was stored."""
    data = dict(render.to_json(report_of(run)))
    data.pop("seed", None)
    return data


# ----- what the report page draws -----

@dataclass
class ProfileView:
    test_title: str
    test_name: str
    mfu: float | None
    achieved_tflops: float | None
    total_us: float | None
    roofline_us: float | None
    roofline_limit: str
    verdict: str
    engines: list[tuple[str, float | None, float, int | None]]   # name, busy us, utilisation, instructions
    hotspots: list[dict]
    has_svg: bool


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def profile_svg(report: grader.Report, test_name: str) -> str | None:
    for test in report.tests:
        if test.name == test_name:
            profile = (test.details or {}).get("profile") or {}
            svg = profile.get("svg") or profile.get("timeline_svg")
            return svg if isinstance(svg, str) and svg.lstrip().startswith("<svg") else None
    return None


def _engines(profile: dict, total_us: float | None) -> list[tuple[str, float | None, float, int | None]]:
    """Engine rows from either shape a profile comes in: {name: utilisation} as the grader
    stores it, or {name: {busy_us, utilisation, instructions}} as nkisim's Profile has it."""
    rows = []
    counts = profile.get("engine_instructions") or {}
    for name, stats in (profile.get("engine_utilisation") or {}).items():
        util = _number(stats) or 0.0
        count = counts.get(name)
        rows.append((str(name), util * total_us if total_us else None, util,
                     count if isinstance(count, int) and not isinstance(count, bool) else None))
    for name, stats in (profile.get("engines") or {}).items():
        if isinstance(stats, dict):
            count = stats.get("instructions")
            rows.append((str(name), _number(stats.get("busy_us")), _number(stats.get("utilisation")) or 0.0,
                         int(count) if isinstance(count, int) else None))
    return sorted(rows, key=lambda row: -row[2])


def profile_views(report: grader.Report) -> list[ProfileView]:
    views = []
    for test in report.tests:
        profile = (test.details or {}).get("profile")
        if not isinstance(profile, dict):
            continue
        total = _number(profile.get("total_us")) or _number(test.p99_us)
        hotspots = [h for h in (profile.get("busiest_lines") or profile.get("hotspots") or []) if isinstance(h, dict)]
        views.append(ProfileView(
            test.title or test.name, test.name, _number(profile.get("mfu")), _number(profile.get("achieved_tflops")),
            total, _number(profile.get("roofline_us")) or _number(test.details.get("roofline_us")),
            str(profile.get("roofline_limit") or ""), str(profile.get("verdict") or ""),
            _engines(profile, total), hotspots[:8], profile_svg(report, test.name) is not None))
    return views


def timing_chart(report: grader.Report):
    rows = [TimingRow(t.title or t.name, t.p99_us, (t.thresholds_us or {}).get(Tier.OPTIMIZED),
                      (t.thresholds_us or {}).get(Tier.RELAXED))
            for t in report.tests if t.kind in TIMED_KINDS]
    return p99_chart(rows) if rows else None


def flag_texts(report: grader.Report, for_staff: bool) -> list[str]:
    """Each flag explained, in the words render.py keeps for staff or for students."""
    titles = {t.name: t.title or t.name for t in report.tests}
    texts = []
    for flag in report.flags:
        code, _, subject = flag.partition(":")
        staff, student = render.FLAG_EXPLANATIONS.get(code, render.UNKNOWN_FLAG)
        text = staff if for_staff else student.replace("*", "")   # Gradescope's markdown emphasis
        texts.append(text.format(subject=titles.get(subject, subject)))
    return texts


def score_parts(report: grader.Report) -> list[tuple[str, float, float]]:
    """(label, points, maximum) per kind and the total, as the terminal report adds them up."""
    def maximum(kind):
        return sum(t.max_points for t in report.tests
                   if t.kind == kind and (t.status != TestStatus.SKIPPED or t.details.get("counts", True)))
    s = report.score
    return [(TestKind.CORRECTNESS.title, s.correctness, maximum(TestKind.CORRECTNESS)),
            (TestKind.PERFORMANCE.title, s.performance, maximum(TestKind.PERFORMANCE)),
            (TestKind.EXTRA_CREDIT.title, s.extra_credit, maximum(TestKind.EXTRA_CREDIT)),
            ("Total", s.total, s.max_total)]
