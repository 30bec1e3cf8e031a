"""The legacy line's trusted half (SDK 2.26, the course's `neuronxcc.nki`): run kernel.neff on
the real inputs without any of the kernel's Python, read the outputs back through libnrt, and
time it on the device with neuron-profile. Runs in `python -I -m grader.neuron`, confined."""
from __future__ import annotations

import os
import tempfile

import numpy as np

from . import libnrt, profile

PERCENTILES = (0, 50, 90, 99, 100)


def run(job: dict) -> tuple[dict, list[np.ndarray]]:
    setup = job["neuron"]
    names = list(job["input_names"])
    paths = [os.path.join("inputs", f"arg{i}.npy") for i in range(len(names))]
    arrays = [np.load(p, allow_pickle=False) for p in paths]
    with open("kernel.neff", "rb") as fh:
        neff = fh.read()
    outputs = libnrt.run_once(setup["libnrt"], neff, dict(zip(names, arrays)))
    header: dict = {"status": "ok", "printed": "", "opcodes": [], "matmul_flops": 0, "instructions": 0}
    if job["mode"] == "benchmark":
        # libnrt was closed by run_once: the core is free for neuron-profile's own runtime.
        # One capture is one execution after a fresh load (the tool has no iteration count),
        # so each timed iteration is a capture; there is nothing to warm up between them.
        tool = os.path.join(setup["tools"], "neuron-profile")
        # /tmp, since the job directory is read-only; removed after, since a worker outside a
        # sandbox keeps its /tmp (a capture is megabytes)
        with tempfile.TemporaryDirectory(prefix="ntff-") as where:
            samples = [profile.device_time_us(tool, "kernel.neff", list(zip(names, paths)),
                                              os.path.join(where, f"profile-{i}.ntff"))
                       for i in range(max(int(job["iters"]), 1))]
        header["latency_us"] = float(np.percentile(samples, 99))
        header["percentiles_us"] = {str(p): float(np.percentile(samples, p)) for p in PERCENTILES}
        header["timing"] = "neuron-profile total_time"
    return header, [arr for _, arr in outputs]
