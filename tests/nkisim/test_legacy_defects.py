"""Defects a new user of the legacy `neuronxcc.nki` (SDK 2.26) API met (issue 40): nki.profile,
a reduction's mask over its reduced axes, nl.broadcast_to of a partition-only tile, nl.matmul
of a PSUM tile, and an exception inside the simulator reaching the user raw."""
import json
import os

import numpy as np
import pytest

import nkisim
from nkisim import errors
from nkisim import execute as executing
from nkisim import program as programs
from nkisim.execute import execute
from nkisim.runtime import ArgSpec, trace_kernel
from nkisim.settings import HardwareLimits

from kernel_helpers import load, store  # noqa: E402

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402
import nki as nki06  # noqa: E402
import nki.isa as nisa06  # noqa: E402
import nki.language as nl06  # noqa: E402

THIS_FILE = os.path.abspath(__file__)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def round_trip(kernel, args):
    """The kernel's program through bytes (encode, decode, validate) and executed there."""
    program, _ = trace_kernel(kernel, [ArgSpec(a.shape, a.dtype) for a in args], {})
    again = programs.decode(programs.encode(program))
    programs.validate(again, HardwareLimits(), list(args))
    return execute(again, list(args)).outputs


# ----- 1. nki.profile ----------------------------------------------------------------------------

PROFILE_DIR = "/tmp/nkisim-profile-never-written"    # decorating writes nothing


@nki.profile(working_directory=PROFILE_DIR, save_neff_name="scaled.neff", save_trace_name="scaled.ntff")
def scaled_rows(x):
    """Defined at import: a profiled kernel in a test file must not stop the file importing."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, value=nl.multiply(t, 3.0))
    return out


def profiled(directory, **options):
    @nki.profile(working_directory=str(directory), **options)
    def halve_then_add(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        ta, tb = nl.load(a), nl.load(b)
        nl.store(out, value=nl.add(nl.multiply(ta, 0.5), tb))
        return out
    return halve_then_add


def test_a_profiled_kernel_defined_at_import_only_decorates():
    assert not os.path.exists(PROFILE_DIR)
    assert callable(scaled_rows) and scaled_rows.__name__ == "scaled_rows"


def test_nki_profile_runs_the_kernel_and_writes_the_estimated_profile(tmp_path):
    a, b = rand(128, 96, seed=1), rand(128, 96, seed=2)
    kernel = profiled(tmp_path, save_trace_name="halve.ntff", profile_nth=2,
                      additional_compile_opt="--disable-dge")
    out = kernel(a, b)
    np.testing.assert_allclose(out, a * 0.5 + b, rtol=1e-6)
    assert sorted(os.listdir(tmp_path)) == ["halve.json", "halve.svg"]
    summary = json.loads((tmp_path / "halve.json").read_text())
    assert summary["total_us"] > 0 and summary["engines"] and summary["dma_mode"]
    assert (tmp_path / "halve.svg").read_text().lstrip().startswith("<svg")


def test_nki_profile_default_names_and_overwrite(tmp_path):
    a, b = rand(64, 32, seed=3), rand(64, 32, seed=4)
    profiled(tmp_path)(a, b)
    assert sorted(os.listdir(tmp_path)) == ["profile.json", "profile.svg"]
    with pytest.raises(errors.KernelContractError, match="overwrite=True") as info:
        profiled(tmp_path)(a, b)
    assert info.value.code == "err_kernel_contract"
    np.testing.assert_allclose(profiled(tmp_path, overwrite=True)(a, b), a * 0.5 + b, rtol=1e-6)


@pytest.mark.parametrize("options, fragment", [
    ({"working_directory": "relative/dir"}, "absolute"),
    ({}, "working_directory"),
    ({"working_directory": "/tmp", "iters": 3}, "iters"),
    ({"working_directory": "/tmp", "profile_nth": 0}, "profile_nth"),
    ({"working_directory": "/tmp", "save_trace_name": "../up.ntff"}, "save_trace_name"),
])
def test_nki_profile_refuses_what_its_documentation_does_not_allow(options, fragment):
    with pytest.raises(errors.ArgumentError, match=fragment):
        nki.profile(**options)


# ----- 2a. a reduction's mask over the reduced axes ---------------------------------------------

@nki.jit
def window_sums(x):
    """Per partition: the sum over the first 5 x 3 of an 8 x 8 window, and the max over the
    first 6 columns of its first row; partitions below 40 only, for a partition mask."""
    out = nl.ndarray((x.shape[0], 3), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    i_r = nl.arange(8)[None, :, None]
    i_c = nl.arange(8)[None, None, :]
    corner = nl.sum(t, axis=(1, 2), mask=(i_r < 5) & (i_c < 3))          # [P]
    row = nl.load(x[:, 0, :])
    j = nl.arange(8)[None, :]
    head = nl.max(row, axis=1, mask=(j < 6), keepdims=True)               # [P, 1]
    i_p = nl.arange(x.shape[0])[:, None]
    low = nl.sum(row, axis=1, mask=(i_p < 40))                           # [P], rows < 40 written
    res = nl.ndarray((x.shape[0], 3), dtype=x.dtype, buffer=nl.sbuf)
    res[:, 0] = corner
    res[:, 1] = head
    res[:, 2] = nl.zeros((x.shape[0], 1), dtype=x.dtype)
    res[0:40, 2] = low[0:40]
    nl.store(out, value=res)
    return out


def window_sums_reference(x):
    want = np.zeros((x.shape[0], 3), np.float32)
    want[:, 0] = x[:, :5, :3].sum(axis=(1, 2))
    want[:, 1] = x[:, 0, :6].max(axis=1)
    want[:40, 2] = x[:40, 0, :].sum(axis=1)
    return want


def test_a_mask_over_the_reduced_axes_selects_what_is_reduced():
    x = rand(64, 8, 8, seed=5)
    np.testing.assert_allclose(nki.simulate_kernel(window_sums, x), window_sums_reference(x), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(round_trip(window_sums, [x]), window_sums_reference(x), rtol=1e-5, atol=1e-5)


@nki.jit
def masked_mean(x):
    out = nl.ndarray((x.shape[0], 1), dtype=x.dtype, buffer=nl.shared_hbm)
    j = nl.arange(x.shape[1])[None, :]
    nl.store(out, value=nl.mean(nl.load(x), axis=1, keepdims=True, mask=(j < 3)))
    return out


@nki.jit
def mask_of_the_wrong_shape(x):
    out = nl.ndarray((x.shape[0], 1), dtype=x.dtype, buffer=nl.shared_hbm)
    j = nl.arange(5)[None, :]
    nl.store(out, value=nl.sum(nl.load(x), axis=1, keepdims=True, mask=(j < 3)))
    return out


@nki.jit
def masked_overhanging_sum(x):
    out = nl.ndarray((x.shape[0], 1), dtype=x.dtype, buffer=nl.shared_hbm)
    i, j = nl.arange(x.shape[0])[:, None], nl.arange(8)[None, :]
    t = nl.load(x)
    nl.store(out, value=nl.sum(t[i, j], axis=1, keepdims=True, mask=(j < x.shape[1])))
    return out


def test_a_reduction_mask_that_fits_neither_input_nor_result_and_a_masked_mean_are_refused():
    with pytest.raises(errors.NotSimulatedError, match="outside its tensor"):
        nki.simulate_kernel(masked_overhanging_sum, rand(32, 6))
    with pytest.raises(errors.ShapeError, match=r"mask of shape \[1, 5\]") as info:
        nki.simulate_kernel(mask_of_the_wrong_shape, rand(32, 8))
    assert info.value.code == "err_unsupported_expression_in_mask"
    with pytest.raises(errors.NotSimulatedError, match="nl.sum") as info:
        nki.simulate_kernel(masked_mean, rand(32, 8))
    assert info.value.site.filename == THIS_FILE


@nki06.jit
def row_sums06(x):
    return store(nl06.sum(load(x), axis=1, keepdims=True))


@nki06.jit
def masked_row_sums06(x):
    # NKI 0.6 has no index predicates (nl.arange is gone): any mask= is the removed keyword
    return store(nl06.sum(load(x), axis=1, keepdims=True, mask=np.arange(8)[None, :] < 3))


def test_nki06_reductions_sum_and_take_no_mask():
    x = rand(32, 8, seed=6)
    np.testing.assert_allclose(row_sums06(x), x.sum(axis=1, keepdims=True), rtol=1e-5)
    with pytest.raises(errors.ArgumentError, match=r"nl.sum\(mask=...\)"):
        masked_row_sums06(x)


# ----- 2b. nl.broadcast_to of a partition-only tile ----------------------------------------------

@nki.jit
def spread_columns(v):
    """v [128]: each partition's value spread over 64 free elements, plus one."""
    out = nl.ndarray((v.shape[0], 64), dtype=v.dtype, buffer=nl.shared_hbm)
    t = nl.load(v)
    wide = nl.broadcast_to(t, shape=(v.shape[0], 64))
    nl.store(out, value=nl.add(wide, 1.0))
    return out


@nki.jit
def spread_to_other_partitions(v):
    out = nl.ndarray((128, 64), dtype=v.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.broadcast_to(nl.load(v), shape=(128, 64)))
    return out


def test_broadcast_to_spreads_a_partition_only_tile_along_a_new_free_dimension():
    v = rand(128, seed=7)
    want = np.repeat(v[:, None], 64, axis=1) + 1
    np.testing.assert_array_equal(nki.simulate_kernel(spread_columns, v), want)
    np.testing.assert_array_equal(round_trip(spread_columns, [v]), want)
    with pytest.raises(errors.ShapeError, match=r"\[64\].*\[128, 64\]"):
        nki.simulate_kernel(spread_to_other_partitions, rand(64, seed=8))


@nki06.jit
def spread06(v):
    return store(nl06.broadcast_to(load(v), (v.shape[0], 16)))


def test_nki06_broadcast_to_keeps_its_same_rank_rule():
    v = rand(32, 1, seed=9)
    np.testing.assert_array_equal(spread06(v), np.repeat(v, 16, axis=1))
    with pytest.raises(errors.ShapeError, match="same rank"):
        spread06(v.reshape(32))


# ----- 2c. nl.matmul of a PSUM tile (nl.transpose's result) ---------------------------------------

@nki.jit
def matmul_of_a_transpose(a, b):
    out = nl.ndarray((a.shape[0], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    a_t = nl.transpose(nl.load(a))             # [K, M], in PSUM
    nl.store(out, value=nl.matmul(a_t, nl.load(b), transpose_x=True))
    return out


@nki.jit
def matmul_of_a_copied_transpose(a, b):
    out = nl.ndarray((a.shape[0], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    a_t = nl.copy(nl.transpose(nl.load(a)))    # to SBUF, as nl.matmul's x must be
    nl.store(out, value=nl.matmul(a_t, nl.load(b), transpose_x=True))
    return out


def test_nl_matmul_of_a_psum_tile_is_the_documented_error_in_its_own_terms():
    a, b = rand(64, 128, seed=10), rand(128, 32, seed=11)
    with pytest.raises(errors.MemorySpaceError) as info:
        nki.simulate_kernel(matmul_of_a_transpose, a, b)
    err = info.value
    assert "operand 'x' of 'matmul'" in err.detail and "'psum'" in err.detail
    assert "nl.copy" in err.remedy and err.site.filename == THIS_FILE
    np.testing.assert_allclose(nki.simulate_kernel(matmul_of_a_copied_transpose, a, b), a @ b, rtol=1e-4, atol=1e-4)


# ----- 3. an exception inside the simulator ------------------------------------------------------

@nki.jit
def plus_one(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.add(nl.load(x), 1.0))
    return out


def test_an_unexpected_exception_while_executing_is_a_simulator_failure(monkeypatch):
    real = executing._Memory.view
    calls = []

    def broken(self, region):
        calls.append(region)
        if len(calls) == 2:          # the second instruction's operand
            raise KeyError(region.alloc_id)
        return real(self, region)
    monkeypatch.setattr(executing._Memory, "view", broken)
    with pytest.raises(errors.SimulatorFailure) as info:
        nki.simulate_kernel(plus_one, rand(16, 4))
    err = info.value
    assert err.code == "err_simulator_exception" and isinstance(err.__cause__, KeyError)
    assert "this is a bug in the simulator, please report it" in err.detail
    assert "instruction 1 (tensor_scalar)" in err.detail and "KeyError" in err.detail
    assert err.site.filename == THIS_FILE and err.at == 1


def test_typed_errors_while_executing_pass_through(monkeypatch):
    def refuses(self, region):
        raise programs.ProgramError("forged")
    monkeypatch.setattr(executing._Memory, "view", refuses)
    with pytest.raises(programs.ProgramError, match="forged"):
        nki.simulate_kernel(plus_one, rand(16, 4))


KEPT = {}


@nki.jit
def reuses_a_tile_of_an_earlier_call(x):
    """The cause of issue 40's KeyError: a tile kept across kernel calls (here a dict; an
    lru_cache'd helper does the same) names an allocation of the earlier call's program."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    if "ones" not in KEPT:
        KEPT["ones"] = nl.load(x)
    nl.store(out, value=nl.add(KEPT["ones"], 1.0))
    return out


def test_a_tile_kept_from_an_earlier_kernel_call_is_the_kernels_error():
    KEPT.clear()
    x = rand(32, 4, seed=12)
    np.testing.assert_array_equal(nki.simulate_kernel(reuses_a_tile_of_an_earlier_call, x), x + 1)
    with pytest.raises(errors.KernelContractError) as info:
        nki.simulate_kernel(reuses_a_tile_of_an_earlier_call, x)
    err = info.value
    assert "earlier kernel call" in err.detail and "within the call" in err.remedy
    assert err.site.filename == THIS_FILE


OUT_H, OUT_W = 3, 5


@nki.jit
def adaptive_average_pool(x):
    """x [C, H, W] -> [C, OUT_H, OUT_W]: each output the mean of its own uneven window."""
    c, h, w = x.shape
    out = nl.ndarray((c, OUT_H, OUT_W), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.static_range(OUT_H):
        top, bottom = (i * h) // OUT_H, -(-(i + 1) * h // OUT_H)
        for j in nl.static_range(OUT_W):
            left, right = (j * w) // OUT_W, -(-(j + 1) * w // OUT_W)
            window = nl.load(x[:, top:bottom, left:right])
            if j % 2:
                pooled = nl.mean(window, axis=(1, 2))
            else:
                total = nl.sum(window, axis=(1, 2), keepdims=True)
                pooled = nl.multiply(total, 1.0 / ((bottom - top) * (right - left)))
            nl.store(out[:, i, j], value=pooled)
    return out


def adaptive_average_pool_reference(x):
    c, h, w = x.shape
    want = np.zeros((c, OUT_H, OUT_W), np.float32)
    for i in range(OUT_H):
        top, bottom = (i * h) // OUT_H, -(-(i + 1) * h // OUT_H)
        for j in range(OUT_W):
            left, right = (j * w) // OUT_W, -(-(j + 1) * w // OUT_W)
            want[:, i, j] = x[:, top:bottom, left:right].mean(axis=(1, 2))
    return want


def test_an_adaptive_average_pool_of_uneven_windows_runs():
    x = rand(128, 7, 11, seed=13)
    want = adaptive_average_pool_reference(x)
    np.testing.assert_allclose(nki.simulate_kernel(adaptive_average_pool, x), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(round_trip(adaptive_average_pool, [x]), want, rtol=1e-5, atol=1e-6)
