"""Points as the course awards them: tiers for timed tests, correctness gating, extra credit
counted apart, and the plausibility flag."""
from __future__ import annotations

from .report import Score, TestResult
from .spec import AssignmentSpec, TestSpec


def timed_points(test: TestSpec, p99_us: float, partial_credit: float) -> tuple[float, str]:
    """(points, status) for a p99: full at or under the optimized threshold, partial at or
    under the relaxed one, else nothing."""
    th = test.thresholds_us
    if p99_us <= th["optimized"]:
        return test.points, "passed"
    if p99_us <= th["relaxed"] and partial_credit > 0:
        return test.points * partial_credit, "partial"
    return 0.0, "failed"


def implausibly_fast(test: TestSpec, p99_us: float, roofline_us: float, speedup: float) -> bool:
    """Faster than physics allows for the work, or `speedup` times faster than the optimized
    reference (whose latency is the optimized threshold / 1.2)."""
    reference_us = test.thresholds_us["optimized"] / 1.2
    return p99_us < roofline_us or p99_us * speedup < reference_us


def total(spec: AssignmentSpec, results: list[TestResult]) -> Score:
    counted = [r for r in results if r.status != "skipped" or r.details.get("counts", True)]
    by_kind = {k: sum(r.points for r in results if r.kind == k) for k in ("correctness", "performance", "extra_credit")}
    max_total = sum(r.max_points for r in counted if r.kind != "extra_credit")
    return Score(correctness=by_kind["correctness"], performance=by_kind["performance"],
                 extra_credit=by_kind["extra_credit"], total=sum(by_kind.values()), max_total=max_total)
