"""`nkisim profile --platform`: the kernel runs under that generation's rules, is timed with its
cost model, and the summary names the generation (and says when its model is uncalibrated)."""
import re

import numpy as np
import pytest

import nkisim
from nkisim import cost, platforms
from nkisim.cli import _load_kernel, main
from nkisim.settings import SimSettings

KERNELS = '''
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def add_rows(a, b):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    y = nl.ndarray(b.shape, b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    nisa.dma_copy(dst=y, src=b)
    nisa.dma_copy(dst=out, src=nisa.tensor_tensor(x, y, op=nl.add))
    return out


@nki.jit
def big_tile(a):
    # 180 KiB a partition: more than Trainium1 leaves a kernel (176 KiB), less than Trainium2's
    t = nl.zeros((128, 46080), nl.float32, buffer=nl.sbuf)
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=nl.add(t[:, 0:a.shape[1]], nl.load(a)))
    return out


@nki.jit(platform_target="trn1")
def pinned(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=nl.load(a))
    return out
'''

HEADLINES = {"trn1": "Trainium1 (NeuronCore-v2) model", "trn2": "Trainium2 (NeuronCore-v3) model",
             "trn3": "Trainium3 (NeuronCore-v4) model"}


@pytest.fixture
def kernel_file(tmp_path):
    path = tmp_path / "kernels.py"
    path.write_text(KERNELS)
    return path


def latency_us(out: str) -> float:
    return float(re.search(r"estimated latency\s+([\d.]+) us", out).group(1))


def add_rows_args(platform):
    return ["profile", "--platform", platform, "--kernel", "add_rows", "--input", "128x2048", "--input", "128x2048"]


@pytest.mark.parametrize("platform", ["trn1", "trn2", "trn3"])
def test_the_summary_names_the_generation_and_times_it_with_its_model(kernel_file, capsys, platform):
    assert main(add_rows_args(platform) + [str(kernel_file)]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith(HEADLINES[platform])
    assert ("NOT calibrated against Trainium3 hardware" in first) == (not cost.generation(platform).calibrated)
    assert (platform == "trn3") == (not cost.generation(platform).calibrated)
    # the printed latency is the platform's model on a run under the platform's rules
    nkisim.install()
    kernel = _load_kernel(str(kernel_file), "add_rows")
    inputs = [np.random.default_rng(0).random((128, 2048), dtype=np.float32) for _ in range(2)]
    run = nkisim.run_kernel(kernel, inputs, {}, settings=SimSettings(platform=platform))
    assert run.settings.platform == platform
    assert latency_us(out) == pytest.approx(cost.estimate(run).total_us, abs=0.05)


def test_each_generation_times_the_same_kernel_differently(kernel_file, capsys):
    latencies = {}
    for platform in ("trn1", "trn2", "trn3"):
        assert main(add_rows_args(platform) + [str(kernel_file)]) == 0
        latencies[platform] = latency_us(capsys.readouterr().out)
    # DMA engines move 17 / 23 / 33 B/ns on v2 / v3 / v4: this DMA-bound kernel gets faster each time
    assert latencies["trn1"] > latencies["trn2"] > latencies["trn3"]


def test_the_platforms_rules_apply_sbuf_size(kernel_file, capsys):
    common = ["profile", str(kernel_file), "--kernel", "big_tile", "--input", "128x512"]
    assert main(common + ["--platform", "trn2"]) == 0
    capsys.readouterr()
    assert main(common + ["--platform", "trn1"]) == 1
    err = capsys.readouterr().err
    assert "err_stack_overflow_sbuf" in err and "196608 physical minus 16384 reserved" in err


def test_an_unknown_platform_is_refused_by_name(kernel_file, capsys):
    with pytest.raises(SystemExit):
        main(["profile", str(kernel_file), "--kernel", "add_rows", "--input", "128x4", "--platform", "trn4"])
    assert "invalid choice: 'trn4' (choose from 'trn1', 'trn2', 'trn3')" in capsys.readouterr().err


def test_a_kernel_pinned_to_another_platform_is_an_error_not_a_silent_choice(kernel_file, capsys):
    common = ["profile", str(kernel_file), "--kernel", "pinned", "--input", "128x64"]
    with pytest.raises(SystemExit, match=r"platform_target='trn1'\) but --platform is trn3"):
        main(common + ["--platform", "trn3"])
    assert main(common + ["--platform", "trn1"]) == 0
    capsys.readouterr()
    assert main(common) == 0             # without --platform the kernel's own target
    assert capsys.readouterr().out.splitlines()[0].startswith(HEADLINES["trn1"])


def test_the_process_default_is_restored_after_the_command(kernel_file, capsys):
    before = platforms.default_platform()
    assert main(add_rows_args("trn1") + [str(kernel_file)]) == 0
    assert platforms.default_platform() == before


NKI06_COPY = '''
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def copy(a):
    assert nisa.get_nc_version() == nisa.nc_version.gen4       # traced for Trainium3
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out
'''


def test_an_nki06_kernel_takes_its_platform_from_the_environment_as_nki_does(tmp_path, capsys, monkeypatch):
    path = tmp_path / "copy06.py"
    path.write_text(NKI06_COPY)
    common = ["profile", str(path), "--kernel", "copy", "--input", "128x64"]
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "gen4")
    assert main(common) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith(HEADLINES["trn3"])
    assert main(common + ["--platform", "trn3"]) == 0
    with pytest.raises(SystemExit, match="NEURON_PLATFORM_TARGET_OVERRIDE=gen4 names trn3 but --platform is trn2"):
        main(common + ["--platform", "trn2"])
