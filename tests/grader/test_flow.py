"""The grading flow end to end on the simulator, with a small two-part assignment whose tests
each take well under a second: one scoring rule in the three outputs, the time budget, the
cancel token, Ctrl-C / SIGTERM, static-check rejections, the timed-run tolerance and no
reference work for a kernel that fails at once."""
from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import threading
import time

import pytest

import grader
from grader import problems, render
from grader.grade import _job_root
from grader.sandbox import Limits

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SPEC_TOML = """
assignment = "flow-small"
title = "flow tests: small conv2d and transpose"
spec_version = "1"
thresholds_version = "t1"
partial_credit = 0.95
time_budget_s = 120

[files.conv2d]
archive_path = "part2/conv2d.py"
functions = { fused_conv2d_maxpool = ["X", "W", "bias", "pool_size"] }
optional = true

[files.kernels]
archive_path = "part1/kernels.py"
functions = { matrix_transpose = ["a_tensor"] }
optional = true

[tolerances]
float32 = { rtol = 1e-5, atol = 1e-8 }
float16 = { rtol = 1e-2, atol = 1e-1 }

[[tests]]
name = "conv_a"
title = "Correctness: conv A"
kind = "correctness"
file = "conv2d"
problem = "conv2d"
points = 2
configs = [
  { batch = 2, c_in = 128, c_out = 128, height = 10, width = 10, k = 3, bias = true, pool = 1, dtype = "float32" },
  { batch = 2, c_in = 128, c_out = 128, height = 10, width = 10, k = 3, bias = true, pool = 2, dtype = "float32" },
]

[[tests]]
name = "conv_b"
title = "Correctness: conv B"
kind = "correctness"
file = "conv2d"
problem = "conv2d"
points = 2
configs = [{ batch = 2, c_in = 256, c_out = 128, height = 8, width = 12, k = 3, bias = false, pool = 1, dtype = "float32" }]

[[tests]]
name = "perf_f32"
title = "Performance: conv float32"
kind = "performance"
file = "conv2d"
problem = "conv2d"
points = 4
gated_by = ["conv_a", "conv_b"]
thresholds_us = { optimized = 60, relaxed = 120 }
configs = [{ batch = 1, c_in = 128, c_out = 128, height = 10, width = 10, k = 3, bias = true, pool = 1, dtype = "float32" }]

[[tests]]
name = "ec_f16"
title = "Extra credit: conv float16"
kind = "extra_credit"
file = "conv2d"
problem = "conv2d"
points = 1
gated_by = ["conv_a", "conv_b"]
thresholds_us = { optimized = 40, relaxed = 40 }
configs = [{ batch = 1, c_in = 128, c_out = 128, height = 10, width = 10, k = 3, bias = true, pool = 1, dtype = "float16" }]

[[tests]]
name = "transpose"
title = "Correctness: transpose"
kind = "correctness"
file = "kernels"
problem = "transpose"
points = 3
configs = [{ m = 256, n = 384, dtype = "float32" }]

[[tests]]
name = "transpose_ec"
title = "Extra credit: transpose"
kind = "extra_credit"
file = "kernels"
problem = "transpose"
points = 0.5
gated_by = ["transpose"]
thresholds_us = { optimized = 40, relaxed = 40 }
warmup = 1
iters = 5
configs = [{ m = 256, n = 512, dtype = "float32" }]
"""
MAX_TOTAL = 11          # correctness 2 + 2 + 3, performance 4; extra credit 1.5 on top


def read(path: str) -> bytes:
    with open(os.path.join(ROOT, path), "rb") as fh:
        return fh.read()


CONV = read("reference_kernels/conv2d_optimized.py")
TRANSPOSE = read("reference_kernels/transpose.py")
SPIN = b'''import neuronxcc.nki as nki


@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    while True:       # MARKER
        pass
'''
RAISES = b'''import neuronxcc.nki as nki


@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    raise ValueError("this kernel fails before any work")
'''


@pytest.fixture(scope="module")
def spec_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("spec") / "flow-small.toml"
    path.write_text(SPEC_TOML)
    return str(path)


@pytest.fixture(scope="module")
def spec(spec_path):
    return grader.load_spec(spec_path)


def upload(folder, conv: bytes | None = None, kernels: bytes | None = None) -> str:
    """A file a student would send: conv2d.py or kernels.py alone, or an archive of both."""
    if conv is not None and kernels is not None:
        path = os.path.join(folder, "asst4.tar.gz")
        for name, data in (("conv2d.py", conv), ("kernels.py", kernels)):
            with open(os.path.join(folder, name), "wb") as fh:
                fh.write(data)
        with tarfile.open(path, "w:gz") as tar:
            tar.add(os.path.join(folder, "conv2d.py"), arcname="part2/conv2d.py")
            tar.add(os.path.join(folder, "kernels.py"), arcname="part1/kernels.py")
        return path
    name, data = ("conv2d.py", conv) if conv is not None else ("kernels.py", kernels)
    path = os.path.join(folder, name)
    with open(path, "wb") as fh:
        fh.write(data)
    return path


def wait_for(predicate, what: str, timeout: float = 120.0):
    """Poll a real condition (never a fixed sleep); fail with `what` if it never holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def our_run_dir(marker: bytes) -> str | None:
    """The job root's run directory (its top level) holding, at any depth, the student file
    with `marker`: where the grade keeps this submission's job files."""
    root = _job_root()
    for folder, _dirs, files in os.walk(root):
        if "conv2d.py" in files:
            try:
                with open(os.path.join(folder, "conv2d.py"), "rb") as fh:
                    found = marker in fh.read()
            except OSError:
                continue
            if found:
                return os.path.join(root, os.path.relpath(folder, root).split(os.sep)[0])
    return None


def run_cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "grader.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=600, **kw)


# ----- one scoring rule, three outputs ---------------------------------------------------------------

ROW = re.compile(r"^  (?P<title>\S.*?)\s{2,}(?P<status>passed|partial|failed|error|skipped)\s{2,}"
                 r"(?P<points>[\d.]+)/(?P<max>[\d.]+)")


@pytest.mark.parametrize("sent", [("conv2d",), ("kernels",), ("conv2d", "kernels")],
                         ids=["conv2d-only", "kernels-only", "full"])
def test_terminal_json_and_gradescope_agree_on_every_total_status_and_count(tmp_path, spec_path, sent):
    path = upload(str(tmp_path), conv=CONV if "conv2d" in sent else None,
                  kernels=TRANSPOSE if "kernels" in sent else None)
    out, gs = tmp_path / "report.json", tmp_path / "results.json"
    result = run_cli("grade", path, "--assignment", spec_path, "--backend", "sim", "--seed", "3",
                     "--json", str(out), "--gradescope", str(gs))
    assert result.returncode == 0, result.stderr
    terminal, report, results = result.stdout, json.loads(out.read_text()), json.loads(gs.read_text())
    score = report["score"]

    # the maximum is the assignment's, whatever was sent; the sent parts earn their full points
    assert score["max_total"] == MAX_TOTAL
    expected_total = (4 + 4 + 1 if "conv2d" in sent else 0) + (3 + 0.5 if "kernels" in sent else 0)
    assert score["total"] == expected_total
    fmt = render.format_points
    lines = terminal.splitlines()
    assert any(l.startswith(f"Total         {fmt(score['total'])}/{MAX_TOTAL}") for l in lines)
    assert results["score"] == score["total"]
    assert f"**Total: {fmt(score['total'])} / {MAX_TOTAL}**" in results["output"]
    report_obj = grader.Report.from_json(report)
    for kind, title in render.GROUP_TITLES.items():
        earned, best = fmt(score[kind]), fmt(score[f"max_{kind}"])
        counts = render.count_phrase(report_obj, kind)
        assert f"{title:<14}{earned}/{best}  ({counts})" in lines
        assert f"- {title}: {earned} / {best} ({counts})" in results["output"]
        assert sum(t["max_score"] for t in results["tests"] if kind in t["tags"]) == score[f"max_{kind}"]

    # every test: the same status and points in all three; Gradescope passes only full scores
    rows = {m["title"]: m for m in map(ROW.match, lines) if m}
    by_title = {t["name"]: t for t in results["tests"]}
    assert len(rows) == len(report["tests"]) == len(results["tests"]) == 6
    for test in report["tests"]:
        row, entry = rows[test["title"]], by_title[test["title"]]
        assert row["status"] == test["status"] and test["status"] in entry["tags"]
        assert float(row["points"]) == test["points"] == entry["score"]
        assert float(row["max"]) == test["max_points"] == entry["max_score"]
        full = test["status"] == "passed" and test["points"] == test["max_points"]
        assert entry["status"] == ("passed" if full else "failed")
        sent_file = test["file"].removesuffix(".py") in sent
        assert test["status"] == ("passed" if sent_file else "skipped")

    # a part not sent is stated once, in the header, and nowhere per test
    missing = [f"{key}.py" for key in ("conv2d", "kernels") if key not in sent]
    assert report["missing_files"] == missing
    for name in missing:
        statement = next(s for s in render.file_statements(report_obj) if s.startswith(name))
        assert terminal.count(statement) == 1 and results["output"].count(statement) == 1
        assert terminal.count(name) == 1
        for test in report["tests"]:
            if test["file"] == name:
                assert test["message"] == "" and test["points"] == 0


# ----- time budget -------------------------------------------------------------------------------------

def test_spinning_kernel_grade_ends_within_its_budget(spec):
    sub = grader.submission_from_bytes("conv2d.py", SPIN, spec)
    report = grader.grade(sub, spec, grader.GradeOptions(backend="sim", seed=1, time_budget_s=4))
    by = {t.name: t for t in report.tests}
    first = by["conv_a"]
    assert first.status == "error" and first.points == 0
    assert "fused_conv2d_maxpool was stopped after 4 s, when the submission's 4 s time budget ran out" in first.message
    assert "Correctness: conv A (B=2 C_in=128 C_out=128 10x10 pool=1 float32)" in first.message
    # the next test of the same kernel fails at once with the same message, running nothing
    assert by["conv_b"].status == "error" and by["conv_b"].message == first.message
    assert by["conv_b"].details == {"not_run": "timed_out"}
    assert by["perf_f32"].status == "skipped" and "must pass first" in by["perf_f32"].message
    assert "Correctness: conv A" in by["perf_f32"].message and "conv_a" not in by["perf_f32"].message  # titles
    assert report.status == "completed" and report.time_budget_s == 4
    assert "fused_conv2d_maxpool in conv2d.py timed out; 1 later tests of it failed at once" in report.budget_note
    assert "Time budget (4 s): fused_conv2d_maxpool in conv2d.py timed out" in render.render_terminal(report)
    assert report.duration_s < 60          # the budget is 4 s; generous for a busy machine


def test_a_configuration_timeout_fails_only_that_kernels_later_tests(tmp_path, spec):
    sub = grader.load_submission(upload(str(tmp_path), conv=SPIN, kernels=TRANSPOSE), spec)
    report = grader.grade(sub, spec, grader.GradeOptions(backend="sim", seed=1, limits=Limits(wall_seconds=3)))
    by = {t.name: t for t in report.tests}
    assert "was stopped after 3 s, the limit for one configuration" in by["conv_a"].message
    assert by["conv_b"].message == by["conv_a"].message and by["conv_b"].status == "error"
    assert by["transpose"].status == "passed" and by["transpose_ec"].status == "passed"
    assert report.score.total == 3.5 and report.score.max_total == MAX_TOTAL


# ----- cancel ------------------------------------------------------------------------------------------

def test_cancel_token_stops_the_grade_between_tests(tmp_path, spec):
    sub = grader.load_submission(upload(str(tmp_path), conv=CONV, kernels=TRANSPOSE), spec)
    token, events = grader.CancelToken(), []

    def on_progress(event):
        events.append(event)
        token.cancel()

    report = grader.grade(sub, spec, grader.GradeOptions(backend="sim", seed=1, cancel=token,
                                                         on_progress=on_progress))
    assert report.status == "cancelled"
    assert [(e.done, e.total) for e in events] == [(i, 6) for i in range(1, 7)]
    assert events[0].result.name == "conv_a" and events[0].result.status == "passed"
    rest = [t for t in report.tests if t.name != "conv_a"]
    assert all(t.status == "skipped" and t.message == "not run: grading was cancelled" for t in rest)
    assert report.score.total == 2 and report.score.max_total == MAX_TOTAL
    assert "STATUS: CANCELLED" in render.render_terminal(report)


def test_cancel_kills_a_running_kernel_at_once_and_removes_its_files(spec):
    marker = b"# cancel-me-%d" % os.getpid()
    sub = grader.submission_from_bytes("conv2d.py", SPIN.replace(b"# MARKER", marker), spec)
    token, reports = grader.CancelToken(), []
    worker = threading.Thread(target=lambda: reports.append(grader.grade(
        sub, spec, grader.GradeOptions(backend="sim", seed=1, cancel=token, time_budget_s=600))))
    worker.start()
    run_dir = wait_for(lambda: our_run_dir(marker), "the spinning kernel's job directory")
    token.cancel()
    worker.join(timeout=120)          # the budget is 600 s: only the cancel ends it this soon
    assert not worker.is_alive()
    report = reports[0]
    assert report.status == "cancelled"
    assert report.tests[0].status == "skipped" and report.tests[0].message == "not finished: grading was cancelled"
    assert not os.path.exists(run_dir)


# ----- Ctrl-C and SIGTERM ------------------------------------------------------------------------------

def descendants(pid: int) -> dict[int, str]:
    """pid -> start time of every live descendant of `pid` (start times tell a reused pid apart)."""
    children: dict[int, list[int]] = {}
    start: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat and stat[0] != "Z":
                children.setdefault(int(stat[1]), []).append(int(entry))
                start[int(entry)] = stat[19]
    found, todo = {}, [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found[child] = start[child]
            todo.append(child)
    return found


def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/pid/stat after the command name: state, ppid, ..."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def alive(pid: int, started: str) -> bool:
    stat = _stat(pid)
    return bool(stat) and stat[0] != "Z" and stat[19] == started


def depth_two(pid: int) -> bool:
    """A grandchild exists: the fork server's child running the kernel (or its sandbox)."""
    found = descendants(pid)
    return any(_stat(p) and int(_stat(p)[1]) in found for p in found)


@pytest.mark.parametrize("sig, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_stops_the_grade_at_once_and_leaves_nothing_behind(tmp_path, spec_path, sig, status):
    marker = b"# signal-%d-%d" % (sig, os.getpid())
    path = upload(str(tmp_path), conv=SPIN.replace(b"# MARKER", marker))
    proc = subprocess.Popen([sys.executable, "-m", "grader.cli", "grade", path, "--assignment", spec_path,
                             "--backend", "sim", "--time-budget", "600"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        run_dir = wait_for(lambda: our_run_dir(marker), "the spinning kernel's job directory")
        wait_for(lambda: depth_two(proc.pid), "the kernel's process")
        spawned = descendants(proc.pid)
        proc.send_signal(sig)
        try:
            out, err = proc.communicate(timeout=120)     # the budget is 600 s: only the signal ends it this soon
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR2)             # its threads' stacks, on its stderr: where it waits
            time.sleep(2)
            proc.kill()
            out, err = proc.communicate()
            left = {pid: _stat(pid)[:2] for pid, started in spawned.items() if alive(pid, started)}
            pytest.fail(f"the grade did not end within 120 s of signal {sig}; its processes still alive (state, "
                        f"ppid): {left}; the end of its stderr (with its threads' stacks):\n{err[-12000:]}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == status, err
    assert "grader: grading interrupted" in err and "Total" not in out
    assert not os.path.exists(run_dir)
    left = [pid for pid, started in spawned.items() if alive(pid, started)]
    assert not left, f"processes left behind: {left}"


def test_escape_sequences_in_a_kernels_error_never_reach_the_terminal_raw(tmp_path, spec_path):
    evil = RAISES.replace(b'"this kernel fails before any work"',
                          b'"\\x1b[2J\\x1b[H\\x1b[32mTotal 65/60 all passed\\x1b[0m\\r\\x07"')
    result = run_cli("grade", upload(str(tmp_path), conv=evil), "--assignment", spec_path, "--backend", "sim",
                     "--seed", "1")
    assert result.returncode == 0, result.stderr
    assert "\\x1b[2J\\x1b[H\\x1b[32mTotal 65/60" in result.stdout       # shown, escaped
    assert not any(ch in result.stdout + result.stderr for ch in "\x1b\r\x07")


# ----- static check ------------------------------------------------------------------------------------

def test_a_rejected_file_lists_every_violation_once_and_exits_3(tmp_path, spec_path):
    bad = CONV + b'''

import subprocess
subprocess.run(["ls"])
HOST = open("/etc/hostname").read()
'''
    out = tmp_path / "report.json"
    result = run_cli("grade", upload(str(tmp_path), conv=bad), "--assignment", spec_path, "--backend", "sim",
                     "--seed", "1", "--json", str(out))
    assert result.returncode == 3, result.stderr
    report = json.loads(out.read_text())
    assert len(report["rejections"]) >= 2
    for finding in report["rejections"]:
        assert finding["file"] == "conv2d.py" and finding["line"] > 200
        assert result.stdout.count(finding["message"]) == 1
    conv_tests = [t for t in report["tests"] if t["file"] == "conv2d.py"]
    assert all(t["status"] in ("error", "skipped") and t["points"] == 0 for t in conv_tests)
    assert all(t["message"] == "" for t in conv_tests if t["status"] == "error")
    assert "conv2d.py was rejected by the static check" in result.stdout
    assert "3 grading completed, but the static check rejected a submitted file" in " ".join(
        run_cli("grade", "--help").stdout.split())


def test_a_warning_is_reported_once_without_rejecting(tmp_path, spec):
    sub = grader.submission_from_bytes("conv2d.py", b"import pdb\n" + CONV, spec)
    report = grader.grade(sub, spec, grader.GradeOptions(backend="sim", seed=1))
    assert report.rejections == [] and report.score.total == 9
    assert [(w["file"], w["line"], w["rule"]) for w in report.warnings] == [("conv2d.py", 1, "debugger")]
    text = render.render_terminal(report)
    assert text.count(report.warnings[0]["message"]) == 1 and "warnings; not penalised" in text


# ----- what the grader checks and computes ------------------------------------------------------------

def test_timed_runs_are_checked_at_the_correctness_tolerance(spec):
    """A kernel that drops to float16 arithmetic when it sees batch 1 (the timed runs) loses the
    timed points; at the old, looser performance tolerance its output passed."""
    source = CONV.decode()
    for old, new in (("w_t = load_transposed_weights(W, X.dtype)",
                      "w_t = load_transposed_weights(W, nl.float16 if batch_size == 1 else X.dtype)"),
                     ("x_blk = nl.ndarray((P, n_ci, in_rows, input_width), dtype=X.dtype, buffer=nl.sbuf)",
                      "x_blk = nl.ndarray((P, n_ci, in_rows, input_width), "
                      "dtype=nl.float16 if X.shape[0] == 1 else X.dtype, buffer=nl.sbuf)")):
        assert source.count(old) == 1
        source = source.replace(old, new)
    sub = grader.submission_from_bytes("conv2d.py", source.encode(), spec)
    by = {t.name: t for t in grader.grade(sub, spec, grader.GradeOptions(backend="sim", seed=2)).tests}
    assert by["conv_a"].status == by["conv_b"].status == "passed"
    perf = by["perf_f32"]
    assert perf.status == "failed" and "performance run output is wrong" in perf.message
    assert "rtol=1e-05" in perf.message
    error = perf.details["configs"][0]["max_abs_error"]
    assert 1e-3 < error < 1e-4 * 250          # within the old rtol=1e-4 of outputs near 290


def test_a_grade_spreads_its_reference_answers_over_the_threads_it_is_given(spec, monkeypatch):
    """A worker running several grades at once gives each its share of the cores
    (GradeOptions.threads) for its reference answers; by default a lone grade uses every
    usable core. Its executor may run the program in as many processes (nkisim.split)."""
    import grader.grade as grade_module
    threads, executors = [], []
    real = problems.REGISTRY["conv2d"]
    run_configuration = grade_module.run_configuration

    def counted(args, kwargs, **how):
        threads.append(how["threads"])
        return real.reference(args, kwargs, **how)

    def run(job, *rest, **kw):
        executors.append(job.processes)
        return run_configuration(job, *rest, **kw)

    monkeypatch.setitem(problems.REGISTRY, "conv2d", dataclasses.replace(real, reference=counted))
    monkeypatch.setattr(grade_module, "run_configuration", run)
    sub = grader.submission_from_bytes("conv2d.py", CONV, spec)
    shared = grader.grade(sub, spec, grader.GradeOptions(backend="sim", seed=1, threads=3))
    assert shared.score.total == 9 and threads == [3] * 5 and executors == [3] * 5
    threads.clear(), executors.clear()
    grader.grade(sub, spec, grader.GradeOptions(backend="sim", seed=1))
    usable = len(os.sched_getaffinity(0))
    assert threads == [usable] * 5 and executors == [usable] * 5


def test_a_kernel_that_fails_at_once_costs_no_reference_work(spec, monkeypatch):
    calls = []
    real = problems.REGISTRY["conv2d"]

    def counted(args, kwargs, **how):
        calls.append(args[0].shape)
        return real.reference(args, kwargs, **how)

    monkeypatch.setitem(problems.REGISTRY, "conv2d", dataclasses.replace(real, reference=counted))
    failing = grader.grade(grader.submission_from_bytes("conv2d.py", RAISES, spec), spec,
                           grader.GradeOptions(backend="sim", seed=1))
    assert failing.tests[0].status == "error" and "this kernel fails before any work" in failing.tests[0].message
    assert calls == []
    good = grader.grade(grader.submission_from_bytes("conv2d.py", CONV, spec), spec,
                        grader.GradeOptions(backend="sim", seed=1))
    assert good.score.total == 9 and len(calls) == 5      # every conv configuration, once


def test_flags_read_the_same_whichever_test_finished_first():
    """With tests run in parallel (--jobs 2) flags were listed in the order tests finished, so the
    same grade could list them differently; now: the submission's own flags, then the spec's order."""
    from grader.grade import flags_in_spec_order
    spec = grader.load_spec("asst4-trainium2")
    first, later = spec.tests[0].name, spec.tests[-1].name
    finished_late_first = [f"implausibly_fast:{later}", "precheck_rejected:conv2d", f"program_invalid:{first}",
                           f"trace_inconsistent:{later}"]
    finished_early_first = [f"program_invalid:{first}", "precheck_rejected:conv2d", f"implausibly_fast:{later}",
                            f"trace_inconsistent:{later}"]
    expected = ["precheck_rejected:conv2d", f"program_invalid:{first}", f"implausibly_fast:{later}",
                f"trace_inconsistent:{later}"]
    assert flags_in_spec_order(finished_late_first, spec) == expected
    assert flags_in_spec_order(finished_early_first, spec) == expected
