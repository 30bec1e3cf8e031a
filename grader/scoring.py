"""Points as the course awards them: tiers for timed tests, correctness gating, extra credit
counted apart, the plausibility flag, and re-scoring stored p99s under new thresholds. One
rule everywhere: the maxima are the assignment's, whatever files a submission holds."""
from __future__ import annotations

import dataclasses

from . import bands, problems
from .errors import GraderInputError
from .report import KINDS, STATUSES, Report, Score, TestResult
from .spec import AssignmentSpec, TestSpec
from .vocabulary import THRESHOLD_FACTOR, Borderline, TestKind, TestStatus, Tier, TimedFlag

MEASURED = (TestStatus.PASSED, TestStatus.PARTIAL, TestStatus.FAILED)     # a timed test's statuses with a p99


def timed_points(test: TestSpec, p99_us: float, partial_credit: float) -> tuple[float, str]:
    """(points, status) for a p99: full at or under the optimized threshold, partial at or
    under the relaxed one, else nothing."""
    th = test.thresholds_us
    if p99_us <= th[Tier.OPTIMIZED]:
        return test.points, TestStatus.PASSED
    if p99_us <= th[Tier.RELAXED] and partial_credit > 0:
        return test.points * partial_credit, TestStatus.PARTIAL
    return 0.0, TestStatus.FAILED


def near_threshold(test: TestSpec, p99_us: float, band: float | None) -> str | None:
    """The tier whose threshold lies within the simulator's error band of a simulated p99 (on
    Trainium the kernel could land on either side of it), the optimized one first; None."""
    if not band:
        return None
    for tier in (Tier.OPTIMIZED, Tier.RELAXED):
        if p99_us * (1 - band) <= test.thresholds_us[tier] <= p99_us * (1 + band):
            return tier
    return None


def timed_verdict(test: TestSpec, p99_us: float, partial_credit: float, band: float | None = None,
                  borderline: str = Borderline.STRICT) -> tuple[float, str, str, bool]:
    """(points, status, message for the student, credited) for a p99 under the test's
    thresholds. `band`: the simulator's error band for the kernel (grader.bands), or None for a
    measured p99. A threshold within it is said in the message; under borderline = "credit" a p99
    slower than a threshold within the smallest band of any class earns its tier (credited: True,
    flagged for staff): the band of the kernel's own class would let a kernel widen it by adding
    work to a less well modelled engine until that engine bounds it."""
    points, status = timed_points(test, p99_us, partial_credit)
    th = test.thresholds_us
    optimized, relaxed = th[Tier.OPTIMIZED], th[Tier.RELAXED]
    near = near_threshold(test, p99_us, band)
    credit = near_threshold(test, p99_us, min(band, bands.credit_band())) if band else None
    credited = credit is not None and borderline == Borderline.CREDIT and p99_us > th[credit]
    if credited:
        near = credit
        earned = timed_points(test, th[near], partial_credit)
        credited = earned[0] > points
        if credited:
            points, status = earned
    if status == TestStatus.PASSED:
        message = f"p99 {p99_us:.1f} us is within the optimized threshold ({optimized:g} us)"
    elif status == TestStatus.PARTIAL:
        message = (f"p99 {p99_us:.1f} us is within the relaxed threshold ({relaxed:g} us) but not the "
                   f"optimized one ({optimized:g} us): {partial_credit:.0%} of the points")
    else:
        tier = "relaxed threshold" if partial_credit and relaxed != optimized else "threshold"
        message = f"p99 {p99_us:.1f} us is slower than the {tier} ({relaxed:g} us)"
    if credited:
        message = (f"p99 {p99_us:.1f} us is slower than the {near} threshold ({th[near]:g} us) but within the "
                   f"simulator's error for kernels like this (+/-{band:.0%}): credited as meeting it, and "
                   f"flagged for course staff")
    elif near is not None:
        message += (f"; the {near} threshold ({th[near]:g} us) is within the simulator's error for kernels like "
                    f"this (+/-{band:.0%}): on Trainium it could land on either side")
        if borderline == Borderline.HARDWARE:
            message += ("; provisional: the course times this run again on a Trainium worker, and that run's "
                        "score stands")
    return points, status, message, credited


def provisional(test: TestSpec, p99_us: float, band: float | None, borderline: str) -> bool:
    """Under borderline = "hardware": a simulated p99 with a threshold within its kernel's own
    band is provisional (its points today's rule's) until a Trainium worker times the run again.
    The kernel's own band, not the credit band: a kernel that widens it earns nothing but a run
    on hardware, which times it as it is."""
    return borderline == Borderline.HARDWARE and near_threshold(test, p99_us, band) is not None


def timed_flags(test: TestSpec, p99_us: float, band: float | None, credited: bool, roofline_us: float,
                spec) -> list[str]:
    """What a timed test's verdict flags for staff, in the report's order: a p99 credited under
    borderline = "credit", one provisional under "hardware", one implausibly fast. Grading and
    rescoring both flag through here."""
    flags = [TimedFlag.BORDERLINE_CREDIT.of(test.name)] if credited else []
    if provisional(test, p99_us, band, spec.borderline):
        flags.append(TimedFlag.BORDERLINE_HARDWARE.of(test.name))
    if implausibly_fast(test, p99_us, roofline_us, spec.implausible_speedup):
        flags.append(TimedFlag.IMPLAUSIBLY_FAST.of(test.name))
    return flags


def implausibly_fast(test: TestSpec, p99_us: float, roofline_us: float, speedup: float) -> bool:
    """Faster than physics allows for the work, or `speedup` times faster than the optimized
    reference (whose latency is the optimized threshold / 1.2)."""
    reference_us = test.thresholds_us[Tier.OPTIMIZED] / THRESHOLD_FACTOR
    return p99_us < roofline_us or p99_us * speedup < reference_us


def total(spec: AssignmentSpec, results: list[TestResult]) -> Score:
    """The score of `results` under the assignment's maxima: the numbers every output
    (terminal, JSON, Gradescope, web) shows, computed once here."""
    return tally(results, {k: spec.max_points(k) for k in KINDS})


def tally(results: list[TestResult], maxima: dict[str, float]) -> Score:
    """Points per kind, the given maxima per kind, and how many tests of each kind ended in
    each status."""
    by_kind = {k: sum(r.points for r in results if r.kind == k) for k in KINDS}
    counts = {}
    for kind in KINDS:
        of_kind = [r for r in results if r.kind == kind]
        counts[kind] = {"tests": len(of_kind), **{s: sum(r.status == s for r in of_kind) for s in STATUSES}}
    correctness, performance, extra = TestKind.CORRECTNESS, TestKind.PERFORMANCE, TestKind.EXTRA_CREDIT
    return Score(correctness=by_kind[correctness], performance=by_kind[performance],
                 extra_credit=by_kind[extra], total=sum(by_kind.values()),
                 max_total=maxima[correctness] + maxima[performance],
                 max_correctness=maxima[correctness], max_performance=maxima[performance],
                 max_extra_credit=maxima[extra], counts=counts)


def rescore(report: Report, spec: AssignmentSpec) -> Report:
    """The report re-scored under `spec`'s thresholds and tiers from its stored p99s: no
    kernel runs. Only timed tests that were measured change; the spec's versions and hash
    are recorded, and where the report came from is kept in `rescored_from`."""
    if spec.assignment != report.assignment:
        raise GraderInputError(f"this report is for {report.assignment!r}, not {spec.assignment!r}",
                               "Rescore with a version of the spec of the report's own assignment.")
    if spec.dialect != report.dialect:      # its kernels were checked against the other dialect's rules
        raise GraderInputError(f"this report's kernels were checked as {report.dialect!r}, and the spec is written "
                               f"in {spec.dialect!r}", "Rescore with a spec in the report's own NKI dialect; "
                                                       "another dialect needs a new grade.")
    by_name = {t.name: t for t in spec.tests}
    ours = {t.name for t in report.tests}
    if ours != set(by_name):
        differ = sorted(ours.symmetric_difference(by_name))
        raise GraderInputError(f"the spec and the report have different tests ({', '.join(differ)})",
                               "Rescore with a spec that keeps the report's tests (only thresholds and "
                               "points may change); a spec with other tests needs a new grade.")
    flags = [f for f in report.flags if not f.startswith(tuple(kind.prefix for kind in TimedFlag))]
    tests = []
    for result in report.tests:
        test = by_name[result.name]
        new = dataclasses.replace(result, max_points=test.points, title=test.title,
                                  thresholds_us=dict(test.thresholds_us) if test.thresholds_us else None,
                                  details=dict(result.details))
        if test.timed and result.p99_us is not None and result.status in MEASURED:
            band = result.details.get("band")
            new.points, new.status, new.message, credited = timed_verdict(test, result.p99_us, spec.partial_credit,
                                                                          band, spec.borderline)
            roof = result.details.get("roofline_us")
            if roof is None:
                roof = max(problems.roofline_us(test.problem, c, spec.platform) for c in test.configs)
            flags += timed_flags(test, result.p99_us, band, credited, roof, spec)
        elif new.status == TestStatus.PASSED:
            new.points = test.points
        tests.append(new)
    previous = report.rescored_from or {"spec_version": report.spec_version,
                                        "thresholds_version": report.thresholds_version,
                                        "spec_hash": report.spec_hash}
    return dataclasses.replace(report, tests=tests, flags=flags, score=total(spec, tests),
                               spec_version=spec.spec_version, thresholds_version=spec.thresholds_version,
                               spec_hash=spec.spec_hash, rescored_from=previous)
