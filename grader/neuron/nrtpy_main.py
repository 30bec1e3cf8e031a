"""Run by the separate nrtpy interpreter (GRADER_NRTPY_PYTHON -I this_file), in a job directory:
load kernel.neff, execute it on the real inputs, read the outputs back and time it on the device.

Standalone on purpose: the nrtpy environment holds nrtpy and NumPy, not the grader, and never
the nki wheel ("The standalone nrtpy wheel and the nki wheel cannot be installed in the same
Python environment": neuron-runtime/nrtpy/index.rst). Reads job.json and inputs/arg*.npy;
writes the file named by its argument: a header frame (grader/wire.py's format, written here
without importing the grader), then each output in .npy format.
Runtime log lines go to stdout/stderr, never into the result.
"""
import json
import re
import struct
import sys

import numpy as np


def _raw(tensor) -> np.ndarray:
    """An output tensor's bytes. "Auto-allocated output tensors may have a void dtype (|V2 for
    fp16) because libnrt does not always report the original dtype" (nrtpy tutorial
    "validate, benchmark"): the grader views them as the answer's dtype."""
    arr = tensor.numpy()
    if arr.dtype.kind == "V":
        return np.ascontiguousarray(arr).view(np.uint8).reshape(arr.shape + (arr.dtype.itemsize,))
    return np.ascontiguousarray(arr)


def run(job: dict) -> tuple[dict, list]:
    from nrtpy import NrtpyModel, NrtpyTensor
    names = list(job["input_names"])
    arrays = [np.load(f"inputs/arg{i}.npy", allow_pickle=False) for i in range(len(names))]
    # NrtpyModel.load_from_neff(neff_path, name=None, core_id=0, ...): core 0 is the one core
    # NEURON_RT_VISIBLE_CORES leaves this process (neuron-runtime/nrtpy/model.rst)
    model = NrtpyModel.load_from_neff("kernel.neff", core_id=0)
    wanted = sorted(model.input_tensors_info)
    if wanted != sorted(names):
        return {"status": "invalid", "error": f"the NEFF takes inputs {', '.join(wanted)}; the kernel's "
                                              f"parameters are {', '.join(sorted(names))}"}, []
    # inputs are dict[str, NrtpyTensor] keyed by the NEFF's input names, never NumPy arrays:
    # NrtpyTensor.from_numpy(array, name=None, core_id=0) (neuron-runtime/nrtpy/tensor.rst)
    inputs = {name: NrtpyTensor.from_numpy(arr, name=name) for name, arr in zip(names, arrays)}
    # model(inputs) returns dict[str, NrtpyTensor] when outputs=None (model.rst, __call__)
    produced = model(inputs)
    outputs = [_raw(produced[name]) for name in model.output_tensors_info]
    header = {"status": "ok"}
    if job["mode"] == "benchmark":
        # model.benchmark(inputs, outputs=None, warmup_iter=5, benchmark_iter=5, mode="device"):
        # "device" is NeuronCore execution time via device-side tracing, per iteration in
        # BenchmarkResult.durations_ms (model.rst); benchmark_iter must be at least 1
        calls = max(int(job["iters"]), 1)
        stats = model.benchmark(inputs, warmup_iter=int(job["warmup"]), benchmark_iter=calls, mode="device")
        # "Some kernels emit multiple execution events per call (multi-subgraph NEFFs). The
        # reported iterations in BenchmarkResult reflects actual device events, not Python calls"
        # (nrtpy-troubleshooting): the events and their count go back as they are, with the
        # number of calls, and the grader combines them into calls
        header["durations_ms"] = [float(d) for d in stats.durations_ms]
        header["iterations"] = int(stats.iterations)
        header["benchmark_iter"] = calls
    return header, outputs


def _nrt_status(err: BaseException) -> int | None:
    """The libnrt status of an nrtpy.NrtError: "libnrt errors with preserved status code", whose
    message "includes the NRT status name and numeric code", e.g. "NRT Error NRT_FAILURE(1): ..."
    (neuron-runtime/nrtpy/errors.rst)."""
    if type(err).__name__ != "NrtError":
        return None
    found = re.match(r"NRT Error [A-Z_]+\((\d+)\)", str(err))
    return int(found.group(1)) if found else None


HEADER_MAGIC = b"GRH1"        # grader/wire.py HEADER_MAGIC; a test checks the two frames agree


def header_frame(header: dict) -> bytes:
    """The magic, the JSON's length (8 bytes, little-endian), the JSON: what grader/wire.py reads."""
    body = json.dumps(header, separators=(",", ":")).encode()
    return HEADER_MAGIC + struct.pack("<Q", len(body)) + body


def main() -> None:
    with open("job.json") as fh:
        job = json.load(fh)
    try:
        header, outputs = run(job)
    except ImportError as err:      # this interpreter lacks nrtpy: the worker's set-up, not the NEFF
        header, outputs = {"status": "grader_error", "error": f"the nrtpy interpreter cannot import what it "
                                                              f"needs: {err}"[:4000]}, []
    except Exception as err:        # NrtError (libnrt status), NrtpyError, a refused input ...
        header, outputs = {"status": "invalid", "error": f"{type(err).__name__}: {err}"[:4000]}, []
        status = _nrt_status(err)
        if status is not None:                          # the grader tells the worker's from the NEFF's
            header["nrt_status"] = status
    header["arrays"] = len(outputs)
    with open(sys.argv[1], "wb") as out:
        out.write(header_frame(header))
        for arr in outputs:
            np.lib.format.write_array(out, arr, allow_pickle=False)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
