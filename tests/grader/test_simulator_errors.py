"""nkisim failing on a valid program is the grader's fault, not the student's: the trusted
executor reports it as "simulator_error", the runner keeps that word, and grade() raises
SimulatorFault (a worker's infrastructure fault: retried, then a grader error), never a 0."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import grader
import nkisim
from grader import executor, wire
from grader.runner import ConfigRun, SimulatorFault, _parse_execution
from grader.sandbox import ChildResult
from nkisim import execute as executing
from nkisim import program as programs
from nkisim.runtime import ArgSpec, trace_kernel

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@nki.jit
def doubled(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.multiply(nl.load(x), 2.0))
    return out


def job_dir(path, x):
    program, _ = trace_kernel(doubled, [ArgSpec(x.shape, x.dtype)], {})
    (path / "program.bin").write_bytes(programs.encode(program))
    os.makedirs(path / "inputs")
    np.save(path / "inputs" / "arg0.npy", x)
    return {"n_inputs": 1, "mode": "correctness", "max_instructions": 1000, "platform": "trn2",
            "dialect": None, "lnc": 1, "processes": 1}


def test_the_executor_reports_a_simulator_failure_as_its_own_status(tmp_path, monkeypatch):
    x = np.arange(64, dtype=np.float32).reshape(16, 4)
    job = job_dir(tmp_path, x)
    monkeypatch.chdir(tmp_path)
    header, outputs = executor.run(job)
    assert header["status"] == "ok"
    np.testing.assert_array_equal(outputs[0], 2 * x)

    def broken(self, region):
        raise KeyError(region.alloc_id)
    monkeypatch.setattr(executing._Memory, "view", broken)
    header, outputs = executor.run(job)
    assert header["status"] == "simulator_error" and outputs == []
    assert header["error"].startswith("SimulatorFailure:") and "bug in the simulator" in header["error"]


def result_of(header: dict) -> ChildResult:
    return ChildResult(0, False, "", "", wire.header_frame(header), False, 0.1)


def test_the_runner_keeps_the_executors_word_and_a_forged_program_stays_invalid():
    run = _parse_execution(result_of({"status": "simulator_error", "error": "SimulatorFailure: boom"}),
                           grader.sandbox.Limits())
    assert run.status == "simulator_error" and "boom" in run.message
    invalid = _parse_execution(result_of({"status": "invalid", "error": "a region points nowhere"}),
                               grader.sandbox.Limits())
    assert invalid.status == "invalid"


SPEC = """
assignment = "simulator-errors"
title = "a simulator failure is the grader's"
spec_version = "1"
thresholds_version = "t1"
time_budget_s = 120

[files.kernels]
archive_path = "part1/kernels.py"
functions = { matrix_transpose = ["a_tensor"] }

[tolerances]
float32 = { rtol = 1e-5, atol = 1e-8 }

[[tests]]
name = "transpose"
title = "Correctness: transpose"
kind = "correctness"
file = "kernels"
problem = "transpose"
points = 3
configs = [{ m = 128, n = 128, dtype = "float32" }]
"""


def test_a_grade_whose_program_nkisim_failed_on_raises_instead_of_scoring_zero(tmp_path, monkeypatch):
    import grader.grade as grade_module
    (tmp_path / "spec.toml").write_text(SPEC)
    spec = grader.load_spec(str(tmp_path / "spec.toml"))
    with open(os.path.join(ROOT, "reference_kernels", "transpose.py"), "rb") as fh:
        sub = grader.submission_from_bytes("kernels.py", fh.read(), spec)
    monkeypatch.setattr(grade_module, "run_configuration",
                        lambda *a, **k: ConfigRun("simulator_error", "SimulatorFailure: nkisim failed on ..."))
    with pytest.raises(SimulatorFault, match="transpose.*nkisim failed to execute"):
        grader.grade(sub, spec, grader.GradeOptions(backend="sim", seed=1))
    monkeypatch.undo()
    report = grader.grade(sub, spec, grader.GradeOptions(backend="sim", seed=1))
    assert report.tests[0].status == "passed" and json.loads(json.dumps(report.to_json()))["tests"]
