"""The simulator held against Trainium hardware: a kernel's simulated p99s, each with the band its
report states (grader.bands), against the p99s measured for the same tests on hardware: the
nightly's references on both backends, or one submission graded on both (as a spec's
borderline = "hardware" does). An error outside the band is a kernel the cost model gets wrong by
more than it tells students; such pairs are what the cost model is checked against
(docs/cost-model.md)."""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Mapping

from .report_view import ReportView, finite


@dataclass(frozen=True)
class Agreement:
    """One timed test of one kernel, simulated and measured."""
    test: str
    title: str
    bound: str | None               # what bounds the kernel in the simulator (the band's class)
    simulated_us: float
    band: float | None              # None: the simulated report states none (an older grader's)
    measured_us: float

    @property
    def error(self) -> float:
        """The simulator's error as a fraction of the measurement (+0.08: 8% slower than measured)."""
        return self.simulated_us / self.measured_us - 1

    @property
    def within(self) -> bool:
        return self.band is not None and abs(self.error) <= self.band


def measured_p99s(view: ReportView) -> dict[str, float]:
    """{test: p99 us} of a report's timed tests that were timed."""
    return {t.name: t.p99_us for t in view.tests if t.timed and t.p99_us is not None}


def agreement(simulated: ReportView, measured_us: Mapping[str, float]) -> list[Agreement]:
    """The timed tests both sides timed, in the simulated report's order."""
    rows = []
    for t in simulated.tests:
        measured = measured_us.get(t.name)
        if t.timed and t.p99_us is not None and finite(measured) and measured > 0:
            rows.append(Agreement(t.name, t.title, t.bound, float(t.p99_us), t.band, float(measured)))
    return rows


@dataclass(frozen=True)
class Summary:
    within: int                     # tests whose error is within their band
    of: int
    median_error: float             # of |error|


def summary(rows: list[Agreement]) -> Summary | None:
    if not rows:
        return None
    return Summary(sum(r.within for r in rows), len(rows), statistics.median(abs(r.error) for r in rows))
