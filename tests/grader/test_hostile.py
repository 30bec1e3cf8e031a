"""Hostile submissions: kernels that attack the sandbox, the result channel, the grader or the
machine, each a complete conv2d.py graded on the simulator against a small spec (one 10x10
configuration, graded in well under a second).

Each test checks that the attack earns nothing it did not earn, that the report says why, and
that nothing the grade started is left running (waited for, with a generous deadline: a child
killed a moment ago may still be exiting on a busy machine). The attacks on the grader's own
process (signals, floods, resource bombs) also check that an honest kernel graded next in the
same process still gets full marks. The static precheck is off but where a test says so, so
that the sandbox and the grader's own checks are what is tested.

The attacks on values and traces (device_print formatters, objects with __array__, code run
through NumPy's helpers, patched runners, forged programs) are in the last section.
"""
from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import socket
import tempfile
import time
from pathlib import Path

import pytest

from grader import render
from grader.grade import GradeOptions, _job_root, grade
from grader.report import MESSAGE_LIMIT, OUTPUT_LIMIT
from grader.sandbox import Limits
from grader.spec import parse
from grader.submission import Submission
from grader.zygote import ZYGOTE

ROOT = Path(__file__).resolve().parents[2]
HONEST = (ROOT / "reference_kernels" / "conv2d_relaxed.py").read_text()

CONFIG = dict(batch=1, c_in=128, c_out=128, height=10, width=10, k=3, bias=True, pool=1, dtype="float32")
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
        # the relaxed reference takes 40-55 us here (roofline 11.8 us), as the cost model is
        # refined: thresholds with room, so the honest kernel gets full marks and no flag
        {"name": "perf", "kind": "performance", "file": "conv2d", "problem": "conv2d", "points": 17.5,
         "gated_by": ["conv"], "thresholds_us": {"optimized": 100, "relaxed": 140}, "warmup": 1, "iters": 5,
         "configs": [CONFIG]},
        {"name": "ec", "kind": "extra_credit", "file": "conv2d", "problem": "conv2d", "points": 1.25,
         "gated_by": ["conv"], "thresholds_us": {"optimized": 100, "relaxed": 100}, "warmup": 1, "iters": 5,
         "configs": [CONFIG]},
    ]})
FULL_MARKS = 2.5 + 17.5 + 1.25
WALL = 20.0          # seconds per kernel run; the honest kernel needs about 0.2
SHORT_WALL = 3.0     # for the cases that are meant to time out
LEFTOVER_DEADLINE = 60.0


def graded(source: str, *, precheck: bool = False, seed: int | None = None, **limits):
    limits.setdefault("wall_seconds", WALL)
    sub = Submission(files={"conv2d": source}, filenames={"conv2d": "conv2d.py"},
                     sha256=hashlib.sha256(source.encode()).hexdigest(), origin="conv2d.py")
    return grade(sub, SPEC, GradeOptions(backend="sim", seed=seed, run_precheck=precheck, limits=Limits(**limits)))


def by_name(report):
    return {t.name: t for t in report.tests}


def assert_nothing_earned(report, why: str | None, test: str = "conv"):
    """No points at all; `test` failed or errored (with `why` in its message, when given); the
    timed tests gated on it did not run."""
    assert report.score.total == 0, report.score
    result = by_name(report)[test]
    assert result.status in ("failed", "error") and result.points == 0, (result.status, result.message)
    if why is not None:
        assert why in result.message, result.message
    if test == "conv":
        assert all(t.status == "skipped" for t in report.tests if t.name != "conv")
    return result


# ----------------------------------------------------------------------------- nothing left behind

def descendants(root: int) -> list[int]:
    """Every live process below `root` (zombies count: they are not reaped yet)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue                        # exited while we looked
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for pid in children.get(todo.pop(), []):
            found.append(pid)
            todo.append(pid)
    return found


_BEFORE: set[int] = set()      # the session's own services (a Redis another test module started)


def leftovers() -> list[int]:
    """Processes of ours still there, but for the fork server, which outlives grades by design
    (its monitors and jobs, should any remain, are counted), and what ran before the test."""
    return [p for p in descendants(os.getpid()) if p != ZYGOTE.pid and p not in _BEFORE]


def wait_for_no_leftovers(deadline_s: float = LEFTOVER_DEADLINE) -> list[int]:
    """[] once every process a grade started has exited; what is still there at the deadline.
    A killed child's monitor reports its exit a moment before it exits itself, so look again
    until the condition holds rather than once."""
    end = time.monotonic() + deadline_s
    while True:
        found = leftovers()
        if not found or time.monotonic() > end:
            return found
        time.sleep(0.05)


def described(pids: list[int]) -> list[str]:
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                command = fh.read().replace(b"\0", b" ").decode(errors="replace")
            out.append(f"{pid}: {command[:200]}")
        except OSError:
            out.append(f"{pid}: (gone)")
    return out


@pytest.fixture(autouse=True)
def nothing_left_running():
    _BEFORE.clear()
    _BEFORE.update(p for p in descendants(os.getpid()) if p != ZYGOTE.pid)
    yield
    assert described(wait_for_no_leftovers()) == []


@pytest.fixture
def grader_stays_healthy():
    """After an attack on the grader itself: an honest grade in this same process (precheck
    on, as the spec says) still gets full marks."""
    yield
    assert wait_for_no_leftovers() == []
    report = graded(HONEST, precheck=True)
    assert report.score.total == FULL_MARKS, [(t.name, t.status, t.message) for t in report.tests]
    assert report.flags == []


# ----------------------------------------------------------------------------- kernel sources

HEADER = """\
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa
"""

# A kernel of the right shape and dtype that computes nothing: every attack below that is not
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


# The result pipe's descriptor is taken out of the environment before student code runs, but
# the pipe is still open in the child: find it as the one writable pipe past stderr.
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


def forged_result(payload: str) -> str:
    """A kernel that writes `payload` (Python building a bytes value `blob`) to the result pipe
    at import and exits before anything else can be written."""
    return HEADER + FIND_RESULT_FD + payload + """
os.write(result_fd(), blob)
os._exit(0)
""" + ZEROS_KERNEL


# ----- cheating on the checks

PATCH_ALLCLOSE = zeros_kernel("""
np.allclose = lambda *args, **kwargs: True
np.isclose = lambda a, b, *args, **kwargs: np.ones(np.broadcast(a, b).shape, dtype=bool)
np.testing.assert_allclose = lambda *args, **kwargs: None
""")

PATCH_SCORER = zeros_kernel("""
import grader.checks
import grader.scoring
grader.scoring.timed_points = lambda test, p99, partial: (1000.0, "passed")
grader.checks.check_output = lambda *args, **kwargs: grader.checks.CheckResult(True, "output matches", 0.0)
""")

FAKE_STDOUT_REPORT = zeros_kernel("""
print("Score: 65.0 / 60.0 (all tests passed)")
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

HUGE_OUTPUT = HEADER + """

@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    out = nl.ndarray((1, 128, 80, 80), dtype=X.dtype, buffer=nl.hbm)
    for r in nl.affine_range(80):
        tile = nl.zeros((128, 80), dtype=X.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=out[0, :, r, :], src=tile)
    return out
"""

# ----- the result channel

FAKE_VERDICT = forged_result("""
import json
blob = json.dumps({"status": "ok", "score": 1000, "points": 1000, "passed": True, "arrays": 0,
                   "trace_bytes": 0}).encode() + b"\\n"
""")

FORGED_ZEROS = forged_result("""
import io
import json
buf = io.BytesIO()
np.save(buf, np.zeros((1, 128, 8, 8), np.float32))
blob = json.dumps({"status": "ok", "arrays": 1, "trace_bytes": 0}).encode() + b"\\n" + buf.getvalue()
""")

# a .npy header whose element count wraps to 0 in 64-bit arithmetic
FORGED_NPY_HEADER = forged_result("""
import io
import json
header = {"descr": "<f4", "fortran_order": False, "shape": (2 ** 32, 2 ** 32)}
buf = io.BytesIO()
np.lib.format.write_array_header_1_0(buf, header)
blob = json.dumps({"status": "ok", "arrays": 1, "trace_bytes": 0}).encode() + b"\\n" + buf.getvalue() + bytes(64)
""")

FORGED_HUGE_ERROR = forged_result("""
import json
blob = json.dumps({"status": "error", "error_type": "E" * 1_000_000, "error": "A" * 50_000_000,
                   "where": "W" * 1_000_000, "arrays": 0, "trace_bytes": 0}).encode() + b"\\n"
""")

RAISED_HUGE_ERROR = zeros_kernel("""
raise RuntimeError("A" * 50_000_000)
""")

# a fake full-marks screen in the exception text and on stdout
ANSI_ERROR = zeros_kernel("""
FAKE = "\\x1b[2J\\x1b[H\\x1b[32mAll tests passed. Total 65 / 60\\x1b[0m\\r\\x07"
print(FAKE)
raise RuntimeError(FAKE)
""")

RESULT_FLOOD = forged_result("""
os.write(result_fd(), b'{"status": "ok", "arrays": 1, "trace_bytes": 0}\\n')
chunk = b"\\x93NUMPY" * (2 ** 17)
for _ in range(256):
    os.write(result_fd(), chunk)
blob = b""
""")

RESULT_FLOOD_GIGABYTES = forged_result("""
os.write(result_fd(), b'{"status": "ok", "artifact": "program", "artifact_bytes": 1}\\n')
chunk = b"\\0" * (8 * 2 ** 20)
for _ in range(192):
    os.write(result_fd(), chunk)
blob = b""
""")

HUGE_STDOUT = zeros_kernel("""
import sys
chunk = "spam " * 200_000 + "\\n"
for _ in range(200):
    sys.stdout.write(chunk)
    sys.stderr.write(chunk)
sys.stdout.flush()
""")

SYSTEM_EXIT = zeros_kernel("""
raise SystemExit(0)
""")

OS_EXIT = zeros_kernel("""
import os
os._exit(0)
""")

# ----- resources

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

# cyclic garbage made while the kernel is traced, where the cycle collector is paused: a loop
# of it must end at the address space limit, not run on until the wall-clock limit
CYCLIC_GARBAGE = HEADER + """

@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    while True:
        tile = nl.zeros((128, 4), dtype=X.dtype, buffer=nl.sbuf)
        junk = [tile, bytearray(2 ** 20)]
        junk.append(junk)
"""

# memory outside the address space limit: memfd files grown with fallocate, each under the
# file size limit, none of them mapped
MEMFD_HOARD = zeros_kernel("""
import os
held, fds = 0, []
try:
    while held < 2 ** 30:
        fds.append(os.memfd_create("hoard"))
        os.posix_fallocate(fds[-1], 0, 32 * 2 ** 20)
        held += 32 * 2 ** 20
except OSError as err:
    print("hoard refused:", err)
raise RuntimeError(f"hoard: held {held >> 20} MiB")
""")

# ----- processes

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


def proc_snoop(grader_pid: int) -> str:
    """Lists /proc and reads every command line there and the grader's (by its host pid)."""
    return zeros_kernel(f"""
import json
import os
found = {{"pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()), "cmdlines": []}}
for pid in found["pids"] + [{grader_pid}]:
    try:
        with open(f"/proc/{{pid}}/cmdline", "rb") as fh:
            found["cmdlines"].append(fh.read().replace(b"\\0", b" ").decode(errors="replace"))
    except OSError as err:
        found["cmdlines"].append(type(err).__name__)
print("PROC " + json.dumps(found))
""")


# ----- the network and the file system

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


def file_snoop(root: Path, host_tmp_file: Path) -> str:
    """What of the machine the child can read or change: it prints what it found and computes
    nothing. `root` is the repository, `host_tmp_file` a file in the host's /tmp."""
    return zeros_kernel(f"""
import ctypes
import glob
import json
import os
import grader

ROOT = {str(root)!r}
found = {{}}


def attempt(what, action):
    try:
        found[what] = "ok " + str(action())
    except OSError as err:
        found[what] = "failed " + type(err).__name__


def read(path):
    with open(path, "rb") as fh:
        return len(fh.read())


grader_dir = os.path.dirname(grader.__file__)
attempt("job dir", lambda: sorted(os.listdir(".")))
found["cwd"] = os.getcwd()
attempt("repo", lambda: sorted(os.listdir(ROOT)))
attempt("grader dir", lambda: sorted(os.listdir(grader_dir)))
for label, path in [("reference", ROOT + "/reference_kernels/conv2d_optimized.py"),
                    ("reference via grader", grader_dir + "/../reference_kernels/conv2d_optimized.py"),
                    ("reference via proc root", "/proc/1/root" + ROOT + "/reference_kernels/conv2d_optimized.py"),
                    ("reference via self root", "/proc/self/root" + ROOT + "/reference_kernels/conv2d_optimized.py"),
                    ("tests", ROOT + "/tests/grader/test_hostile.py"),
                    ("specs", grader_dir + "/specs/asst4-trainium2.toml"),
                    ("grader source", grader_dir + "/grade.py"),
                    ("git", ROOT + "/.git/HEAD"),
                    ("host tmp file", {str(host_tmp_file)!r})]:
    attempt("read " + label, lambda: read(path))
attempt("tmp", lambda: sorted(os.listdir("/tmp")))
found["other jobs"] = [p for r in ("/tmp", "/dev/shm") for p in glob.glob(r + "/nkigrader*/**", recursive=True)
                       if not (found["cwd"] + "/").startswith(p.rstrip("/") + "/")
                       and not p.startswith(found["cwd"] + "/")]
# anything named like our reference kernels anywhere outside the system directories
hits = []
for top in sorted(os.listdir("/")):
    if top in ("usr", "proc", "sys", "dev") or os.path.islink("/" + top):
        continue
    for dirpath, dirnames, filenames in os.walk("/" + top):
        hits += [os.path.join(dirpath, f) for f in filenames if f.startswith("conv2d_")]
found["conv2d files"] = hits
attempt("write tmp", lambda: open("/tmp/scratch", "w").write("x"))
for what, path in [("write grader", grader_dir + "/_hostile_probe.py"), ("write repo", ROOT + "/_hostile_probe.txt"),
                   ("write etc", "/etc/_hostile_probe"), ("write job dir", "_hostile_probe"),
                   ("leave cgroup", "/sys/fs/cgroup/pids/cgroup.procs")]:
    attempt(what, lambda: open(path, "w").write(str(os.getpid())))
libc = ctypes.CDLL(None, use_errno=True)
mounts = [line.split()[4] for line in open("/proc/self/mountinfo")]
found["umount"] = sorted(p for p in mounts if libc.umount2(p.encode(), 2) == 0)
print("SNOOP " + json.dumps(found))
""")


# ----------------------------------------------------------------------------- the honest baseline

def test_the_honest_kernel_gets_full_marks_and_a_plausible_latency():
    report = graded(HONEST)
    assert report.score.total == FULL_MARKS and report.flags == []
    perf = by_name(report)["perf"]
    assert perf.status == "passed" and 30 < perf.p99_us < 80


# ----------------------------------------------------------------------------- cheating on the checks

def test_patching_numpy_in_the_child_does_not_touch_the_graders_check():
    assert_nothing_earned(graded(PATCH_ALLCLOSE), "wrong output")


def test_the_graders_own_modules_are_not_even_importable_in_the_child():
    assert_nothing_earned(graded(PATCH_SCORER), "No module named 'grader.checks'")


def test_a_fake_score_printed_to_stdout_is_only_output():
    result = assert_nothing_earned(graded(FAKE_STDOUT_REPORT), "wrong output")
    assert "Score: 65.0 / 60.0" in result.output             # shown as the kernel's output, nothing more


def test_zeros_earn_nothing():
    assert_nothing_earned(graded(zeros_kernel()), "wrong output")


def test_wrong_dtype_fails_even_when_the_values_are_close():
    assert_nothing_earned(graded(WRONG_DTYPE), "output dtype float16 differs from the expected float32")


def test_nan_output_fails_with_a_nan_message():
    assert_nothing_earned(graded(NAN_OUTPUT), "8192 output values are NaN or infinite")


def test_returning_the_input_fails():
    assert_nothing_earned(graded(RETURNS_INPUT), None)


def test_a_too_large_output_fails_on_its_shape():
    assert_nothing_earned(graded(HUGE_OUTPUT), "(1, 128, 80, 80)")


# ----------------------------------------------------------------------------- the result channel

@pytest.mark.parametrize("source", [FAKE_VERDICT, FORGED_ZEROS], ids=["fake-verdict", "forged-zeros"])
def test_a_forged_result_earns_nothing(source):
    assert_nothing_earned(graded(source), None)


def test_a_forged_npy_header_whose_size_wraps_is_a_bad_result_not_a_crash():
    assert_nothing_earned(graded(FORGED_NPY_HEADER), None)


@pytest.mark.parametrize("source", [FORGED_HUGE_ERROR, RAISED_HUGE_ERROR], ids=["forged", "raised"])
def test_a_50_mb_error_text_is_cut_before_the_report(source):
    report = graded(source)
    result = assert_nothing_earned(report, None)
    assert len(result.message) <= MESSAGE_LIMIT + 200 and len(result.output) <= OUTPUT_LIMIT + 200
    assert len(json.dumps(report.to_json())) < 200_000
    assert len(render.render_terminal(report)) < 100_000


def test_ansi_escapes_in_a_kernels_error_and_output_reach_the_terminal_report_escaped():
    report = graded(ANSI_ERROR)
    result = assert_nothing_earned(report, "RuntimeError")
    assert "\x1b[2J" in result.message or "\x1b[2J" in result.output    # kept as data ...
    text = render.render_terminal(report)
    for raw in ("\x1b", "\r", "\x07"):                                   # ... never sent raw
        assert raw not in text
    assert "Total 65 / 60" in text                                      # visible as what it is


def test_a_gigabyte_result_is_refused_while_read_as_a_limit_not_as_cheating(grader_stays_healthy):
    """1.5 GiB sent back under the default limits: the grader keeps no more than this small
    configuration can honestly need (a bounded program plus its outputs), copies nothing, and says
    it was a limit; no program_invalid flag, which would call the student a cheat."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    report = graded(RESULT_FLOOD_GIGABYTES)
    result = assert_nothing_earned(report, "result too large")
    assert result.status == "error" and not any(f.startswith("program_invalid") for f in report.flags)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 600 * 1024        # 1.5 GiB sent; at most the 256 MiB + inputs cap kept, once


def test_huge_stdout_is_truncated(grader_stays_healthy):
    start = time.monotonic()
    result = assert_nothing_earned(graded(HUGE_STDOUT), "wrong output")
    assert time.monotonic() - start < 30
    assert 0 < len(result.output) <= OUTPUT_LIMIT + 200 and "spam" in result.output


def test_flooding_the_result_pipe_is_capped_and_reported(grader_stays_healthy):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert_nothing_earned(graded(RESULT_FLOOD, result_bytes=4 * 2 ** 20), None)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 128 * 1024        # 1.8 GB were sent; the grader kept 4 MiB of them


def test_system_exit_at_import_is_an_error():
    assert_nothing_earned(graded(SYSTEM_EXIT), "SystemExit")


def test_os_exit_before_reporting_is_a_death():
    assert_nothing_earned(graded(OS_EXIT), "before reporting")


# ----------------------------------------------------------------------------- resources

def test_sleeping_forever_times_out(grader_stays_healthy):
    start = time.monotonic()
    assert_nothing_earned(graded(SLEEP_FOREVER, wall_seconds=SHORT_WALL), "3 s")
    assert time.monotonic() - start < SHORT_WALL + 30


def test_an_infinite_loop_times_out():
    assert_nothing_earned(graded(INFINITE_LOOP, wall_seconds=SHORT_WALL), "3 s")


needs_pids_cgroup = pytest.mark.needs("process_cap")


@needs_pids_cgroup
def test_forking_stops_at_the_process_cap():
    result = assert_nothing_earned(graded(FORK_COUNTER), "fork bomb: ")
    started = int(result.message.split("fork bomb: ")[1].split()[0])
    assert 0 < started < Limits().processes
    assert "Resource temporarily unavailable" in result.message


@needs_pids_cgroup
def test_a_fork_bomb_is_contained_and_killed_at_the_timeout(grader_stays_healthy):
    assert_nothing_earned(graded(FORK_BOMB, wall_seconds=SHORT_WALL), "3 s")


def test_a_memory_bomb_hits_the_address_space_limit():
    result = by_name(graded(MEMORY_BOMB, memory_bytes=2 ** 30))["conv"]
    assert result.status == "error" and result.points == 0
    # RLIMIT_AS makes the allocation fail (MemoryError); a kill would do as well
    assert "MemoryError" in result.message or "died" in result.message, result.message


def test_cyclic_garbage_in_a_traced_loop_hits_the_address_space_limit():
    started = time.monotonic()
    result = by_name(graded(CYCLIC_GARBAGE, memory_bytes=2 ** 30))["conv"]
    assert result.status == "error" and result.points == 0
    assert "MemoryError" in result.message or "died" in result.message, result.message
    assert time.monotonic() - started < WALL, "ran until the wall-clock limit"


@pytest.mark.needs("memory_cgroup")
def test_memory_held_outside_the_address_space_stops_at_the_memory_cgroup(grader_stays_healthy):
    """memfd files grown with fallocate count against no rlimit; the job's memory cgroup (here
    256 MiB, no swap) stops them: the kernel kills the hoarder, and the report says why."""
    result = assert_nothing_earned(graded(MEMFD_HOARD, resident_bytes=256 * 2 ** 20), None)
    assert "memory limit" in result.message, result.message
    assert "hoard: held" not in result.message


# ----------------------------------------------------------------------------- attacking processes

needs_pid_namespace = pytest.mark.needs("pid_namespace")     # or the child could signal the grader


@needs_pid_namespace
@pytest.mark.parametrize("source", [KILL_PARENT, KILL_GROUP], ids=["kill-getppid", "killpg-0"])
def test_killing_the_parent_or_the_group_kills_only_the_sandbox(source, grader_stays_healthy):
    """In the PID namespace the kernel runs as its init, whose parent is outside (getppid() is 0,
    so os.kill(0) signals the process group): the sandbox's own launcher dies, the kernel
    itself is protected, and depending on which the grader sees first the run died or failed
    on its output. Never a point, and the grader (this process) lives on."""
    result = by_name(graded(source))["conv"]
    assert result.points == 0 and result.status in ("failed", "error")
    assert "died" in result.message or "wrong output" in result.message, result.message


@needs_pid_namespace
def test_pid_1_is_the_sandbox_itself():
    """os.kill(1, SIGKILL) reaches the namespace's own init, which the kernel protects: the
    kernel carries on and fails on its output."""
    assert_nothing_earned(graded(KILL_INIT), "wrong output")


@needs_pid_namespace
def test_killing_every_visible_process_reaches_nothing_outside(grader_stays_healthy):
    """kill(-1) and every PID up to 65535: in the namespace there is nobody else to signal."""
    assert_nothing_earned(graded(KILL_EVERYONE), "kill(-1): No such process; killed 0 processes by number")


@pytest.mark.needs("private_proc")
def test_the_child_sees_no_host_process_and_not_the_graders_command_line():
    result = assert_nothing_earned(graded(proc_snoop(os.getpid())), "wrong output")
    line = next(x for x in result.output.splitlines() if x.startswith("PROC "))
    found = json.loads(line[len("PROC "):])
    assert found["pids"] == [1]                                   # itself, and nothing else
    assert found["cmdlines"][-1] == "FileNotFoundError"           # the grader's pid is not there
    assert not any("pytest" in c for c in found["cmdlines"])


# ----------------------------------------------------------------------------- the network and the file system

@pytest.mark.needs("net_namespace")
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


@pytest.mark.needs("package_view")
def test_the_child_sees_its_job_and_packages_only_and_cannot_change_anything():
    leftover = Path(_job_root()) / "run-crashed" / "conv-0"      # what a crashed grade leaves behind
    leftover.mkdir(parents=True, exist_ok=True)
    (leftover / "conv2d.py").write_text("# another student's kernel\n")
    host_tmp = Path(tempfile.mkdtemp(prefix="hostile-", dir="/tmp")) / "secret.txt"
    host_tmp.write_text("the host's /tmp")
    try:
        report = graded(file_snoop(ROOT, host_tmp), seed=987654321)
    finally:
        shutil.rmtree(leftover.parent)
        shutil.rmtree(host_tmp.parent)
    result = assert_nothing_earned(report, "wrong output")
    line = next(x for x in result.output.splitlines() if x.startswith("SNOOP "))
    found = json.loads(line[len("SNOOP "):])
    assert found["job dir"].startswith("ok ") and "'conv2d.py'" in found["job dir"]
    assert "987654321" not in result.output                     # the seed never reaches the child
    assert found["repo"].startswith("ok ") and all(
        name in ("'grader'", "'nkisim'", "'.venv'") for name in found["repo"][4:-1].split(", ")), found["repo"]
    assert "grade.py" not in found["grader dir"] and "specs" not in found["grader dir"]
    for what in ("reference", "reference via grader", "reference via proc root", "reference via self root",
                 "tests", "specs", "grader source", "git", "host tmp file"):
        assert found["read " + what].startswith("failed"), (what, found["read " + what])
    assert found["conv2d files"] == []
    assert found["tmp"].startswith("ok") and host_tmp.parent.name not in found["tmp"]   # a private /tmp
    assert found["other jobs"] == []          # only its own job directory and the way to it
    assert found["write tmp"].startswith("ok")                   # a private, writable /tmp
    for what in ("write grader", "write repo", "write etc", "write job dir", "leave cgroup"):
        assert found[what].startswith("failed"), (what, found[what])
    assert found["umount"] == []
    assert not (ROOT / "grader" / "_hostile_probe.py").exists() and not (ROOT / "_hostile_probe.txt").exists()
    assert not Path("/etc/_hostile_probe").exists()


@pytest.mark.needs("own_uid")
def test_the_child_runs_as_nobody_and_cannot_read_private_files():
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
""")))["conv"]
    finally:
        secret.unlink()
    lines = result.output.splitlines()
    uid_line = next(x for x in lines if x.startswith("uid "))
    assert uid_line.split()[1] == uid_line.split()[2] != "0" and uid_line.endswith("[]")
    assert any(x.startswith("read /etc/shadow failed") for x in lines)
    assert f"read {secret} failed" in result.output and "api-key-123" not in result.output


# ----------------------------------------------------------------------------- the static precheck

def test_the_precheck_rejects_os_and_patching_numpy():
    report = graded(HEADER + "import os\nnp.allclose = lambda *args, **kwargs: True\n" + ZEROS_KERNEL, precheck=True)
    assert report.score.total == 0 and report.flags == ["precheck_rejected:conv2d"]
    assert all(t.status in ("error", "skipped") and t.points == 0 for t in report.tests)


# ============================================================================= values and traces
# The lead's section: attacks on what the grade is computed from (nl.device_print formatters,
# nl.full with an __array__ object, np.testing.runstring / measure, patching nki.baremetal
# through a parameter, forged programs and traces, private attributes, host NumPy on device
# tensors, skipping work when benchmarked, outputs hard-coded for a public seed).

# The kernel below computes a 1x128x8x8 answer on the host when it can get the input values
# (it never can now), and otherwise returns what the attack produced.
HOST_CONV = """

def host_answer(x, w, b):
    x, w, b = (np.asarray(v, dtype=np.float64) for v in (x, w, b))
    out = np.zeros((x.shape[0], w.shape[0], x.shape[2] - 2, x.shape[3] - 2))
    for i in range(3):
        for j in range(3):
            out += np.einsum("bchw,oc->bohw", x[:, :, i:i + out.shape[2], j:j + out.shape[3]], w[:, :, i, j])
    return (out + b[None, :, None, None]).astype(np.float32)
"""

# 1. nl.device_print formats tiles with NumPy's print options, so a formatter set by the kernel
#    saw every value; nl.full(shape, obj) took an object whose __float__ fed the trace and whose
#    __array__ fed the data.
PRINT_FORMATTER_LEAK = HEADER + HOST_CONV + """
SEEN = []
np.set_printoptions(threshold=10**9, formatter={"float_kind": lambda v: SEEN.append(v) or "0"})


class Answer:
    def __float__(self):
        return 0.0

    def __array__(self, dtype=None, copy=None):
        vals = np.asarray(SEEN, dtype=np.float32)
        return vals.reshape(-1)[:128 * 64].reshape(128, 8, 8) if vals.size >= 128 * 64 else np.ones((128, 8, 8))


@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    x = nl.ndarray((128, 10, 10), dtype=X.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=X[0])
    nl.device_print("x", x)
    out = nl.ndarray((1, 128, 8, 8), dtype=X.dtype, buffer=nl.hbm)
    tile = nl.full((128, 8, 8), Answer(), dtype=X.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=out[0], src=tile)
    return out
"""


def test_a_device_print_formatter_never_sees_a_value_and_an_array_object_gives_no_data():
    report = graded(PRINT_FORMATTER_LEAK)
    result = assert_nothing_earned(report, "wrong output")
    assert result.output.rstrip().endswith("]]]")    # printed at execution, into the report


# 2. Code run through NumPy's helpers, then anything written to the result pipe: with the
#    child holding no values, the most it can send is some program, and a forged one is invalid.
RUNSTRING_FORGERY = forged_result("""
import numpy.testing
numpy.testing.runstring("import json; GLOBAL_BLOB = json.dumps({'status': 'ok', 'artifact': 'program', "
                        "'artifact_bytes': 12}).encode() + b'\\\\n' + b'NKIPROG1' + b'xxxx'", globals())
blob = GLOBAL_BLOB
""")


def test_code_run_through_numpy_helpers_can_only_forge_an_invalid_program():
    report = graded(RUNSTRING_FORGERY)
    assert_nothing_earned(report, "malformed") if "malformed" in by_name(report)["conv"].message else \
        assert_nothing_earned(report, "hardware's rules")
    assert "program_invalid:conv" in report.flags


# 3. Patching the runners through a parameter: the child no longer runs the kernel through
#    nki.baremetal or any runner a kernel can reach, and an emptied program computes nothing.
PATCHED_RUNNERS = HEADER + HOST_CONV + """
import nkisim.machine


def install(module, fake):
    module.baremetal = fake
    module.benchmark = lambda *a, **k: fake
    module.simulate_kernel = fake


install(nki, lambda kernel, *a, **k: (lambda *args, **kw: host_answer(*args[:3])))
nkisim.machine.Machine.emit = lambda self, *args, **kwargs: None
""" + ZEROS_KERNEL


def test_patching_the_runners_and_the_tracer_earns_nothing():
    report = graded(PATCHED_RUNNERS)
    assert report.score.total == 0
    assert by_name(report)["conv"].status in ("failed", "error")


# 4. Reading values through private attributes or host NumPy: device tensors hold none.
PRIVATE_VALUES = HEADER + """

@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    found = [getattr(X, name, None) for name in ("_values", "_arr", "array", "data", "values")]
    if any(callable(f) or isinstance(f, np.ndarray) for f in found):
        raise RuntimeError("a value container was reachable")
    return np.asarray(X)
"""


def test_device_tensors_hold_no_values_to_reach():
    report = graded(PRIVATE_VALUES)
    result = assert_nothing_earned(report, "DeviceValueError")
    assert "a value container was reachable" not in result.message


# 5. Knowing it is timed: the child's job names no mode, no iteration count, no test.
TIMED_DETECTOR = HONEST.replace("@nki.compiler.skip_middle_end_transformations", '''
import json as _json
with open("job.json") as _fh:
    _JOB = _json.load(_fh)
if {"mode", "warmup", "iters", "seed", "test"} & set(_JOB) or "inputs" not in _JOB:
    raise RuntimeError("the child could tell: " + ",".join(sorted(_JOB)))


@nki.compiler.skip_middle_end_transformations''', 1)


def test_the_child_cannot_tell_a_timed_run_from_a_correctness_run():
    report = graded(TIMED_DETECTOR)
    assert report.score.total == FULL_MARKS, [(t.name, t.status, t.message) for t in report.tests]


# 6. Cheaper arithmetic than the problem asks for fails the timed tests as it fails correctness.
FLOAT16_INSIDE = HONEST.replace("@nki.compiler.skip_middle_end_transformations", '''
_real_copy = nisa.tensor_copy


def _lossy(src, *args, **kwargs):
    return _real_copy(_real_copy(src, dtype=nl.float16), *args, **kwargs)


nisa.tensor_copy = _lossy


@nki.compiler.skip_middle_end_transformations''', 1)


def test_float16_arithmetic_in_a_float32_kernel_earns_nothing():
    report = graded(FLOAT16_INSIDE)
    assert_nothing_earned(report, "wrong output")


# 7. The launch: a kernel may not put itself on more physical cores than its spec grades on.
def split_over_an_spmd_grid(source: str) -> str:
    """The honest kernel with its pooled rows split between the instances of an SPMD grid whose
    nl.nc dimension puts one instance on each of Trainium2's two cores, launched at import."""
    split = source.replace("            for hp in nl.affine_range(out_pool_height):\n",
                           "            for hp in range(nl.program_id(0), out_pool_height, nl.num_programs()):\n", 1)
    split = split.replace("buffer=nl.hbm,", "buffer=nl.shared_hbm,", 1)     # one output for both instances
    assert split.count("nl.program_id(0)") == 1 and "nl.shared_hbm" in split
    return split + "\n\nfused_conv2d_maxpool = fused_conv2d_maxpool[nl.nc(2)]\n"


def test_a_kernel_launching_itself_on_an_spmd_grid_is_graded_without_it():
    honest = by_name(graded(HONEST))["perf"]
    report = graded(split_over_an_spmd_grid(HONEST))
    # graded as the harness launches it, without a grid: nl.num_programs() is 1 and every row
    # is done on one core, so the honest kernel's grade and latency, not half of it
    assert by_name(report)["perf"].p99_us == honest.p99_us
    assert report.score.total == FULL_MARKS, [(t.name, t.status, t.message) for t in report.tests]
