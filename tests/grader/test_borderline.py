"""A simulated p99 carries the simulator's error band for its kind of kernel (grader.bands, from
bench/fidelity.py --cross-validate), and a threshold within that band is said to the student; the
spec's `borderline` says what it earns: "strict" (the default, today's points), "credit" (the
tier, flagged for staff) or "hardware" (today's points, provisional until a Trainium worker times
the run again: workers/hardware_check.py). A kernel far from its thresholds is unaffected; a measured p99 has no
band; rescoring keeps the rule."""
from __future__ import annotations

import dataclasses
import hashlib

import pytest

from grader import bands, scoring
from grader.grade import GradeOptions, grade
from grader.report import Report, TestResult
from grader.report_view import view_of
from grader.sandbox import Limits
from grader.spec import SpecError, from_toml
from grader.submission import Submission
from grader.vocabulary import Borderline, TestStatus
from nkisim.cost.profile import BOUNDS
from test_hostile import HONEST, SPEC, WALL, by_name

PERF = SPEC.test("perf")          # thresholds: optimized 100 us, relaxed 140 us; 17.5 points, 95% partial
# credit is given only within the smallest band of any class (grader/fidelity_bands.json, which
# bench/fidelity.py rewrites as the model changes): the credited cases sit at half of it
HALF_CREDIT = 1 + bands.credit_band() / 2


@pytest.mark.parametrize("p99, band, borderline, points, status, credited", [
    (105.0, 0.10, Borderline.STRICT, 17.5 * 0.95, TestStatus.PARTIAL, False),   # over optimized, within the band
    (100.0 * HALF_CREDIT, 0.10, Borderline.CREDIT, 17.5, TestStatus.PASSED, True),          # ... credited
    (140.0 * HALF_CREDIT, 0.10, Borderline.CREDIT, 17.5 * 0.95, TestStatus.PARTIAL, True),  # over relaxed: partial
    (120.0, 0.10, Borderline.CREDIT, 17.5 * 0.95, TestStatus.PARTIAL, False),   # far from both: as today
    (50.0, 0.10, Borderline.CREDIT, 17.5, TestStatus.PASSED, False),            # far under: as today
    (97.0, 0.10, Borderline.CREDIT, 17.5, TestStatus.PASSED, False),            # under, but within: said only
    (105.0, None, Borderline.CREDIT, 17.5 * 0.95, TestStatus.PARTIAL, False),   # a measured p99: no band
])
def test_the_borderline_rule(p99, band, borderline, points, status, credited):
    got = scoring.timed_verdict(PERF, p99, 0.95, band, borderline)
    assert got[0] == pytest.approx(points) and got[1] == status and got[3] is credited
    near = scoring.near_threshold(PERF, p99, band)
    assert (near is not None) == ("simulator's error" in got[2])
    if band is None or near is None:
        assert got[:3] == scoring.timed_verdict(PERF, p99, 0.95)[:3]          # unaffected


def test_the_bands_cover_every_class_of_kernel():
    found = bands.bands()
    assert set(found) == set(BOUNDS) and all(0 <= b < 1 for b in found.values())
    assert bands.band_of({"bound": "dma"}) == (found["dma"], "dma")
    assert bands.band_of({"verdict": "an older profile"}) is None and bands.band_of(None) is None


def test_a_spec_chooses_strict_credit_or_hardware():
    text = '''assignment = "x"
spec_version = "1"
thresholds_version = "t"
[files.conv2d]
archive_path = "conv2d.py"
functions = { fused_conv2d_maxpool = ["X", "W", "bias", "pool_size"] }
[tolerances]
float32 = { rtol = 1e-4, atol = 1e-4 }
[[tests]]
name = "c"
kind = "correctness"
file = "conv2d"
problem = "conv2d"
points = 1
configs = [{ batch = 1, c_in = 128, c_out = 128, height = 10, width = 10, k = 3, bias = true, pool = 1, dtype = "float32" }]
'''
    assert from_toml(text).borderline == Borderline.STRICT
    assert from_toml('borderline = "credit"\n' + text).borderline == Borderline.CREDIT
    assert from_toml('borderline = "hardware"\n' + text).borderline == Borderline.HARDWARE
    with pytest.raises(SpecError, match='"strict", "credit" or "hardware"'):
        from_toml('borderline = "lenient"\n' + text)


def test_the_view_shows_a_simulated_p99_with_its_band_and_a_measured_one_without():
    def report(details):
        t = TestResult("perf", "performance", "passed", 17.5, 17.5, p99_us=50.0, thresholds_us={"optimized": 100,
                       "relaxed": 140}, details=details)
        return Report(assignment="a", spec_version="1", thresholds_version="t", backend="sim", submission_sha256="0",
                      tests=[t], flags=[],
                      score=scoring.tally([t], {"correctness": 0, "performance": 17.5, "extra_credit": 0}))
    assert view_of(report({"band": 0.085, "bound": "dma"})).tests[0].p99_text == "50.0 us +/-8%"
    assert view_of(report({})).tests[0].p99_text == "50.0 us"


def _graded(spec, source: str = HONEST):
    sub = Submission(files={"conv2d": source}, filenames={"conv2d": "conv2d.py"},
                     sha256=hashlib.sha256(source.encode()).hexdigest(), origin="conv2d.py")
    return grade(sub, spec, GradeOptions(backend="sim", run_precheck=False, limits=Limits(wall_seconds=WALL)))


def test_a_grade_carries_the_band_and_credits_a_borderline_p99_only_under_credit():
    honest = by_name(_graded(SPEC))["perf"]
    band, bound = honest.details["band"], honest.details["bound"]
    assert bound in BOUNDS and band == bands.bands()[bound]
    assert honest.status == TestStatus.PASSED and "simulator's error" not in honest.message     # far from 100 us
    # the optimized threshold just under the honest p99, within its band and the credit band
    # (the smallest of any class): partial under strict
    tight = dataclasses.replace(PERF, thresholds_us={"optimized": honest.p99_us * (1 - bands.credit_band() / 2),
                                                     "relaxed": honest.p99_us * 2})
    strict = dataclasses.replace(SPEC, tests=tuple(tight if t.name == "perf" else t for t in SPEC.tests))
    report = _graded(strict)
    perf = by_name(report)["perf"]
    assert perf.status == TestStatus.PARTIAL and "could land on either side" in perf.message
    assert not any(f.startswith("borderline_credit:") for f in report.flags)
    credit = dataclasses.replace(strict, borderline=Borderline.CREDIT)
    report = _graded(credit)
    perf = by_name(report)["perf"]
    assert perf.status == TestStatus.PASSED and perf.points == PERF.points and "credited" in perf.message
    assert "borderline_credit:perf" in report.flags
    # rescoring the strict report under the credit spec gives the same points and flag
    rescored = scoring.rescore(_graded(strict), credit)
    assert by_name(rescored)["perf"].points == PERF.points and "borderline_credit:perf" in rescored.flags


def test_a_kernel_cannot_earn_credit_by_changing_what_bounds_it():
    """The attack: a DMA-bound kernel 30% over the optimized threshold adds useless Vector (or
    Tensor Engine) work until that engine bounds it, so its class's band (the widest) covers the
    gap, and a slower kernel would be credited. Credit is given only within the smallest band
    of any class; the message still names the kernel's own."""
    spec = dataclasses.replace(SPEC, borderline=Borderline.CREDIT)
    widest, smallest = max(bands.bands().values()), min(bands.bands().values())
    assert widest > smallest * 1.5            # the hole exists for the bundled bands
    p99 = PERF.thresholds_us["optimized"] * (1 + (widest + smallest) / 2)    # inside the widest only
    got = scoring.timed_verdict(PERF, p99, spec.partial_credit, widest, spec.borderline)
    assert got[3] is False and got[1] == TestStatus.PARTIAL
    assert "could land on either side" in got[2]


@pytest.mark.parametrize("p99, band, provisional", [
    (105.0, 0.10, True),          # over optimized, within the kernel's own band
    (97.0, 0.10, True),           # under it, within: provisional too (hardware may be slower)
    (120.0, 0.10, False),         # far from both thresholds
    (105.0, None, False),         # a measured p99 has no band
    (100.0 * 1.3, 0.35, True),    # the widest band: hardware times it as it is, nothing is credited
])
def test_under_hardware_a_borderline_p99_keeps_todays_points_and_is_provisional(p99, band, provisional):
    got = scoring.timed_verdict(PERF, p99, 0.95, band, Borderline.HARDWARE)
    assert got[:2] == scoring.timed_verdict(PERF, p99, 0.95, band, Borderline.STRICT)[:2] and got[3] is False
    assert scoring.provisional(PERF, p99, band, Borderline.HARDWARE) is provisional
    assert ("provisional" in got[2]) is provisional
    assert not scoring.provisional(PERF, p99, band, Borderline.STRICT)


def test_a_grade_under_hardware_is_flagged_provisional_and_rescoring_keeps_it():
    honest = by_name(_graded(SPEC))["perf"]
    tight = dataclasses.replace(PERF, thresholds_us={"optimized": honest.p99_us * (1 - honest.details["band"] / 2),
                                                     "relaxed": honest.p99_us * 2})
    strict = dataclasses.replace(SPEC, tests=tuple(tight if t.name == "perf" else t for t in SPEC.tests))
    hardware = dataclasses.replace(strict, borderline=Borderline.HARDWARE)
    report = _graded(hardware)
    perf = by_name(report)["perf"]
    assert perf.status == TestStatus.PARTIAL and "provisional" in perf.message
    assert "borderline_hardware:perf" in report.flags
    assert any("Trainium hardware" in f.for_student for f in view_of(report).flags)
    rescored = scoring.rescore(_graded(strict), hardware)
    assert "borderline_hardware:perf" in rescored.flags and by_name(rescored)["perf"].points == perf.points
    assert "borderline_hardware:perf" not in scoring.rescore(report, strict).flags
    assert "borderline_hardware:perf" not in _graded(dataclasses.replace(SPEC, borderline=Borderline.HARDWARE)).flags
