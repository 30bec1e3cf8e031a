"""The legacy SDK line (2.26, the course's `neuronxcc.nki`) end to end through its contract
doubles: the sandboxed child compiles with nki.baremetal(..., save_neff_name=...); a trusted
process reads the outputs back through libnrt (ctypes, the documented C API) and takes the p99
of device-side times from neuron-profile capture / view --output-format summary-json."""
from __future__ import annotations

import ctypes
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
from neuron_specs import SMALL_SPEC  # noqa: E402

from grader import spec as specs  # noqa: E402
from grader.grade import GradeOptions, grade  # noqa: E402
from grader.neuron import libnrt, profile  # noqa: E402
from grader.submission import submission_from_bytes  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OPTIMIZED = (ROOT / "reference_kernels" / "conv2d_optimized.py").read_bytes()
PROFILE_OVER_BENCH_US = 5.0     # neuron-profile total_time carries ~15 us of overhead, nki.benchmark ~10


def test_a_kernel_is_graded_on_the_legacy_line_with_neuron_profile_p99(sdk, tmp_path):
    report = grade_on(sdk, "legacy", SMALL_SPEC, OPTIMIZED, tmp_path, seed=5, neuron_cores=[2])
    spec = specs.parse(SMALL_SPEC)
    sim = grade(submission_from_bytes("conv2d.py", OPTIMIZED, spec), spec, GradeOptions(backend="sim", seed=5))
    tests = {t["name"]: t for t in report["tests"]}
    assert report["backend"] == "neuron" and report["rejections"] == []
    assert tests["small"]["status"] == "passed" and tests["perf"]["status"] == "passed", report["tests"]
    assert report["score"]["total"] == sim.score.total == 6
    assert tests["perf"]["p99_us"] == pytest.approx(sim.tests[1].p99_us + PROFILE_OVER_BENCH_US, rel=1e-6)


def test_a_wrong_kernel_fails_on_the_legacy_line(sdk, tmp_path):
    broken = OPTIMIZED.replace(b"bias_col, op=nl.add", b"bias_col, op=nl.subtract")
    report = grade_on(sdk, "legacy", SMALL_SPEC, broken, tmp_path, seed=5)
    small = next(t for t in report["tests"] if t["name"] == "small")
    assert small["status"] == "failed" and "wrong output" in small["message"], small


def _neff(sdk, tmp_path: Path) -> tuple[bytes, np.ndarray]:
    """kernel.neff of a small kernel, compiled by the legacy compile double as the child would."""
    (tmp_path / "scale.py").write_text(
        "import neuronxcc.nki as nki\nimport neuronxcc.nki.isa as nisa\nimport neuronxcc.nki.language as nl\n\n"
        "@nki.jit\ndef scale(x):\n"
        "    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.hbm)\n"
        "    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(dst=t, src=x)\n"
        "    nisa.dma_copy(dst=out, src=nisa.tensor_scalar(t, nl.multiply, 2.0))\n"
        "    return out\n")
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    np.save(tmp_path / "x.npy", x)
    code = (f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import numpy as np; import neuronxcc.nki as nki; "
            f"from scale import scale; nki.baremetal(scale, save_neff_name={str(tmp_path / 'k.neff')!r})"
            f"(np.load({str(tmp_path / 'x.npy')!r}))")
    subprocess.run([str(sdk.legacy), "-I", "-c", code], check=True, env=sdk_envs.run_env({}))
    return (tmp_path / "k.neff").read_bytes(), x


def test_libnrt_reads_typed_outputs_back_and_refuses_other_input_names(sdk, tmp_path):
    neff, x = _neff(sdk, tmp_path)
    [(name, out)] = libnrt.run_once(str(sdk.libnrt), neff, {"x": x})
    assert name == "output_0" and out.dtype == np.float32
    np.testing.assert_array_equal(out, 2 * x)
    with pytest.raises(ValueError, match="the NEFF takes inputs x; the kernel's parameters are a_tensor"):
        libnrt.run_once(str(sdk.libnrt), neff, {"a_tensor": x})


def test_the_libnrt_double_refuses_calls_outside_init_and_close(sdk):
    lib = libnrt.load_library(str(sdk.libnrt))
    model = ctypes.c_void_p()
    assert lib.nrt_load(b"x", 1, 0, -1, ctypes.byref(model)) in (13, 14)    # NRT_UNINITIALIZED / NRT_CLOSED
    assert lib.nrt_init(libnrt.NRT_FRAMEWORK_TYPE_NO_FW, b"", b"") == 0
    try:
        assert lib.nrt_load(b"not a neff", 10, 0, -1, ctypes.byref(model)) == 2          # NRT_INVALID
        assert lib.nrt_load(b"not a neff", 10, 0, 1, ctypes.byref(model)) == 2           # vnc_count must be -1
    finally:
        lib.nrt_close()
    assert lib.nrt_allocate_tensor_set(ctypes.byref(ctypes.c_void_p())) == 14           # NRT_CLOSED


def test_neuron_profile_times_one_execution_on_the_real_inputs(sdk, tmp_path):
    neff, _ = _neff(sdk, tmp_path)
    (tmp_path / "kernel.neff").write_bytes(neff)
    tool = str(sdk.tools / "neuron-profile")
    us = profile.device_time_us(tool, str(tmp_path / "kernel.neff"), [("x", str(tmp_path / "x.npy"))],
                                str(tmp_path / "p.ntff"))
    assert 15.0 < us < 1000.0
    with pytest.raises(profile.ProfileError, match="no input named 'a_tensor'"):
        profile.device_time_us(tool, str(tmp_path / "kernel.neff"), [("a_tensor", str(tmp_path / "x.npy"))],
                               str(tmp_path / "q.ntff"))
    refused = subprocess.run([tool, "capture", "-n", str(tmp_path / "kernel.neff"), "--iterations", "5"],
                             capture_output=True, text=True)
    assert refused.returncode == 2 and "unrecognized arguments" in refused.stderr


@pytest.mark.parametrize("summary, seconds", [
    ({"total_time": 0.017}, 0.017),
    ({"summary": [{"total_time": 0.000123, "nc_idx": 1}]}, 0.000123),
])
def test_total_time_is_read_from_summary_json(summary, seconds):
    assert profile._total_time_s(summary) == seconds


@pytest.mark.parametrize("summary", [{}, {"a": {"total_time": 1}, "b": {"total_time": 2}}, {"total_time": -1}])
def test_a_summary_without_one_positive_total_time_is_refused(summary):
    with pytest.raises(profile.ProfileError):
        profile._total_time_s(summary)
