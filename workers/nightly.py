"""Nightly regression: every reference kernel of every active spec on every available backend.
Each result is stored with its p99s, whether it passed, drift against the previous night, and
the thresholds it implies (120% of its p99) beside the ones in force; staff can adopt those as
a new thresholds version (proposed in thresholds_versions, source "nightly") and rescore.

A relaxed threshold is proposed only from a relaxed reference clearly slower than the optimized
one (RELAXED_MIN_GAP): one within it would all but merge the two tiers, so the relaxed threshold
in force stays, and the relaxed reference's result says why (NightlyResult.not_proposed)."""
from __future__ import annotations

import logging

from sqlalchemy import select

import grader
from grader.references import FILES, REFERENCE_OF_TIER, TIER_OF_REFERENCE, stands_for
from grader.references import archive as reference_archive
from grader.vocabulary import (PLATFORM_OF_QUEUE, RELAXED_MIN_GAP, THRESHOLD_FACTOR, Backend, Queue, RunStatus,
                               TestStatus, Tier)
from store import specs
from store.db import session_scope
from store.lifecycle import now
from store.models import Assignment, NightlyResult, NightlyRun, ThresholdsVersion

from . import enqueue, settings

log = logging.getLogger(__name__)

IMPLIED_FACTOR = THRESHOLD_FACTOR     # the course's rule: thresholds are 120% of the reference's p99


def active_specs() -> list[str]:
    """The spec hashes of every active assignment; the bundled specs (stored now) when there are none."""
    with session_scope() as s:
        found = sorted(set(s.scalars(select(Assignment.spec_hash).where(Assignment.active.is_(True)))))
        if not found:
            found = [specs.stored(s, grader.load_spec(name)).hash for name in grader.available_specs()]
    return found


def references_for(spec) -> list[str]:
    """The references with a kernel for one of the spec's kernel functions (an archive of none
    would be graded as an empty upload)."""
    wanted = {fn for fs in spec.files.values() for fn in fs.functions}
    return [reference for reference, files in FILES.items() if wanted & set(files)]


def available_backends() -> list[str]:
    """The simulator always; Trn2 when a trn2 worker is alive (it runs the neuron references)."""
    with session_scope() as s:
        trn2 = enqueue.worker_alive_on(s, Queue.TRN2)
    return [Backend.SIM, Backend.NEURON] if trn2 else [Backend.SIM]


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
            spec = specs.spec_by_hash(s, spec_hash)
        platform = spec.platform
        if not references_for(spec):
            # a course's own problems (folders): their reference solutions are the folder's, held to
            # it by `grader problem check`; the course's conv2d references have nothing to grade there
            log.info("nightly: spec %s (%s) has no kernel the reference kernels implement: not in the nightly",
                     spec.assignment, spec_hash[:12])
            continue
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
        s.flush()
        note_relaxed_gaps(s, night_id, spec.assignment, backend)
    return result


def relaxed_gaps(optimized_p99: dict, relaxed_p99: dict, relaxed_in_force: dict) -> dict[str, str]:
    """{test: why its relaxed threshold is not proposed} for each test timed by both references
    whose relaxed p99 is within RELAXED_MIN_GAP of the optimized one's (or faster).
    `relaxed_in_force`: {test: us}, the relaxed thresholds that stay."""
    notes = {}
    for name, fast in optimized_p99.items():
        slow = relaxed_p99.get(name)
        if not fast or slow is None or slow >= fast * (1 + RELAXED_MIN_GAP):
            continue
        kept = relaxed_in_force.get(name)
        notes[name] = (f"relaxed reference within {100 * abs(slow / fast - 1):.1f}% of the optimized one "
                       f"(p99 {slow:.1f} against {fast:.1f} us; at least {100 * RELAXED_MIN_GAP:g}% apart is "
                       "needed): relaxed threshold not proposed"
                       + (f", {kept:g} us stays in force" if isinstance(kept, (int, float)) else ""))
    return notes


def note_relaxed_gaps(session, night_id: int, spec_name: str, backend: str) -> None:
    """Once both references of a spec and backend are graded for the night (in any order: the
    neuron ones land from the hardware queue), write on the relaxed one's result which relaxed
    thresholds are not proposed, and why."""
    # one at a time per night: the other reference's grade may land at the same moment
    session.scalar(select(NightlyRun.id).where(NightlyRun.id == night_id).with_for_update())
    found = {r.reference_kernel: r for r in session.scalars(select(NightlyResult).where(
        NightlyResult.nightly_run_id == night_id, NightlyResult.spec_name == spec_name,
        NightlyResult.backend == backend).order_by(NightlyResult.id))}
    optimized, relaxed = found.get(REFERENCE_OF_TIER[Tier.OPTIMIZED]), found.get(REFERENCE_OF_TIER[Tier.RELAXED])
    if optimized is None or relaxed is None:
        return
    kept = {name: levels.get(Tier.RELAXED) for name, levels in (relaxed.thresholds_in_force or {}).items()}
    relaxed.not_proposed = relaxed_gaps(optimized.p99_us or {}, relaxed.p99_us or {}, kept)


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
    its backend: optimized and relaxed tiers from the optimized and relaxed references, but the
    relaxed threshold in force where the relaxed reference is too close to the optimized one
    (its result's not_proposed says why)."""
    results = session.scalars(select(NightlyResult).where(NightlyResult.nightly_run_id == night.id)).all()
    for assignment in session.scalars(select(Assignment).where(Assignment.active.is_(True))):
        mine = [r for r in results if r.backend == assignment.backend and r.passed
                and r.spec_name == specs.spec_of(assignment).assignment]
        tiers = {TIER_OF_REFERENCE[r.reference_kernel]: r.implied_thresholds for r in mine}
        if set(tiers) != {Tier.OPTIMIZED, Tier.RELAXED}:
            continue
        refused = next(r.not_proposed or {} for r in mine if TIER_OF_REFERENCE[r.reference_kernel] == Tier.RELAXED)
        in_force = specs.spec_of(assignment).thresholds()
        thresholds = {}
        for name in tiers[Tier.OPTIMIZED]:
            if name not in tiers[Tier.RELAXED]:
                continue
            optimized = tiers[Tier.OPTIMIZED][name]
            kept = name in refused and name in in_force
            relaxed = in_force[name][Tier.RELAXED] if kept else tiers[Tier.RELAXED][name]
            thresholds[name] = {Tier.OPTIMIZED: optimized, Tier.RELAXED: max(relaxed, optimized)}
        session.add(ThresholdsVersion(assignment_id=assignment.id, source="nightly", thresholds=thresholds,
                                      version=f"nightly-{night.started_at:%Y-%m-%d}-{night.id}"))
