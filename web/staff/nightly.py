"""The nightly regression of the reference kernels: p99 per night with drifted nights marked,
the thresholds the references imply beside those in force, and, where a Trainium worker ran the
same references, the simulator's p99s (with their bands) against the measured ones."""
from __future__ import annotations

from collections import defaultdict

from flask import render_template
from sqlalchemy import select
from sqlalchemy.orm import Session

import grader
from grader.references import REFERENCE_OF_TIER, TIER_OF_REFERENCE
from grader.vocabulary import Backend, Tier
from store import specs
from store.models import Assignment, NightlyResult
from workers import enqueue

from .. import db
from ..charts import COLORS, Guide, Point, time_chart
from . import bp

NIGHTS_SHOWN = 60
# which threshold each reference kernel stands for: the course sets the optimized threshold
# from its optimized kernel and the relaxed one from its plain kernel
LEVEL_OF_KERNEL = TIER_OF_REFERENCE


def implied_for(session: Session, assignment: Assignment) -> dict[str, dict[str, float]]:
    """{test: {"optimized": us, "relaxed": us}} from the latest nightly result of each
    reference kernel of this assignment's spec on its backend; no relaxed level for a test whose
    relaxed threshold that night did not propose (not_proposed_for says why)."""
    implied: dict[str, dict[str, float]] = defaultdict(dict)
    for kernel, level in LEVEL_OF_KERNEL.items():
        latest = _latest(session, assignment, kernel)
        refused = (latest.not_proposed or {}) if latest else {}
        for test, us in ((latest.implied_thresholds or {}) if latest else {}).items():
            if isinstance(us, (int, float)) and test not in refused:
                implied[test][level] = float(us)
    return dict(implied)


def not_proposed_for(session: Session, assignment: Assignment) -> dict[str, str]:
    """{test: why the latest nightly did not propose its relaxed threshold} (workers/nightly.py)."""
    latest = _latest(session, assignment, REFERENCE_OF_TIER[Tier.RELAXED])
    return dict(latest.not_proposed or {}) if latest else {}


def _latest(session: Session, assignment: Assignment, kernel: str) -> NightlyResult | None:
    return session.scalar(select(NightlyResult).where(
        NightlyResult.spec_name == assignment.spec_name, NightlyResult.reference_kernel == kernel,
        NightlyResult.backend == assignment.backend).order_by(NightlyResult.id.desc()).limit(1))


def titles_for(session: Session, spec_name: str, rows: list[NightlyResult]) -> dict[str, str]:
    """Test name -> title: from the view of the latest stored report (the spec it ran under),
    else from an assignment on that spec; a TA reads titles, not ids."""
    latest = next((r for r in reversed(rows) if r.report), None)
    if latest is not None:
        return {t.name: t.title for t in grader.view_of(grader.Report.from_json(latest.report)).tests}
    assignment = session.scalar(select(Assignment).where(Assignment.spec_name == spec_name).limit(1))
    return {t.name: t.title for t in specs.spec_of(assignment).tests} if assignment else {}


def against_hardware(session: Session, latest: dict[tuple[str, str, str], NightlyResult]) -> list[dict]:
    """Each (spec, reference kernel) whose latest night ran on both the simulator and Trainium
    hardware: its timed tests simulated (with their bands) against measured (grader.agreement)."""
    pairs = []
    for (spec_name, kernel, backend), sim in sorted(latest.items()):
        hw = latest.get((spec_name, kernel, Backend.NEURON.value))
        if backend != Backend.SIM or hw is None or not sim.report:
            continue
        rows = grader.agreement(grader.view_of(grader.Report.from_json(sim.report)), hw.p99_us or {})
        if rows:
            pairs.append({"spec": spec_name, "kernel": kernel, "simulated": sim, "measured": hw, "rows": rows,
                          "summary": grader.agreement_summary(rows),
                          "versions_differ": sim.spec_version != hw.spec_version})
    return pairs


@bp.route("/nightly")
def nightly():
    session = db.session()
    results = session.scalars(select(NightlyResult).order_by(NightlyResult.id.desc()).limit(2000)).all()
    series: dict[tuple[str, str, str], list[NightlyResult]] = defaultdict(list)
    for r in results:
        key = (r.spec_name, r.reference_kernel, r.backend)
        if len(series[key]) < NIGHTS_SHOWN:
            series[key].append(r)
    groups = []
    for (spec_name, kernel, backend), rows in sorted(series.items()):
        rows.reverse()                             # oldest first
        latest = rows[-1]
        level = LEVEL_OF_KERNEL.get(kernel, Tier.OPTIMIZED)
        tests = sorted({t for r in rows for t in (r.p99_us or {})})
        titles = titles_for(session, spec_name, rows)
        backend_title = Backend(backend).title if backend in set(Backend) else backend
        charts, table = [], []
        for test in tests:
            in_force = (latest.thresholds_in_force or {}).get(test, {}).get(level)
            implied = (latest.implied_thresholds or {}).get(test)
            guides = tuple(g for g in (Guide(f"{level} in force", in_force, COLORS[level]) if in_force else None,
                                       Guide("implied", implied, COLORS["implied"], dashed=True) if implied else None)
                           if g is not None)
            points = [Point(r.created_at, (r.p99_us or {}).get(test), r.drift) for r in rows]
            charts.append(time_chart(points, title=f"{titles.get(test, test)}: p99 of {kernel} ({backend_title})", unit=" us", guides=guides))
            table.append((titles.get(test, test), (latest.p99_us or {}).get(test), implied, in_force,
                          (latest.not_proposed or {}).get(test, "")))
        groups.append({"spec": spec_name, "kernel": kernel, "backend": backend, "backend_title": backend_title, "level": level, "latest": latest,
                       "charts": charts, "table": table, "drifts": [r for r in rows if r.drift]})
    running = [d for d in enqueue.running_now(session) if d["what"] == "nightly regression"]
    compared = against_hardware(session, {key: rows[-1] for key, rows in series.items()})
    return render_template("staff/nightly.html", groups=groups, running=running, compared=compared)
