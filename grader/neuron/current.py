"""The current line's trusted half (SDK 2.32+: nrtpy and its device-mode benchmark first ship
with 2.32, beside the nki 0.6 wheel): kernel.neff runs in a separate nrtpy interpreter
(GRADER_NRTPY_PYTHON), since the nrtpy and nki wheels cannot share one environment. This
process (confined, no student code) starts it on the job directory, then checks everything it
sends back: the interpreter is trusted, the NEFF it ran is not. The p99 is over calls, each
call's device events combined (per_call_us)."""
from __future__ import annotations

import math
import os
import subprocess
import tempfile

import numpy as np

from .. import wire
from . import faults

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nrtpy_main.py")
MAX_RESULT = 1 << 30
PERCENTILES = (0, 50, 90, 99, 100)


def run(job: dict) -> tuple[dict, list[np.ndarray]]:
    # removed when read: the sandbox's /tmp is private, but a worker outside one keeps its /tmp
    with tempfile.TemporaryDirectory(prefix="nrtpy-") as folder:
        return _run_into(job, os.path.join(folder, "result.bin"))


def _run_into(job: dict, result: str) -> tuple[dict, list[np.ndarray]]:
    python = job["neuron"]["nrtpy_python"]
    # nrtpy loads the NEFF at the degree it was compiled for: the worker's (grader.neuron.lines)
    env = dict(os.environ, NEURON_LOGICAL_NC_CONFIG=str(job["neuron"].get("lnc", 2)))
    try:
        done = subprocess.run([python, "-I", SCRIPT, result], stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, errors="replace", env=env)
    except OSError as err:
        raise faults.missing("the nrtpy interpreter (GRADER_NRTPY_PYTHON)", python, err) from None
    if done.returncode != 0 or not os.path.exists(result):
        # nrtpy_main reports whatever the NEFF does; an interpreter that ends without a result
        # failed on its own (a module missing, a crash of the runtime under it)
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise faults.WorkerFault(f"the nrtpy interpreter failed on this worker (exit {done.returncode}): {tail}")
    with open(result, "rb") as fh:
        data = fh.read(MAX_RESULT + 1)
    header, pos = wire.read_header_line(data)
    if header.get("status") == "grader_error":      # nrtpy_main: the interpreter lacks what it needs
        return {"status": "grader_error", "error": wire.bounded_text(str(header.get("error", "")))}, []
    if header.get("status") != "ok":
        error = wire.bounded_text(str(header.get("error", "nrtpy refused the NEFF")))
        status = header.get("nrt_status")
        fault = faults.from_runtime("nrtpy", status) if isinstance(status, int) else None
        if fault is not None:                            # the same statuses as the legacy line's libnrt
            return {"status": "grader_error", "error": f"{fault} ({error})"}, []
        return {"status": "invalid", "error": error}, []
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
        try:
            samples = per_call_us(durations, header.get("iterations"), header.get("benchmark_iter"))
        except EventCountError as err:          # the grader's fault, never a p99 (runner.RunnerFault)
            return {"status": "grader_error", "error": str(err)}, []
        result["latency_us"] = float(np.percentile(samples, 99))
        result["percentiles_us"] = {str(p): float(np.percentile(samples, p)) for p in PERCENTILES}
        result["timing"] = "nrtpy benchmark(mode=device), per call"
    return result, outputs


class EventCountError(ValueError):
    """nrtpy's device events do not add up to the calls benchmarked."""


def per_call_us(durations_ms: list, iterations, calls) -> np.ndarray:
    """Each benchmarked call's device time, in microseconds, from nrtpy's device events.
    "Some kernels emit multiple execution events per call (multi-subgraph NEFFs). The reported
    iterations in BenchmarkResult reflects actual device events, not Python calls"
    (neuron-runtime/nrtpy/nrtpy-troubleshooting); durations_ms holds one time per event
    (model.rst). So a call is `iterations / benchmark_iter` consecutive events, the time of its
    subgraphs one after another: their sum. Counts that do not add up (events not a whole
    number per call, or durations_ms and iterations disagreeing) are refused, never averaged
    into a p99."""
    if not (isinstance(calls, int) and not isinstance(calls, bool) and calls >= 1):
        raise EventCountError(f"nrtpy's benchmark did not say how many calls it timed (benchmark_iter {calls!r})")
    if not (isinstance(iterations, int) and not isinstance(iterations, bool)):
        raise EventCountError(f"nrtpy's BenchmarkResult.iterations is {iterations!r}, not a count of device events")
    if len(durations_ms) != iterations:
        raise EventCountError(f"nrtpy's benchmark gave {len(durations_ms)} durations_ms for {iterations} device "
                              f"events (BenchmarkResult.iterations)")
    per_call, left = divmod(iterations, calls)
    if per_call < 1 or left:
        raise EventCountError(f"nrtpy's benchmark recorded {iterations} device events for {calls} calls "
                              f"(benchmark_iter): not a whole number of events per call, so its events cannot be "
                              f"told apart into calls and no p99 is taken from them")
    events = np.asarray(durations_ms, dtype=np.float64).reshape(calls, per_call)
    return events.sum(axis=1) * 1000.0
