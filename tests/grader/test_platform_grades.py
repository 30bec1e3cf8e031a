"""Each platform's spec grades on its own generation's model, end to end on the simulator: the
2024 assignment on the Trainium1 model with no platform flag, the Trainium3 one on the v4 model
with the flag saying that model is not yet checked against hardware."""
import dataclasses
import os

import pytest

import grader
from grader.grade import GradeOptions, grade
from grader.sandbox import Limits
from grader.submission import submission_from_bytes
from grader.vocabulary import TestStatus

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
ROOMY = dict(time_budget_s=3600, config_timeout_s=1800, limits=Limits(wall_seconds=1800))


def read(path: str) -> bytes:
    with open(os.path.join(ROOT, path), "rb") as fh:
        return fh.read()


def timed_only(spec):
    return dataclasses.replace(spec, tests=tuple(dataclasses.replace(t, gated_by=())
                                                 for t in spec.tests if t.timed and t.file == "conv2d"))


def graded(spec_name: str, kernel: str):
    spec = timed_only(grader.load_spec(spec_name))
    sub = submission_from_bytes("conv2d.py", read(kernel), spec)
    return grade(sub, spec, GradeOptions(backend="sim", seed=5, jobs=2, **ROOMY))


def test_the_2024_assignment_grades_the_reference_on_the_trainium1_model_unflagged():
    report = graded("asst4-trainium", "reference_kernels/conv2d_optimized.py")
    assert report.platform == "trn1" and report.flags == [], report.flags
    assert [t.status for t in report.tests] == [TestStatus.PASSED] * 2
    # the Trainium1 model, not Trainium2's: its 2.8 GHz Tensor Engine makes the same kernel faster
    trn2 = graded("asst4-trainium2", "reference_kernels/conv2d_optimized.py")
    by_dtype = {t.configs[0]["dtype"]: r.p99_us for t, r in zip(timed_only(grader.load_spec("asst4-trainium2")).tests,
                                                                trn2.tests) if t.configs[0]["pool"] == 1 and t.configs[0]["height"] == 224}
    for test, result in zip(timed_only(grader.load_spec("asst4-trainium")).tests, report.tests):
        assert result.p99_us < by_dtype[test.configs[0]["dtype"]], (test.name, result.p99_us)


@pytest.mark.parametrize("kernel, statuses", [
    ("conv2d_optimized.py", {"perf": TestStatus.PASSED, "ec": TestStatus.PASSED}),
    ("conv2d_relaxed.py", {"ec": TestStatus.FAILED}),
])
def test_the_trainium3_spec_tiers_its_references_and_says_its_model_is_unchecked(kernel, statuses):
    report = graded("asst4-trainium3-nki06", f"reference_kernels/nki06/{kernel}")
    assert report.platform == "trn3" and report.flags == ["uncalibrated_model:trn3"]
    by_name = {t.name: t for t in report.tests}
    for name, result in by_name.items():
        expected = statuses.get(name.split("_")[0])
        if expected is not None:
            assert result.status == expected, (name, result.p99_us, result.message)
    if kernel == "conv2d_relaxed.py":       # the relaxed tier where the course has one
        assert by_name["perf_224_pool1_float16"].status == TestStatus.PARTIAL
