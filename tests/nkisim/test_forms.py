"""Documented NKI forms the simulator accepts with hardware semantics (nl.ds, nl.expand_dims,
nl.loop_reduce), and what it says about names it does not simulate or that are not NKI.
The kernels follow the NKI documentation's own examples, written afresh; every invalid
variant must fail with a typed error at this file's line marked `# <tag>`."""
import os

import numpy as np
import pytest

import nkisim
from marker_lines import marker_lines
from nkisim import errors

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

THIS_FILE = os.path.abspath(__file__)
line_of = marker_lines(THIS_FILE)


def raised_at(exc_type, code, tag, kernel, *args, **kwargs):
    with pytest.raises(exc_type) as info:
        nki.baremetal(kernel)(*args, **kwargs)
    err = info.value
    assert err.code == code, str(err)
    assert err.remedy and len(err.remedy) > 10, str(err)
    assert err.site is not None and os.path.abspath(err.site.filename) == THIS_FILE, str(err)
    assert err.site.lineno == line_of(tag), f"{err.site} is not the line of <{tag}>"
    return err


def f32(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ----- nl.ds -----------------------------------------------------------------------------------

def copy_columns_by_ds(x):
    """The docs' example: load 512-column blocks with nl.ds(i * 512, 512) instead of a slice."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    for i in nl.affine_range(x.shape[1] // 512):
        tile = nl.load(x[:, nl.ds(i * 512, 512)])
        nl.store(out[:, nl.ds(i * 512, 512)], tile)
    return out


def copy_rows_by_ds_with_dma(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        tile = nl.ndarray((128, x.shape[1]), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=x[nl.ds(i * 128, 128), :])
        nisa.dma_copy(dst=out[nl.ds(i * 128, 128), 0:x.shape[1]], src=tile)
    return out


def ds_mixed_with_integers(x):
    """x: (128, 4, 16); picks plane 2, columns 3..10, through a (128, 8) SBUF tile."""
    out = nl.ndarray((128, 8), x.dtype, buffer=nl.hbm)
    tile = nl.ndarray((128, 8), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x[nl.ds(0, 128), 2, nl.ds(3, 8)])
    doubled = nisa.tensor_scalar(tile[:, nl.ds(0, 8)], np.multiply, 2.0)
    nisa.dma_copy(dst=out, src=doubled)
    return out


def test_ds_loads_and_stores_the_same_elements_as_a_slice():
    x = f32(128, 2048, seed=1)
    np.testing.assert_array_equal(nki.baremetal(copy_columns_by_ds)(x), x)
    y = f32(512, 96, seed=2)
    np.testing.assert_array_equal(nki.baremetal(copy_rows_by_ds_with_dma)(y), y)


def test_ds_mixes_with_integer_indices():
    x = f32(128, 4, 16, seed=3)
    np.testing.assert_array_equal(nki.baremetal(ds_mixed_with_integers)(x), 2 * x[:, 2, 3:11])


def test_ds_is_the_slice_start_to_start_plus_size():
    assert nl.ds(5, 3) == slice(5, 8)
    assert nl.ds(4.0, 2) == slice(4, 6)      # integral floats from '/' arithmetic are fine


def ds_past_the_end(x):
    out = nl.ndarray((128, 512), x.dtype, buffer=nl.hbm)
    tile = nl.ndarray((128, 512), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x[:, nl.ds(1024, 512)])  # <ds-oob>
    nisa.dma_copy(dst=out, src=tile)
    return out


def ds_negative_start(x):
    out = nl.ndarray((128, 4), x.dtype, buffer=nl.hbm)
    tile = nl.ndarray((128, 4), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x[:, nl.ds(-4, 4)])  # <ds-negative>
    nisa.dma_copy(dst=out, src=tile)
    return out


def ds_mixed_with_arange(x):
    out = nl.ndarray((128, 4), x.dtype, buffer=nl.hbm)
    i_p = nl.arange(128)[:, None]
    tile = nl.load(x[i_p, nl.ds(0, 4)])  # <ds-arange>
    nl.store(out, tile)
    return out


def ds_with_zero_size(x):
    out = nl.ndarray((128, 4), x.dtype, buffer=nl.hbm)
    tile = nl.load(x[:, nl.ds(0, 0)])  # <ds-size>
    nl.store(out, tile)
    return out


def test_ds_out_of_bounds_still_fails_at_the_line():
    err = raised_at(errors.OutOfBoundsError, "err_tensor_access_out_of_bound", "ds-oob",
                    ds_past_the_end, f32(128, 1500))
    assert "1500" in err.detail
    raised_at(errors.OutOfBoundsError, "err_tensor_access_out_of_bound", "ds-negative",
              ds_negative_start, f32(128, 16))


def test_ds_is_basic_indexing_so_mixing_it_with_arange_is_the_nki_error():
    raised_at(errors.IndexingError, "err_unsupported_mixing_basic_advanced_tensor_indexing", "ds-arange",
              ds_mixed_with_arange, f32(128, 16))
    raised_at(errors.IndexingError, "err_tensor_index_not_supported", "ds-size",
              ds_with_zero_size, f32(128, 16))


def copy_rows_by_masked_ds(x):
    """Row blocks of 128 through nl.ds; the last block overhangs the tensor's end and a mask
    on the row index keeps its loads and stores to the rows that exist."""
    N = x.shape[0]
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    for i in nl.affine_range((N + 127) // 128):
        rows = i * 128 + nl.arange(128)[:, None]
        tile = nl.load(x[nl.ds(i * 128, 128), :], mask=(rows < N))
        nl.store(out[nl.ds(i * 128, 128), :], tile, mask=(rows < N))
    return out


def copy_rows_by_unmasked_ds(x):
    N = x.shape[0]
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    for i in nl.affine_range((N + 127) // 128):
        tile = nl.load(x[nl.ds(i * 128, 128), :])  # <ds-unmasked>
        nl.store(out[nl.ds(i * 128, 128), :], tile)
    return out


def test_ds_window_past_the_end_is_fine_under_a_mask_and_fails_without():
    x = f32(200, 8, seed=9)
    np.testing.assert_array_equal(nki.baremetal(copy_rows_by_masked_ds)(x), x)
    raised_at(errors.OutOfBoundsError, "err_tensor_access_out_of_bound", "ds-unmasked",
              copy_rows_by_unmasked_ds, x)


# ----- nl.expand_dims ----------------------------------------------------------------------------

def expand_then_broadcast(x):
    out = nl.ndarray((128, 3, 4), x.dtype, buffer=nl.hbm)
    tile = nl.ndarray((128, 3), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    wide = nl.broadcast_to(nl.expand_dims(tile, 2), shape=(128, 3, 4))
    nisa.dma_copy(dst=out, src=wide)
    return out


def test_expand_dims_adds_a_size_one_dimension():
    x = f32(128, 3, seed=4)
    np.testing.assert_array_equal(nki.baremetal(expand_then_broadcast)(x), np.repeat(x[:, :, None], 4, axis=2))


# ----- nl.loop_reduce ----------------------------------------------------------------------------

def sum_of_products_by_loop_reduce(lhsT, rhs):
    """The docs' pattern: each K block's matmul lands in PSUM and loop_reduce adds it into an
    SBUF accumulator allocated before the loop."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    out = nl.ndarray((M, N), nl.float32, buffer=nl.hbm)
    acc = nl.zeros((M, N), dtype=nl.float32, buffer=nl.sbuf)
    for k in nl.affine_range(K // 128):
        a = nl.ndarray((128, M), lhsT.dtype, buffer=nl.sbuf)
        b = nl.ndarray((128, N), rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=lhsT[nl.ds(k * 128, 128), :])
        nisa.dma_copy(dst=b, src=rhs[nl.ds(k * 128, 128), :])
        part = nisa.nc_matmul(a, b)
        acc = nl.loop_reduce(part, op=np.add, loop_indices=[k], dtype=nl.float32)
    nisa.dma_copy(dst=out, src=acc)
    return out


def running_max_into_a_slice(x):
    """x: (T, 128, 8): the element-wise max over T blocks, reduced into columns 2..9 of a
    wider tile through a subscript target, then those columns stored."""
    T = x.shape[0]
    out = nl.ndarray((128, 8), x.dtype, buffer=nl.hbm)
    best = nl.full((128, 12), -1e30, dtype=nl.float32, buffer=nl.sbuf)
    for t in nl.sequential_range(T):
        block = nl.ndarray((128, 8), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=block, src=x[t])
        best[:, 2:10] = nl.loop_reduce(block, op=nl.maximum, loop_indices=t)
    nisa.dma_copy(dst=out, src=best[:, 2:10])
    return out


def test_loop_reduce_adds_matmul_blocks_like_the_docs_equivalent():
    lhsT, rhs = f32(512, 64, seed=5), f32(512, 96, seed=6)
    run = nkisim.run_kernel(sum_of_products_by_loop_reduce, (lhsT, rhs), {})
    np.testing.assert_allclose(run.outputs, lhsT.T.astype(np.float64) @ rhs, rtol=1e-4, atol=1e-3)
    opcodes = [rec.opcode for rec in run.trace]
    # lowered onto registered instructions: one tensor_tensor per iteration
    assert opcodes.count("tensor_tensor") == 4 and opcodes.count("nc_matmul") == 4


def test_loop_reduce_max_into_a_subscript_target():
    x = f32(5, 128, 8, seed=7)
    np.testing.assert_array_equal(nki.baremetal(running_max_into_a_slice)(x), x.max(axis=0))


def loop_reduce_not_assigned(x):
    out = nl.ndarray((128, 4), x.dtype, buffer=nl.hbm)
    tile = nl.ndarray((128, 4), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    for k in nl.affine_range(2):
        nisa.dma_copy(dst=out, src=nl.loop_reduce(tile, op=np.add, loop_indices=[k]))  # <lr-unassigned>
    return out


def loop_reduce_without_accumulator(x):
    out = nl.ndarray((128, 4), x.dtype, buffer=nl.hbm)
    tile = nl.ndarray((128, 4), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    for k in nl.affine_range(2):
        total = nl.loop_reduce(tile, op=np.add, loop_indices=[k])  # <lr-undefined>
    nisa.dma_copy(dst=out, src=total)
    return out


def loop_reduce_subtract(x):
    out = nl.ndarray((128, 4), x.dtype, buffer=nl.hbm)
    tile = nl.ndarray((128, 4), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    acc = nl.zeros((128, 4), nl.float32, buffer=nl.sbuf)
    for k in nl.affine_range(2):
        acc = nl.loop_reduce(tile, op=np.subtract, loop_indices=[k])  # <lr-subtract>
    nisa.dma_copy(dst=out, src=acc)
    return out


def test_loop_reduce_needs_an_accumulator_assigned_with_equals():
    err = raised_at(errors.UnsupportedOperationError, "err_loop_reduce_destination", "lr-unassigned",
                    loop_reduce_not_assigned, f32(128, 4))
    assert "assigned with '='" in err.detail
    err = raised_at(errors.UnsupportedOperationError, "err_loop_reduce_destination", "lr-undefined",
                    loop_reduce_without_accumulator, f32(128, 4))
    assert "'total'" in err.detail and "nl.zeros" in err.remedy


def test_loop_reduce_with_an_order_dependent_op_is_not_simulated():
    err = raised_at(errors.NotSimulatedError, "err_not_simulated", "lr-subtract",
                    loop_reduce_subtract, f32(128, 4))
    assert "tensor_tensor" in err.remedy


# ----- names nkisim does not simulate, and names that are not NKI ----------------------------------

def uses_local_gather(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    tile = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    index = nl.zeros((128, 8), nl.uint16, buffer=nl.sbuf)
    gathered = nisa.local_gather(tile, index)  # <local-gather>
    nisa.dma_copy(dst=out, src=gathered)
    return out


def uses_dynamic_copy(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    tile = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    nisa.dma_copy(dst=out, src=nisa.tensor_copy_dynamic_src(tile))  # <dynamic-copy>
    return out


def uses_nl_dma_copy(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    tile = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nl.dma_copy(dst=tile, src=x)  # <nl-dma-copy>
    nisa.dma_copy(dst=out, src=tile)
    return out


def uses_misspelled_instruction(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    tile = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    nisa.dma_copy(dst=out, src=nisa.tensor_cpy(tile))  # <misspelled>
    return out


def test_documented_but_unsimulated_names_say_so_and_list_what_is():
    err = raised_at(errors.NotSimulatedError, "err_not_simulated", "local-gather", uses_local_gather, f32(128, 8))
    assert "documented NKI" in err.detail and "nisa.tensor_tensor" in err.detail and "nisa.bn_stats" in err.detail
    assert "nl.gather_flattened" in err.remedy
    err = raised_at(errors.NotSimulatedError, "err_not_simulated", "dynamic-copy", uses_dynamic_copy, f32(128, 8))
    assert "nisa.tensor_copy" in err.detail and "slice computed in Python" in err.remedy


def test_an_unsimulated_name_that_is_only_imported_does_not_fail():
    from neuronxcc.nki.isa import local_gather
    from neuronxcc.nki.isa import tensor_copy_dynamic_src
    assert "not simulated" in repr(local_gather) and "not simulated" in repr(tensor_copy_dynamic_src)
    x = f32(128, 2048, seed=8)
    np.testing.assert_array_equal(nki.baremetal(copy_columns_by_ds)(x), x)


def test_what_nkisim_keeps_behind_the_packages_is_not_an_nki_name():
    """The real packages have no nki.os, nki.compiler.Kernel or nki.bind: a kernel using what
    nkisim's own modules import or hold would run here and fail to compile on Trainium."""
    import nki as nki06
    import neuronxcc.nki.compiler as ncc
    for module, name in ((nki, "os"), (nki, "ArgumentError"), (nki, "names"), (nki.compiler, "Kernel"),
                         (ncc, "numbers"), (ncc, "direct_alloc"), (ncc, "as_kernel"),
                         (nki06, "bind"), (nki06, "kernel"), (nki06, "views"), (nki06, "rules")):
        with pytest.raises(errors.NoSuchNameError, match="is not an NKI name"):
            getattr(module, name)
    assert nki.compiler is ncc and nki.isa is nisa and nki.language is nl
    assert ncc.skip_middle_end_transformations and ncc.sbuf.alloc and nki06.jit and nki06.isa.nc_matmul
    assert "not simulated" in repr(ncc.multi_buffer)          # documented in 2.26, not simulated
    with pytest.raises(errors.NoSuchNameError, match="did you mean nki.compiler.skip_middle_end_transformations"):
        ncc.skip_middle_end_transformation  # noqa: B018
    assert sorted(n for n in vars(nki06) if not n.startswith("_")) == ["isa", "jit", "language", "simulate", "typing"]


def test_names_that_are_not_nki_get_close_matches():
    err = raised_at(errors.NoSuchNameError, "err_no_such_nki_name", "nl-dma-copy", uses_nl_dma_copy, f32(128, 4))
    assert "nisa.dma_copy" in err.remedy
    err = raised_at(errors.NoSuchNameError, "err_no_such_nki_name", "misspelled",
                    uses_misspelled_instruction, f32(128, 4))
    assert "nisa.tensor_copy" in err.remedy
    with pytest.raises(errors.NoSuchNameError, match="nki.baremetal"):
        nki.baremtal  # noqa: B018
    with pytest.raises(errors.ArgumentError, match="working_directory"):
        nki.profile(uses_local_gather)
    # still AttributeErrors, so feature tests in Python keep working
    assert not hasattr(nl, "no_such_function") and getattr(nisa, "nope", None) is None
    with pytest.raises(AttributeError):
        nl.__no_dunder__  # noqa: B018


def test_no_instruction_or_language_function_takes_keywords_it_does_not_name():
    """An argument nkisim does not understand is an error: no simulated nisa/nl function (in either
    dialect) swallows unknown keywords, and a call with one says so at the kernel's line."""
    import inspect

    import nki.isa as nisa06
    import nki.language as nl06
    for module in (nisa, nl, nisa06, nl06):
        for name in dir(module):
            fn = getattr(module, name)
            if name.startswith("_") or not callable(fn) or isinstance(fn, type) or \
                    any(c.__name__ == "NkiOp" for c in type(fn).__mro__):     # op codes, called or refused whole
                continue
            try:
                params = inspect.signature(fn).parameters.values()
            except (TypeError, ValueError):
                continue
            assert all(p.kind is not p.VAR_KEYWORD for p in params), f"{module.__name__}.{name} takes **kwargs"

    def unknown_keyword(x):
        tile = nl.load(x)
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
        nl.store(out, nisa.tensor_tensor(tile, tile, op=nl.add, bogus=1))  # <bogus>
        return out
    err = raised_at(errors.ArgumentError, "err_unsupported_args", "bogus", unknown_keyword, f32(128, 4))
    assert "bogus" in err.detail
