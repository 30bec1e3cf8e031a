"""A Trn2 worker detects its SDK line at start, and refuses to start with one line naming what is
missing: the device, the SDK, the tools or the nrtpy interpreter. Each case runs `grader worker
--queue trn2` the way a deployment starts it, in the Python environment of that case."""
from __future__ import annotations

import glob
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "doubles"))

import sdk_envs  # noqa: E402
from fixtures import sdk  # noqa: E402,F401

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


def start_worker(python, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-m", "workers.cli", "worker", "--queue", "trn2"], cwd=ROOT,
                          capture_output=True, text=True, env=sdk_envs.run_env(env), timeout=120)


def refusal(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.skipif(bool(glob.glob("/dev/neuron*")), reason="this machine has Neuron devices")
def test_a_machine_without_a_neuron_device_is_refused_naming_the_device():
    line = refusal(start_worker(sys.executable, {}))
    assert line.startswith("grader: this machine cannot run a trn2 worker: no Neuron device")
    assert "/dev/neuron" in line


def test_a_runtime_that_sees_no_neuroncore_is_refused(sdk):
    line = refusal(start_worker(sdk.legacy, sdk.settings("legacy", cores=0)))
    assert "no Neuron device: the Neuron runtime sees no NeuronCore" in line


def test_a_python_without_the_sdk_is_refused_naming_the_sdk(sdk):
    line = refusal(start_worker(sys.executable, sdk.settings("legacy")))
    assert "Neuron SDK missing" in line and "neuronxcc.nki" in line and "nki 0.2+" in line


def test_the_legacy_line_without_neuron_profile_is_refused_naming_the_tools(sdk, tmp_path):
    line = refusal(start_worker(sdk.legacy, dict(sdk.settings("legacy"), GRADER_NEURON_TOOLS=str(tmp_path))))
    assert "tools missing" in line and "neuron-profile" in line and "aws-neuronx-tools" in line


def test_the_current_line_without_an_nrtpy_interpreter_is_refused_naming_it(sdk):
    settings = sdk.settings("current")
    del settings["GRADER_NRTPY_PYTHON"]
    line = refusal(start_worker(sdk.current, settings))
    assert "interpreter missing" in line and "GRADER_NRTPY_PYTHON" in line


def test_an_nrtpy_interpreter_that_cannot_import_nrtpy_is_refused(sdk):
    # the NKI environment itself is no nrtpy environment: the two wheels cannot share one
    line = refusal(start_worker(sdk.current, dict(sdk.settings("current"), GRADER_NRTPY_PYTHON=str(sdk.current))))
    assert "cannot import nrtpy" in line


@pytest.mark.parametrize("line", ["legacy", "current"])
def test_each_line_is_detected_with_its_cores(sdk, line):
    probe = ("from grader.neuron import detect; s = detect(); "
             "print(s.line, s.cores, s.lnc, s.sdk, s.nrtpy_python is not None)")
    done = subprocess.run([str(sdk.python(line)), "-I", "-c", probe], capture_output=True, text=True,
                          env=sdk_envs.run_env(sdk.settings(line, cores=4)), timeout=120)
    assert done.returncode == 0, done.stderr
    name, cores, lnc, *sdk_name, has_nrtpy = done.stdout.split()
    assert (name, cores, lnc, has_nrtpy) == (line, "4", "2", str(line == "current"))
    assert " ".join(sdk_name) == ("nki 0.6.0" if line == "current" else "neuronx-cc 2.21.33363.0")


def detected(sdk, **env) -> subprocess.CompletedProcess:
    probe = "from grader.neuron import detect; s = detect(); print(s.cores, list(s.visible), s.lnc, s.lnc_source)"
    return subprocess.run([str(sdk.current), "-I", "-c", probe], capture_output=True, text=True,
                          env=sdk_envs.run_env(sdk.settings("current") | env), timeout=120)


@pytest.mark.parametrize("env, seen", [
    # the runtime's degree: NEURON_LOGICAL_NC_CONFIG, else the platform's ("LNC=2 (default)" on Trn2; LNC applies
    # to Trn2 and Trn3 only: logical-neuroncore-config); nrt.h's instance family says which platform
    ({}, "8 [0, 1, 2, 3, 4, 5, 6, 7] 2 Trn2's default"),
    ({"NEURON_LOGICAL_NC_CONFIG": "1"}, "8 [0, 1, 2, 3, 4, 5, 6, 7] 1 NEURON_LOGICAL_NC_CONFIG=1"),
    ({"NRT_DOUBLE_FAMILY": "2"}, "8 [0, 1, 2, 3, 4, 5, 6, 7] 1 Trn1's default"),
    # the cores the runtime lets this process use (nrt_get_visible_vnc_count), numbered as the instance numbers them
    ({"NEURON_RT_VISIBLE_CORES": "0-1"}, "2 [0, 1] 2 Trn2's default"),
    ({"NEURON_RT_VISIBLE_CORES": "4,6-7"}, "3 [4, 6, 7] 2 Trn2's default"),
])
def test_the_runtimes_lnc_and_visible_cores_are_detected(sdk, env, seen):
    done = detected(sdk, **env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == seen


@pytest.mark.parametrize("env, words", [
    ({"NEURON_LOGICAL_NC_CONFIG": "4"}, "NEURON_LOGICAL_NC_CONFIG=4 is no degree the Neuron runtime supports"),
    ({"NEURON_LOGICAL_NC_CONFIG": "2", "NRT_DOUBLE_FAMILY": "2"}, "NEURON_LOGICAL_NC_CONFIG=2 on a Trn1 instance"),
    ({"NRT_DOUBLE_FAMILY": "99"}, "does not say which instance family this is"),
    ({"NEURON_RT_VISIBLE_CORES": "0-"}, "NEURON_RT_VISIBLE_CORES=0- is not a NeuronCore list"),
    # the trn2 queue's thresholds are Trainium2's: a worker of another generation is refused at start
    ({"NRT_DOUBLE_FAMILY": "2", "NEURON_LOGICAL_NC_CONFIG": "1"}, "it is Trainium1 (NeuronCore-v2)"),
    ({"NRT_DOUBLE_FAMILY": "14"}, "it is Trainium3 (NeuronCore-v4)"),
])
def test_a_runtime_setting_the_platform_does_not_support_stops_the_worker_in_one_line(sdk, env, words):
    line = refusal(start_worker(sdk.current, sdk.settings("current") | env))
    assert line.startswith("grader: this machine cannot run a trn2 worker: ") and words in line, line


def test_a_worker_limited_to_two_visible_cores_runs_two_grades_at_once(sdk, celery_worker):
    """NEURON_RT_VISIBLE_CORES=0-1 on an instance of eight: the worker's pool is two processes,
    one per core it may use (the fixture asks for one; a trn2 worker takes one per core)."""
    import psutil
    from service_waits import wait_for
    worker = celery_worker("trn2", python=sdk.current, NEURON_RT_VISIBLE_CORES="0-1", **sdk.settings("current"))
    assert "NeuronCores 0,1: one grade per core" in worker.output(), worker.output()[-4000:]
    pool = lambda: [p for p in psutil.Process(worker.pid).children() if p.status() != psutil.STATUS_ZOMBIE]
    wait_for(lambda: len(pool()) >= 2, 120, "the worker's pool processes")
    assert len(pool()) == 2, [p.cmdline() for p in pool()]


def test_a_worker_refuses_cores_it_cannot_see(sdk):
    line = refusal(subprocess.run([str(sdk.current), "-m", "workers.cli", "worker", "--queue", "trn2", "--cores",
                                   "2"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                                  env=sdk_envs.run_env(sdk.settings("current") | {"NEURON_RT_VISIBLE_CORES": "0-1"})))
    assert line == ("grader: --cores '2': this instance has NeuronCores 0-1 visible to this worker "
                    "(NEURON_RT_VISIBLE_CORES)"), line


def setup_of(line: str):
    from grader.neuron import NeuronSetup
    return NeuronSetup(line, "nki 0.6.0" if line == "current" else "neuronx-cc 2.21.33363.0", 8,
                       "/opt/aws/neuron/lib/libnrt.so.1", "/opt/aws/neuron/bin",
                       "/opt/nrtpy/bin/python" if line == "current" else None)


@pytest.mark.parametrize("line", ["legacy", "current"])
def test_each_line_grades_the_bundled_spec_of_its_dialect(line):
    """The spec a refusal names (and `grader doctor` grades by default) is one the line compiles."""
    from grader import spec as specs
    from grader.neuron import check_dialect
    from grader.neuron.lines import DIALECT_OF_LINE, SPEC_OF_LINE
    spec = specs.load(SPEC_OF_LINE[line])
    assert spec.dialect == DIALECT_OF_LINE[line].name
    check_dialect(setup_of(line), spec)          # no error


@pytest.mark.parametrize("line, spec, words", [
    ("current", "asst4-trainium2", ["the current Neuron SDK line (nki 0.6.0) compiles NKI 0.6 kernels (import nki) "
                                    "only, and spec 'asst4-trainium2' is written in legacy NKI (neuronxcc.nki, "
                                    "NKI 0.1) on Neuron SDK 2.26",
                                    "On this machine grade with the asst4-trainium2-nki06 spec, or another NKI 0.6 spec",
                                    "on a legacy-line worker (Neuron SDK 2.26) or with --backend sim"]),
    ("current", "asst4-trainium", ["spec 'asst4-trainium' is written in legacy NKI", "asst4-trainium2-nki06 spec"]),
    ("legacy", "asst4-trainium2-nki06", ["the legacy Neuron SDK line (neuronx-cc 2.21.33363.0) compiles legacy NKI "
                                         "kernels (import neuronxcc.nki) only, and spec 'asst4-trainium2-nki06' is "
                                         "written in NKI 0.6 (nki) on Neuron SDK 2.32",
                                         "On this machine grade with the asst4-trainium2 spec, or another legacy NKI spec",
                                         "on a current-line worker (Neuron SDK 2.32)"]),
])
def test_a_spec_in_the_other_lines_dialect_is_a_grader_error(line, spec, words):
    from grader import spec as specs
    from grader.errors import GraderInputError
    from grader.neuron import WrongSdkLine, check_dialect
    with pytest.raises(WrongSdkLine) as err:
        check_dialect(setup_of(line), specs.load(spec))
    assert isinstance(err.value, GraderInputError)        # the CLI, web and workers show it as the grader's
    assert all(w in str(err.value) for w in words), str(err.value)
