"""The current line's trusted half (SDK 2.28+, the nki 0.2+ wheel): kernel.neff runs in a
separate nrtpy interpreter (GRADER_NRTPY_PYTHON), since the nrtpy and nki wheels cannot share
one environment. This process (confined, no student code) starts it on the job directory,
then checks everything it sends back: the interpreter is trusted, the NEFF it ran is not."""
from __future__ import annotations

import math
import os
import subprocess
import tempfile

import numpy as np

from .. import wire

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nrtpy_main.py")
MAX_RESULT = 1 << 30
PERCENTILES = (0, 50, 90, 99, 100)


def run(job: dict) -> tuple[dict, list[np.ndarray]]:
    python = job["neuron"]["nrtpy_python"]
    result = os.path.join(tempfile.mkdtemp(prefix="nrtpy-"), "result.bin")   # the private /tmp
    done = subprocess.run([python, "-I", SCRIPT, result], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          errors="replace")
    if done.returncode != 0 or not os.path.exists(result):
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise RuntimeError(f"the nrtpy interpreter failed (exit {done.returncode}): {tail}")
    with open(result, "rb") as fh:
        data = fh.read(MAX_RESULT + 1)
    header, pos = wire.read_header_line(data)
    if header.get("status") != "ok":
        return {"status": "invalid", "error": wire.bounded_text(str(header.get("error", "nrtpy refused the NEFF")))}, []
    count = wire.bounded_int(header.get("arrays"), 0, 16, "output count")
    view = memoryview(data)
    outputs = []
    for _ in range(count):
        arr, pos = wire.read_npy_at(view, pos, MAX_RESULT)
        outputs.append(arr)
    result: dict = {"status": "ok", "printed": "", "opcodes": [], "matmul_flops": 0, "instructions": 0}
    if job["mode"] == "benchmark":
        durations = header.get("durations_ms")
        if not (isinstance(durations, list) and durations
                and all(isinstance(d, (int, float)) and math.isfinite(d) and d > 0 for d in durations)):
            raise wire.BadResult("benchmark durations are not a list of positive numbers")
        samples = np.asarray(durations, dtype=np.float64) * 1000.0
        result["latency_us"] = float(np.percentile(samples, 99))
        result["percentiles_us"] = {str(p): float(np.percentile(samples, p)) for p in PERCENTILES}
        result["timing"] = "nrtpy benchmark(mode=device)"
    return result, outputs
