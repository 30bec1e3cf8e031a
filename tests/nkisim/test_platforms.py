"""Platform rules: the Fall 2024 assignment ran on Trn1 with SDK 2.20/2.21, the Fall 2025 one
on Trn2 with SDK 2.26. Each rule where the two differ is tested both ways, with kernels that
stay invalid on both still failing with their usual errors."""
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import nkisim
from marker_lines import marker_lines
from nkisim import errors, platforms
from nkisim.settings import HardwareLimits, SimSettings

nkisim.install()

import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

THIS_FILE = os.path.abspath(__file__)
REPO = Path(THIS_FILE).parents[2]
line_of = marker_lines(THIS_FILE)
TRN1 = SimSettings(platform="trn1")
TRN2 = SimSettings(platform="trn2")



def run(kernel, *args, settings):
    return nkisim.run_kernel(kernel, args, {}, settings=settings).outputs


def failure(exc_type, code, tag, kernel, *args, settings):
    with pytest.raises(exc_type) as info:
        run(kernel, *args, settings=settings)
    err = info.value
    assert err.code == code, str(err)
    assert err.site is not None and os.path.abspath(err.site.filename) == THIS_FILE, str(err)
    assert err.site.lineno == line_of(tag), f"{err.site} is not the line of <{tag}>"
    return err


def f32(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ----- the rules and the table --------------------------------------------------------------------

def test_rules_of_each_platform():
    trn2, trn1 = platforms.rules_for("trn2"), platforms.rules_for("trn1")
    assert trn2.sbuf_usable_bytes == 224 * 1024 - 8 == 229368
    assert trn1.sbuf_usable_bytes == 192 * 1024 - 16 * 1024
    assert (trn2.hbm_tensor_init_value, trn1.hbm_tensor_init_value) == (False, True)
    assert (trn2.logging_off, trn1.logging_off) == (False, True)
    assert platforms.rules_for(None) is trn2      # the default
    trn3 = platforms.rules_for("trn3")
    assert (trn3.nc_version, trn3.sbuf_partition_bytes) == (4, 256 * 1024)
    with pytest.raises(ValueError, match="unknown platform 'trn4'.*'trn2'.*'trn1'.*'trn3'"):
        platforms.rules_for("trn4")


def test_every_row_of_the_table_differs_and_names_its_source():
    assert len(platforms.DIFFERENCES) >= 5
    for row in platforms.DIFFERENCES:
        assert len({row.trn1, row.trn2, row.trn3.replace("as trn2", row.trn2)}) > 1 and row.source \
            and row.applied, row
    rules = " ".join(row.rule for row in platforms.DIFFERENCES)
    for topic in ("HBM tensor created with an initial value", "logging.OFF", "SBUF"):
        assert topic in rules


def test_settings_take_their_limits_from_the_platform():
    assert SimSettings().platform == "trn2" and SimSettings().limits.sbuf_usable_bytes == 229368
    assert TRN1.limits.sbuf_partition_bytes == 192 * 1024 and TRN1.limits.sbuf_reserved_bytes == 16 * 1024
    explicit = SimSettings(platform="trn1", limits=HardwareLimits(sbuf_reserved_bytes=0))
    assert explicit.limits.sbuf_usable_bytes == 224 * 1024      # given limits win
    assert nl.tile_size.total_available_sbuf_size == 229368
    with pytest.raises(ValueError, match="unknown platform"):
        SimSettings(platform="inf2")


# ----- HBM tensors with an initial value ----------------------------------------------------------

def hbm_zeros_then_partial_write(x):
    out = nl.zeros((128, 8), nl.float32, buffer=nl.hbm)  # <hbm-zeros>
    tile = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    nisa.dma_copy(dst=out[:, 0:4], src=tile)
    return out


def hbm_full_never_written(x):
    out = nl.full((128, 4), 7.0, nl.float32, buffer=nl.hbm)  # <hbm-full>
    return out


def test_hbm_tensor_with_initial_value_allowed_on_trn1_only():
    x = f32(128, 4, seed=1)
    expected = np.concatenate([x, np.zeros_like(x)], axis=1)
    np.testing.assert_array_equal(run(hbm_zeros_then_partial_write, x, settings=TRN1), expected)
    err = failure(errors.MemorySpaceError, "err_hbm_tensor_with_init_value_not_supported", "hbm-zeros",
                  hbm_zeros_then_partial_write, x, settings=TRN2)
    assert "nl.ndarray" in err.remedy
    np.testing.assert_array_equal(run(hbm_full_never_written, x, settings=TRN1), np.full((128, 4), 7.0))
    failure(errors.MemorySpaceError, "err_hbm_tensor_with_init_value_not_supported", "hbm-full",
            hbm_full_never_written, x, settings=TRN2)


def hbm_ndarray_never_written(x):
    out = nl.ndarray((128, 4), nl.float32, buffer=nl.hbm)
    return out


def matmul_operand_in_hbm(x):
    out = nl.ndarray((4, 4), nl.float32, buffer=nl.hbm)
    product = nisa.nc_matmul(x, x)  # <matmul-hbm>
    nisa.dma_copy(dst=out, src=nisa.tensor_copy(product))
    return out


def test_kernels_invalid_on_both_platforms_still_fail():
    x = f32(128, 4, seed=2)
    for settings in (TRN1, TRN2):
        with pytest.raises(errors.KernelContractError) as info:
            run(hbm_ndarray_never_written, x, settings=settings)
        assert info.value.code == "err_tensor_output_not_written_to"
        failure(errors.MemorySpaceError, "err_unsupported_memory", "matmul-hbm", matmul_operand_in_hbm, x,
                settings=settings)


# ----- the SBUF budget ----------------------------------------------------------------------------

def keeps_a_whole_222x222_fp32_output(x):
    """The shape of two real 2025 kernels: a float32[128, 222*222] tile (197,136 B per
    partition) kept whole, plus 17,420 B of other tiles: 214,556 B live."""
    out = nl.ndarray((128, 4), nl.float32, buffer=nl.hbm)
    whole = nl.ndarray((128, 222 * 222), nl.float32, buffer=nl.sbuf)  # <sbuf-whole>
    other = nl.ndarray((128, 4355), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=other[:, 0:4], src=x)
    nisa.dma_copy(dst=whole[:, 0:4], src=other[:, 0:4])
    nisa.dma_copy(dst=out, src=whole[:, 0:4])
    return out


def just_over_the_trn2_budget(x):
    out = nl.ndarray((128, 4), nl.float32, buffer=nl.hbm)
    big = nl.ndarray((128, 57343), nl.float32, buffer=nl.sbuf)  # <sbuf-over>
    nisa.dma_copy(dst=big[:, 0:4], src=x)
    nisa.dma_copy(dst=out, src=big[:, 0:4])
    return out


def test_sbuf_budget_is_trn2s_8_byte_reserve_and_trn1s_smaller_sbuf():
    x = f32(128, 4, seed=3)
    np.testing.assert_array_equal(run(keeps_a_whole_222x222_fp32_output, x, settings=TRN2), x)
    err = failure(errors.AllocationError, "err_stack_overflow_sbuf", "sbuf-whole",
                  keeps_a_whole_222x222_fp32_output, x, settings=TRN1)
    assert "required SBUF 197136 bytes" in err.detail and "available 180224 bytes" in err.detail and "196608 physical minus 16384 reserved" in err.detail
    err = failure(errors.AllocationError, "err_stack_overflow_sbuf", "sbuf-over",
                  just_over_the_trn2_budget, x, settings=TRN2)
    assert "required SBUF 229372 bytes" in err.detail and "229376 physical minus 8 reserved" in err.detail


# ----- nc_version ---------------------------------------------------------------------------------

def scale_by_generation(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    tile = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    factor = 3.0 if nisa.get_nc_version() == nisa.nc_version.gen3 else 2.0
    nisa.dma_copy(dst=out, src=nisa.tensor_scalar(tile, np.multiply, factor))
    return out


def test_nc_version_follows_the_platform():
    x = f32(128, 4, seed=4)
    np.testing.assert_array_equal(run(scale_by_generation, x, settings=TRN2), 3 * x)
    np.testing.assert_array_equal(run(scale_by_generation, x, settings=TRN1), 2 * x)


# ----- logging.OFF and the process-wide platform ----------------------------------------------------

PART1_2024 = '''
import logging
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

logging.disable(logging.OFF)


@nki.jit
def vector_add(a, b):
    out = nl.zeros(a.shape, a.dtype, buffer=nl.hbm)
    ta = nl.load(a)
    tb = nl.load(b)
    nl.store(out, nl.add(ta, tb))
    return out
'''

DRIVER = '''
import sys
import numpy as np
import nkisim
nkisim.install(platform=sys.argv[1])
sys.path.insert(0, sys.argv[2])
import part1_2024
a = np.arange(512, dtype=np.float32).reshape(128, 4)
out = part1_2024.vector_add(a, a)
print("sum", float(out.sum()))
'''


def run_2024_file(tmp_path, platform):
    (tmp_path / "part1_2024.py").write_text(PART1_2024)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(DRIVER), platform, str(tmp_path)],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)


def test_the_2024_template_runs_under_trn1_rules_only(tmp_path):
    ok = run_2024_file(tmp_path, "trn1")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == f"sum {2 * float(np.arange(512).sum())}"
    refused = run_2024_file(tmp_path, "trn2")
    assert refused.returncode != 0
    assert "module 'logging' has no attribute 'OFF'" in refused.stderr


def test_install_sets_the_process_default_and_uninstall_resets_it():
    had_off = hasattr(logging, "OFF")
    try:
        nkisim.install(platform="trn1")
        assert SimSettings().platform == "trn1" and hasattr(logging, "OFF")
        assert logging.OFF > logging.CRITICAL
        nkisim.install(platform="trn2")
        assert SimSettings().platform == "trn2" and hasattr(logging, "OFF") == had_off
        with pytest.raises(ValueError, match="unknown platform"):
            nkisim.install(platform="trn9")
        assert SimSettings().platform == "trn2"
    finally:
        platforms.reset()
