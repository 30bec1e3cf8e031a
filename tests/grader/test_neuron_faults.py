"""A worker's broken Neuron set-up is the grader's error, never the student's 0 (issue 43 item
5): a profiler or nrtpy interpreter that cannot be started, an nrtpy environment without nrtpy,
a runtime status no NEFF causes. The grade raises runner.RunnerFault (a GraderFault: a worker
retries the run, then gives it up as a grader error); no test is scored and no program_invalid
flag is raised. What a NEFF does (refused, out of bounds, a hang) stays the run's verdict."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "doubles"))
sys.path.insert(0, os.path.dirname(__file__))

import sdk_envs  # noqa: E402
from fixtures import DRIVER, grade_on, sdk  # noqa: E402,F401
from neuron_specs import SMALL_SPEC, SMALL_SPEC_NKI06  # noqa: E402
from test_neuron_current import _job_dir, _run_trusted  # noqa: E402

from grader.neuron import faults  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LEGACY_OPTIMIZED = (ROOT / "reference_kernels" / "conv2d_optimized.py").read_bytes()
NKI06_OPTIMIZED = (ROOT / "reference_kernels" / "nki06" / "conv2d_optimized.py").read_bytes()


@pytest.fixture
def outside_tmp():
    """A folder the grade's sandboxed processes see (they get a private /tmp), as a worker's
    installed tools are."""
    where = Path(tempfile.mkdtemp(prefix="nki-test-faults-", dir="/var/tmp"))
    yield where
    shutil.rmtree(where, ignore_errors=True)


def _grade_failing(sdk, line: str, spec: dict, source: bytes, tmp_path: Path, settings: dict) -> str:
    """Grade on a worker of `line` whose settings are `settings`; the grade must raise: its stderr."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    (tmp_path / "conv2d.py").write_bytes(source)
    (tmp_path / "options.json").write_text(json.dumps({"backend": "neuron", "seed": 5}))
    done = subprocess.run([str(sdk.python(line)), "-I", str(DRIVER), str(tmp_path)], capture_output=True,
                          text=True, env=sdk_envs.run_env(settings), timeout=900)
    assert done.returncode != 0 and not done.stdout.strip(), done.stdout[-2000:]
    return done.stderr


def test_a_profiler_that_cannot_start_is_a_grader_error(sdk, tmp_path, outside_tmp):
    """neuron-profile installed (grader doctor and the worker's start find it executable) but
    broken: its interpreter is gone. The timed run cannot start it: the worker's fault."""
    tools = outside_tmp / "tools"
    tools.mkdir()
    broken = tools / "neuron-profile"
    broken.write_text("#!/nonexistent/python3\n")
    broken.chmod(0o755)
    settings = dict(sdk.settings("legacy"), GRADER_NEURON_TOOLS=str(tools))
    err = _grade_failing(sdk, "legacy", SMALL_SPEC, LEGACY_OPTIMIZED, tmp_path / "grade", settings)
    assert "RunnerFault" in err and "this worker could not run the kernel's NEFF" in err, err[-3000:]
    assert "neuron-profile (aws-neuronx-tools) cannot be started on this worker" in err


def test_an_nrtpy_interpreter_that_dies_without_a_result_is_a_grader_error(sdk, tmp_path, outside_tmp):
    """An interpreter that answers the worker's start-up probe but fails when it runs the NEFF."""
    launcher = outside_tmp / "nrtpy-python"
    launcher.write_text(f"#!/bin/sh\n[ \"$2\" = -c ] && exec {sdk.nrtpy} \"$@\"\necho 'Segmentation fault' >&2\n"
                        "exit 139\n")
    launcher.chmod(0o755)
    settings = dict(sdk.settings("current"), GRADER_NRTPY_PYTHON=str(launcher))
    err = _grade_failing(sdk, "current", SMALL_SPEC_NKI06, NKI06_OPTIMIZED, tmp_path / "grade", settings)
    assert "RunnerFault" in err and "the nrtpy interpreter failed on this worker (exit 139)" in err, err[-3000:]


def test_an_nrtpy_environment_without_nrtpy_reports_a_grader_error(sdk, tmp_path):
    job = _job_dir(tmp_path, sdk, ["x"])
    data = json.loads((job / "job.json").read_text())
    data["neuron"]["nrtpy_python"] = sys.executable          # this project's Python: NumPy, no nrtpy
    (job / "job.json").write_text(json.dumps(data))
    header, outputs = _run_trusted(job)
    assert header["status"] == "grader_error" and outputs == [], header
    assert "cannot import what it needs" in header["error"] and "nrtpy" in header["error"]


@pytest.mark.parametrize("status", sorted(faults.WORKER_STATUSES))
def test_runtime_statuses_no_neff_causes_are_the_workers(status):
    fault = faults.from_runtime("nrt_execute", status)
    assert isinstance(fault, faults.WorkerFault) and faults.WORKER_STATUSES[status] in str(fault)
    assert faults.verdict(fault)["status"] == "grader_error"


@pytest.mark.parametrize("status", [1, 2, 4, 5, 1003, 1004, 1006])
def test_what_a_neff_can_cause_stays_the_runs_verdict(status):
    """Refused, too large, a hang, a numerical error, out of bounds: the kernel's doing."""
    assert faults.from_runtime("nrt_execute", status) is None
    assert faults.verdict(RuntimeError("nrt_execute failed")) is None


def test_a_hardware_report_says_what_timed_it(sdk, tmp_path):
    """The report's provenance names the SDK line, the logical-NeuronCore degree and the core."""
    report = grade_on(sdk, "current", SMALL_SPEC_NKI06, NKI06_OPTIMIZED, tmp_path, seed=5, neuron_cores=[3])
    assert report["hardware"].startswith("current SDK line (nki ") and report["hardware"].endswith(
        "LNC=2 (Trn2's default), NeuronCore 3"), report["hardware"]
    from grader.report import Report
    from grader.report_view import view_of
    from grader import render
    text = render.render_terminal(view_of(Report.from_json(report)), color=False)
    assert "hardware current SDK line" in text


@pytest.mark.parametrize("name, code, verdict", [("NRT_EXEC_NC_BUSY", 1005, "grader_error"),
                                                 ("NRT_EXEC_OOB", 1006, "invalid")])
def test_the_current_line_tells_the_workers_runtime_status_from_the_neffs(sdk, tmp_path, name, code, verdict):
    """nrtpy raises NrtError "NRT Error NAME(code): ..." (neuron-runtime/nrtpy/errors); the same
    table as the legacy line's libnrt decides whose it is."""
    job = _job_dir(tmp_path, sdk, ["x"])
    failing = tmp_path / "failing_nrtpy"
    (failing / "nrtpy").mkdir(parents=True)
    (failing / "nrtpy" / "__init__.py").write_text(
        f"import sys\nsys.path.remove({str(failing)!r})\ndel sys.modules['nrtpy']\nimport nrtpy as _real\n"
        "sys.modules['nrtpy'] = _real\n"
        f"def call(self, *a, **k):\n    raise _real.NrtError({name!r}, {code}, 'nrt_execute')\n"
        "_real.NrtpyModel.__call__ = call\n")
    launcher = tmp_path / "nrtpy-python"
    launcher.write_text(f"#!{sdk.nrtpy}\nimport runpy, sys\nsys.path.insert(0, {str(failing)!r})\n"
                        "sys.argv = sys.argv[2:]\nrunpy.run_path(sys.argv[0], run_name='__main__')\n")
    launcher.chmod(0o755)
    data = json.loads((job / "job.json").read_text())
    data["neuron"]["nrtpy_python"] = str(launcher)
    (job / "job.json").write_text(json.dumps(data))
    header, outputs = _run_trusted(job)
    assert header["status"] == verdict and outputs == [], header
    assert f"{name}({code})" in header["error"]
