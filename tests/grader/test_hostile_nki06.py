"""Hostile submissions in NKI 0.6: the attacks of test_hostile.py on the checks, the result
channel, the runners and the values, rewritten as NKI 0.6 kernels (`import nki`, destination-first
calls) and graded under the same small spec in the current dialect, plus what only the 0.6 front
end offers (its kernel class and rule hooks, nki.simulate). Attacks on the sandbox and the
machine (forks, signals, floods, snooping) never reach NKI and are test_hostile.py's.

The precheck is off unless a test says so, so that the sandbox and the grader's own checks are
what is tested. Every test also checks that nothing the grade started is left running.
"""
from __future__ import annotations

import dataclasses
import hashlib

from grader.grade import GradeOptions, grade
from grader.sandbox import Limits
from grader.submission import Submission
from test_hostile import (FIND_RESULT_FD, FULL_MARKS, HOST_CONV, SPEC, WALL, ROOT, assert_nothing_earned,  # noqa: F401
                          by_name, nothing_left_running)

SPEC06 = dataclasses.replace(SPEC, assignment="hostile-small-nki06", dialect="nki-0.6")
HONEST = (ROOT / "reference_kernels" / "nki06" / "conv2d_relaxed.py").read_text()

HEADER = """\
import numpy as np
import nki
import nki.language as nl
import nki.isa as nisa
"""

# A kernel of the right shape and dtype that computes nothing.
ZEROS_KERNEL = """

@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    B, C_in, H, Wd = X.shape
    C_out, _, K, _ = W.shape
    Ho, Wo = (H - K + 1) // pool_size, (Wd - K + 1) // pool_size
    out = nl.ndarray((B, C_out, Ho, Wo), X.dtype, buffer=nl.shared_hbm)
    for b in range(B):
        for co in range(C_out // 128):
            tile = nl.ndarray((128, Ho, Wo), X.dtype, buffer=nl.sbuf)
            nisa.memset(dst=tile, value=0.0)
            nisa.dma_copy(dst=out[b, co * 128:(co + 1) * 128], src=tile)
    return out
"""


def zeros_kernel(prelude: str = "") -> str:
    return HEADER + prelude + ZEROS_KERNEL


def graded(source: str, *, precheck: bool = False):
    sub = Submission(files={"conv2d": source}, filenames={"conv2d": "conv2d.py"},
                     sha256=hashlib.sha256(source.encode()).hexdigest(), origin="conv2d.py")
    return grade(sub, SPEC06, GradeOptions(backend="sim", run_precheck=precheck, limits=Limits(wall_seconds=WALL)))


def test_the_honest_nki06_kernel_gets_full_marks_without_a_flag():
    report = graded(HONEST, precheck=True)
    assert report.score.total == FULL_MARKS and report.flags == [], [(t.name, t.status, t.message)
                                                                    for t in report.tests]
    assert report.dialect == "nki-0.6"
    perf = by_name(report)["perf"]
    assert perf.status == "passed" and 30 < perf.p99_us < 80


# ----- the checks

def test_zeros_earn_nothing():
    assert_nothing_earned(graded(zeros_kernel()), "wrong output")


def test_patching_numpy_in_the_child_does_not_touch_the_graders_check():
    assert_nothing_earned(graded(zeros_kernel("""
np.allclose = lambda *args, **kwargs: True
np.testing.assert_allclose = lambda *args, **kwargs: None
""")), "wrong output")


def test_never_written_memory_reads_as_nan_and_fails():
    source = HEADER + """

@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    out = nl.ndarray((1, 128, 8, 8), X.dtype, buffer=nl.shared_hbm)
    never_written = nl.ndarray((128, 8, 8), X.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=out[0], src=never_written)
    return out
"""
    assert_nothing_earned(graded(source), "8192 output values are NaN or infinite")


def test_returning_the_input_fails():
    assert_nothing_earned(graded(HEADER + """

@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    return X
"""), None)


# ----- the result channel

def test_a_forged_verdict_on_the_result_pipe_earns_nothing():
    source = HEADER + FIND_RESULT_FD + """
import json
blob = json.dumps({"status": "ok", "score": 1000, "points": 1000, "passed": True, "arrays": 0,
                   "trace_bytes": 0}).encode() + b"\\n"
os.write(result_fd(), blob)
os._exit(0)
""" + ZEROS_KERNEL
    assert_nothing_earned(graded(source), None)


# ----- the runners and the front end's own hooks

def test_patching_nki_simulate_jit_and_the_tracer_earns_nothing():
    """The child traces the kernel itself (never through nki.jit's call or nki.simulate), and a
    tracer that emits nothing leaves a program that computes nothing."""
    source = HEADER + HOST_CONV + """
import nkisim.machine

nki.simulate = lambda kernel: (lambda *args, **kw: host_answer(*args[:3]))
_jit = nki.jit
nki.jit = lambda f=None, **kw: _jit(f)
nkisim.machine.Machine.emit = lambda self, *args, **kwargs: None
""" + ZEROS_KERNEL
    report = graded(source)
    assert report.score.total == 0
    assert by_name(report)["conv"].status in ("failed", "error")


def test_silencing_the_06_rules_on_the_kernel_class_is_refused_by_the_static_check():
    """The kernel class is reachable (type(kernel)): switching off its rule hooks would let a
    kernel return an nl.hbm output, which NKI 0.6's compiler refuses. The precheck refuses the
    patch of a class the simulator shares."""
    source = HONEST.replace("buffer=nl.shared_hbm", "buffer=nl.hbm") + """
type(fused_conv2d_maxpool).check_result = lambda self, result, site: None
"""
    assert "buffer=nl.hbm" in source
    report = graded(source, precheck=True)
    assert report.score.total == 0
    assert "monkey-patch" in [r["rule"] for r in report.rejections], report.rejections
    unpatched = graded(HONEST.replace("buffer=nl.shared_hbm", "buffer=nl.hbm"))
    assert_nothing_earned(unpatched, "nl.shared_hbm")


def test_a_legacy_kernel_passed_off_as_nki06_is_refused_by_the_static_check():
    """A legacy kernel (whose one-instruction 2x2 max-pool and broadcast bias add NKI 0.6 has no
    form for) that hides its legacy modules from the child's look at its namespace and relabels
    its kernel class: the precheck, which every bundled spec runs, refuses the file before any of
    it runs. (With a spec's precheck off, kernel code can reach nkisim itself, and the child's
    dialect check only catches honest mistakes.)"""
    legacy = (ROOT / "reference_kernels" / "conv2d_relaxed.py").read_text()
    source = legacy + """
type(fused_conv2d_maxpool).dialect = "nki-0.6"
_kept = {"nki": nki, "nl": nl, "nisa": nisa}
del nki, nl, nisa
"""
    report = graded(source, precheck=True)
    assert report.score.total == 0
    rules = [r["rule"] for r in report.rejections]
    assert rules[0] == "dialect" and {"monkey-patch", "internals"} <= set(rules), rules


def test_device_tensors_hold_no_values_to_reach():
    source = HEADER + """

@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    found = [getattr(X, name, None) for name in ("_values", "_arr", "array", "data", "values")]
    if any(callable(f) or isinstance(f, np.ndarray) for f in found):
        raise RuntimeError("a value container was reachable")
    return np.asarray(X)
"""
    result = assert_nothing_earned(graded(source), "DeviceValueError")
    assert "a value container was reachable" not in result.message


# ----- knowing it is timed, and cheaper arithmetic when timed

def test_the_child_cannot_tell_a_timed_run_from_a_correctness_run():
    source = HONEST.replace("@nki.jit", '''import json as _json
with open("job.json") as _fh:
    _JOB = _json.load(_fh)
if {"mode", "warmup", "iters", "seed", "test"} & set(_JOB) or "inputs" not in _JOB:
    raise RuntimeError("the child could tell: " + ",".join(sorted(_JOB)))


@nki.jit''', 1)
    report = graded(source)
    assert report.score.total == FULL_MARKS, [(t.name, t.status, t.message) for t in report.tests]


def test_float16_arithmetic_in_a_float32_kernel_earns_nothing():
    """tensor_copy rounded through float16 on the way: 0.6 takes the dtype from dst, so the
    kernel routes every copy through a float16 tile of its own."""
    source = HONEST.replace("@nki.jit", '''_real_copy = nisa.tensor_copy


def _lossy(dst, src, **kwargs):
    half = nl.ndarray(src.shape, nl.float16, buffer=nl.sbuf)
    _real_copy(dst=half, src=src)
    _real_copy(dst=dst, src=half, **kwargs)


nisa.tensor_copy = _lossy


@nki.jit''', 1)
    assert source != HONEST
    assert_nothing_earned(graded(source), "wrong output")


# ----- the launch: a kernel may not choose more physical cores than its spec grades on

def split_across_cores(source: str) -> str:
    """The honest kernel with its output rows split between two physical cores, launched on a
    logical NeuronCore of two by the submission itself (kernel[2], at import)."""
    split = source.replace("            for hp in nl.affine_range(out_pool_height):\n",
                           "            for hp in nl.affine_range(out_pool_height):\n"
                           "                if hp % nl.num_programs() != nl.program_id(0):\n"
                           "                    continue\n", 1)
    assert split != source
    return split + "\n\nfused_conv2d_maxpool = fused_conv2d_maxpool[2]\n"


def test_a_kernel_launching_itself_on_two_cores_is_graded_on_the_specs_one():
    honest = by_name(graded(HONEST))["perf"]
    report = graded(split_across_cores(HONEST))
    # launched on the spec's one core, nl.num_programs() is 1 and the split does every row on
    # it: the honest kernel's grade and latency, not half of it
    assert by_name(report)["perf"].p99_us == honest.p99_us
    assert report.score.total == FULL_MARKS


def test_a_program_claiming_two_cores_is_refused_by_the_parent(tmp_path, monkeypatch):
    """A forged program (lnc=2, half its records on core 1) from the tracing child: the parent
    holds the program to the spec's logical NeuronCore."""
    import numpy as np

    from grader import executor
    from nkisim import program as programs
    from nkisim.runtime import ArgSpec, trace_kernel
    import nkisim
    nkisim.install()
    import nki
    import nki.isa as nisa
    import nki.language as nl

    @nki.jit
    def scale(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.dma_copy(dst=out, src=t)
        return out
    program, _ = trace_kernel(scale[2], (ArgSpec((128, 8), np.float32),), {})
    assert program.lnc == 2 and any(r.attrs.get("core") == 1 for r in program.records)
    (tmp_path / "program.bin").write_bytes(programs.encode(program))
    (tmp_path / "inputs").mkdir()
    np.save(tmp_path / "inputs" / "arg0.npy", np.ones((128, 8), np.float32))
    monkeypatch.chdir(tmp_path)
    result, _ = executor.run({"n_inputs": 1, "mode": "correctness", "platform": "trn2", "dialect": "nki-0.6",
                              "max_instructions": 100, "lnc": 1})
    assert result["status"] == "invalid" and "logical NeuronCore" in result["error"]


def test_a_spec_launching_on_two_cores_grades_the_split_kernel_at_lnc_2():
    """lnc = 2 in the spec: the harness launches kernel[2], the split kernel earns its marks with
    each core doing half the rows, faster than on one core; the honest one-core kernel (every
    core doing all the rows) is still right."""
    spec2 = dataclasses.replace(SPEC06, assignment="hostile-small-nki06-lnc2", lnc=2)
    split = split_across_cores(HONEST).replace("\n\nfused_conv2d_maxpool = fused_conv2d_maxpool[2]\n", "\n")
    sub = Submission(files={"conv2d": split}, filenames={"conv2d": "conv2d.py"},
                     sha256=hashlib.sha256(split.encode()).hexdigest(), origin="conv2d.py")
    two = grade(sub, spec2, GradeOptions(backend="sim", run_precheck=True, limits=Limits(wall_seconds=WALL)))
    one = graded(HONEST)
    assert two.score.total == FULL_MARKS, [(t.name, t.status, t.message) for t in two.tests]
    assert by_name(two)["perf"].p99_us < 0.8 * by_name(one)["perf"].p99_us


def test_a_spec_asks_for_two_cores_only_where_there_are_two():
    import pytest

    from grader.errors import GraderInputError
    from grader.spec import from_toml
    base = (ROOT / "grader" / "specs" / "asst4-trainium2.toml").read_text()
    with pytest.raises(GraderInputError, match="lnc must be 1, or 2"):
        from_toml("lnc = 2\n" + base)                        # a legacy spec
    with pytest.raises(GraderInputError, match="lnc must be 1, or 2"):
        from_toml('dialect = "nki-0.6"\nlnc = 3\n' + base)
    assert from_toml('dialect = "nki-0.6"\nlnc = 2\n' + base).lnc == 2


# ----- run-time loops (nisa.register_load): what the device decides is the program's, not the child's

RUNTIME_LOOP = """
    # a loop the device runs: its trip count (2) loaded into a register from SBUF
    trips = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=trips, value=2)
    trip_reg = nisa.register_alloc()
    nisa.register_load(trip_reg, trips)
    scratch = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nl.fori_loop(0, trip_reg, lambda i: nisa.memset(dst=scratch, value=0.0))
"""


def with_runtime_loop(source: str) -> str:
    marker = "    K = filter_height\n"
    assert marker in source
    return source.replace(marker, marker + RUNTIME_LOOP, 1)


def test_an_honest_kernel_with_a_run_time_loop_gets_full_marks_without_a_flag():
    report = graded(with_runtime_loop(HONEST), precheck=True)
    assert report.score.total == FULL_MARKS and report.flags == [], [(t.name, t.status, t.message)
                                                                    for t in report.tests]
    plain = by_name(graded(HONEST))["perf"].p99_us
    assert plain <= by_name(report)["perf"].p99_us < plain * 1.2


def test_a_run_time_loop_that_never_ends_earns_nothing_and_leaves_nothing_running():
    source = HEADER + """

@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    out = nl.ndarray((1, 128, 8, 8), X.dtype, buffer=nl.shared_hbm)
    zeros = nl.ndarray((128, 8, 8), X.dtype, buffer=nl.sbuf)
    nisa.memset(dst=zeros, value=0.0)
    nisa.dma_copy(dst=out[0], src=zeros)
    one = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=one, value=1)
    r = nisa.register_alloc()
    nisa.register_load(r, one)
    nl.while_loop(r, lambda cond: cond)
    return out
"""
    result = assert_nothing_earned(graded(source), None)
    assert "executed more than" in result.message, result.message
