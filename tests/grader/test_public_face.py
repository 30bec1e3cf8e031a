"""The grader's public face as workers/ and web/ use it: the names, one base for bad input
with a remedy, the cancel token and progress events, the seed kept out of public JSON,
rescore without running a kernel, and the problem registry behind the old facades."""
from __future__ import annotations

import json
import pickle
import subprocess
import sys

import numpy as np
import pytest

import grader
from grader import problems, render, scoring
from grader import spec as specs
from grader import report as report_types      # not TestResult by name: pytest would collect it
from grader.grade import _config_label, choose_backend

PUBLIC = ["available_specs", "load_spec", "load_submission", "submission_from_bytes", "GradeOptions", "grade",
          "Report", "TestResult", "Score", "rescore", "ProgressEvent", "CancelToken", "GraderInputError",
          "BackendUnavailable", "SpecError", "SubmissionError", "AssignmentSpec", "TestSpec"]


def test_every_public_name_resolves():
    for name in PUBLIC:
        assert getattr(grader, name) is not None, name
    assert grader.available_specs() == ["asst4-trainium", "asst4-trainium2", "asst4-trainium2-nki06", "asst4-trainium3-nki06"]
    # importing the module of the same name does not take the grading call away
    assert __import__("grader.grade").grade is grader.grade and callable(grader.grade)
    assert {"to_gradescope", "to_json", "render_terminal"} <= set(dir(grader.render))


def test_importing_the_package_loads_no_grading_code():
    """The sandboxed child imports `grader` to run grader.child: that must not pull in the
    grading core or the reference answers."""
    code = ("import sys, grader; bad = [m for m in ('grader.grade', 'grader.problems', 'reference_kernels', "
            "'grader.scoring') if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_every_bad_input_error_is_a_grader_input_error_with_a_remedy():
    spec = grader.load_spec("asst4-trainium2")
    errors = []
    for bad in (lambda: grader.load_spec("nope"),
                lambda: grader.submission_from_bytes("conv2d.py", b"def f(:\n", spec),
                lambda: choose_backend("neuron"),
                lambda: choose_backend("gpu")):
        with pytest.raises(grader.GraderInputError) as info:
            bad()
        errors.append(info.value)
    assert [type(e).__name__ for e in errors] == ["SpecError", "SubmissionError", "BackendUnavailable",
                                                  "BackendUnavailable"]
    for err in errors:
        assert isinstance(err, ValueError) and err.reason and err.remedy
        assert str(err).startswith(err.reason.rstrip(".")) and str(err).endswith(err.remedy)
        copy = pickle.loads(pickle.dumps(err))          # Celery ships errors between processes
        assert (type(copy), copy.reason, copy.remedy) == (type(err), err.reason, err.remedy)


def test_a_non_positive_time_budget_is_refused_before_anything_runs():
    spec = grader.load_spec("asst4-trainium2")
    sub = grader.submission_from_bytes("conv2d.py", b"def fused_conv2d_maxpool(X, W, bias, pool_size=1):\n"
                                                    b"    return X\n", spec)
    with pytest.raises(grader.GraderInputError, match="time budget must be positive"):
        grader.grade(sub, spec, grader.GradeOptions(backend="sim", time_budget_s=0))


def test_cancel_token():
    token = grader.CancelToken()
    assert not token.cancelled and token.reason == "cancelled"
    token.cancel("interrupted")
    token.cancel()                    # a later cancel keeps the first reason
    assert token.cancelled and token.event.is_set() and token.reason == "interrupted"
    with pytest.raises(ValueError):
        grader.CancelToken().cancel("bored")


# ----- reports -------------------------------------------------------------------------------------

SPEC = grader.load_spec("asst4-trainium2")


def stored_report(p99s: dict[str, float], seed_kind="secret") -> grader.Report:
    """A report as a worker stores it: correctness passed, timed tests measured."""
    tests = []
    for t in SPEC.tests:
        if t.file == "kernels":
            tests.append(report_types.TestResult(t.name, t.kind, "skipped", 0.0, t.points, title=t.title,
                                                 file="kernels.py", details={"not_run": "not_submitted"}))
        elif not t.timed:
            tests.append(report_types.TestResult(t.name, t.kind, "passed", t.points, t.points, title=t.title,
                                                 file="conv2d.py"))
        else:
            points, status, message, _ = scoring.timed_verdict(t, p99s[t.name], SPEC.partial_credit)
            tests.append(report_types.TestResult(t.name, t.kind, status, points, t.points, title=t.title,
                                                 file="conv2d.py", p99_us=p99s[t.name], message=message,
                                                 thresholds_us=dict(t.thresholds_us), details={"roofline_us": 1.0}))
    return grader.Report(assignment=SPEC.assignment, spec_version=SPEC.spec_version,
                         thresholds_version=SPEC.thresholds_version, spec_hash=SPEC.spec_hash, backend="sim",
                         submission_sha256="ab" * 32, score=scoring.total(SPEC, tests), flags=[], tests=tests,
                         seed=1234567890123, seed_kind=seed_kind, missing_files=["kernels.py"])


P99 = {"perf_224_pool1_float32": 4700.0, "perf_224_pool1_float16": 1000.0, "perf_224_pool2_float32": 4000.0,
       "perf_224_pool2_float16": 900.0, "ec_32x16_pool1_float32": 100.0, "ec_32x16_pool1_float16": 90.0,
       "ec_32x16_pool2_float32": 120.0, "ec_32x16_pool2_float16": 80.0}


def test_secret_seed_is_returned_but_left_out_of_public_json():
    report = stored_report(P99)
    assert report.seed == 1234567890123
    assert "seed" not in report.to_json() and "seed" not in render.to_json(report)
    assert report.to_json(include_seed=True)["seed"] == 1234567890123
    restored = grader.Report.from_json(json.loads(json.dumps(report.to_json(include_seed=True))))
    assert restored == report
    public = stored_report(P99, seed_kind="public")
    assert public.to_json()["seed"] == 1234567890123        # the caller chose it; nothing to hide


def test_from_json_ignores_fields_it_does_not_know():
    data = stored_report(P99).to_json()
    data["added_later"] = 1
    data["tests"][0]["also_new"] = 2
    assert grader.Report.from_json(data).tests[0].name == "conv_small"


def test_rescore_applies_new_thresholds_to_stored_p99s():
    report = stored_report(P99)
    assert report.score.performance == pytest.approx(17.5 * 0.95 + 17.5 + 7.5 + 7.5)
    data = (specs.SPEC_DIR / "asst4-trainium2.toml").read_text()
    data = data.replace('thresholds_version = "2025-11-13"', 'thresholds_version = "2025-12-01"')
    data = data.replace("thresholds_us = { optimized = 4596, relaxed = 4964 }",
                        "thresholds_us = { optimized = 4800, relaxed = 5000 }")
    new_spec = grader.spec_from_toml(data, "new.toml")
    new = grader.rescore(report, new_spec)
    by = {t.name: t for t in new.tests}
    assert by["perf_224_pool1_float32"].status == "passed" and by["perf_224_pool1_float32"].points == 17.5
    assert "within the optimized threshold (4800 us)" in by["perf_224_pool1_float32"].message
    assert by["perf_224_pool1_float32"].thresholds_us == {"optimized": 4800, "relaxed": 5000}
    assert new.score.performance == 50 and new.score.total == 10 + 50 + 2.5
    assert new.thresholds_version == "2025-12-01" and new.spec_hash == new_spec.spec_hash
    assert new.rescored_from == {"spec_version": "3", "thresholds_version": "2025-11-13",
                                 "spec_hash": SPEC.spec_hash}
    assert report.score.performance < 50                      # the stored report is unchanged
    assert [t.p99_us for t in new.tests] == [t.p99_us for t in report.tests]


def test_rescore_refuses_another_assignment_or_other_tests():
    report = stored_report(P99)
    with pytest.raises(grader.GraderInputError, match="not 'asst4-trainium'"):
        grader.rescore(report, grader.load_spec("asst4-trainium"))
    report.tests = report.tests[:-1]
    with pytest.raises(grader.GraderInputError, match="different tests"):
        grader.rescore(report, SPEC)


def test_rescore_refuses_a_spec_in_another_nki_dialect():
    """The report's kernels passed the legacy dialect's checks: a spec of the same assignment in
    NKI 0.6 (a course moving on) needs a new grade, not new points for the old one."""
    report = stored_report(P99)
    moved = grader.spec_from_toml(SPEC.toml.replace('platform = "trn2"', 'dialect = "nki-0.6"\nplatform = "trn2"'))
    assert moved.assignment == report.assignment and moved.dialect == "nki-0.6"
    with pytest.raises(grader.GraderInputError) as info:
        grader.rescore(report, moved)
    assert "checked as 'neuronxcc-nki'" in info.value.reason and "'nki-0.6'" in info.value.reason
    assert "needs a new grade" in info.value.remedy
    assert grader.rescore(report, SPEC).dialect == "neuronxcc-nki"       # the same dialect rescoring as before


def test_a_report_stored_before_the_dialect_field_reads_as_legacy():
    data = stored_report(P99).to_json()
    data.pop("dialect")
    old = grader.Report.from_json(data)
    assert old.dialect == "neuronxcc-nki"
    assert grader.view_of(old).provenance.dialect == "legacy NKI (neuronxcc.nki, NKI 0.1) on Neuron SDK 2.26"


# ----- problems ------------------------------------------------------------------------------------

def test_problem_registry_backs_the_module_facades():
    conv = {"batch": 1, "c_in": 128, "c_out": 128, "height": 10, "width": 12, "k": 3, "bias": True, "pool": 2,
            "dtype": "float16"}
    args, kwargs = problems.make_inputs("conv2d", conv, np.random.default_rng(0))
    assert [a.shape for a in args] == [(1, 128, 10, 12), (128, 128, 3, 3), (128,)] and kwargs == {"pool_size": 2}
    assert all(a.dtype == np.float16 for a in args)
    assert problems.reference("conv2d", args, kwargs).shape == (1, 128, 4, 5)
    assert problems.work("conv2d", conv)[0] == 2.0 * 128 * 128 * 9 * 8 * 10
    assert 0 < problems.roofline_us("conv2d", conv) == problems.get("conv2d").roofline_us(conv)
    assert _config_label(conv) == "B=1 C_in=128 C_out=128 10x12 pool=2 float16"
    assert _config_label({"m": 256, "n": 384, "dtype": "float32"}) == "256x384 float32"
    transpose = problems.get("transpose")
    assert transpose.kernel == "matrix_transpose" and transpose.allowed_instructions == {"nc_transpose"}
    assert SPEC.test("transpose").compute_only == ("nc_transpose",)     # from the registry, not the TOML
    assert SPEC.test("conv_small").kernel == "fused_conv2d_maxpool"
    with pytest.raises(ValueError, match="unknown problem 'fft'"):
        problems.get("fft")
