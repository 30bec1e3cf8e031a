"""`grader doctor` names the Trainium generation the Neuron runtime reports (nrt_get_instance_info's
instance family and size, through the libnrt double) and refuses, in one line, a spec whose
platform is another generation's: its thresholds were measured on other hardware."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "doubles"))

import sdk_envs  # noqa: E402
from fixtures import sdk  # noqa: E402,F401

from grader import spec as specs  # noqa: E402
from grader.neuron import NeuronSetup, WrongPlatform, check_platform  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CONFIG = '{ batch = 1, c_in = 128, c_out = 128, height = 10, width = 10, k = 3, bias = true, pool = 1, dtype = "float16" }'
TRN1_2XL = {"NRT_DOUBLE_FAMILY": "2", "NRT_DOUBLE_SIZE": "1"}        # nrt.h NRT_INSTANCE_TRN1, _SIZE_2XL
TRN3 = {"NRT_DOUBLE_FAMILY": "14"}                                    # NRT_INSTANCE_TRN3 (48xlarge)


def spec_toml(platform: str) -> str:
    """A legacy-dialect spec of one timed test on `platform`, thresholds far above any p99."""
    return f"""
assignment = "generation-check"
spec_version = "t1"
thresholds_version = "t1"
platform = "{platform}"
[files.conv2d]
archive_path = "part2/conv2d.py"
functions = {{ fused_conv2d_maxpool = ["X", "W", "bias", "pool_size"] }}
[tolerances]
float16 = {{ rtol = 1e-2, atol = 1e-1 }}
[[tests]]
name = "perf_small_float16"
kind = "performance"
file = "conv2d"
problem = "conv2d"
points = 4
thresholds_us = {{ optimized = 5000.0, relaxed = 10000.0 }}
warmup = 1
iters = 2
configs = [{CONFIG}]
"""


def doctor(python, env: dict, *args) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-m", "grader.cli", "doctor", *args], cwd=ROOT, capture_output=True,
                          text=True, env=sdk_envs.run_env(env), timeout=900)


def detected(sdk, env: dict) -> dict:
    probe = ("import json; from grader.neuron import detect; s = detect(); "
             "print(json.dumps([s.family, s.size, s.platform, s.generation()]))")
    done = subprocess.run([str(sdk.legacy), "-I", "-c", probe], capture_output=True, text=True,
                          env=sdk_envs.run_env(sdk.settings("legacy") | env), timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("env, seen", [
    ({}, ["Trn2", "48xlarge", "trn2", "Trainium2 (NeuronCore-v3), platform trn2 (trn2.48xlarge, from "
                                      "nrt_get_instance_info)"]),
    (TRN1_2XL, ["Trn1", "2xlarge", "trn1", "Trainium1 (NeuronCore-v2), platform trn1 (trn1.2xlarge, from "
                                           "nrt_get_instance_info)"]),
    ({"NRT_DOUBLE_FAMILY": "4", "NRT_DOUBLE_SIZE": "0"}, ["Inf2", "xlarge", "trn1",
                                                          "Trainium1 (NeuronCore-v2), platform trn1 (inf2.xlarge, "
                                                          "from nrt_get_instance_info)"]),
    (TRN3, ["Trn3", "48xlarge", "trn3", "Trainium3 (NeuronCore-v4), platform trn3 (a Trn3 instance of size "
                                        "48xlarge, from nrt_get_instance_info)"]),
    # a family nrt.h does not list: detect() needs the degree given, and the generation stays unknown
    ({"NRT_DOUBLE_FAMILY": "99", "NEURON_LOGICAL_NC_CONFIG": "1"},
     [None, "48xlarge", None, "unknown: the Neuron runtime does not report which instance this is"]),
])
def test_detect_reads_the_generation_from_the_runtimes_instance_info(sdk, env, seen):
    assert detected(sdk, env) == seen


def test_doctor_on_a_trn1_refuses_a_trn2_spec_in_one_line(sdk, tmp_path):
    (tmp_path / "spec.toml").write_text(spec_toml("trn2"))
    done = doctor(sdk.legacy, sdk.settings("legacy") | TRN1_2XL, "--assignment", str(tmp_path / "spec.toml"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert ("generation: Trainium1 (NeuronCore-v2), platform trn1 (trn1.2xlarge, from nrt_get_instance_info)"
            in done.stdout)
    assert "p99 us" not in done.stdout              # no reference was graded
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("grader doctor: this machine is Trainium1 (NeuronCore-v2), platform trn1 (trn1.2xlarge, "
                           "from nrt_get_instance_info), and spec 'generation-check' is for platform trn2"), line
    assert "grade a spec whose platform is trn1" in line and "--backend sim" in line


@pytest.mark.parametrize("assignment, platform", [("asst4-trainium2", "trn2"), ("asst4-trainium", "trn1")])
def test_doctor_on_a_trn3_refuses_the_bundled_specs_of_other_generations(sdk, assignment, platform):
    assert specs.load(assignment).platform == platform
    done = doctor(sdk.legacy, sdk.settings("legacy") | TRN3, "--assignment", assignment)
    assert done.returncode == 2 and "p99 us" not in done.stdout, done.stdout + done.stderr
    assert "generation: Trainium3 (NeuronCore-v4), platform trn3" in done.stdout
    [line] = done.stderr.strip().splitlines()
    assert f"spec {assignment!r} is for platform {platform}" in line, line


def test_doctor_on_a_trn1_grades_a_trn1_spec(sdk, tmp_path):
    (tmp_path / "spec.toml").write_text(spec_toml("trn1"))
    done = doctor(sdk.legacy, sdk.settings("legacy") | TRN1_2XL, "--assignment", str(tmp_path / "spec.toml"),
                  "--json", str(tmp_path / "doctor.json"))
    # past every refusal to the table: the loose thresholds make every row far off the spec's reference
    assert done.returncode == 1, done.stdout + done.stderr
    assert "generation: Trainium1 (NeuronCore-v2), platform trn1 (trn1.2xlarge" in done.stdout
    assert done.stderr == "", done.stderr
    written = json.loads((tmp_path / "doctor.json").read_text())
    assert (written["platform"], written["family"], written["size"]) == ("trn1", "Trn1", "2xlarge")
    rows = written["rows"]
    assert [(r["test"], r["tier"]) for r in rows] == [("perf_small_float16", "optimized"),
                                                     ("perf_small_float16", "relaxed")]
    assert all(r["p99_us"] is not None and r["p99_us"] > 0 for r in rows), rows
    assert {r["verdict"] for r in rows} == {">10% off the spec's reference"}


def test_a_runtime_that_does_not_say_its_generation_cannot_be_checked(sdk, tmp_path):
    (tmp_path / "spec.toml").write_text(spec_toml("trn2"))
    done = doctor(sdk.legacy, sdk.settings("legacy") | {"NRT_DOUBLE_FAMILY": "99", "NEURON_LOGICAL_NC_CONFIG": "1"},
                  "--assignment", str(tmp_path / "spec.toml"))
    assert done.returncode == 2 and "p99 us" not in done.stdout, done.stdout + done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "so it cannot be checked against spec 'generation-check' (platform trn2)" in line, line
    assert "nrt_get_instance_info" in line


def test_check_platform_passes_the_machines_own_generation_only():
    spec = specs.load("asst4-trainium")
    trn1 = NeuronSetup("legacy", "neuronx-cc 2.21", 2, "/opt/aws/neuron/lib/libnrt.so.1", "/opt/aws/neuron/bin",
                       None, lnc=1, family="Trn1", size="2xlarge", platform="trn1")
    check_platform(trn1, spec)                   # returns: the spec is this machine's generation's
    with pytest.raises(WrongPlatform, match="spec 'asst4-trainium2' is for platform trn2"):
        check_platform(trn1, specs.load("asst4-trainium2"))
