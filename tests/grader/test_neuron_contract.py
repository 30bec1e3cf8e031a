"""Today's hardware runner against the strict nrtpy double (tests/doubles/nrtpy_site): the double
refuses what the documented nrtpy API refuses, and run_neff hands it NumPy arrays."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

DOUBLES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "doubles")
sys.path[:0] = [DOUBLES, os.path.join(DOUBLES, "nrtpy_site")]

import nkisim  # noqa: E402

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402
from nkisim.runtime import ArgSpec, trace_kernel  # noqa: E402

import neff_double  # noqa: E402
from grader import neuron  # noqa: E402


@nki.jit
def scale_by_two(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=nisa.tensor_scalar(t, nl.multiply, 2.0))
    return out


def test_todays_run_neff_hands_numpy_arrays_to_nrtpy_and_is_refused(tmp_path, monkeypatch):
    x = np.random.default_rng(0).random((128, 64), dtype=np.float32)
    program, _ = trace_kernel(scale_by_two, [ArgSpec(x.shape, x.dtype)], {})
    (tmp_path / "inputs").mkdir()
    np.save(tmp_path / "inputs" / "arg0.npy", x)
    (tmp_path / "kernel.neff").write_bytes(neff_double.encode(program))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TypeError, match=r"inputs\['x'\] must be an nrtpy.NrtpyTensor .* got ndarray"):
        neuron.run_neff({"n_inputs": 1, "mode": "benchmark", "warmup": 2, "iters": 5})
