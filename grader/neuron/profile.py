"""Device-side time of one NEFF execution with aws-neuronx-tools' `neuron-profile`, the legacy
line's documented way to time a NEFF without the kernel's Python (no nrtpy before SDK 2.3x).

tools/profiler/neuron-profile-user-guide.rst (aws-neuron-sdk), "CLI reference":
    neuron-profile capture -n NEFF -s NTFF [--ignore-exec-errors] [NAME FILE.npy ...]
        executes the NEFF once on the given inputs and writes the device trace;
    neuron-profile view --output-format summary-json -n NEFF -s NTFF
        prints the profile's summary, whose `total_time` is the execution's NeuronCore time in
        seconds ("took 0.017 seconds (17 ms) to run the model").
"""
from __future__ import annotations

import json
import math
import os
import subprocess


class ProfileError(RuntimeError):
    pass


def _run(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace")
    except OSError as err:          # missing, not executable, its interpreter gone: the worker's set-up
        from .faults import missing
        raise missing("neuron-profile (aws-neuronx-tools)", argv[0], err) from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise ProfileError(f"{os.path.basename(argv[0])} {argv[1]} failed (exit {done.returncode}): "
                           + " | ".join(tail))
    return done.stdout


def _total_time_s(summary) -> float:
    """`total_time` of the one profiled execution, wherever summary-json nests it (a bare
    object, or a list of per-worker objects under a key); exactly one value is accepted."""
    found: list = []

    def walk(node, depth: int) -> None:
        if depth > 4:
            return
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "total_time":
                    found.append(value)
                else:
                    walk(value, depth + 1)
        elif isinstance(node, list):
            for item in node:
                walk(item, depth + 1)

    walk(summary, 0)
    values = {float(v) for v in found if isinstance(v, (int, float, str)) and _is_number(v)}
    if len(values) != 1:
        raise ProfileError(f"neuron-profile's summary holds {len(found)} total_time values, expected one")
    value = values.pop()
    if not (math.isfinite(value) and value > 0):
        raise ProfileError(f"neuron-profile reported total_time {value!r}")
    return value


def _is_number(v) -> bool:
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def device_time_us(tool: str, neff: str, inputs: list[tuple[str, str]], session: str) -> float:
    """Capture one execution of `neff` on `inputs` ((NEFF input name, .npy path) pairs) and read
    its NeuronCore time back, in microseconds."""
    argv = [tool, "capture", "-n", neff, "-s", session]
    for name, path in inputs:
        argv += [name, path]
    _run(argv)
    out = _run([tool, "view", "--output-format", "summary-json", "-n", neff, "-s", session])
    try:
        summary = json.loads(out)
    except ValueError:
        raise ProfileError("neuron-profile view did not print JSON") from None
    return _total_time_s(summary) * 1e6
