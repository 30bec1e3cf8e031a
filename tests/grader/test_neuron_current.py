"""The current SDK line (2.28+, the nki 0.2+ wheel) end to end through its contract doubles: the
sandboxed child compiles with NKI_ARTIFACTS_DIR, a separate nrtpy interpreter (which must never
import nki) runs kernel.neff with NrtpyTensor inputs, and the p99 comes from
benchmark(mode="device").durations_ms."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "doubles"))
sys.path.insert(0, os.path.dirname(__file__))

import sdk_envs  # noqa: E402
from fixtures import grade_on, sdk  # noqa: E402,F401
from neuron_specs import SMALL_SPEC, for_current_line  # noqa: E402

from grader import spec as specs  # noqa: E402
from grader.grade import GradeOptions, grade  # noqa: E402
from grader.submission import submission_from_bytes  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OPTIMIZED = (ROOT / "reference_kernels" / "conv2d_optimized.py").read_bytes()
SPREAD = 1.04       # the double's durations span base x 1.00 .. 1.04; p99 of 5 is ~the top


def sim_report():
    spec = specs.parse(SMALL_SPEC)
    return grade(submission_from_bytes("conv2d.py", OPTIMIZED, spec), spec, GradeOptions(backend="sim", seed=5))


def test_a_kernel_is_graded_on_the_current_line_with_device_side_p99(sdk, tmp_path):
    report = grade_on(sdk, "current", SMALL_SPEC, for_current_line(OPTIMIZED), tmp_path, seed=5,
                      neuron_cores=[3], run_precheck=False)
    sim = sim_report()
    assert report["backend"] == "neuron"
    tests = {t["name"]: t for t in report["tests"]}
    assert tests["small"]["status"] == "passed" and tests["perf"]["status"] == "passed", report["tests"]
    assert report["score"]["total"] == sim.score.total == 6
    # device time, not host time (which adds the round trip) and not the mean (1.02 x)
    p99 = np.percentile([1.0, 1.01, 1.02, 1.03, 1.04], 99)
    assert tests["perf"]["p99_us"] == pytest.approx(sim.tests[1].p99_us * p99, rel=1e-3)


def test_a_wrong_kernel_fails_on_the_current_line(sdk, tmp_path):
    # the kernel reads its input as the bias too: it compiles and runs, its output is wrong
    broken = for_current_line(OPTIMIZED).replace(b"def fused_conv2d_maxpool(X, W, bias, pool_size=1):",
                            b"def fused_conv2d_maxpool(X, W, bias, pool_size=1):\n    bias = X", 1)
    report = grade_on(sdk, "current", SMALL_SPEC, broken, tmp_path, seed=5, run_precheck=False)
    small = next(t for t in report["tests"] if t["name"] == "small")
    assert small["status"] in ("failed", "error"), small
    assert report["score"]["total"] == 0


def _job_dir(tmp_path: Path, sdk, input_names: list[str], mode: str = "benchmark") -> Path:
    """A trusted runner's job directory holding a compiled NEFF of a small kernel (the current
    line's compile double writes it, as the child would)."""
    kernel = tmp_path / "scale.py"
    kernel.write_text(
        "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"
        "@nki.jit\ndef scale(x):\n"
        "    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.hbm)\n"
        "    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(dst=t, src=x)\n"
        "    nisa.dma_copy(dst=out, src=nisa.tensor_scalar(t, nl.multiply, 2.0))\n"
        "    return out\n")
    job = tmp_path / "job"
    (job / "inputs").mkdir(parents=True)
    x = np.arange(128 * 64, dtype=np.float16).reshape(128, 64) / 1000
    np.save(job / "inputs" / "arg0.npy", x)
    compile_it = (f"import os, sys; os.environ['NKI_ARTIFACTS_DIR'] = {str(tmp_path / 'art')!r}; "
                  f"sys.path.insert(0, {str(tmp_path)!r}); import numpy as np; from scale import scale; "
                  f"scale(np.load({str(job / 'inputs' / 'arg0.npy')!r}))")
    subprocess.run([str(sdk.current), "-I", "-c", compile_it], check=True, env=sdk_envs.run_env({}))
    (job / "kernel.neff").write_bytes((tmp_path / "art" / "kernel.neff").read_bytes())
    (job / "job.json").write_text(json.dumps({"mode": mode, "warmup": 2, "iters": 5, "input_names": input_names,
                                              "neuron": sdk.settings("current") | {
                                                  "line": "current", "nrtpy_python": str(sdk.nrtpy)}}))
    return job


def _run_trusted(job: Path) -> tuple[dict, list]:
    code = ("import json, sys; from grader.neuron.current import run; "
            "h, outs = run(json.load(open('job.json'))); import numpy as np; "
            "print(json.dumps({'h': h, 'outs': [[o.dtype.str, list(o.shape), o.tobytes().hex()] for o in outs]}))")
    done = subprocess.run([sys.executable, "-I", "-c", code], cwd=job, capture_output=True, text=True,
                          env=sdk_envs.run_env({}), timeout=300)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout.strip().splitlines()[-1])
    outs = [np.frombuffer(bytes.fromhex(h), dtype=np.dtype(d)).reshape(s) for d, s, h in data["outs"]]
    return data["h"], outs


def test_the_nrtpy_runner_reads_raw_outputs_back_and_times_on_the_device(sdk, tmp_path):
    from grader.neuron import as_expected
    job = _job_dir(tmp_path, sdk, ["x"])
    header, outputs = _run_trusted(job)
    x = np.load(job / "inputs" / "arg0.npy")
    # nrtpy hands fp16 outputs back as |V2: raw bytes, viewed as the answer's dtype by the grader
    assert outputs[0].dtype == np.uint8 and outputs[0].shape == (128, 64, 2)
    np.testing.assert_array_equal(as_expected(outputs[0], 2 * x), 2 * x)
    assert header["timing"] == "nrtpy benchmark(mode=device)"
    assert header["percentiles_us"]["0"] < header["latency_us"] <= header["percentiles_us"]["100"]


def test_a_neff_whose_inputs_are_not_the_kernels_parameters_is_refused(sdk, tmp_path):
    header, outputs = _run_trusted(_job_dir(tmp_path, sdk, ["a_tensor"]))
    assert header["status"] == "invalid" and outputs == []
    assert "the NEFF takes inputs x; the kernel's parameters are a_tensor" in header["error"]
