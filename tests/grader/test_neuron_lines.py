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
             "print(s.line, s.cores, s.sdk, s.nrtpy_python is not None)")
    done = subprocess.run([str(sdk.python(line)), "-I", "-c", probe], capture_output=True, text=True,
                          env=sdk_envs.run_env(sdk.settings(line, cores=4)), timeout=120)
    assert done.returncode == 0, done.stderr
    name, cores, *sdk_name, has_nrtpy = done.stdout.split()
    assert (name, cores, has_nrtpy) == (line, "4", str(line == "current"))
    assert " ".join(sdk_name) == ("nki 0.6.0" if line == "current" else "neuronx-cc 2.21.33363.0")


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
