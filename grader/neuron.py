"""The neuron backend's two halves, split at the same boundary as the simulator's.

In the sandboxed child (`compile_neff`): neuronx-cc traces and compiles the kernel into a NEFF.
It is given inputs of the right shapes and dtypes filled with zeros, so whatever the kernel
computes or prints there says nothing about the graded inputs; only the NEFF file comes back.

In a trusted process (`python -I -m grader.neuron`, no student code): the NEFF is loaded onto
the job's NeuronCore with the Neuron runtime's Python API (nrtpy: NrtpyModel.load_from_neff,
then a call with the real inputs), the outputs are read back, and the NEFF is timed there:
warmup executions, then `iters` timed ones, and the percentiles of their latencies. The child
can therefore forge neither outputs nor timings on hardware either.

Written against the documented nrtpy API; it cannot run on machines without a Neuron device,
where tests run the same two halves with nkisim standing in (GRADER_NEURON_SHIM=nkisim: the
artifact is the traced program and grader.executor runs it).
"""
from __future__ import annotations

import os
import tempfile
import time

import numpy as np

PERCENTILES = (0, 50, 90, 99, 100)


def compile_neff(kernel, arg_specs, job: dict) -> bytes:
    """Compile `kernel` for the NeuronCore and return the NEFF's bytes (child side)."""
    import neuronxcc.nki as nki
    zeros = [np.zeros(spec.shape, dtype=spec.dtype) for spec in arg_specs]
    with tempfile.TemporaryDirectory(dir=os.getcwd()) as where:
        neff = os.path.join(where, "kernel.neff")
        options = dict(job.get("compile_options") or {})
        nki.baremetal(kernel, save_neff_name=neff, artifacts_dir=where, **options)(*zeros, **job["kwargs"])
        with open(neff, "rb") as fh:
            return fh.read()


def _named_inputs(model, inputs: list[np.ndarray]) -> dict:
    names = list(model.input_tensors_info)
    if len(names) != len(inputs):
        raise ValueError(f"the NEFF takes {len(names)} inputs, the test has {len(inputs)}")
    return {name: np.ascontiguousarray(arr) for name, arr in zip(names, inputs)}


def _as_arrays(outputs) -> list[np.ndarray]:
    if isinstance(outputs, dict):
        return [np.asarray(v) for v in outputs.values()]
    if isinstance(outputs, (list, tuple)):
        return [np.asarray(v) for v in outputs]
    return [np.asarray(outputs)]


def run_neff(job: dict) -> tuple[dict, list[np.ndarray]]:
    """Execute kernel.neff on the real inputs and time it (trusted side)."""
    from nrtpy import NrtpyModel
    inputs = [np.load(os.path.join("inputs", f"arg{i}.npy"), allow_pickle=False) for i in range(job["n_inputs"])]
    model = NrtpyModel.load_from_neff("kernel.neff", core_id=0)   # the only core NEURON_RT_VISIBLE_CORES shows
    named = _named_inputs(model, inputs)
    outputs = _as_arrays(model(named))
    header: dict = {"status": "ok", "printed": "", "opcodes": [], "matmul_flops": 0, "instructions": 0}
    if job["mode"] == "benchmark":
        for _ in range(int(job["warmup"])):
            model(named)
        samples = []
        for _ in range(max(int(job["iters"]), 1)):
            start = time.perf_counter_ns()
            model(named)
            samples.append((time.perf_counter_ns() - start) / 1e3)
        header["latency_us"] = float(np.percentile(samples, 99))
        header["percentiles_us"] = {str(p): float(np.percentile(samples, p)) for p in PERCENTILES}
    return header, outputs


def main() -> None:
    from grader.executor import _write, refused
    from grader.jobs import serve_job
    serve_job(run_neff, _write, refused)


if __name__ == "__main__":
    main()
