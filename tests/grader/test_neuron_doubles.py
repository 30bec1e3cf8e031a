"""The SDK's contract doubles refuse what the documented APIs refuse (tests/doubles/README.md):
a double that accepted what the real API refuses would let the hardware path pass here and
crash on a Trn2. Each case runs in the Python environment the real package lives in."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "doubles"))

import sdk_envs  # noqa: E402
from fixtures import sdk  # noqa: E402,F401

# the same small kernel in each SDK line's dialect: legacy calls return their result; NKI 0.6
# calls take their destination first and return nothing, and outputs live in nl.shared_hbm
LEGACY_KERNEL = """\
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

@nki.jit
def scale(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=nisa.tensor_scalar(t, nl.multiply, 2.0))
    return out
"""
NKI06_KERNEL = """\
import nki
import nki.isa as nisa
import nki.language as nl

@nki.jit
def scale(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out, src=t)
    return out
"""


def run_in(python, code: str, cwd: Path, **env) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-I", "-c", textwrap.dedent(code)], cwd=cwd, capture_output=True,
                          text=True, env=sdk_envs.run_env(env), timeout=300)


@pytest.fixture(scope="module")
def neff_dir(sdk, tmp_path_factory):
    """kernel.neff of a small kernel from the current line's compile double, and its input."""
    where = tmp_path_factory.mktemp("neff")
    (where / "scale.py").write_text(NKI06_KERNEL)
    np.save(where / "x.npy", np.arange(128 * 64, dtype=np.float32).reshape(128, 64))
    done = run_in(sdk.current, f"""
        import numpy as np, sys
        sys.path.insert(0, {str(where)!r})
        from scale import scale
        scale[2](np.load("x.npy"))          # at a default Trn2's degree, LNC=2
        """, where, NKI_ARTIFACTS_DIR=str(where / "art"))
    assert done.returncode == 0, done.stderr
    return where


def nrtpy(sdk, neff_dir, body: str) -> subprocess.CompletedProcess:
    return run_in(sdk.nrtpy, "import numpy as np, nrtpy\nfrom nrtpy import NrtpyModel, NrtpyTensor\n"
                  "model = NrtpyModel.load_from_neff('art/kernel.neff')\nx = np.load('x.npy')\n"
                  + textwrap.dedent(body), neff_dir)


def last_error(done: subprocess.CompletedProcess) -> str:
    assert done.returncode != 0, done.stdout
    return done.stderr.strip().splitlines()[-1]


def test_nrtpy_runs_a_neff_on_nrtpy_tensors(sdk, neff_dir):
    done = nrtpy(sdk, neff_dir, """
        out = model({"x": NrtpyTensor.from_numpy(x, name="x")})
        raw = out["output_0"].numpy()
        assert raw.dtype.kind == "V", raw.dtype          # libnrt reports no dtype: raw bytes
        assert np.array_equal(raw.view(np.float32), 2 * x)
        stats = model.benchmark({"x": NrtpyTensor.from_numpy(x)}, warmup_iter=1, benchmark_iter=3, mode="device")
        assert stats.iterations == 3 and len(stats.durations_ms) == 3 and stats.warmup_iterations == 1
        print(list(model.input_tensors_info), model.input_tensors_info["x"].size)
        """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["['x']", str(128 * 64 * 4)]


@pytest.mark.parametrize("body, error", [
    ('model({"x": x})', "TypeError: inputs['x'] must be an nrtpy.NrtpyTensor"),
    ('model({"X": NrtpyTensor.from_numpy(x)})', "NrtError: NRT Error NRT_INVALID(2): input tensor names ['X']"),
    ('model({"x": NrtpyTensor.from_numpy(x[:64])})', "NrtError: NRT Error NRT_INVALID(2): input 'x' has 16384 bytes"),
    ('model({"x": NrtpyTensor.from_numpy(x)}, iterations=3)', "TypeError"),
    ('NrtpyTensor.from_numpy(x.tolist())', "TypeError: from_numpy takes a numpy.ndarray"),
    ('model.benchmark({"x": NrtpyTensor.from_numpy(x)}, benchmark_iter=0)', "ValueError: benchmark_iter must be at least 1"),
    ('model.benchmark({"x": NrtpyTensor.from_numpy(x)}, mode="wall")', "ValueError: mode must be 'device' or 'host'"),
    ('model.benchmark({"x": NrtpyTensor.from_numpy(x)}, warmup=5)', "TypeError"),
    ('t = NrtpyTensor.from_numpy(x); nrtpy.reset(); model({"x": t})', "NrtpyError"),
    ('nrtpy.reset(); NrtpyTensor.from_numpy(x).numpy(); nrtpy.reset(); model({"x": NrtpyTensor.from_numpy(x)})',
     "NrtpyError: this model belongs to a runtime closed by nrtpy.reset()"),
    ('nrtpy.configure(visible_cores=[0])', "RuntimeError: the nrtpy runtime is already active"),
    ('NrtpyModel.load_from_neff("missing.neff")', "NrtError: NRT Error NRT_FAILURE(1): Failed to load model"),
    ('import nki', "ImportError: the standalone nrtpy wheel and the nki wheel cannot be installed"),
])
def test_nrtpy_refuses_what_its_documentation_refuses(sdk, neff_dir, body, error):
    assert error in last_error(nrtpy(sdk, neff_dir, body))


def test_nrtpy_cannot_be_imported_beside_nki(sdk, neff_dir):
    done = run_in(sdk.nrtpy, "import sys, types\nsys.modules['nki'] = types.ModuleType('nki')\nimport nrtpy", neff_dir)
    assert "cannot be installed in the same Python environment" in last_error(done)


def test_the_legacy_compile_surface_refuses_undocumented_arguments(sdk, tmp_path):
    (tmp_path / "scale.py").write_text(LEGACY_KERNEL)
    done = run_in(sdk.legacy, """
        import numpy as np, sys
        sys.path.insert(0, ".")
        import neuronxcc.nki as nki
        from scale import scale
        nki.baremetal(scale, save_neff_name="k.neff", artifacts_dir=".")
        """, tmp_path)
    assert last_error(done).startswith("TypeError: nki.baremetal() got unexpected keyword argument(s) artifacts_dir")


def test_the_current_line_has_no_baremetal_and_reads_the_artifacts_dir_at_import(sdk, tmp_path):
    (tmp_path / "scale.py").write_text(NKI06_KERNEL)
    done = run_in(sdk.current, "import nki\nnki.baremetal", tmp_path)
    assert "nki.baremetal is not available from NKI 0.2.0" in last_error(done)
    late = run_in(sdk.current, """
        import os, sys, numpy as np
        sys.path.insert(0, ".")
        from scale import scale
        os.environ["NKI_ARTIFACTS_DIR"] = "late"       # after nki was imported: too late
        scale[2](np.zeros((128, 64), np.float32))
        print(os.path.exists("late"))
        """, tmp_path)
    assert late.returncode == 0 and late.stdout.strip() == "False", late.stderr


def test_the_current_line_serves_nki06_and_refuses_the_legacy_api(sdk, tmp_path):
    """The nki wheel of SDK 2.30+ has NKI 0.6's API: a legacy kernel under `import nki` is refused
    when it is compiled, and nothing leaves a NEFF behind."""
    (tmp_path / "scale.py").write_text(LEGACY_KERNEL.replace("neuronxcc.nki", "nki"))
    done = run_in(sdk.current, """
        import sys, numpy as np, nki
        sys.path.insert(0, ".")
        print(nki.__version__, nki.isa.__name__, nki.language.__name__, nki.typing.__name__)
        from scale import scale
        scale[2](np.zeros((128, 64), np.float32))
        """, tmp_path, NKI_ARTIFACTS_DIR=str(tmp_path / "art"))
    assert done.stdout.split() == ["0.6.0", "nkisim.nki06.isa", "nkisim.nki06.language", "nkisim.nki06.typing"]
    assert "takes its destination first" in done.stderr, done.stderr
    assert not (tmp_path / "art" / "kernel.neff").exists()


@pytest.mark.parametrize("body, error", [
    # since NKI 0.3 the target comes from NEURON_PLATFORM_TARGET_OVERRIDE, and only the top-level kernel is jitted
    ("nki.jit(platform_target='trn2')", "nki.jit(platform_target=...) is an error since NKI 0.3"),
    ("@nki.jit\ndef helper(x):\n    return x\n@nki.jit\ndef k(x):\n    return helper(x)\nk(np.zeros((4, 4), np.float32))",
     "called from inside another kernel"),
    ("nki.jit(nki.jit(lambda x: x))", "is decorated with @nki.jit twice"),
])
def test_the_current_lines_jit_keeps_nki06_rules(sdk, tmp_path, body, error):
    done = run_in(sdk.current, "import numpy as np, nki\n" + body, tmp_path)
    assert done.returncode != 0 and error in done.stderr, done.stderr       # nkisim's errors span lines


def test_nki_simulate_runs_on_the_cpu_and_keeps_no_neff(sdk, tmp_path):
    (tmp_path / "scale.py").write_text(NKI06_KERNEL)
    done = run_in(sdk.current, """
        import os, sys, numpy as np, nki
        sys.path.insert(0, ".")
        from scale import scale
        x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
        print(np.array_equal(nki.simulate(scale)(x), 2 * x), os.path.exists("art"))
        print(np.array_equal(scale[2](x), 2 * x), os.path.exists("art/kernel.neff"))
        """, tmp_path, NKI_ARTIFACTS_DIR=str(tmp_path / "art"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False", "True", "True"]


def test_the_nrtpy_script_frames_its_header_as_the_grader_reads_it():
    """nrtpy_main.py runs where the grader is not installed, so it writes the frame itself."""
    from grader import wire
    from grader.neuron import nrtpy_main
    header = {"status": "ok", "arrays": 2, "durations_ms": [0.01, 0.02]}
    frame = nrtpy_main.header_frame(header)
    assert frame == wire.header_frame(header)
    assert wire.read_header_line(frame + b"rest") == (header, len(frame))


# ----- logical NeuronCores, documented names, device events, visible cores (issue 43) -----------

@pytest.mark.parametrize("call, env, error", [
    # "kernel(...) # Kernel implicitly defaults to LNC=1; neuronx-cc defaults to LNC=2 on Trn2" (EVRF066),
    # and the kernel's LNC "must match the NEURON_LOGICAL_NC_CONFIG ... set for the Neuron Runtime" (nki.jit)
    ("scale(x)", {}, "was compiled for LNC=1 and the Neuron runtime runs at LNC=2"),
    ("scale[1](x)", {}, "was compiled for LNC=1 and the Neuron runtime runs at LNC=2"),
    ("scale[2](x)", {"NEURON_LOGICAL_NC_CONFIG": "1"}, "is configured with LNC=2, but NEURON_LOGICAL_NC_CONFIG=1"),
    ("scale[2](x)", {"NRT_DOUBLE_FAMILY": "2", "NEURON_LOGICAL_NC_CONFIG": "1"}, "is configured with LNC=2"),
])
def test_the_current_line_compiles_only_at_the_runtimes_lnc(sdk, tmp_path, call, env, error):
    (tmp_path / "scale.py").write_text(NKI06_KERNEL)
    done = run_in(sdk.current, f"""
        import sys, numpy as np
        sys.path.insert(0, ".")
        from scale import scale
        x = np.zeros((128, 64), np.float32)
        {call}
        """, tmp_path, **env)
    assert error in last_error(done)


@pytest.mark.parametrize("call, env", [("scale[2](x)", {}), ("scale(x)", {"NEURON_LOGICAL_NC_CONFIG": "2"}),
                                       ("scale[1](x)", {"NEURON_LOGICAL_NC_CONFIG": "1"}),
                                       ("scale(x)", {"NRT_DOUBLE_FAMILY": "2"})])
def test_the_current_line_runs_a_kernel_at_the_runtimes_lnc(sdk, tmp_path, call, env):
    (tmp_path / "scale.py").write_text(NKI06_KERNEL)
    done = run_in(sdk.current, f"""
        import sys, numpy as np
        sys.path.insert(0, ".")
        from scale import scale
        x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
        print(np.array_equal({call}, 2 * x))
        """, tmp_path, **env)
    assert done.returncode == 0 and done.stdout.split() == ["True"], done.stderr


def test_nrtpy_loads_a_neff_only_at_the_lnc_it_was_compiled_for(sdk, neff_dir):
    done = run_in(sdk.nrtpy, "from nrtpy import NrtpyModel\nNrtpyModel.load_from_neff('art/kernel.neff')",
                  neff_dir, NEURON_LOGICAL_NC_CONFIG="1")
    assert "NrtError: NRT Error NRT_FAILURE(1): Failed to load model: the NEFF was compiled for LNC=2 and the " \
           "runtime runs at LNC=1" in last_error(done)
    bad = run_in(sdk.nrtpy, "from nrtpy import NrtpyModel\nNrtpyModel.load_from_neff('art/kernel.neff')",
                 neff_dir, NEURON_LOGICAL_NC_CONFIG="4")
    assert "NRT_INVALID(2): NEURON_LOGICAL_NC_CONFIG=4 is not supported" in last_error(bad)


@pytest.mark.parametrize("code, error", [
    # NKI 0.6's top level documents jit and simulate (nki/api/nki.rst): no nki.compiler page
    ("import nki\nnki.compiler.skip_middle_end_transformations", "nki.compiler is not an NKI name"),
    ("import nki\nnki.compiler", "nki.compiler is not an NKI name"),
    ("import nki.compiler", "ModuleNotFoundError: No module named 'nki.compiler'"),
    ("from nki import compiler", "ImportError"),
])
def test_the_current_line_refuses_names_nki_06_does_not_document(sdk, tmp_path, code, error):
    done = run_in(sdk.current, code, tmp_path)
    assert done.returncode != 0 and error in done.stderr, done.stderr
    if code.endswith("skip_middle_end_transformations"):
        probe = run_in(sdk.current, "import nki\ntry:\n    nki.compiler.skip_middle_end_transformations\n"
                                    "except AttributeError:\n    print('AttributeError', hasattr(nki, 'compiler'))",
                       tmp_path)       # what the real module raises, so getattr and hasattr keep working
        assert probe.stdout.split() == ["AttributeError", "False"], probe.stderr


def test_nrtpy_device_mode_reports_each_subgraphs_event(sdk, neff_dir):
    """"Some kernels emit multiple execution events per call (multi-subgraph NEFFs). The
    reported iterations in BenchmarkResult reflects actual device events, not Python calls"."""
    import neff_double
    data = (neff_dir / "art" / "kernel.neff").read_bytes()
    (neff_dir / "two.neff").write_bytes(neff_double.encode(neff_double.decode(data)[1], subgraphs=2))
    done = run_in(sdk.nrtpy, """
        import numpy as np
        from nrtpy import NrtpyModel, NrtpyTensor
        x = np.load("x.npy")
        for path in ("art/kernel.neff", "two.neff"):
            model = NrtpyModel.load_from_neff(path)
            stats = model.benchmark({"x": NrtpyTensor.from_numpy(x)}, warmup_iter=1, benchmark_iter=3)
            host = model.benchmark({"x": NrtpyTensor.from_numpy(x)}, warmup_iter=1, benchmark_iter=3, mode="host")
            print(stats.iterations, len(stats.durations_ms), host.iterations, round(sum(stats.durations_ms), 9))
        """, neff_dir)
    assert done.returncode == 0, done.stderr
    one, two = (line.split() for line in done.stdout.splitlines())
    assert one[:3] == ["3", "3", "3"] and two[:3] == ["6", "6", "3"] and one[3] == two[3]


@pytest.mark.parametrize("visible, count", [("", 8), ("0-1", 2), ("3", 1), ("0,2,4-6", 5)])
def test_libnrt_counts_the_visible_cores_apart_from_the_instances(sdk, tmp_path, visible, count):
    """nrt_get_visible_vnc_count: "VirtualNeuronCores visible to the application";
    nrt_get_total_vnc_count: "VirtualNeuronCores available in instance" (nrt.h)."""
    done = run_in(sdk.legacy, f"""
        from grader.neuron import libnrt
        lib = libnrt.load_library({str(sdk.libnrt)!r})
        import ctypes
        total = ctypes.c_uint32(0)
        assert lib.nrt_get_total_vnc_count(ctypes.byref(total)) == 0
        print(total.value, libnrt.visible_cores({str(sdk.libnrt)!r}), libnrt.instance_family({str(sdk.libnrt)!r}))
        """, tmp_path, NEURON_RT_VISIBLE_CORES=visible)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["8", str(count), "Trn2"]
