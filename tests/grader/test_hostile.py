"""Hostile submissions: kernels that cheat, or attack the sandbox, the grader or the machine.

Each one is a complete conv2d.py graded on the simulator against a small spec (one 10x10
config, graded in well under a second). For each we check that it earns nothing it did not
earn, that the report says why, and that the grader stays healthy: after every test an honest
kernel graded in the same process still gets full marks, and no process the test started is
left behind. Most cases run without the static precheck, so that the sandbox and the output
checks are what is tested; a few run with it and assert that it rejects them.
"""
from __future__ import annotations

import base64
import hashlib
import os
import resource
import shutil
import socket
import time
from pathlib import Path

import numpy as np
import pytest

from grader import problems
from grader.grade import GradeOptions, _job_root, grade
from grader.sandbox import Limits, capabilities
from grader.zygote import ZYGOTE
from grader.spec import parse
from grader.submission import Submission

ROOT = Path(__file__).resolve().parents[2]
HONEST = (ROOT / "reference_kernels" / "conv2d_relaxed.py").read_text()
CAPS = capabilities()

CONFIG = dict(batch=1, c_in=128, c_out=128, height=10, width=10, k=3, bias=True, pool=1, dtype="float32")
OUT_SHAPE = (1, 128, 8, 8)
SPEC = parse({
    "assignment": "hostile-small", "spec_version": "1", "thresholds_version": "test", "platform": "trn2",
    "partial_credit": 0.95, "precheck": True, "implausible_speedup": 3.0,
    "files": {"conv2d": {"archive_path": "part2/conv2d.py",
                         "functions": {"fused_conv2d_maxpool": ["X", "W", "bias", "pool_size"]}}},
    "tolerances": {"correctness": {"rtol": 1e-5, "atol": 1e-8}, "float32": {"rtol": 1e-4, "atol": 1e-4},
                   "float16": {"rtol": 1e-2, "atol": 1e-1}},
    "tests": [
        {"name": "conv", "kind": "correctness", "file": "conv2d", "problem": "conv2d", "points": 2.5,
         "configs": [CONFIG]},
        # the relaxed reference takes 42.2 us here (roofline 11.8 us): full marks on both
        {"name": "perf", "kind": "performance", "file": "conv2d", "problem": "conv2d", "points": 17.5,
         "gated_by": ["conv"], "thresholds_us": {"optimized": 50, "relaxed": 70}, "warmup": 1, "iters": 5,
         "configs": [CONFIG]},
        {"name": "ec", "kind": "extra_credit", "file": "conv2d", "problem": "conv2d", "points": 1.25,
         "gated_by": ["conv"], "thresholds_us": {"optimized": 50, "relaxed": 50}, "warmup": 1, "iters": 5,
         "configs": [CONFIG]},
    ]})
FULL_MARKS = 2.5 + 17.5 + 1.25
WALL = 20.0          # seconds per kernel run; the honest kernel needs about 0.2
SHORT_WALL = 3.0     # for the cases that are meant to time out


def graded(source: str, *, precheck: bool = False, seed: int | None = None, **limits):
    limits.setdefault("wall_seconds", WALL)
    sub = Submission(files={"conv2d": source}, filenames={"conv2d": "conv2d.py"},
                     sha256=hashlib.sha256(source.encode()).hexdigest(), origin="conv2d.py")
    return grade(sub, SPEC, GradeOptions(backend="sim", seed=seed, run_precheck=precheck, limits=Limits(**limits)))


def by_name(report):
    return {t.name: t for t in report.tests}


def assert_nothing_earned(report, why: str, test: str = "conv"):
    """No points at all; `test` failed or errored with `why` in its message; the timed tests
    gated on it did not run."""
    assert report.score.total == 0, report.score
    result = by_name(report)[test]
    assert result.status in ("failed", "error") and result.points == 0
    assert why in result.message, result.message
    if test == "conv":
        assert all(t.status == "skipped" for t in report.tests if t.name != "conv")
    return result


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for pid in children.get(todo.pop(), []):
            found.append(pid)
            todo.append(pid)
    return found


@pytest.fixture(autouse=True)
def grader_stays_healthy():
    """After each hostile grade: nothing left running, and an honest grade in this same process
    (precheck on, as the spec says) still gets full marks."""
    yield
    assert leftovers() == []
    report = graded(HONEST, precheck=True)
    assert report.score.total == FULL_MARKS, [(t.name, t.status, t.message) for t in report.tests]
    assert report.flags == []
    assert leftovers() == []


def leftovers() -> list[int]:
    """Processes of ours still running, but for the fork server, which outlives grades by design
    (its monitors and jobs, should any remain, are counted)."""
    return [p for p in descendants(os.getpid()) if p != ZYGOTE.pid]


# ----------------------------------------------------------------------------- kernel sources

HEADER = """\
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa
"""

# A kernel of the right shape and dtype that computes nothing: every cheat below that is not
# about the output itself returns this.
ZEROS_KERNEL = """

@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    B, C_in, H, Wd = X.shape
    C_out, _, K, _ = W.shape
    Ho, Wo = (H - K + 1) // pool_size, (Wd - K + 1) // pool_size
    out = nl.ndarray((B, C_out, Ho, Wo), dtype=X.dtype, buffer=nl.hbm)
    for b in nl.affine_range(B):
        for co in nl.affine_range(C_out // 128):
            tile = nl.zeros((128, Ho, Wo), dtype=X.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=out[b, co * 128:(co + 1) * 128], src=tile)
    return out
"""


def zeros_kernel(prelude: str = "") -> str:
    return HEADER + prelude + ZEROS_KERNEL


# The answer computed on the host with NumPy, as a cheat would.
HOST_CONV = """

def host_conv(x, w, b, pool):
    n, ci, h, wd = x.shape
    co, _, k, _ = w.shape
    ho, wo = h - k + 1, wd - k + 1
    out = np.zeros((n, co, ho, wo), np.float64)
    for i in range(k):
        for j in range(k):
            out += np.einsum("nchw,oc->nohw", x[:, :, i:i + ho, j:j + wo], w[:, :, i, j])
    out += b[None, :, None, None]
    if pool > 1:
        out = out.reshape(n, co, ho // pool, pool, wo // pool, pool).max(axis=(3, 5))
    return out.astype(x.dtype)
"""

# The grader takes GRADER_RESULT_FD out of the environment before student code runs, but the
# pipe is still open in the child: find it as the one writable pipe past stderr.
FIND_RESULT_FD = """
import os


def result_fd():
    for name in sorted(os.listdir("/proc/self/fd"), key=int):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if int(name) > 2 and target.startswith("pipe:"):
            return int(name)
    raise RuntimeError("no result pipe found")
"""

PATCH_ALLCLOSE = zeros_kernel("""
np.allclose = lambda *args, **kwargs: True
np.isclose = lambda a, b, *args, **kwargs: np.ones(np.broadcast(a, b).shape, dtype=bool)
np.testing.assert_allclose = lambda *args, **kwargs: None
""")

PATCH_SCORER = zeros_kernel("""
import grader.checks
import grader.grade
import grader.scoring
grader.scoring.timed_points = lambda test, p99, partial: (1000.0, "passed")
grader.scoring.total = lambda spec, results: None
grader.checks.check_output = lambda *args, **kwargs: grader.checks.CheckResult(True, "output matches", 0.0)
grader.grade.check_output = grader.checks.check_output
""")

# honest work, with the simulator's latency model patched to say 1 us
PATCH_COST_MODEL = HONEST + """

import types
import nkisim.cost
import nkisim.cost.scheduler
import nkisim.runtime

def _fast(*args, **kwargs):
    return types.SimpleNamespace(total_us=1.0, dma_count=0)

nkisim.cost.schedule = _fast
nkisim.cost.scheduler.schedule = _fast
nkisim.cost.estimate = _fast
nkisim.runtime.LatencyPercentiles.get_latency_percentile = lambda self, p: 1.0
"""

# honest work, but the instruction trace the latency comes from is thrown away
PATCH_TRACE = HONEST + """

import nkisim.machine
nkisim.machine.Machine.record = lambda self, *args, **kwargs: None
"""

# honest work, through an nki.benchmark replacement that reports an empty trace
PATCH_RUNNER = HONEST + """

import types
import nkisim
_real_run_kernel = nkisim.run_kernel

def _run_kernel(*args, **kwargs):      # the runner the child times with: hand back no trace
    run = _real_run_kernel(*args, **kwargs)
    return types.SimpleNamespace(outputs=run.outputs, trace=[])

nkisim.run_kernel = _run_kernel
"""

FAKE_STDOUT_REPORT = zeros_kernel("""
import json
print("Score: 65.0 / 60.0 (all tests passed)")
print(json.dumps({"score": {"correctness": 10, "performance": 50, "extra_credit": 5, "total": 65},
                  "tests": [{"name": "conv", "status": "passed", "points": 2.5}]}))
""")

FD_FAKE_VERDICT = HEADER + FIND_RESULT_FD + """
import json
fd = result_fd()
os.write(fd, json.dumps({"status": "ok", "score": 1000, "points": 1000, "passed": True,
                         "arrays": 0, "trace_bytes": 0}).encode() + b"\\n")
os._exit(0)
""" + ZEROS_KERNEL

FD_FORGED_ZEROS = HEADER + FIND_RESULT_FD + """
import io
import json
buf = io.BytesIO()
np.save(buf, np.zeros((1, 128, 8, 8), np.float32))
blob = buf.getvalue()
os.write(result_fd(),
         json.dumps({"status": "ok", "arrays": 1, "trace_bytes": 2}).encode() + b"\\n" + blob + b"[]")
os._exit(0)
""" + ZEROS_KERNEL

def forged_host_answer(trace: bytes = b"[]") -> str:
    """The child holds the inputs: read them from the job directory, answer on the host, forge
    the result with the given trace (by default an empty one), and never run a kernel."""
    return HEADER + HOST_CONV + FIND_RESULT_FD + f"""
import io
import json
job = json.load(open("job.json"))
args = [np.load(f"inputs/arg{{i}}.npy") for i in range(job["n_args"])]
answer = host_conv(*args, job["kwargs"]["pool_size"])
buf = io.BytesIO()
np.save(buf, answer)
blob = buf.getvalue()
trace = {trace!r}
os.write(result_fd(),
         json.dumps({{"status": "ok", "arrays": 1, "trace_bytes": len(trace)}}).encode() + b"\\n"
         + blob + trace)
os._exit(0)
""" + ZEROS_KERNEL


FD_FORGED_HOST_ANSWER = forged_host_answer()


# Reading device values through the simulator's private attributes, with only allowed imports.
PRIVATE_ATTRIBUTES = HEADER + HOST_CONV + """

@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    answer = host_conv(X._arr, W._arr, bias._arr, pool_size)
    out = nl.ndarray(answer.shape, dtype=X.dtype, buffer=nl.hbm)
    out._arr[...] = answer
    out._alloc.written = True
    return out
"""

HOST_NUMPY = HEADER + HOST_CONV + """

@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    answer = host_conv(np.asarray(X), np.asarray(W), np.asarray(bias), pool_size)
    out = nl.ndarray(answer.shape, dtype=X.dtype, buffer=nl.hbm)
    return out
"""


def hardcoded(answer: np.ndarray) -> str:
    """A kernel that writes a precomputed answer into its output (through the simulator's
    internals, as nothing else can put host data on the device)."""
    blob = base64.b64encode(answer.astype(np.float32).tobytes()).decode()
    return HEADER + f"""
import base64
ANSWER = np.frombuffer(base64.b64decode("{blob}"), np.float32).reshape({answer.shape})


@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    out = nl.ndarray(ANSWER.shape, dtype=X.dtype, buffer=nl.hbm)
    out._arr[...] = ANSWER
    out._alloc.written = True
    return out
"""


# Honest in the correctness run; garbage, fast, when it sees nki.benchmark on the stack.
SKIP_WORK_WHEN_BENCHMARKED = HONEST.replace("def fused_conv2d_maxpool(", "def honest_kernel(") + """

import inspect


def benchmarked():
    # the harness's frames say which run this is: nki.benchmark's, or the grader child's job
    for frame in inspect.stack():
        local = frame.frame.f_locals
        if type(local.get("self")).__name__ == "BenchmarkedKernel":
            return True
        if isinstance(local.get("job"), dict) and local["job"].get("mode") == "benchmark":
            return True
    return False


@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    if not benchmarked():
        return honest_kernel(X, W, bias, pool_size)
    B, C_in, H, Wd = X.shape
    C_out, _, K, _ = W.shape
    out = nl.ndarray((B, C_out, H - K + 1, Wd - K + 1), dtype=X.dtype, buffer=nl.hbm)
    tile = nl.zeros((128, H - K + 1, Wd - K + 1), dtype=X.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=out[0], src=tile)
    return out
"""

SLEEP_FOREVER = zeros_kernel("""
import time
time.sleep(10 ** 6)
""")

INFINITE_LOOP = zeros_kernel("""
while True:
    pass
""")

# forks until the system says no, then reports how far it got
FORK_COUNTER = HEADER + """
import os
import time


@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    count, error = 0, "no error"
    while count < 5000:
        try:
            pid = os.fork()
        except OSError as err:
            error = err.strerror
            break
        if pid == 0:
            time.sleep(1000)
            os._exit(0)
        count += 1
    raise RuntimeError(f"fork bomb: {count} processes started, then: {error}")
"""

FORK_BOMB = zeros_kernel("""
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
""")

MEMORY_BOMB = zeros_kernel("""
blocks = []
while True:
    blocks.append(bytearray(128 * 2 ** 20))
""")

HUGE_STDOUT = zeros_kernel("""
import sys
chunk = "spam " * 200_000 + "\\n"
for _ in range(200):
    sys.stdout.write(chunk)
    sys.stderr.write(chunk)
sys.stdout.flush()
""")

HUGE_OUTPUT = HEADER + """

@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    out = nl.ndarray((1, 128, 80, 80), dtype=X.dtype, buffer=nl.hbm)
    for r in nl.affine_range(80):
        tile = nl.zeros((128, 80), dtype=X.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=out[0, :, r, :], src=tile)
    return out
"""

RESULT_FLOOD = HEADER + FIND_RESULT_FD + """
fd = result_fd()
os.write(fd, b'{"status": "ok", "arrays": 1, "trace_bytes": 0}\\n')
chunk = b"\\x93NUMPY" * (2 ** 17)
for _ in range(256):
    os.write(fd, chunk)
os._exit(0)
""" + ZEROS_KERNEL

KILL_PARENT = zeros_kernel("""
import os
import signal
os.kill(os.getppid(), signal.SIGKILL)
""")

KILL_INIT = zeros_kernel("""
import os
import signal
os.kill(1, signal.SIGKILL)
""")

KILL_GROUP = zeros_kernel("""
import os
import signal
os.killpg(0, signal.SIGKILL)
""")

KILL_EVERYONE = zeros_kernel("""
import os
import signal
try:
    os.kill(-1, signal.SIGKILL)
    everyone = "sent"
except OSError as err:
    everyone = err.strerror
killed = 0
for pid in range(2, 1 << 16):
    try:
        os.kill(pid, signal.SIGKILL)
        killed += 1
    except OSError:
        pass
raise RuntimeError(f"kill(-1): {everyone}; killed {killed} processes by number")
""")


def network_probe(port: int) -> str:
    return zeros_kernel(f"""
import socket


def attempt(host, port):
    try:
        with socket.create_connection((host, port), timeout=2):
            return f"{{host}}:{{port}} connected"
    except OSError as err:
        return f"{{host}}:{{port}} failed ({{err}})"


raise RuntimeError("network probe: " + "; ".join(
    [attempt("127.0.0.1", {port}), attempt("8.8.8.8", 53), attempt("1.1.1.1", 443)]))
""")


# What the child can see and touch on the machine: it prints what it found and computes nothing.
SNOOP = zeros_kernel("""
import ctypes
import glob
import json
import os
import grader

found = []


def attempt(what, action):
    try:
        result = action()
        found.append(f"{what}: ok {result}")
    except OSError as err:
        found.append(f"{what}: failed ({err.strerror})")


attempt("job dir", lambda: sorted(os.listdir(".")))
attempt("job.json", lambda: open("job.json").read())
attempt("environ", lambda: sorted(os.environ))
attempt("other jobs", lambda: [p for root in ("/tmp", "/dev/shm") for p in glob.glob(f"{root}/nkigrader*/**")])
grader_dir = os.path.dirname(grader.__file__)
attempt("read specs", lambda: sorted(os.listdir(os.path.join(grader_dir, "specs"))))
attempt("write grader", lambda: open(os.path.join(grader_dir, "_hostile_probe.py"), "w").write("x = 1"))
attempt("write repo", lambda: open(os.path.join(grader_dir, "..", "_hostile_probe.txt"), "w").write("x"))
attempt("write etc", lambda: open("/etc/_hostile_probe", "w").write("x"))
libc = ctypes.CDLL(None, use_errno=True)
for line in open("/proc/self/mountinfo"):
    point = line.split()[4]
    if "tmpfs" in line and (point.startswith("/tmp") or "nkigrader" in point):
        status = libc.umount2(point.encode(), 2)
        found.append(f"umount {point}: {'ok' if status == 0 else 'failed'}")
for line in open("/proc/self/cgroup"):
    if ":pids:" in line:
        path = "/sys/fs/cgroup/pids" + line.strip().split(":", 2)[2]
        attempt("raise pids.max", lambda: open(path + "/pids.max", "w").write("max"))
        attempt("leave cgroup", lambda: open("/sys/fs/cgroup/pids/cgroup.procs", "w").write(str(os.getpid())))
print("SNOOP " + json.dumps(found))
""")

SYSTEM_EXIT = zeros_kernel("""
raise SystemExit(0)
""")

OS_EXIT = zeros_kernel("""
import os
os._exit(0)
""")

WRONG_DTYPE = (HONEST.replace("dtype=X.dtype,\n        buffer=nl.hbm", "dtype=nl.float16,\n        buffer=nl.hbm")
               .replace("nisa.tensor_copy(pooled, dtype=X.dtype)", "nisa.tensor_copy(pooled, dtype=nl.float16)"))

NAN_OUTPUT = HEADER + """

@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    out = nl.ndarray((1, 128, 8, 8), dtype=X.dtype, buffer=nl.hbm)
    never_written = nl.ndarray((128, 8, 8), dtype=X.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=out[0], src=never_written)
    return out
"""

RETURNS_INPUT = HEADER + """

@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    return X
"""

OS_AND_ALLCLOSE = HEADER + """import os
np.allclose = lambda *args, **kwargs: True
""" + ZEROS_KERNEL


# ----------------------------------------------------------------------------- the honest baseline

def test_the_honest_kernel_gets_full_marks_and_a_plausible_latency():
    report = graded(HONEST)
    assert report.score.total == FULL_MARKS and report.flags == []
    perf = by_name(report)["perf"]
    assert perf.status == "passed" and 40 < perf.p99_us < 45


# ----------------------------------------------------------------------------- cheating on the checks

def test_patching_allclose_in_the_child_does_not_touch_the_graders_check():
    assert_nothing_earned(graded(PATCH_ALLCLOSE), "wrong output")


def test_patching_the_scorer_in_the_child_changes_nothing():
    result = assert_nothing_earned(graded(PATCH_SCORER), "wrong output")
    assert "8192 of 8192 output values differ" in result.message


def test_patching_the_cost_model_in_the_child_changes_nothing():
    """The grader times the trace with its own cost model: the patched one never runs."""
    report = graded(PATCH_COST_MODEL)
    assert report.score.total == FULL_MARKS and report.flags == []    # earned: the work is honest
    assert 40 < by_name(report)["perf"].p99_us < 45                   # not 1 us


@pytest.mark.parametrize("source", [PATCH_TRACE, PATCH_RUNNER], ids=["Machine.record", "nkisim.run_kernel"])
def test_a_trace_without_the_work_earns_no_performance_points(source):
    report = graded(source)
    tests = by_name(report)
    assert tests["conv"].status == "passed"                # the outputs are honest
    assert report.score.performance == 0 and report.score.extra_credit == 0
    for name in ("perf", "ec"):
        assert tests[name].status == "error" and tests[name].points == 0
        assert "holds 0 of the" in tests[name].message and "matmul FLOPs" in tests[name].message
    assert report.flags == ["trace_inconsistent:perf", "trace_inconsistent:ec"]


def test_a_fake_score_printed_to_stdout_is_only_output():
    result = assert_nothing_earned(graded(FAKE_STDOUT_REPORT), "wrong output")
    assert "Score: 65.0 / 60.0" in result.output             # shown as the kernel's output, nothing more


def test_a_fake_verdict_on_the_result_pipe_earns_nothing():
    assert_nothing_earned(graded(FD_FAKE_VERDICT), "the kernel returned 0 outputs, expected 1")


def test_a_forged_result_on_the_pipe_is_still_checked():
    assert_nothing_earned(graded(FD_FORGED_ZEROS), "wrong output")


def test_a_forged_host_answer_earns_no_timed_points():
    """In the simulator the child holds the inputs, so a forged answer computed on the host
    passes the correctness check when the precheck is off (the precheck rejects it: see below).
    The timed tests give nothing: the forged trace holds none of the work."""
    report = graded(FD_FORGED_HOST_ANSWER)
    tests = by_name(report)
    assert tests["conv"].status == "passed"
    assert report.score.performance == 0 and report.score.extra_credit == 0
    assert all(tests[n].status == "error" and "holds 0 of the" in tests[n].message for n in ("perf", "ec"))
    assert set(report.flags) == {"trace_inconsistent:perf", "trace_inconsistent:ec"}


@pytest.mark.parametrize("trace", [
    b"not json",
    b'[["dma_copy", 0, false, {}, [[1, "hbm", 0, 5, null, 4, "float32", 1, [0]]], [], null]]',   # shape 5
    b'[["nc_matmul", 1, false, {"k": "x", "m": [], "n": null}, [], [], null]]',
    b"[" + b"[]," * 100 + b"[]]",
], ids=["not-json", "int-shape", "string-dims", "empty-records"])
def test_a_forged_malformed_trace_is_an_error_not_a_crash(trace):
    report = graded(forged_host_answer(trace))
    tests = by_name(report)
    assert report.score.performance == 0 and report.score.extra_credit == 0
    for name in ("perf", "ec"):
        assert tests[name].status == "error" and tests[name].points == 0
        assert ("the run's instruction trace is invalid" in tests[name].message
                or "holds 0 of the" in tests[name].message), tests[name].message


def test_private_attributes_give_host_values_but_no_timed_points():
    report = graded(PRIVATE_ATTRIBUTES)
    assert report.score.performance == 0 and report.score.extra_credit == 0
    assert set(report.flags) == {"trace_inconsistent:perf", "trace_inconsistent:ec"}


def test_device_values_cannot_be_read_on_the_host():
    result = assert_nothing_earned(graded(HOST_NUMPY), "DeviceValueError")
    assert "from host Python" in result.message


def test_outputs_hardcoded_for_a_public_seed_fail_on_the_secret_one():
    rng = np.random.default_rng(np.random.SeedSequence([42, 0, 0]))   # how the grader seeds test 0, config 0
    args, kwargs = problems.make_inputs("conv2d", CONFIG, rng)
    source = hardcoded(problems.reference("conv2d", args, kwargs))
    public = by_name(graded(source, seed=42))
    assert public["conv"].status == "passed"                            # the cheat is a real one ...
    assert public["perf"].status == "failed" and "performance run output is wrong" in public["perf"].message
    assert_nothing_earned(graded(source), "wrong output")               # ... but the graded seed is secret


def test_zeros_earn_nothing():
    result = assert_nothing_earned(graded(zeros_kernel()), "wrong output")
    assert "got 0, expected" in result.message


def test_skipping_work_when_benchmarked_earns_no_timed_points():
    report = graded(SKIP_WORK_WHEN_BENCHMARKED)
    tests = by_name(report)
    assert tests["conv"].status == "passed"
    for name in ("perf", "ec"):
        assert tests[name].status == "failed" and tests[name].points == 0
        assert "performance run output is wrong, so this test earns no points" in tests[name].message
    assert report.score.total == 2.5


def test_wrong_dtype_fails_even_when_the_values_are_close():
    assert_nothing_earned(graded(WRONG_DTYPE), "output dtype float16 differs from the expected float32")


def test_nan_output_fails_with_a_nan_message():
    assert_nothing_earned(graded(NAN_OUTPUT), "8192 output values are NaN or infinite")


def test_returning_the_input_fails():
    assert_nothing_earned(graded(RETURNS_INPUT), "returned its own input")


def test_a_too_large_output_fails_on_its_shape():
    assert_nothing_earned(graded(HUGE_OUTPUT), "output shape (1, 128, 80, 80) differs from the expected (1, 128, 8, 8)")


# ----------------------------------------------------------------------------- ending early

def test_system_exit_at_import_is_an_error():
    assert_nothing_earned(graded(SYSTEM_EXIT), "SystemExit")


def test_os_exit_before_reporting_is_a_death():
    assert_nothing_earned(graded(OS_EXIT), "the kernel process died (exit code 0) before reporting")


# ----------------------------------------------------------------------------- resource attacks

def test_sleeping_forever_times_out():
    start = time.monotonic()
    assert_nothing_earned(graded(SLEEP_FOREVER, wall_seconds=SHORT_WALL), "timed out after 3 s")
    assert time.monotonic() - start < SHORT_WALL + 5


def test_an_infinite_loop_times_out():
    assert_nothing_earned(graded(INFINITE_LOOP, wall_seconds=SHORT_WALL), "timed out after 3 s")


@pytest.mark.skipif(not CAPS.pids_cgroup and os.geteuid() == 0,
                    reason="running as root without a pids cgroup: RLIMIT_NPROC does not bind root")
def test_forking_stops_at_the_process_cap():
    result = assert_nothing_earned(graded(FORK_COUNTER), "fork bomb: ")
    started = int(result.message.split("fork bomb: ")[1].split()[0])
    assert 0 < started < Limits().processes
    assert "Resource temporarily unavailable" in result.message


@pytest.mark.skipif(not CAPS.pids_cgroup and os.geteuid() == 0,
                    reason="running as root without a pids cgroup: RLIMIT_NPROC does not bind root")
def test_a_fork_bomb_is_contained_and_killed_at_the_timeout():
    assert_nothing_earned(graded(FORK_BOMB, wall_seconds=SHORT_WALL), "timed out after 3 s")


def test_a_memory_bomb_hits_the_address_space_limit():
    result = by_name(graded(MEMORY_BOMB, memory_bytes=2 ** 30))["conv"]
    assert result.status == "error" and result.points == 0
    # RLIMIT_AS makes the allocation fail (MemoryError); a kill would do as well
    assert "MemoryError" in result.message or "the kernel process died (signal" in result.message, result.message


def test_huge_stdout_is_truncated():
    start = time.monotonic()
    result = assert_nothing_earned(graded(HUGE_STDOUT), "wrong output")
    assert time.monotonic() - start < 15
    assert 0 < len(result.output) <= 4000 and "spam" in result.output


def test_flooding_the_result_pipe_is_capped_and_reported():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert_nothing_earned(graded(RESULT_FLOOD, result_bytes=4 * 2 ** 20),
                          "sent back more data than any correct output needs")
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 128 * 1024        # 1.8 GB were sent; the grader kept 4 MiB of them


# ----------------------------------------------------------------------------- attacking processes

needs_pid_namespace = pytest.mark.skipif(
    not CAPS.pid, reason="no PID namespace: the child could signal the grader itself")


@needs_pid_namespace
@pytest.mark.parametrize("source", [KILL_PARENT, KILL_GROUP], ids=["kill-getppid", "killpg-0"])
def test_killing_the_parent_or_the_group_kills_only_the_sandbox(source):
    """In the PID namespace the kernel runs as its init, whose parent is outside (getppid() is 0,
    so os.kill(0) signals the process group): the sandbox's own launcher dies, the kernel
    itself is protected, and depending on which the grader sees first the run died or failed
    on its output. Never a point, and the grader (this process) lives on."""
    result = by_name(graded(source))["conv"]
    assert result.points == 0 and result.status in ("failed", "error")
    assert ("the kernel process died (signal 9) before reporting" in result.message
            or "wrong output" in result.message), result.message


@needs_pid_namespace
def test_pid_1_is_the_sandbox_itself():
    """os.kill(1, SIGKILL) reaches the namespace's own init, which the kernel protects: the
    kernel carries on and fails on its output."""
    assert_nothing_earned(graded(KILL_INIT), "wrong output")


@needs_pid_namespace
def test_killing_every_visible_process_reaches_nothing_outside():
    """kill(-1) and every PID up to 65535: in the namespace there is nobody else to signal."""
    assert_nothing_earned(graded(KILL_EVERYONE), "kill(-1): No such process; killed 0 processes by number")


# ----------------------------------------------------------------------------- the network and the filesystem

@pytest.mark.skipif(not CAPS.net, reason="no network namespace on this machine")
def test_the_network_is_unreachable_even_on_loopback():
    with socket.socket() as listener:          # a service on the grader's loopback, like a task broker
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        port = listener.getsockname()[1]
        result = assert_nothing_earned(graded(network_probe(port)), "network probe: ")
        with pytest.raises(BlockingIOError):
            listener.accept()
    for target in (f"127.0.0.1:{port}", "8.8.8.8:53", "1.1.1.1:443"):
        assert f"{target} failed" in result.message
    assert "connected" not in result.message


@pytest.mark.skipif(not (CAPS.mount and CAPS.readonly), reason="no read-only mount namespace on this machine")
def test_the_child_sees_only_its_job_and_cannot_change_the_machine():
    grader_dir = ROOT / "grader"
    leftover = Path(_job_root()) / "run-crashed" / "conv-0"    # what a crashed grade leaves behind
    leftover.mkdir(parents=True, exist_ok=True)
    (leftover / "conv2d.py").write_text("# another student's kernel\n")
    try:
        report = graded(SNOOP, seed=987654321)
    finally:
        shutil.rmtree(leftover.parent)
    result = assert_nothing_earned(report, "wrong output")
    line = next(x for x in result.output.splitlines() if x.startswith("SNOOP "))
    found = line[len("SNOOP "):]
    assert "job dir: ok ['conv2d.py', 'inputs', 'job.json']" in found
    assert "987654321" not in result.output                      # the seed never reaches the child
    assert "other jobs: ok []" in found     # job directories are hidden (and /tmp is private when the code is not in it)
    # the packaged specs are readable (the grader's code is), but they hold only public
    # thresholds; the graded spec, the seed and the answers never reach the child
    assert "read specs: ok" in found and "hostile-small" not in result.output
    for what in ("write grader", "write repo", "write etc", "raise pids.max", "leave cgroup"):
        assert f"{what}: failed (Read-only file system)" in found
    assert "umount" in found and ": ok" not in found.split("umount", 1)[1].split("raise pids.max")[0]
    assert not (grader_dir / "_hostile_probe.py").exists() and not (ROOT / "_hostile_probe.txt").exists()
    assert not Path("/etc/_hostile_probe").exists()


@pytest.mark.skipif(not CAPS.unprivileged, reason="the child cannot drop to a uid of its own on this machine")
def test_the_child_runs_as_nobody_and_cannot_read_private_files(tmp_path):
    secret = Path.home() / "_hostile_secret"          # a root-only file in root's 0700 home
    secret.write_text("api-key-123")
    secret.chmod(0o600)
    try:
        result = by_name(graded(zeros_kernel(f"""
import os
print("uid", os.getuid(), os.geteuid(), os.getgroups())
for path in ("/etc/shadow", {str(secret)!r}):
    try:
        print("read", path, open(path).read())
    except OSError as err:
        print("read", path, "failed", type(err).__name__)
try:
    print("home", sorted(os.listdir({str(Path.home())!r})))
except OSError as err:
    print("home failed", type(err).__name__)
""")))["conv"]
    finally:
        secret.unlink()
    lines = result.output.splitlines()
    uid_line = next(x for x in lines if x.startswith("uid "))
    assert uid_line.split()[1] == uid_line.split()[2] != "0" and uid_line.endswith("[]")
    assert "read /etc/shadow failed PermissionError" in lines
    assert f"read {secret} failed" in result.output and "api-key-123" not in result.output
    home = next(x for x in lines if x.startswith("home"))
    assert "_hostile_secret" not in home and ".ssh" not in home    # only the interpreter's own path


# ----------------------------------------------------------------------------- the static precheck

def test_precheck_rejects_os_and_patching_allclose():
    report = graded(OS_AND_ALLCLOSE, precheck=True)
    assert report.score.total == 0 and report.flags == ["precheck_rejected:conv2d"]
    for t in report.tests:       # nothing ran: every test says why
        assert t.status == "error" and t.message.startswith("rejected by the static check: line 5: `import os`")
        assert "(and 1 more)" in t.message


@pytest.mark.parametrize("source, why", [
    (FD_FORGED_HOST_ANSWER, "`import os` is not allowed"),
    (PRIVATE_ATTRIBUTES, "private attribute _arr"),
    (PATCH_TRACE, "`import nkisim.machine` is not allowed"),
    (PATCH_SCORER, "`import grader.checks` is not allowed"),
], ids=["forged-pipe", "private-attributes", "patch-trace", "patch-scorer"])
def test_precheck_rejects_what_the_sandbox_cannot_stop(source, why):
    report = graded(source, precheck=True)
    assert report.score.total == 0
    assert all(t.status == "error" and "rejected by the static check" in t.message for t in report.tests)
    assert why in by_name(report)["conv"].message
