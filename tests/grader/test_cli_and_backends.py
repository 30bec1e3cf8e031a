"""The grader CLI as a user runs it, on the simulator and on a Trn2 worker's neuron backend
(through the Neuron SDK's contract doubles, tests/doubles)."""
import glob
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "doubles"))

import sdk_envs  # noqa: E402
from fixtures import sdk  # noqa: E402,F401


def source(path):
    with open(os.path.join(ROOT, path), "rb") as fh:
        return fh.read()


SMALL_SPEC_TOML = """
assignment = "small-conv"
spec_version = "t1"
thresholds_version = "t1"
partial_credit = 0.95
[files.conv2d]
archive_path = "part2/conv2d.py"
functions = { fused_conv2d_maxpool = ["X", "W", "bias", "pool_size"] }
[tolerances]
float32 = { rtol = 1e-5, atol = 1e-8 }
float16 = { rtol = 1e-2, atol = 1e-1 }
[[tests]]
name = "small"
kind = "correctness"
file = "conv2d"
problem = "conv2d"
points = 2
configs = [{ batch = 1, c_in = 128, c_out = 128, height = 10, width = 10, k = 3, bias = true, pool = 2, dtype = "float32" }]
[[tests]]
name = "perf"
kind = "performance"
file = "conv2d"
problem = "conv2d"
points = 4
gated_by = ["small"]
thresholds_us = { optimized = 1000, relaxed = 2000 }
warmup = 2
iters = 3
configs = [{ batch = 1, c_in = 128, c_out = 128, height = 10, width = 10, k = 3, bias = true, pool = 1, dtype = "float16" }]
"""


def test_cli_grades_on_the_neuron_backend_of_a_trn2_worker(sdk, tmp_path):
    """`grader grade --backend neuron` as a TA runs it on a Trn2 of the course's SDK line
    (through the SDK's contract doubles: tests/doubles)."""
    (tmp_path / "spec.toml").write_text(SMALL_SPEC_TOML)
    (tmp_path / "conv2d.py").write_bytes(source("reference_kernels/conv2d_optimized.py"))
    done = subprocess.run([str(sdk.legacy), "-m", "grader.cli", "grade", str(tmp_path / "conv2d.py"),
                           "--assignment", str(tmp_path / "spec.toml"), "--backend", "neuron", "--seed", "5",
                           "--json", str(tmp_path / "report.json")], capture_output=True, text=True, cwd=ROOT,
                          env=sdk_envs.run_env(sdk.settings("legacy")), timeout=600)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["backend"] == "neuron" and report["score"]["total"] == 6
    assert report["tests"][1]["p99_us"] > 0


def run_cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "grader.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


@pytest.mark.parametrize("content, name, reason", [
    (b"def f(:\n", "conv2d.py", "line 1"),
    (b"\xff\xfe bad", "conv2d.py", "UTF-8"),
    (b"import numpy as np\n", "conv2d.py", "fused_conv2d_maxpool"),
    (b"x = 1\n", "notes.txt", "not a file type"),
])
def test_cli_bad_input_exits_2_with_the_reason(tmp_path, content, name, reason):
    path = tmp_path / name
    path.write_bytes(content)
    result = run_cli("grade", str(path))
    assert result.returncode == 2
    assert reason in result.stderr and result.stdout == ""


def test_cli_kernels_py_alone_grades_part_1_under_the_assignments_maximum(tmp_path):
    """As the README says: `grader grade kernels.py` works on its own."""
    path = tmp_path / "kernels.py"
    path.write_bytes(source("student_template/kernels.py"))
    out = tmp_path / "report.json"
    result = run_cli("grade", str(path), "--backend", "sim", "--seed", "1", "--json", str(out))
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    assert report["missing_files"] == ["conv2d.py"] and report["score"]["max_total"] == 70
    assert {t["status"] for t in report["tests"] if t["file"] == "conv2d.py"} == {"skipped"}
    assert "conv2d.py was not submitted: its 12 tests score 0 (60 points of the assignment's 70)" in result.stdout
    assert "Total         0/70" in result.stdout


@pytest.mark.parametrize("args, reason", [
    (("--time-budget", "0"), "--time-budget must be positive"),
    (("--jobs", "0"), "--jobs must be at least 1"),
])
def test_cli_bad_options_exit_2(tmp_path, args, reason):
    path = tmp_path / "conv2d.py"
    path.write_bytes(source("student_template/conv2d.py"))
    result = run_cli("grade", str(path), *args)
    assert result.returncode == 2 and reason in result.stderr and result.stdout == ""


def test_cli_help_documents_inputs_assignment_paths_and_exit_statuses():
    text = " ".join(run_cli("grade", "--help").stdout.split())      # argparse rewraps lines
    for needle in ("kernels.py", "path of a spec .toml file", "must bump spec_version", "--time-budget",
                   "130 interrupted by Ctrl-C (SIGINT), 143 by SIGTERM", "2 bad input", "3 grading completed"):
        assert needle in text, needle


def test_cli_unknown_assignment_exits_2(tmp_path):
    path = tmp_path / "conv2d.py"
    path.write_bytes(source("student_template/conv2d.py"))
    result = run_cli("grade", str(path), "--assignment", "asst9")
    assert result.returncode == 2 and "asst4-trainium2" in result.stderr


@pytest.mark.skipif(bool(glob.glob("/dev/neuron*")), reason="this machine has Neuron devices")
def test_cli_neuron_backend_without_a_neuron_device_exits_2(tmp_path):
    path = tmp_path / "conv2d.py"
    path.write_bytes(source("student_template/conv2d.py"))
    result = run_cli("grade", str(path), "--backend", "neuron")
    assert result.returncode == 2 and result.stdout == ""
    assert "no Neuron device" in result.stderr and "--backend sim" in result.stderr


def test_cli_report_into_a_missing_folder_exits_2_before_grading(tmp_path):
    path = tmp_path / "conv2d.py"
    path.write_bytes(source("student_template/conv2d.py"))
    result = run_cli("grade", str(path), "--json", str(tmp_path / "no" / "report.json"))
    assert result.returncode == 2 and "does not exist" in result.stderr and "[1/" not in result.stderr


def test_cli_grades_the_template_and_writes_reports(tmp_path):
    path = tmp_path / "conv2d.py"
    path.write_bytes(source("student_template/conv2d.py"))
    out, gs = tmp_path / "report.json", tmp_path / "results.json"
    result = run_cli("grade", str(path), "--assignment", "asst4-trainium", "--backend", "sim", "--seed", "1",
                     "--json", str(out), "--gradescope", str(gs))
    assert result.returncode == 0, result.stderr
    assert "Total" in result.stdout and "[1/6]" in result.stderr
    report = json.loads(out.read_text())
    assert report["assignment"] == "asst4-trainium" and report["score"]["total"] == 0
    # timed by the Trainium1 model, which the Trn1 profiles calibrate: no platform flag
    assert report["platform"] == "trn1" and not any(f.startswith(("simulated_platform", "uncalibrated_model"))
                                                    for f in report["flags"])
    statuses = {t["name"]: t["status"] for t in report["tests"]}
    assert statuses["conv_small"] == "error"
    # Fall 2024 performance tests are not gated on correctness: they run, and fail
    assert statuses["perf_224_float32"] in ("error", "failed")
    results = json.loads(gs.read_text())
    assert results["score"] == 0 and len(results["tests"]) == 6


def test_grade_shows_each_configuration_of_a_long_test_on_stderr(tmp_path):
    """A test of several configurations takes minutes: each one says so as it finishes, on stderr,
    so the terminal report on stdout (and a --json file) stay as they were."""
    import grader
    from grader.references import archive
    with open(os.path.join(ROOT, "tests", "workers", "specs", "tiny.toml")) as f:
        spec_text = f.read().replace(
        'configs = [{ batch = 1, c_in = 128, c_out = 128, height = 8, width = 8, k = 3, bias = false, pool = 1, '
        'dtype = "float32" }]',
        'configs = [{ batch = 1, c_in = 128, c_out = 128, height = 8, width = 8, k = 3, bias = false, pool = 1, '
        'dtype = "float32" }, { batch = 1, c_in = 128, c_out = 128, height = 8, width = 8, k = 3, bias = false, '
        'pool = 2, dtype = "float32" }]', 1)
    spec_path = tmp_path / "two-configs.toml"
    spec_path.write_text(spec_text)
    upload = tmp_path / "asst4.tar.gz"
    upload.write_bytes(archive(grader.load_spec(str(spec_path)), "conv2d_optimized"))
    result = run_cli("grade", str(upload), "--assignment", str(spec_path), "--backend", "sim", "--seed", "1",
                     "--json", str(tmp_path / "report.json"))
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    first = lines.index(next(line for line in lines if "configuration 1/2" in line))
    assert "Correctness: one small image: configuration 1/2 (" in lines[first] and "passed" in lines[first]
    assert "configuration 2/2" in lines[first + 1] and lines[first + 2].startswith("[1/2] Correctness")
    assert not any("configuration" in line for line in lines if "Performance" in line)    # one config: no extra line
    assert "configuration" not in result.stdout


def test_cli_grades_an_nki06_kernel_under_an_nki06_spec_and_rejects_a_legacy_one(tmp_path):
    """`grader grade` under a spec in NKI 0.6: the NKI 0.6 reference passes and the report says
    which NKI checked it; the legacy reference is rejected by the static check with the one
    dialect error (exit 3), as a student who picked the wrong starter files would see it."""
    spec = tmp_path / "small-nki06.toml"
    spec.write_text('dialect = "nki-0.6"\n' + SMALL_SPEC_TOML)
    ours, legacy = tmp_path / "ours" / "conv2d.py", tmp_path / "legacy" / "conv2d.py"
    for path, kernel in ((ours, "reference_kernels/nki06/conv2d_optimized.py"),
                         (legacy, "reference_kernels/conv2d_optimized.py")):
        path.parent.mkdir()
        path.write_bytes(source(kernel))
    out = tmp_path / "report.json"
    done = run_cli("grade", str(ours), "--assignment", str(spec), "--backend", "sim", "--seed", "1", "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert "dialect NKI 0.6 (nki) on Neuron SDK 2.32" in done.stdout.splitlines()
    report = json.loads(out.read_text())
    assert report["dialect"] == "nki-0.6" and [t["status"] for t in report["tests"]] == ["passed", "passed"]
    done = run_cli("grade", str(legacy), "--assignment", str(spec), "--backend", "sim", "--seed", "1")
    assert done.returncode == 3, done.stderr
    assert "conv2d.py was rejected by the static check (1 violation)" in done.stdout
    assert "[dialect]: this assignment is written in NKI 0.6 (nki) on Neuron SDK 2.32 (import nki); this file " \
           "imports neuronxcc.nki, the legacy dialect" in done.stdout
