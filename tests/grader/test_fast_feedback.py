"""Fast feedback for broken kernels: what tracing already knows (the count, shape and dtype of
the outputs a traced program declares) fails a run before its program is executed, with the
message the output check gives, and a test stops at its first failing configuration."""
from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

import grader
from grader import problems
from grader.checks import check_output
from grader.runner import RunnerJob, run_configuration
from grader.sandbox import Limits
from grader.spec import parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with open(os.path.join(ROOT, "reference_kernels", "conv2d_optimized.py")) as _fh:
    OPTIMIZED = _fh.read()

OUTPUT_SHAPE = "shape=(batch_size, out_channels, out_pool_height, out_pool_width)"
OUTPUT_DTYPE = "dtype=X.dtype,\n        buffer=nl.hbm"


def variant(old: str, new: str) -> str:
    assert OPTIMIZED.count(old) == 1, old
    return OPTIMIZED.replace(old, new)


# every output row written, and one more row nobody asked for: the work is all done
ONE_ROW_TOO_MANY = variant(OUTPUT_SHAPE, "shape=(batch_size, out_channels, out_pool_height + 1, out_pool_width)")
# right without max-pool, one row too many with it
POOLED_ROW_TOO_MANY = variant(OUTPUT_SHAPE,
                              "shape=(batch_size, out_channels, out_pool_height + pool_size - 1, out_pool_width)")
ALWAYS_FLOAT32 = variant(OUTPUT_DTYPE, "dtype=nl.float32,\n        buffer=nl.hbm")
TWO_OUTPUTS = variant("    return X_out\n", "    return X_out, X_out\n")

SMALL = dict(batch=2, c_in=128, c_out=128, height=10, width=10, k=3, bias=True, dtype="float32")
SPEC = parse({
    "assignment": "fast-feedback", "spec_version": "1", "thresholds_version": "t1", "platform": "trn2",
    "partial_credit": 0.95, "precheck": True, "implausible_speedup": 3.0,
    "files": {"conv2d": {"archive_path": "part2/conv2d.py",
                         "functions": {"fused_conv2d_maxpool": ["X", "W", "bias", "pool_size"]}}},
    "tolerances": {"float32": {"rtol": 1e-5, "atol": 1e-8}, "float16": {"rtol": 1e-2, "atol": 1e-1}},
    "tests": [
        {"name": "conv_a", "kind": "correctness", "file": "conv2d", "problem": "conv2d", "points": 2,
         "configs": [dict(SMALL, pool=1), dict(SMALL, pool=2), dict(SMALL, pool=1, c_out=256)]},
        {"name": "conv_b", "kind": "correctness", "file": "conv2d", "problem": "conv2d", "points": 2,
         "configs": [dict(SMALL, pool=1, c_in=256, height=8, width=12)]},
        {"name": "perf_f32", "kind": "performance", "file": "conv2d", "problem": "conv2d", "points": 4,
         "gated_by": ["conv_b"], "thresholds_us": {"optimized": 60, "relaxed": 120}, "warmup": 1, "iters": 2,
         "configs": [dict(SMALL, batch=1, pool=1)]},
        {"name": "perf_f16", "kind": "performance", "file": "conv2d", "problem": "conv2d", "points": 4,
         "gated_by": ["conv_b"], "thresholds_us": {"optimized": 60, "relaxed": 120}, "warmup": 1, "iters": 2,
         "configs": [dict(SMALL, batch=1, pool=1, dtype="float16"), dict(SMALL, batch=1, pool=2, dtype="float16")]},
    ]})


@pytest.fixture
def reference_calls(monkeypatch):
    """Every reference answer the grade works out, by problem (a counting wrapper of the real one)."""
    calls = []
    for name, problem in list(problems.REGISTRY.items()):
        def counted(args, kwargs, real=problem.reference, name=name, **how):
            calls.append(name)
            return real(args, kwargs, **how)
        monkeypatch.setitem(problems.REGISTRY, name, dataclasses.replace(problem, reference=counted))
    return calls


def graded(source: str, spec=SPEC, **options):
    sub = grader.submission_from_bytes("conv2d.py", source.encode(), spec)
    return grader.grade(sub, spec, grader.GradeOptions(backend="sim", seed=5, **options))


def by_name(report):
    return {t.name: t for t in report.tests}


def test_the_layout_message_is_the_output_checks_own():
    """The early verdict and the output check say the same thing about the same outputs."""
    out, expected = np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32)
    assert check_output(out, expected, 1e-5, 1e-8).message == "output shape (2, 3) differs from the expected (3, 2)"
    assert check_output(out.astype(np.float16), expected.T, 1e-5, 1e-8).message == \
        "output dtype float16 differs from the expected float32"


def test_every_problem_knows_its_answers_shape_and_dtype_without_computing_it():
    rng = np.random.default_rng(0)
    for config in [dict(SMALL, pool=1), dict(SMALL, pool=2, height=11), dict(SMALL, pool=2, dtype="float16"),
                   {"m": 128, "n": 384, "dtype": "float32"}]:
        problem = problems.problem_of_config(config)
        args, kwargs = problem.make_inputs(config, rng)
        answer = problem.reference(args, kwargs)
        assert problem.output(config) == (answer.shape, answer.dtype), config


def test_a_wrong_shape_fails_each_test_after_tracing_alone(reference_calls):
    report = graded(ONE_ROW_TOO_MANY)
    tests = by_name(report)
    for name in ("conv_a", "conv_b"):
        result = tests[name]
        assert result.status == "failed" and result.points == 0
        # the first configuration failed, and was the only one run
        assert [c["stopped_after"] for c in result.details["configs"]] == ["tracing"]
    assert tests["conv_a"].message.endswith(
        "wrong output: output shape (2, 128, 9, 8) differs from the expected (2, 128, 8, 8)")
    assert tests["conv_b"].message.endswith(
        "wrong output: output shape (2, 128, 7, 10) differs from the expected (2, 128, 6, 10)")
    assert tests["perf_f32"].status == tests["perf_f16"].status == "skipped"
    assert reference_calls == []              # no answer was worked out for outputs that cannot match
    assert report.flags == [] and report.score.total == 0


def test_a_test_stops_at_its_first_failing_configuration():
    """Right without max-pool, wrong with it: conv_a's pool-1 configuration runs and passes,
    its pool-2 one fails after tracing, and its third is never run."""
    report = graded(POOLED_ROW_TOO_MANY)
    conv_a = by_name(report)["conv_a"]
    assert conv_a.status == "failed"
    assert conv_a.message.endswith("wrong output: output shape (2, 128, 5, 4) differs from the expected (2, 128, 4, 4)")
    first, second = conv_a.details["configs"]
    assert "max_abs_error" in first and "stopped_after" not in first
    assert second["stopped_after"] == "tracing" and "max_abs_error" not in second
    assert by_name(report)["conv_b"].status == "passed"


def test_a_timed_run_with_the_wrong_dtype_fails_after_tracing_with_the_timed_message():
    report = graded(ALWAYS_FLOAT32)
    tests = by_name(report)
    assert tests["conv_a"].status == tests["conv_b"].status == tests["perf_f32"].status == "passed"
    perf = tests["perf_f16"]
    assert perf.status == "failed" and perf.points == 0 and perf.p99_us is None
    assert perf.message.endswith("performance run output is wrong, so this test earns no points: "
                                 "output dtype float32 differs from the expected float16")
    assert [c.get("stopped_after") for c in perf.details["configs"]] == ["tracing"]


def test_more_outputs_than_one_fail_after_tracing():
    conv_a = by_name(graded(TWO_OUTPUTS))["conv_a"]
    assert conv_a.status == "failed" and conv_a.message.endswith("the kernel returned 2 outputs, expected 1")
    assert [c.get("stopped_after") for c in conv_a.details["configs"]] == ["tracing"]


def test_a_right_kernel_is_executed_and_checked_in_full():
    report = graded(OPTIMIZED)
    assert report.score.total == 2 + 2 + 4 + 4 and report.flags == []
    for result in report.tests:
        assert all("stopped_after" not in c and "max_abs_error" in c for c in result.details["configs"])


def test_a_wrong_shape_grade_of_the_full_assignment_runs_one_configuration_per_test(reference_calls):
    """asst4-trainium2 with the one-row-too-many kernel: each correctness test stops after tracing
    its first configuration (before, each 224x224 one was executed in full, ~150 s in all on
    two cores); the timed tests, gated on them, do not run."""
    spec = grader.load_spec("asst4-trainium2")
    report = graded(ONE_ROW_TOO_MANY, spec=spec, time_budget_s=3600, config_timeout_s=1800,
                    limits=Limits(wall_seconds=1800))
    conv = [t for t in report.tests if t.file == "conv2d.py"]
    ran = [t for t in conv if t.details.get("configs")]
    assert [t.name for t in ran] == ["conv_small", "conv_large", "conv_bias", "conv_maxpool"]
    for result in ran:
        assert result.status == "failed" and "wrong output: output shape" in result.message, result.message
        assert [c["stopped_after"] for c in result.details["configs"]] == ["tracing"]
    assert "output shape (4, 256, 223, 222) differs from the expected (4, 256, 222, 222)" in ran[1].message
    assert all(t.status == "skipped" for t in conv if t not in ran)
    assert reference_calls == [] and report.score.total == 0


def small_job(source: str, expected, tmp_path) -> RunnerJob:
    config = dict(SMALL, pool=1)
    args, kwargs = problems.make_inputs("conv2d", config, np.random.default_rng(3))
    return RunnerJob(backend="sim", filename="conv2d.py", source=source, function="fused_conv2d_maxpool",
                     args=args, kwargs=kwargs, job_root=str(tmp_path), expected_output=expected)


def test_the_executor_refuses_to_execute_a_program_declaring_another_output(tmp_path):
    """The same program runs in full when no output is expected, and is not executed (no
    outputs, no instruction count) when the expected one is not what it declares."""
    expected = problems.output("conv2d", dict(SMALL, pool=1))
    full = run_configuration(small_job(ONE_ROW_TOO_MANY, None, tmp_path), Limits())
    assert full.status == "ok" and full.outputs[0].shape == (2, 128, 9, 8) and full.instructions > 0
    early = run_configuration(small_job(ONE_ROW_TOO_MANY, expected, tmp_path), Limits())
    assert early.status == "mismatch" and early.outputs == [] and early.instructions == 0
    assert early.declared == [((2, 128, 9, 8), "float32")]
    two = run_configuration(small_job(TWO_OUTPUTS, expected, tmp_path), Limits())
    assert two.status == "mismatch" and two.declared == [((2, 128, 8, 8), "float32")] * 2
    right = run_configuration(small_job(OPTIMIZED, expected, tmp_path), Limits())
    assert right.status == "ok" and right.outputs[0].shape == expected[0] and right.instructions > 0


@pytest.mark.parametrize("declared", [None, [], "x", [[[2, 3]]], [[[2, -1], "float32"]], [[[2, True], "float32"]],
                                      [[[2, 3], 5]], [[list(range(40)), "float32"]], [[[1], "f"]] * 17])
def test_a_malformed_mismatch_is_an_invalid_run_not_a_crash(declared):
    from grader import wire
    from grader.runner import _parse_execution
    from grader.sandbox import ChildResult
    frame = wire.header_frame({"status": "mismatch", "declared": declared})
    done = ChildResult(0, False, "", "", frame, False, 0.1)
    with pytest.raises(wire.BadResult):
        _parse_execution(done, Limits())
