"""A simulated configuration's kernel is traced while its inputs are drawn (grader.grade starts the
tracing child from the problem's signature: the arguments' shapes, dtypes and scalars, which
tracing needs and which hold no value). So the signature must be exactly what the inputs are
drawn as, for every configuration a spec can hold; a grade traced this way is the grade it was."""
from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from grader import problems, sandbox, spec as specs
from grader.grade import GradeOptions, grade
from grader.inputs import config_inputs, config_seed
from grader.runner import ConfigRun, RunnerJob, run_configuration, trace_configuration
from grader.sandbox import Limits
from grader.spec import parse
from grader.submission import Submission

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted({(t.problem, tuple(sorted(c.items()))) for name in specs.available()
                  for t in specs.load(name).tests for c in t.configs})


@pytest.mark.parametrize("problem, items", CONFIGS, ids=lambda v: "-".join(map(str, v)) if isinstance(v, tuple) else v)
def test_every_configuration_a_spec_holds_has_the_signature_its_inputs_are_drawn_as(problem, items):
    config = dict(items)
    args, kwargs = config_inputs(problem, config, config_seed(5, 0, 0))
    specs_, signed_kwargs = problems.signature(problem, config)
    assert [(a.shape, a.dtype) for a in args] == [(tuple(s), np.dtype(d)) for s, d in specs_]
    assert kwargs == signed_kwargs


def test_a_configuration_traced_from_its_signature_runs_as_one_traced_from_its_inputs(tmp_path):
    """The same program, outputs and latency as tracing from the drawn arrays."""
    source = (ROOT / "reference_kernels" / "conv2d_optimized.py").read_text()
    config = dict(batch=1, c_in=128, c_out=128, height=12, width=10, k=3, bias=True, pool=2, dtype="float16")
    args, kwargs = config_inputs("conv2d", config, config_seed(8, 1, 0))
    job = RunnerJob(backend="sim", filename="conv2d.py", source=source, function="fused_conv2d_maxpool",
                    args=args, kwargs=kwargs, mode="benchmark", job_root=str(tmp_path),
                    expected_output=problems.output("conv2d", config))
    specs_, signed_kwargs = problems.signature("conv2d", config)
    ahead = RunnerJob(**dict(job.__dict__, args=[], kwargs=signed_kwargs, arg_specs=specs_))
    traced = trace_configuration(ahead, Limits(wall_seconds=120.0))
    assert not isinstance(traced, ConfigRun), traced.message
    first = run_configuration(job, Limits(wall_seconds=120.0), traced=traced)
    again = run_configuration(job, Limits(wall_seconds=120.0))
    assert first.status == again.status == "ok", (first.message, again.message)
    assert bytes(traced[0]) and first.latency_us == again.latency_us and first.instructions == again.instructions
    assert first.outputs[0].tobytes() == again.outputs[0].tobytes()


# ----------------------------------------------------------------------------- the next configuration's trace

BASE = dict(batch=1, c_in=128, c_out=128, height=10, width=10, k=3, bias=True, pool=1, dtype="float32")
A, B, C = BASE, dict(BASE, height=12), dict(BASE, width=12)
SPEC = parse({
    "assignment": "trace-ahead", "spec_version": "1", "thresholds_version": "test", "platform": "trn2",
    "files": {"conv2d": {"archive_path": "conv2d.py",
                         "functions": {"fused_conv2d_maxpool": ["X", "W", "bias", "pool_size"]}}},
    "tolerances": {"correctness": {"rtol": 1e-5, "atol": 1e-8}, "float32": {"rtol": 1e-4, "atol": 1e-4}},
    "tests": [{"name": "two", "kind": "correctness", "file": "conv2d", "problem": "conv2d", "points": 1.0,
               "configs": [A, B]},
              {"name": "one", "kind": "correctness", "file": "conv2d", "problem": "conv2d", "points": 1.0,
               "configs": [C]}]})
HONEST = (ROOT / "reference_kernels" / "conv2d_relaxed.py").read_text()


def wrapped(body: str) -> str:
    """The honest kernel, but `body` first (it sees only shapes: the kernel is being traced)."""
    return HONEST + ("\n\n_honest = fused_conv2d_maxpool\n\n\ndef fused_conv2d_maxpool(X, W, bias, pool_size=1):\n"
                     + "".join(f"    {line}\n" for line in body.splitlines())
                     + "    return _honest(X, W, bias, pool_size)\n")


def grade_it(source: str, wall: float):
    sub = Submission(files={"conv2d": source}, filenames={"conv2d": "conv2d.py"},
                     sha256=hashlib.sha256(source.encode()).hexdigest(), origin="conv2d.py")
    start = time.monotonic()
    report = grade(sub, SPEC, GradeOptions(backend="sim", seed=3, limits=Limits(wall_seconds=wall)))
    return report, time.monotonic() - start


def nothing_left_running():
    return not sandbox._RUNNING and not [t for t in threading.enumerate() if t.name == "trace"]


def test_a_kernel_that_hangs_tracing_the_next_configuration_times_out_naming_that_configuration():
    """Its trace began while the configuration before it executed: the timeout still counts the
    limit of one configuration and names the one that hung."""
    report, _ = grade_it(wrapped("if X.shape[2] == 12:\n    while True:\n        pass"), wall=4.0)
    two, one = report.tests
    assert two.status == "error" and two.points == 0, (two.status, two.message)
    assert "stopped after 4 s, the limit for one configuration" in two.message, two.message
    assert "10x10" not in two.message and "12x10" in two.message, two.message
    assert [c["config"] for c in two.details["configs"]] == ["B=1 C_in=128 C_out=128 10x10 pool=1 float32",
                                                             "B=1 C_in=128 C_out=128 12x10 pool=1 float32"]
    assert one.status == "error" and one.details.get("not_run") == "timed_out"
    assert nothing_left_running()


def test_a_trace_begun_for_a_configuration_that_never_runs_is_killed_at_once():
    """The first configuration fails (its program declares the wrong output), so the second never
    runs; its trace, begun early and hanging, is killed when the grade moves on, not waited for."""
    source = wrapped("if X.shape[2] == X.shape[3] == 10:\n    pool_size = 2\nif X.shape[2] == 12:\n    while True:\n        pass")
    report, took = grade_it(source, wall=60.0)
    two, one = report.tests
    assert two.status == "failed" and "output shape" in two.message, (two.status, two.message)
    assert one.status == "passed", (one.status, one.message)
    assert took < 45, took               # not the 60 s the hanging trace was allowed
    assert nothing_left_running()


# ----------------------------------------------------------------------------- one trace per signature

A_ZERO_BIAS = dict(A, bias=False)       # A's shapes, dtypes and pool: what tracing sees is A's
SAME_SIGNATURE = parse({
    "assignment": "trace-once", "spec_version": "1", "thresholds_version": "test", "platform": "trn2",
    "files": {"conv2d": {"archive_path": "conv2d.py",
                         "functions": {"fused_conv2d_maxpool": ["X", "W", "bias", "pool_size"]}}},
    "tolerances": {"float32": {"rtol": 1e-4, "atol": 1e-4}},
    "tests": [{"name": "plain", "kind": "correctness", "file": "conv2d", "problem": "conv2d", "points": 1.0,
               "configs": [A_ZERO_BIAS, A]},
              {"name": "other", "kind": "correctness", "file": "conv2d", "problem": "conv2d", "points": 1.0,
               "configs": [B, A_ZERO_BIAS]}]})
# adds no bias: right where the bias is zero, wrong elsewhere
NO_BIAS = HONEST.replace("nisa.tensor_tensor(acc, bias_sb, op=nl.add, dtype=nl.float32)",
                         "nisa.tensor_copy(acc, dtype=nl.float32)")


def grade_counting(source: str, monkeypatch) -> tuple:
    """The report of a grade of SAME_SIGNATURE, and the children it started, by module (a
    tracing child as "grader.child HxW": the image it traces for, from its job.json). Counted,
    never ordered: a trace begun ahead starts on a thread of its own."""
    import json
    import os
    from grader import runner
    started = []
    real = runner.run_child

    def counted(argv, workdir, *args, **kwargs):
        name = argv[-1]
        if name == "grader.child":
            with open(os.path.join(workdir, "job.json")) as fh:
                x_shape = json.load(fh)["inputs"][0][0]
            name += f" {x_shape[2]}x{x_shape[3]}"
        started.append(name)
        return real(argv, workdir, *args, **kwargs)
    monkeypatch.setattr(runner, "run_child", counted)
    sub = Submission(files={"conv2d": source}, filenames={"conv2d": "conv2d.py"},
                     sha256=hashlib.sha256(source.encode()).hexdigest(), origin="conv2d.py")
    return grade(sub, SAME_SIGNATURE, GradeOptions(backend="sim", seed=3)), started


def test_a_configuration_with_the_signature_of_the_last_one_runs_its_program_again(monkeypatch):
    """Tracing sees shapes, dtypes and scalars alone, so a configuration with the last one's
    signature (the bias test after the plain one) has its program traced already: no tracing
    child. A different signature (B), or one seen before but not last (A's after B), is traced."""
    report, started = grade_counting(HONEST, monkeypatch)
    assert [(t.status, t.points) for t in report.tests] == [("passed", 1.0), ("passed", 1.0)], \
        [t.message for t in report.tests]
    assert started.count("grader.executor") == 4            # every configuration executed
    # A's zero-bias (and A's after it, reused), B, then A's zero-bias again (after B: not the last)
    assert sorted(n for n in started if n != "grader.executor") == ["grader.child 10x10", "grader.child 10x10",
                                                                    "grader.child 12x10"]


def test_a_program_run_again_meets_its_own_inputs_and_answer(monkeypatch):
    """The attack reuse must not open: a kernel right on the configuration it was traced for and
    wrong on the next with the same signature. Its program runs again on the next one's inputs
    (a random bias) and is checked against that one's answer: the test fails there."""
    assert NO_BIAS != HONEST
    report, started = grade_counting(NO_BIAS, monkeypatch)
    plain, _ = report.tests
    assert plain.status == "failed" and "B=1 C_in=128 C_out=128 10x10 pool=1 float32" in plain.message, plain.message
    assert [c.get("max_abs_error") is not None for c in plain.details["configs"]] == [True, True]
    # "plain" traced once for both; "other" stopped at B, its A's trace begun ahead and killed
    assert sorted(n for n in started if n != "grader.executor") == ["grader.child 10x10", "grader.child 10x10",
                                                                    "grader.child 12x10"]


# ----------------------------------------------------------------------------- the next configuration's inputs

def grade_drawing(source: str, monkeypatch, **options) -> tuple:
    """The report of a grade of SPEC, and every draw of inputs it made: (test index, configuration
    index, the drawing thread's name, the arrays' bytes)."""
    import importlib
    graded = importlib.import_module("grader.grade")
    draws = []
    real = graded.shared_config_inputs

    def recorded(problem, config, seq):
        shared, kwargs = real(problem, config, seq)
        _, ti, ci = seq.entropy
        draws.append((ti, ci, threading.current_thread().name, [a.tobytes() for a in shared.arrays]))
        return shared, kwargs
    monkeypatch.setattr(graded, "shared_config_inputs", recorded)
    sub = Submission(files={"conv2d": source}, filenames={"conv2d": "conv2d.py"},
                     sha256=hashlib.sha256(source.encode()).hexdigest(), origin="conv2d.py")
    return grade(sub, SPEC, GradeOptions(backend="sim", seed=3, **options)), draws


def input_memfds() -> list[str]:
    """The shared input memory this process holds descriptors of."""
    import os
    held = []
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if "grader-inputs" in target:
            held.append(target)
    return held


def test_the_next_configurations_inputs_are_drawn_while_this_one_runs_and_are_the_same(monkeypatch):
    """B's inputs (and C's, the next test's) are drawn beside the configuration before them, on a
    thread of their own, each once, with the values a draw at their turn gives: the same grade."""
    report, draws = grade_drawing(HONEST, monkeypatch)
    assert [(t.status, t.points) for t in report.tests] == [("passed", 1.0), ("passed", 1.0)]
    # A's at its turn, on the thread running the test
    assert [(ti, ci, thread == "inputs") for ti, ci, thread, _ in draws] == [(0, 0, False), (0, 1, True), (1, 0, True)]
    for (ti, ci, _, drawn), config in zip(draws, [A, B, C]):
        args, _ = config_inputs("conv2d", config, config_seed(3, ti, ci))
        assert drawn == [a.tobytes() for a in args]
    assert input_memfds() == []


def test_inputs_drawn_for_a_configuration_that_never_runs_are_let_go(monkeypatch):
    """A fails (its program declares the wrong output), so B never runs: the inputs drawn for it
    ahead are closed when the grade moves on to C, not kept for the life of the process."""
    before = input_memfds()
    report, draws = grade_drawing(wrapped("if X.shape[2] == X.shape[3] == 10:\n    pool_size = 2"), monkeypatch)
    two, one = report.tests
    assert two.status == "failed" and "output shape" in two.message, (two.status, two.message)
    assert one.status == "passed", (one.status, one.message)
    assert [(ti, ci) for ti, ci, _, _ in draws] == [(0, 0), (0, 1), (1, 0)]       # B's drawn, never used
    assert input_memfds() == before == []


# What the next configuration's tracing child would look for: the inputs drawn for it while the
# configuration before runs, as a memfd some process it can see holds or maps.
PROBE = """
import os
seen = []
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    for table in ("fd", "map_files"):
        try:
            names = os.listdir(f"/proc/{pid}/{table}")
        except OSError:
            continue
        for name in names:
            try:
                target = os.readlink(f"/proc/{pid}/{table}/{name}")
            except OSError:
                continue
            if "grader-inputs" in target:
                seen.append(f"/proc/{pid}/{table}/{name} -> {target}")
"""


def test_the_next_configurations_tracing_child_cannot_reach_the_inputs_drawn_for_it(monkeypatch):
    """The attack drawing ahead invites: B's kernel, traced while A executes and B's own inputs
    are drawn and held by the grader (and C's, traced while B executes), looks through every
    process it can see for them, and would fail its test with what it found. It finds nothing: the child sees its own sandbox's
    processes alone, and no child is handed that memory. The same probe run here, in the
    grader's process, finds the inputs of a run, so it would see them were they reachable."""
    from grader import sharedmem
    held = sharedmem.share([np.ones(4, np.float32)])
    try:
        namespace: dict = {}
        exec(PROBE, namespace)
        assert namespace["seen"], "the probe finds inputs where they are reachable"
    finally:
        held.close()
    # every configuration looks: C's is traced while B's executor, begun while A's output was
    # checked, holds B's inputs
    body = PROBE.strip() + "\nif seen:\n    raise RuntimeError('reached: ' + '; '.join(seen))"
    report, draws = grade_drawing(wrapped(body), monkeypatch, run_precheck=False)
    assert [(ti, ci, thread) for ti, ci, thread, _ in draws][1] == (0, 1, "inputs")
    assert [(t.status, t.points) for t in report.tests] == [("passed", 1.0), ("passed", 1.0)], \
        [t.message for t in report.tests]


# ----------------------------------------------------------------------------- the next configuration's run

def grade_running(source: str, monkeypatch) -> tuple:
    """The report of a grade of SPEC, every run it started: (X's height and width, the thread
    that started it), and the configurations (test name, index) begun while the one before was
    checked."""
    import importlib
    graded = importlib.import_module("grader.grade")
    runs, launched = [], []
    real, real_launch = graded.run_configuration, graded._Run._launch_next

    def recorded(job, limits, cancel=None, traced=None):
        runs.append((job.args[0].shape[2:], threading.current_thread().name))
        return real(job, limits, cancel, traced=traced)

    def launch(run):
        real_launch(run)
        if run.ahead is not None and run.ahead.launched is not None:
            launched.append(run.ahead.key)
    monkeypatch.setattr(graded, "run_configuration", recorded)
    monkeypatch.setattr(graded._Run, "_launch_next", launch)
    sub = Submission(files={"conv2d": source}, filenames={"conv2d": "conv2d.py"},
                     sha256=hashlib.sha256(source.encode()).hexdigest(), origin="conv2d.py")
    return grade(sub, SPEC, GradeOptions(backend="sim", seed=3, run_precheck=False)), runs, launched


def nothing_begun_left():
    return nothing_left_running() and not [t for t in threading.enumerate() if t.name == "run-ahead"]


def test_the_next_configuration_executes_while_this_ones_output_is_checked(monkeypatch):
    """Once A has run, B starts executing on a thread of its own while A's output is compared and
    checked, and C while B's is: each configuration runs once, and the grade is the same."""
    report, runs, launched = grade_running(HONEST, monkeypatch)
    assert [(t.status, t.points) for t in report.tests] == [("passed", 1.0), ("passed", 1.0)], \
        [t.message for t in report.tests]
    assert launched == [("two", 1), ("one", 0)]
    assert [shape for shape, _ in runs] == [(10, 10), (12, 10), (10, 12)]
    assert [thread == "run-ahead" for _, thread in runs] == [False, True, True]
    assert input_memfds() == []
    assert nothing_begun_left()


# right on B and C; on A (10x10) it adds no bias: the same shape, wrong values
WRONG_ON_A = (HONEST + "\n\n" + NO_BIAS[NO_BIAS.index("@nki.compiler"):].replace("def fused_conv2d_maxpool(", "def _no_bias(")
              + "\n\n_honest = fused_conv2d_maxpool\n\n\ndef fused_conv2d_maxpool(X, W, bias, pool_size=1):\n"
                "    if X.shape[2] == X.shape[3] == 10:\n        return _no_bias(X, W, bias, pool_size)\n"
                "    return _honest(X, W, bias, pool_size)\n")


def test_a_configuration_begun_before_the_one_before_it_failed_never_counts(monkeypatch):
    """The attack running ahead invites: a kernel wrong on a test's first configuration and right
    on the next. B starts executing while A's output is checked, and is right; A's check fails,
    so the test fails there, B's run is killed and let go, and nothing of it is in the report.
    The next test (C) still runs."""
    report, runs, launched = grade_running(WRONG_ON_A, monkeypatch)
    assert launched[0] == ("two", 1)        # B began before A's output was checked
    two, one = report.tests
    assert two.status == "failed" and two.points == 0, (two.status, two.message)
    assert two.message.startswith("B=1 C_in=128 C_out=128 10x10 pool=1 float32: wrong output"), two.message
    assert [c["config"] for c in two.details["configs"]] == ["B=1 C_in=128 C_out=128 10x10 pool=1 float32"]
    assert one.status == "passed", (one.status, one.message)
    assert runs[0][0] == (10, 10)
    assert runs[-1][0] == (10, 12)          # C, whether B's run got as far as starting or not
    assert input_memfds() == []
    assert nothing_begun_left()
