"""grader.agreement (grader/agreements.py): a simulated grade held against measured p99s. The error is the simulator's
as a fraction of the measurement, within means inside the band the simulated report states, and
only timed tests timed on both sides are compared."""
from __future__ import annotations

from pathlib import Path

import pytest

import grader

ROOT = Path(__file__).resolve().parents[2]
TINY_SPEC = ROOT / "tests" / "workers" / "specs" / "tiny.toml"


@pytest.fixture(scope="module")
def simulated():
    spec = grader.load_spec(str(TINY_SPEC))
    kernel = (ROOT / "reference_kernels" / "conv2d_optimized.py").read_bytes()
    return grader.view_of(grader.grade(grader.submission_from_bytes("conv2d.py", kernel, spec), spec,
                                       grader.GradeOptions(backend="sim", seed=3)))


def test_a_measurement_inside_the_band_is_within_and_one_outside_is_not(simulated):
    perf = simulated.test("perf_tiny")
    assert perf.band is not None and perf.bound in ("tensor", "vector", "dma", "latency")
    for factor, within in ((1 + perf.band / 2, True), (1 - perf.band / 2, True), (1 + 2 * perf.band, False),
                           (1 / (1 + 2 * perf.band), False)):
        rows = grader.agreement(simulated, {"perf_tiny": perf.p99_us / factor})
        assert [(r.test, r.title, r.bound) for r in rows] == [("perf_tiny", perf.title, perf.bound)]
        assert rows[0].error == pytest.approx(factor - 1) and rows[0].within is within, factor
    slower = grader.agreement(simulated, {"perf_tiny": perf.p99_us / 1.5})[0]
    assert slower.error > 0                      # the simulator says slower than the hardware measured


def test_the_module_does_not_shadow_the_function_of_its_name():
    """`from grader.agreements import ...` first, then grader.agreement is still the function."""
    import grader.agreements  # noqa: F401
    assert callable(grader.agreement) and grader.agreement.__module__ == "grader.agreements"


def test_only_timed_tests_measured_on_both_sides_are_compared(simulated):
    perf = simulated.test("perf_tiny")
    assert grader.agreement(simulated, {}) == []
    assert grader.agreement(simulated, {"perf_tiny": 0.0}) == []                 # no measurement
    assert grader.agreement(simulated, {"perf_tiny": float("nan")}) == []
    assert grader.agreement(simulated, {"conv_tiny": 5.0}) == []                 # correctness is not timed
    assert grader.measured_p99s(simulated) == {"perf_tiny": perf.p99_us}
    assert grader.agreement_summary([]) is None


def test_the_summary_counts_within_and_takes_the_median_error(simulated):
    perf = simulated.test("perf_tiny")
    rows = [grader.agreement(simulated, {"perf_tiny": perf.p99_us / f})[0] for f in (1.01, 1 + 3 * perf.band, 0.98)]
    summary = grader.agreement_summary(rows)
    assert (summary.within, summary.of) == (2, 3) and summary.median_error == pytest.approx(0.02)


def test_a_simulated_p99_without_a_band_is_never_within():
    """An older grader's report states no band: its error is shown, never called within."""
    from grader.agreements import Agreement
    row = Agreement("perf", "Perf", None, 10.0, None, 10.0)
    assert row.error == 0 and not row.within
