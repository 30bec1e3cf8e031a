"""The neuron backend's trusted half (grader/neuron.py) on a machine without a Neuron device:
the Neuron runtime's Python API (nrtpy) is stood in for by the simulator, which loads our
traced program in place of a NEFF and executes it. What is tested is our code around the
runtime: naming the inputs as the NEFF lists them, reading the outputs back, warmup and timed
executions, and the percentiles of their latencies."""
from __future__ import annotations

import json
import sys
import types

import numpy as np
import pytest

import nkisim
from nkisim import program as programs
from nkisim.execute import execute
from nkisim.runtime import ArgSpec, trace_kernel

from grader import neuron

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402


@nki.jit
def scale_by_two(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=nisa.tensor_scalar(t, nl.multiply, 2.0))
    return out


class SimulatedModel:
    """NrtpyModel's documented surface, running our program format instead of a NEFF."""

    calls = 0

    def __init__(self, program) -> None:
        self.program = program
        self.input_tensors_info = {a.name: a for a in sorted(program.allocs, key=lambda a: a.input_index or 0)
                                   if a.input_index is not None}

    @classmethod
    def load_from_neff(cls, path, name=None, core_id=0, **kwargs):
        assert core_id == 0
        with open(path, "rb") as fh:
            return cls(programs.decode(fh.read()))

    def __call__(self, inputs, outputs=None):
        SimulatedModel.calls += 1
        done = execute(self.program, list(inputs.values()))
        return {"out": done.outputs}


@pytest.fixture
def simulated_runtime(monkeypatch):
    module = types.ModuleType("nrtpy")
    module.NrtpyModel = SimulatedModel
    monkeypatch.setitem(sys.modules, "nrtpy", module)
    SimulatedModel.calls = 0


def test_the_trusted_runner_executes_the_artifact_on_the_real_inputs_and_times_it(tmp_path, monkeypatch,
                                                                                    simulated_runtime):
    x = np.random.default_rng(0).random((128, 64), dtype=np.float32)
    program, _ = trace_kernel(scale_by_two, [ArgSpec(x.shape, x.dtype)], {})
    (tmp_path / "inputs").mkdir()
    np.save(tmp_path / "inputs" / "arg0.npy", x)
    (tmp_path / "kernel.neff").write_bytes(programs.encode(program))
    job = {"n_inputs": 1, "mode": "benchmark", "warmup": 2, "iters": 5}
    (tmp_path / "job.json").write_text(json.dumps(job))
    monkeypatch.chdir(tmp_path)
    header, outputs = neuron.run_neff(job)
    np.testing.assert_array_equal(outputs[0], 2 * x)
    assert SimulatedModel.calls == 1 + 2 + 5          # outputs, warmup, timed
    assert header["status"] == "ok" and header["latency_us"] > 0
    assert set(header["percentiles_us"]) == {"0", "50", "90", "99", "100"}
    assert header["percentiles_us"]["0"] <= header["latency_us"] <= header["percentiles_us"]["100"]


def test_a_neff_taking_other_inputs_than_the_test_gives_is_refused():
    class Model:
        input_tensors_info = {"a": None, "b": None}
    with pytest.raises(ValueError, match="takes 2 inputs, the test has 1"):
        neuron._named_inputs(Model(), [np.zeros(3)])
