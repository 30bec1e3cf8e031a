"""Nightly regression: every reference kernel of every active spec on every available backend.
Each result is stored with its p99s, whether it passed, drift against the previous night, and
the thresholds it implies (120% of its p99) beside the ones in force; staff can adopt those as
a new thresholds version (proposed in thresholds_versions, source "nightly") and rescore."""
from __future__ import annotations

import datetime as dt
import logging

from sqlalchemy import select

import grader
from grader.references import FILES, TIER_OF_REFERENCE, stands_for
from grader.references import archive as reference_archive
from grader.vocabulary import THRESHOLD_FACTOR, Backend, Queue, RunStatus, TestStatus, Tier
from store import specs
from store.db import session_scope
from store.lifecycle import now
from store.models import Assignment, NightlyResult, NightlyRun, ThresholdsVersion, WorkerHeartbeat

from . import settings

log = logging.getLogger(__name__)

IMPLIED_FACTOR = THRESHOLD_FACTOR     # the course's rule: thresholds are 120% of the reference's p99
# the generation each hardware queue's workers run on: the one hardware queue is Trn2's
# (`grader worker --queue trn2`); a spec of another platform has no hardware to run on yet
PLATFORM_OF_QUEUE = {Queue.TRN2: "trn2"}


def active_specs() -> list[str]:
    """The spec hashes of every active assignment; the bundled specs (stored now) when there are none."""
    with session_scope() as s:
        found = sorted(set(s.scalars(select(Assignment.spec_hash).where(Assignment.active.is_(True)))))
        if not found:
            found = [specs.stored(s, grader.load_spec(name)).hash for name in grader.available_specs()]
    return found


def available_backends() -> list[str]:
    """The simulator always; Trn2 when a trn2 worker is alive (it runs the neuron references)."""
    alive = now() - dt.timedelta(seconds=settings.load().worker_alive_s)
    with session_scope() as s:
        trn2 = s.scalar(select(WorkerHeartbeat.id).where(WorkerHeartbeat.seen_at >= alive,
                                                         WorkerHeartbeat.queues.contains(Queue.TRN2)).limit(1))
    return [Backend.SIM, Backend.NEURON] if trn2 is not None else [Backend.SIM]


def run_nightly(trigger: str = "beat", backends: list[str] | None = None, progress=None) -> int:
    """Grade every reference of every active spec, each on its spec's platform; returns the
    nightly run's id. The simulator references run here, timed by the spec's generation's model;
    the neuron ones are sent to the hardware queue of the spec's generation, and a spec whose
    generation has none runs on the simulator alone."""
    with session_scope() as s:
        night = NightlyRun(trigger=trigger)
        s.add(night)
        s.flush()
        night_id = night.id
    backends = backends or available_backends()
    failed = False
    for spec_hash in active_specs():
        with session_scope() as s:
            platform = specs.spec_by_hash(s, spec_hash).platform
        queue = next((q for q, p in PLATFORM_OF_QUEUE.items() if p == platform), None)
        if Backend.NEURON in backends and queue is None:
            log.warning("nightly: spec %s is for platform %s, which no hardware queue runs: its references run "
                        "on the simulator only", spec_hash[:12], platform)
        for reference in FILES:
            for backend in backends:
                if backend == Backend.NEURON:
                    if queue is None:
                        continue
                    from .tasks import nightly_reference
                    nightly_reference.apply_async(args=[night_id, spec_hash, reference, backend], queue=queue.value)
                    continue
                try:
                    grade_reference(night_id, spec_hash, reference, backend, progress)
                except Exception:
                    failed = True
                    log.error("nightly: %s on %s could not be graded", reference, backend, exc_info=True)
    with session_scope() as s:
        night = s.get(NightlyRun, night_id)
        night.status, night.finished_at = (RunStatus.FAILED if failed else RunStatus.DONE), now()
        propose_thresholds(s, night)
    from .answers import fill_active
    fill_active()             # expired and used-up answer sets out, fresh ones in, before the day's grades
    return night_id


def grade_reference(night_id: int, spec_hash: str, reference: str, backend: str, progress=None) -> NightlyResult:
    """Grade one reference under the stored spec `spec_hash`. `progress(reference, event)`, if
    given, hears each finished test (`grader nightly --now`)."""
    with session_scope() as s:
        spec = specs.spec_by_hash(s, spec_hash)
    if backend == Backend.NEURON:
        # a worker of another generation would time the references on the wrong chip
        from grader.neuron import check_platform, detect
        check_platform(detect(), spec)
    submission = grader.submission_from_bytes("asst4.tar.gz", reference_archive(spec, reference), spec)
    on_progress = (lambda event: progress(reference, event)) if progress else None
    report = grader.grade(submission, spec, grader.GradeOptions(backend=backend, on_progress=on_progress))
    view = grader.view_of(report)                # the one reading of a report: titles, statuses, p99s
    p99 = {t.name: t.p99_us for t in view.tests if t.timed and t.p99_us is not None}
    checked = {t.name for t in spec.tests if stands_for(reference, t)}
    bad = [t for t in view.tests if t.name in checked and t.status in (TestStatus.FAILED, TestStatus.ERROR)]
    with session_scope() as s:
        previous = s.scalar(select(NightlyResult).where(
            NightlyResult.spec_name == spec.assignment, NightlyResult.reference_kernel == reference,
            NightlyResult.backend == backend, NightlyResult.nightly_run_id != night_id)
            .order_by(NightlyResult.id.desc()).limit(1))
        titles = {t.name: t.title for t in view.tests}
        reasons = [f"{t.title} {t.status}" for t in bad]
        reasons += drift_reasons(previous.p99_us if previous else {}, p99, settings.load().drift_percent, titles)
        if backend == Backend.NEURON:         # on a Trn2: the `grader doctor` table, and its rows that are not well
            from grader.neuron.doctor import rows_from_report, table
            rows = rows_from_report(spec, TIER_OF_REFERENCE[reference], report)
            log.info("nightly %s on %s:\n%s", reference, backend, table(rows))
            reasons += [f"{titles.get(r.test, r.test)} ({r.tier}) {r.verdict}" for r in rows
                        if r.verdict != "ok" and r.test not in {t.name for t in bad}]
        result = NightlyResult(
            nightly_run_id=night_id, spec_name=spec.assignment, spec_version=spec.spec_version,
            thresholds_version=spec.thresholds_version, reference_kernel=reference, backend=backend,
            p99_us=p99, passed=not bad, drift=bool(reasons), drift_reason="; ".join(reasons) or None,
            implied_thresholds={name: round(IMPLIED_FACTOR * us, 1) for name, us in p99.items()},
            thresholds_in_force=spec.thresholds(),
            score_total=view.points.total, report=report.to_json(include_seed=False))
        s.add(result)
    return result


def drift_reasons(before: dict, after: dict, percent: float, titles: dict | None = None) -> list[str]:
    """A reason per test whose p99 moved more than `percent` from the night before, naming the
    test by its title when `titles` ({name: title}) has it."""
    titles = titles or {}
    reasons = []
    for name, us in after.items():
        old = before.get(name)
        if old:
            moved = 100.0 * (us - old) / old
            if abs(moved) > percent:
                reasons.append(f"{titles.get(name, name)} p99 {old:.1f} -> {us:.1f} us ({moved:+.1f}%, limit {percent:g}%)")
    return reasons


def propose_thresholds(session, night: NightlyRun) -> None:
    """For each active assignment, a proposed thresholds version from tonight's references on
    its backend: optimized and relaxed tiers from the optimized and relaxed references."""
    results = session.scalars(select(NightlyResult).where(NightlyResult.nightly_run_id == night.id)).all()
    for assignment in session.scalars(select(Assignment).where(Assignment.active.is_(True))):
        mine = [r for r in results if r.backend == assignment.backend and r.passed
                and r.spec_name == specs.spec_of(assignment).assignment]
        tiers = {TIER_OF_REFERENCE[r.reference_kernel]: r.implied_thresholds for r in mine}
        if set(tiers) != {Tier.OPTIMIZED, Tier.RELAXED}:
            continue
        thresholds = {name: {Tier.OPTIMIZED: tiers[Tier.OPTIMIZED][name], Tier.RELAXED: max(tiers[Tier.RELAXED][name],
                                                                                   tiers[Tier.OPTIMIZED][name])}
                      for name in tiers[Tier.OPTIMIZED] if name in tiers[Tier.RELAXED]}
        session.add(ThresholdsVersion(assignment_id=assignment.id, source="nightly", thresholds=thresholds,
                                      version=f"nightly-{night.started_at:%Y-%m-%d}-{night.id}"))
