"""`grader doctor` for the TA who sets up a Trn2 worker: run plainly here (no device) it says so
in one line and exits non-zero; on a Trn2 of either SDK line (the contract doubles) it prints
the reference kernels' p99 beside the spec's reference latencies and thresholds, and exits 0
only when all is well."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "doubles"))

import sdk_envs  # noqa: E402
from fixtures import sdk  # noqa: E402,F401

from grader import spec as specs  # noqa: E402
from grader.grade import GradeOptions, grade  # noqa: E402
from grader.submission import submission_from_bytes  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CONFIG = '{ batch = 1, c_in = 128, c_out = 128, height = 10, width = 10, k = 3, bias = true, pool = 1, dtype = "float16" }'
NKI06 = "nki-0.6"
PROFILE_OVER_BENCH_US = 5.0     # neuron-profile total_time vs the simulator's nki.benchmark latency


def spec_toml(optimized_us: float, relaxed_us: float, dialect: str | None = None) -> str:
    """A small spec; `dialect` "nki-0.6" for the current line (absent: legacy neuronxcc.nki)."""
    return (f'dialect = "{dialect}"\n' if dialect else "") + f"""
assignment = "doctor-check"
spec_version = "t1"
thresholds_version = "t1"
[files.conv2d]
archive_path = "part2/conv2d.py"
functions = {{ fused_conv2d_maxpool = ["X", "W", "bias", "pool_size"] }}
[tolerances]
float32 = {{ rtol = 1e-5, atol = 1e-8 }}
float16 = {{ rtol = 1e-2, atol = 1e-1 }}
[[tests]]
name = "small"
kind = "correctness"
file = "conv2d"
problem = "conv2d"
points = 1
configs = [{CONFIG}]
[[tests]]
name = "perf_small_float16"
kind = "performance"
file = "conv2d"
problem = "conv2d"
points = 4
gated_by = ["small"]
thresholds_us = {{ optimized = {optimized_us:.1f}, relaxed = {relaxed_us:.1f} }}
warmup = 1
iters = 3
configs = [{CONFIG}]
"""


def sim_p99(reference: str, dialect: str = "neuronxcc-nki", lnc: int = 1) -> float:
    """The reference's p99 on the simulator, whose cost model the doubles' device shares: in
    reference_kernels/, or reference_kernels/nki06/ for dialect "nki-0.6"; launched on `lnc`
    physical cores (a default Trn2 compiles NKI 0.6 kernels at LNC=2)."""
    spec = specs.parse({"assignment": "x", "spec_version": "1", "thresholds_version": "1", "dialect": dialect,
                        "lnc": lnc,
                        "files": {"conv2d": {"archive_path": "part2/conv2d.py",
                                             "functions": {"fused_conv2d_maxpool": ["X", "W", "bias", "pool_size"]}}},
                        "tolerances": {"float16": {"rtol": 1e-2, "atol": 1e-1}},
                        "tests": [{"name": "t", "kind": "performance", "file": "conv2d", "problem": "conv2d",
                                   "points": 1, "thresholds_us": {"optimized": 1e6, "relaxed": 1e6},
                                   "configs": [{"batch": 1, "c_in": 128, "c_out": 128, "height": 10, "width": 10,
                                                "k": 3, "bias": True, "pool": 1, "dtype": "float16"}]}]})
    source = (ROOT / "reference_kernels" / ("nki06" if dialect == "nki-0.6" else ".") / reference).read_bytes()
    return grade(submission_from_bytes("conv2d.py", source, spec), spec, GradeOptions(backend="sim", seed=0)).tests[0].p99_us


def doctor(python, env: dict, *args) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-m", "grader.cli", "doctor", *args], cwd=ROOT, capture_output=True,
                          text=True, env=sdk_envs.run_env(env), timeout=900)


@pytest.mark.skipif(bool(glob.glob("/dev/neuron*")), reason="this machine has Neuron devices")
def test_doctor_without_a_device_says_so_in_one_line_and_fails():
    done = doctor(sys.executable, {})
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("grader doctor: no Neuron device: /dev/neuron* is absent")


def test_doctor_on_a_legacy_trn2_whose_numbers_match_the_spec_says_all_is_well(sdk, tmp_path):
    # thresholds set as the course sets them: 120% of each reference's p99 on this "machine"
    optimized = sim_p99("conv2d_optimized.py") + PROFILE_OVER_BENCH_US
    relaxed = sim_p99("conv2d_relaxed.py") + PROFILE_OVER_BENCH_US
    (tmp_path / "spec.toml").write_text(spec_toml(1.2 * optimized, 1.2 * relaxed))
    done = doctor(sdk.legacy, sdk.settings("legacy", cores=8), "--assignment", str(tmp_path / "spec.toml"),
                  "--core", "5", "--json", str(tmp_path / "doctor.json"))
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "NeuronCores: 8" in done.stdout and "SDK line: legacy (neuronx-cc 2.21.33363.0)" in done.stdout
    assert "all well" in done.stdout
    rows = json.loads((tmp_path / "doctor.json").read_text())["rows"]
    assert [(r["test"], r["tier"], r["verdict"]) for r in rows] == [
        ("perf_small_float16", "optimized", "ok"), ("perf_small_float16", "relaxed", "ok")]
    assert rows[0]["p99_us"] == pytest.approx(optimized, rel=0.01)
    assert rows[1]["p99_us"] == pytest.approx(relaxed, rel=0.01)


def test_doctor_on_a_current_trn2_grades_the_nki06_references_and_says_all_is_well(sdk, tmp_path):
    """Under an NKI 0.6 spec the references graded are reference_kernels/nki06/'s, as they are:
    the legacy ones, renamed, would not even load on the nki 0.6 wheel."""
    p99 = np.percentile([1.0, 1.01, 1.02, 1.03, 1.04], 99)    # the nrtpy double's device durations, per base
    optimized = sim_p99("conv2d_optimized.py", NKI06, lnc=2) * p99      # a default Trn2: LNC=2
    relaxed = sim_p99("conv2d_relaxed.py", NKI06, lnc=2) * p99
    (tmp_path / "spec.toml").write_text(spec_toml(1.2 * optimized, 1.2 * relaxed, NKI06))
    done = doctor(sdk.current, sdk.settings("current"), "--assignment", str(tmp_path / "spec.toml"),
                  "--json", str(tmp_path / "doctor.json"))
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SDK line: current (nki 0.6.0), NEFFs run by" in done.stdout and "all well" in done.stdout
    assert "logical NeuronCores: LNC=2 (Trn2's default); kernels are compiled as kernel[2]" in done.stdout
    table = [line.split() for line in done.stdout.splitlines() if line.startswith("perf_small_float16")]
    assert [(row[1], row[-1]) for row in table] == [("optimized", "ok"), ("relaxed", "ok")]
    rows = json.loads((tmp_path / "doctor.json").read_text())["rows"]
    assert [(r["test"], r["tier"], r["verdict"]) for r in rows] == [
        ("perf_small_float16", "optimized", "ok"), ("perf_small_float16", "relaxed", "ok")]
    assert rows[0]["p99_us"] == pytest.approx(optimized, rel=1e-3)
    assert rows[1]["p99_us"] == pytest.approx(relaxed, rel=1e-3)


def test_doctor_on_a_current_trn2_far_from_the_spec_says_rederive_and_fails(sdk, tmp_path):
    # thresholds measured on some other machine, twice as slow as this one
    (tmp_path / "spec.toml").write_text(spec_toml(2.4 * sim_p99("conv2d_optimized.py", NKI06),
                                                  2.4 * sim_p99("conv2d_relaxed.py", NKI06), NKI06))
    done = doctor(sdk.current, sdk.settings("current"), "--assignment", str(tmp_path / "spec.toml"))
    print(done.stdout)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "SDK line: current (nki 0.6.0), NEFFs run by" in done.stdout
    assert 'timing: nrtpy benchmark(mode="device").durations_ms, each call\'s device events combined' \
        in done.stdout
    rows = [line for line in done.stdout.splitlines() if line.startswith("perf_small_float16")]
    assert len(rows) == 2 and all(">10% off the spec's reference" in r for r in rows)
    assert "re-derive them" in done.stdout


@pytest.mark.parametrize("spec", ["asst4-trainium2", "legacy-toml"])
def test_doctor_on_a_current_trn2_refuses_a_legacy_spec_in_one_line(sdk, tmp_path, spec):
    (tmp_path / "spec.toml").write_text(spec_toml(100.0, 200.0))
    name = "doctor-check" if spec == "legacy-toml" else spec
    done = doctor(sdk.current, sdk.settings("current"), "--assignment",
                  str(tmp_path / "spec.toml") if spec == "legacy-toml" else spec)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "p99 us" not in done.stdout              # no table: no reference was graded
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"grader doctor: the current Neuron SDK line (nki 0.6.0) compiles NKI 0.6 kernels "
                           f"(import nki) only, and spec {name!r} is written in legacy NKI"), line
    assert "grade with the asst4-trainium2-nki06 spec" in line


@pytest.mark.parametrize("env, words", [
    ({"NEURON_LOGICAL_NC_CONFIG": "3"}, "logical NeuronCores: NEURON_LOGICAL_NC_CONFIG=3 is no degree the Neuron "
                                        "runtime supports (1 or 2 physical NeuronCores per logical one)"),
    ({"NEURON_LOGICAL_NC_CONFIG": "2", "NRT_DOUBLE_FAMILY": "2"},
     "logical NeuronCores: NEURON_LOGICAL_NC_CONFIG=2 on a Trn1 instance, where the runtime supports LNC=1 only"),
    ({"NEURON_RT_VISIBLE_CORES": "0-1", "NRT_DOUBLE_CORES": "1"},
     "NEURON_RT_VISIBLE_CORES=0-1 names 2 NeuronCores and the Neuron runtime sees 1"),
])
def test_doctor_refuses_a_logical_core_setting_the_runtime_does_not_have_in_one_line(sdk, env, words):
    done = doctor(sdk.current, sdk.settings("current") | env)
    assert done.returncode == 2 and "p99 us" not in done.stdout, done.stdout + done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("grader doctor: " + words), line


def test_doctor_on_a_trn1_prints_its_default_lnc_1(sdk, tmp_path):
    (tmp_path / "spec.toml").write_text(spec_toml(1e5, 2e5, NKI06))
    done = doctor(sdk.current, sdk.settings("current") | {"NRT_DOUBLE_FAMILY": "2"}, "--assignment",
                  str(tmp_path / "spec.toml"))
    assert "logical NeuronCores: LNC=1 (Trn1's default); kernels are compiled as kernel[1]" in done.stdout, \
        done.stdout + done.stderr


def test_doctor_refuses_a_core_this_process_does_not_see(sdk):
    done = doctor(sdk.current, sdk.settings("current") | {"NEURON_RT_VISIBLE_CORES": "0-1"}, "--core", "5")
    assert done.returncode == 2 and done.stdout == "", done.stdout
    [line] = done.stderr.strip().splitlines()
    assert line == ("grader doctor: --core 5 is not a NeuronCore this process sees (it sees 0, 1); pick one of them, "
                    "or widen NEURON_RT_VISIBLE_CORES"), line
