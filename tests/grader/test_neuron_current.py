"""The current SDK line (2.32, the nki 0.6 wheel) end to end through its contract doubles: the
sandboxed child compiles an NKI 0.6 kernel with NKI_ARTIFACTS_DIR, a separate nrtpy interpreter
(which must never import nki) runs kernel.neff with NrtpyTensor inputs, and the p99 comes from
benchmark(mode="device").durations_ms. The line compiles NKI 0.6 only: a legacy spec is refused."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "doubles"))
sys.path.insert(0, os.path.dirname(__file__))

import sdk_envs  # noqa: E402
from fixtures import grade_on, sdk  # noqa: E402,F401
from neuron_specs import SMALL_SPEC, SMALL_SPEC_NKI06  # noqa: E402

from grader import spec as specs  # noqa: E402
from grader.grade import GradeOptions, grade  # noqa: E402
from grader.submission import submission_from_bytes  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OPTIMIZED = (ROOT / "reference_kernels" / "nki06" / "conv2d_optimized.py").read_bytes()
LEGACY_OPTIMIZED = (ROOT / "reference_kernels" / "conv2d_optimized.py").read_bytes()
SPREAD = 1.04       # the double's durations span base x 1.00 .. 1.04; p99 of 5 is ~the top
SIGNATURE = b"def fused_conv2d_maxpool(X, W, bias, pool_size=1):"


def sim_report(lnc: int = 1):
    """The simulator's grade of the reference, its kernel launched on `lnc` physical cores."""
    spec = specs.parse(dict(SMALL_SPEC_NKI06, lnc=lnc))
    return grade(submission_from_bytes("conv2d.py", OPTIMIZED, spec), spec, GradeOptions(backend="sim", seed=5))


def test_a_default_trn2_grades_an_nki06_kernel_at_its_lnc_2_with_device_side_p99(sdk, tmp_path):
    """A Trn2 runtime left at its default logical-NeuronCore degree (LNC=2) grades a kernel:
    compiled as kernel[2] in the child (the call's own default, LNC=1, is refused on this
    runtime: test_neuron_doubles) and loaded at LNC=2 by nrtpy."""
    report = grade_on(sdk, "current", SMALL_SPEC_NKI06, OPTIMIZED, tmp_path, seed=5, neuron_cores=[3])
    sim = sim_report(lnc=2)
    assert report["backend"] == "neuron" and report["dialect"] == "nki-0.6"
    assert report["rejections"] == [], report["rejections"]          # the precheck passes a 0.6 kernel
    tests = {t["name"]: t for t in report["tests"]}
    assert tests["small"]["status"] == "passed" and tests["perf"]["status"] == "passed", report["tests"]
    assert report["score"]["total"] == sim.score.total == 6
    # device time of two physical cores, not host time (which adds the round trip) and not the mean (1.02 x)
    p99 = np.percentile([1.0, 1.01, 1.02, 1.03, 1.04], 99)
    assert tests["perf"]["p99_us"] == pytest.approx(sim.tests[1].p99_us * p99, rel=1e-3)
    assert sim.tests[1].p99_us != pytest.approx(sim_report(lnc=1).tests[1].p99_us, rel=1e-3)


def test_a_worker_configured_for_lnc_1_compiles_and_loads_at_it(sdk, tmp_path):
    """The operator's NEURON_LOGICAL_NC_CONFIG reaches every process of the grade, though the
    sandbox's environment is minimal: compiled as kernel[1], loaded at LNC=1."""
    settings = dict(sdk.settings("current"), NEURON_LOGICAL_NC_CONFIG="1")
    report = grade_on_with(sdk, settings, SMALL_SPEC_NKI06, OPTIMIZED, tmp_path, seed=5)
    perf = next(t for t in report["tests"] if t["name"] == "perf")
    p99 = np.percentile([1.0, 1.01, 1.02, 1.03, 1.04], 99)
    assert perf["status"] == "passed" and perf["p99_us"] == pytest.approx(sim_report(lnc=1).tests[1].p99_us * p99,
                                                                          rel=1e-3), perf


def grade_on_with(sdk, settings: dict, spec: dict, source: bytes, tmp_path: Path, **options) -> dict:
    """grade_on for a current-line worker with these settings (environment)."""
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    (tmp_path / "conv2d.py").write_bytes(source)
    (tmp_path / "options.json").write_text(json.dumps({"backend": "neuron", **options}))
    done = subprocess.run([str(sdk.current), "-I", str(ROOT / "tests" / "doubles" / "grade_driver.py"), str(tmp_path)],
                          capture_output=True, text=True, env=sdk_envs.run_env(settings), timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout)


def test_a_wrong_nki06_kernel_fails_on_the_current_line(sdk, tmp_path):
    # the kernel ignores the pool size it is given: it compiles and runs, its output is wrong
    assert OPTIMIZED.count(SIGNATURE) == 1
    broken = OPTIMIZED.replace(SIGNATURE, SIGNATURE + b"\n    pool_size = 1", 1)
    report = grade_on(sdk, "current", SMALL_SPEC_NKI06, broken, tmp_path, seed=5)
    small = next(t for t in report["tests"] if t["name"] == "small")
    assert small["status"] == "failed", small
    assert report["score"]["total"] == 0


def test_a_legacy_kernel_renamed_to_nki_does_not_compile_on_the_current_line(sdk, tmp_path):
    """What the grader once did for the current line (neuronxcc.nki -> nki) cannot work: the nki
    wheel has the 0.6 API, and the kernel's first legacy name stops it when its file is loaded
    (tests/grader/test_neuron_doubles.py: a legacy call is refused when it is compiled)."""
    renamed = LEGACY_OPTIMIZED.replace(b"neuronxcc.nki", b"nki")
    report = grade_on(sdk, "current", SMALL_SPEC_NKI06, renamed, tmp_path, seed=5, run_precheck=False)
    small = next(t for t in report["tests"] if t["name"] == "small")
    assert small["status"] == "error" and "nki.compiler is not an NKI name" in small["message"], small
    assert report["score"]["total"] == 0


def grade_cli(sdk, line: str, *args) -> subprocess.CompletedProcess:
    return subprocess.run([str(sdk.python(line)), "-m", "grader.cli", "grade", *args, "--backend", "neuron"],
                          cwd=ROOT, capture_output=True, text=True, env=sdk_envs.run_env(sdk.settings(line)),
                          timeout=300)


def one_line_refusal(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
    [line] = done.stderr.strip().splitlines()
    return line


def test_a_legacy_spec_is_refused_on_the_current_line_naming_the_nki06_spec(sdk, tmp_path):
    (tmp_path / "conv2d.py").write_bytes(LEGACY_OPTIMIZED)
    line = one_line_refusal(grade_cli(sdk, "current", str(tmp_path / "conv2d.py"), "--assignment", "asst4-trainium2"))
    assert line.startswith("grader: the current Neuron SDK line (nki 0.6.0) compiles NKI 0.6 kernels (import nki) "
                           "only, and spec 'asst4-trainium2' is written in legacy NKI"), line
    assert "grade with the asst4-trainium2-nki06 spec" in line and "on a legacy-line worker" in line


def test_grade_refuses_a_legacy_spec_on_the_current_line_before_any_kernel_runs(sdk, tmp_path):
    """The API (what a trn2 worker calls) raises the grader's error, never a report scoring 0."""
    (tmp_path / "spec.json").write_text(json.dumps(SMALL_SPEC))
    (tmp_path / "conv2d.py").write_bytes(LEGACY_OPTIMIZED)
    (tmp_path / "options.json").write_text(json.dumps({"backend": "neuron"}))
    done = subprocess.run([str(sdk.current), "-I", str(ROOT / "tests" / "doubles" / "grade_driver.py"), str(tmp_path)],
                          capture_output=True, text=True, env=sdk_envs.run_env(sdk.settings("current")), timeout=300)
    assert done.returncode != 0 and done.stdout == ""
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("grader.neuron.lines.WrongSdkLine: the current Neuron SDK line (nki 0.6.0) compiles "
                           "NKI 0.6 kernels (import nki) only, and spec 'small-conv'"), last
    assert "asst4-trainium2-nki06" in last


def test_an_nki06_spec_is_refused_on_the_legacy_line(sdk, tmp_path):
    (tmp_path / "conv2d.py").write_bytes(OPTIMIZED)
    line = one_line_refusal(grade_cli(sdk, "legacy", str(tmp_path / "conv2d.py"), "--assignment",
                                      "asst4-trainium2-nki06"))
    assert line.startswith("grader: the legacy Neuron SDK line (neuronx-cc 2.21.33363.0) compiles legacy NKI "
                           "kernels (import neuronxcc.nki) only, and spec 'asst4-trainium2-nki06' is written in "
                           "NKI 0.6"), line
    assert "grade with the asst4-trainium2 spec" in line and "on a current-line worker" in line


def _job_dir(tmp_path: Path, sdk, input_names: list[str], mode: str = "benchmark", subgraphs: int = 1) -> Path:
    """A trusted runner's job directory holding a compiled NEFF of a small kernel (the current
    line's compile double writes it at LNC=2, as the child would on a default Trn2), of
    `subgraphs` device events per execution."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    kernel = tmp_path / "scale.py"
    kernel.write_text(
        "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"
        "@nki.jit\ndef scale(x):\n"
        "    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)\n"
        "    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(dst=t, src=x)\n"
        "    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)\n"
        "    nisa.dma_copy(dst=out, src=t)\n"
        "    return out\n")
    job = tmp_path / "job"
    (job / "inputs").mkdir(parents=True)
    x = np.arange(128 * 64, dtype=np.float16).reshape(128, 64) / 1000
    np.save(job / "inputs" / "arg0.npy", x)
    compile_it = (f"import os, sys; os.environ['NKI_ARTIFACTS_DIR'] = {str(tmp_path / 'art')!r}; "
                  f"sys.path.insert(0, {str(tmp_path)!r}); import numpy as np; from scale import scale; "
                  f"scale[2](np.load({str(job / 'inputs' / 'arg0.npy')!r}))")
    subprocess.run([str(sdk.current), "-I", "-c", compile_it], check=True, env=sdk_envs.run_env({}))
    neff = (tmp_path / "art" / "kernel.neff").read_bytes()
    if subgraphs != 1:
        import neff_double
        neff = neff_double.encode(neff_double.decode(neff)[1], subgraphs=subgraphs)
    (job / "kernel.neff").write_bytes(neff)
    (job / "job.json").write_text(json.dumps({"mode": mode, "warmup": 2, "iters": 5, "input_names": input_names,
                                              "neuron": sdk.settings("current") | {
                                                  "line": "current", "nrtpy_python": str(sdk.nrtpy), "lnc": 2}}))
    return job


def _run_trusted(job: Path) -> tuple[dict, list]:
    code = ("import json, sys; from grader.neuron.current import run; "
            "h, outs = run(json.load(open('job.json'))); import numpy as np; "
            "print(json.dumps({'h': h, 'outs': [[o.dtype.str, list(o.shape), o.tobytes().hex()] for o in outs]}))")
    tmp = job.parent / "worker-tmp"          # the worker's /tmp: the runner leaves nothing there
    tmp.mkdir(exist_ok=True)
    done = subprocess.run([sys.executable, "-I", "-c", code], cwd=job, capture_output=True, text=True,
                          env=sdk_envs.run_env({"TMPDIR": str(tmp)}), timeout=300)
    assert done.returncode == 0, done.stderr
    assert not list(tmp.iterdir()), f"left in the worker's temporary folder: {list(tmp.iterdir())}"
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
    assert header["timing"] == "nrtpy benchmark(mode=device), per call"
    assert header["percentiles_us"]["0"] < header["latency_us"] <= header["percentiles_us"]["100"]


def test_a_neff_whose_inputs_are_not_the_kernels_parameters_is_refused(sdk, tmp_path):
    header, outputs = _run_trusted(_job_dir(tmp_path, sdk, ["a_tensor"]))
    assert header["status"] == "invalid" and outputs == []
    assert "the NEFF takes inputs x; the kernel's parameters are a_tensor" in header["error"]


def test_a_neff_of_two_device_events_per_call_is_timed_per_call(sdk, tmp_path):
    """nrtpy's device mode reports events, and a multi-subgraph NEFF emits several per call
    (nrtpy-troubleshooting): with two events of half a call each, a p99 over events would be
    half the kernel's time. Combined into calls, it is the one-event NEFF's."""
    one, _ = _run_trusted(_job_dir(tmp_path / "one", sdk, ["x"]))
    two, _ = _run_trusted(_job_dir(tmp_path / "two", sdk, ["x"], subgraphs=2))
    assert one["status"] == two["status"] == "ok", (one, two)
    assert two["latency_us"] == pytest.approx(one["latency_us"], rel=1e-9)
    assert two["percentiles_us"] == pytest.approx(one["percentiles_us"], rel=1e-9)


@pytest.mark.parametrize("durations, iterations, calls, words", [
    ([0.01] * 9, 9, 5, "9 device events for 5 calls (benchmark_iter): not a whole number of events per call"),
    ([0.01] * 4, 4, 5, "4 device events for 5 calls"),
    ([0.01] * 10, 5, 5, "10 durations_ms for 5 device events"),
    ([0.01] * 5, None, 5, "BenchmarkResult.iterations is None"),
    ([0.01] * 5, 5, None, "did not say how many calls it timed"),
])
def test_device_events_that_do_not_add_up_to_the_calls_are_refused(durations, iterations, calls, words):
    from grader.neuron.current import EventCountError, per_call_us
    with pytest.raises(EventCountError, match=re.escape(words)):
        per_call_us(durations, iterations, calls)


def test_events_are_combined_into_calls_in_order():
    from grader.neuron.current import per_call_us
    calls = per_call_us([0.004, 0.006, 0.005, 0.005, 0.010, 0.001], 6, 3)
    assert calls.tolist() == pytest.approx([10.0, 10.0, 11.0])


def test_a_count_that_does_not_add_up_is_a_grader_error_never_a_p99(sdk, tmp_path):
    """The trusted runner says "grader_error" (runner.RunnerFault: the grade is the
    grader's error, retried by a worker), and takes no p99 from such events. Here the nrtpy
    interpreter is one whose benchmark drops an event, as a broken runtime might."""
    job = _job_dir(tmp_path, sdk, ["x"])
    broken = tmp_path / "broken_nrtpy"
    (broken / "nrtpy").mkdir(parents=True)
    (broken / "nrtpy" / "__init__.py").write_text(
        f"import sys\nsys.path.remove({str(broken)!r})\ndel sys.modules['nrtpy']\nimport nrtpy as _real\n"
        "sys.modules['nrtpy'] = _real\n_bench = _real.NrtpyModel.benchmark\n"
        "def benchmark(self, *a, **k):\n    r = _bench(self, *a, **k)\n    r.durations_ms = r.durations_ms[1:]\n"
        "    r.iterations -= 1\n    return r\n_real.NrtpyModel.benchmark = benchmark\n")
    launcher = tmp_path / "nrtpy-python"       # started as `launcher -I nrtpy_main.py result`
    launcher.write_text(f"#!{sdk.nrtpy}\nimport runpy, sys\nsys.path.insert(0, {str(broken)!r})\n"
                        "sys.argv = sys.argv[2:]\nrunpy.run_path(sys.argv[0], run_name='__main__')\n")
    launcher.chmod(0o755)
    data = json.loads((job / "job.json").read_text())
    data["neuron"]["nrtpy_python"] = str(launcher)
    (job / "job.json").write_text(json.dumps(data))
    header, outputs = _run_trusted(job)
    assert header["status"] == "grader_error" and outputs == [], header
    assert "4 device events for 5 calls" in header["error"] and "latency_us" not in header
