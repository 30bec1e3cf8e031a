"""Forms that ran on hardware and follow its semantics: bounds checked at the instruction on
the elements it touches (masks keep overhanging elements out), and PSUM accumulation groups.
The kernels restate examples of the NKI documentation in our own words; each invalid variant
still fails with the kernel's own line (marked `# <tag>`)."""
from __future__ import annotations

import os

import numpy as np
import pytest

import nkisim
from marker_lines import marker_lines
from nkisim import cost, errors
from nkisim.indexing import kept_box

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

THIS_FILE = os.path.abspath(__file__)
line_of = marker_lines(THIS_FILE)



def rand(*shape, seed=0):
    return np.random.default_rng(seed).random(shape, dtype=np.float32)


# ----- stores past the end of a tensor, as the error docs' own example writes them -------------

def zero_fill(masked: bool):
    """Fill a (128, 4000) HBM tensor with zeros in 512-column tiles: the last tile overhangs."""
    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 4000), dtype=nl.float32, buffer=nl.hbm)
        for i in nl.affine_range((4000 + 511) // 512):
            tile = nl.mgrid[0:128, 0:512]
            if masked:
                nl.store(out[tile.p, i * 512 + tile.x], value=0, mask=(i * 512 + tile.x < 4000))
            else:
                nl.store(out[tile.p, i * 512 + tile.x], value=0)  # <unmasked-store>
        return out
    return kernel


def test_a_store_masked_to_the_tensor_is_fine_and_writes_every_element():
    out = nki.baremetal(zero_fill(masked=True))(rand(1, 1))
    np.testing.assert_array_equal(out, np.zeros((128, 4000), np.float32))


def test_the_same_store_unmasked_is_out_of_bounds_at_the_kernels_line():
    with pytest.raises(errors.OutOfBoundsError) as info:
        nki.baremetal(zero_fill(masked=False))(rand(1, 1))
    err = info.value
    assert err.code == "err_tensor_access_out_of_bound"
    assert (err.site.filename, err.site.lineno) == (THIS_FILE, line_of("unmasked-store"))
    assert "index range [3584, 4095] exceed dimension size of 4000" in err.detail


# ----- loads of a partial last row tile -------------------------------------------------------------

@nki.jit
def row_tiles_copy(x):
    """Copy an (H, W) tensor 128 rows at a time; H is not a multiple of 128."""
    h, w = x.shape
    out = nl.ndarray((h, w), dtype=x.dtype, buffer=nl.hbm)
    i_p, i_f = nl.mgrid[0:128, 0:w]
    for t in nl.affine_range((h + 127) // 128):
        rows = t * 128 + i_p
        tile = nl.load(x[rows, i_f], mask=(rows < h))
        nl.store(out[rows, i_f], value=tile, mask=(rows < h))
    return out


def test_masked_loads_and_stores_of_a_partial_row_tile():
    x = rand(300, 40, seed=1)
    np.testing.assert_array_equal(nki.baremetal(row_tiles_copy)(x), x)


@nki.jit
def row_tiles_copy_sliced(x):
    """row_tiles_copy with each last tile's rows sliced out instead of masked."""
    h, w = x.shape
    out = nl.ndarray((h, w), dtype=x.dtype, buffer=nl.hbm)
    for t in nl.affine_range((h + 127) // 128):
        n = min(128, h - t * 128)
        tile = nl.ndarray((128, w), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile[0:n, :], src=x[t * 128:t * 128 + n, :])
        nisa.dma_copy(dst=out[t * 128:t * 128 + n, :], src=tile[0:n, :])
    return out


def test_a_dma_masked_to_a_box_moves_that_box_as_its_slices_would():
    """A mask that keeps a box of a load or store (a ragged last tile's rows) is the copy of that
    box: the DMA moves the box's rows, as the slices spelling it do, costs what they cost, and
    its trace holds strided accesses, not the offsets of every element of the overhanging tile."""
    x = rand(300, 40, seed=1)
    masked = nkisim.run_kernel(row_tiles_copy, (x,), {})
    sliced = nkisim.run_kernel(row_tiles_copy_sliced, (x,), {})
    np.testing.assert_array_equal(masked.outputs, x)
    dmas = [rec for rec in masked.trace if rec.opcode == "dma_copy"]
    assert all(rec.mask is None and all(r.offsets is None for r in rec.reads + rec.writes) for rec in dmas)
    assert [tuple(r.shape) for rec in dmas for r in rec.reads] == \
        [tuple(r.shape) for rec in sliced.trace if rec.opcode == "dma_copy" for r in rec.reads]
    assert cost.estimate(masked).total_us == cost.estimate(sliced).total_us



def ragged_compute(masked: bool):
    """Scale, exponentiate and multiply a (300, 700) tensor by a 128x128 weight, in tiles of 128
    rows (the last one 44) or 512 columns (the last one 188): each ragged tile's compute masked
    to the elements that exist, or spelt with slices instead."""
    @nki.jit
    def kernel(x, w):
        h, n = x.shape
        scaled = nl.ndarray((h, n), dtype=x.dtype, buffer=nl.hbm)
        product = nl.ndarray((128, n), dtype=x.dtype, buffer=nl.hbm)
        i_p, i_f = nl.mgrid[0:128, 0:n]
        for t in nl.affine_range((h + 127) // 128):
            rows = t * 128 + i_p
            if masked:
                tile = nl.load(x[rows, i_f], mask=(rows < h))
                y = nisa.tensor_scalar(tile, np.multiply, 2.0, mask=(rows < h))
                z = nisa.activation(op=nl.exp, data=y, mask=(rows < h))
                nl.store(scaled[rows, i_f], value=z, mask=(rows < h))
            else:
                k = min(128, h - t * 128)
                tile = nl.ndarray((128, n), dtype=x.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=tile[0:k, :], src=x[t * 128:t * 128 + k, :])
                y = nisa.tensor_scalar(tile[0:k, :], np.multiply, 2.0)
                z = nisa.activation(op=nl.exp, data=y)
                nisa.dma_copy(dst=scaled[t * 128:t * 128 + k, :], src=z)
        w_t = nl.load(w)
        j_p, j_f = nl.mgrid[0:128, 0:512]
        for t in nl.affine_range((n + 511) // 512):
            cols = t * 512 + j_f
            if masked:
                x_t = nl.load(x[j_p, cols], mask=(cols < n))
                ps = nisa.nc_matmul(w_t, x_t, mask=(cols < n))
                res = nl.copy(ps, dtype=x.dtype, mask=(cols < n))
                nl.store(product[j_p, cols], value=res, mask=(cols < n))
            else:
                k = min(512, n - t * 512)
                x_t = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=x_t[:, 0:k], src=x[0:128, t * 512:t * 512 + k])
                ps = nisa.nc_matmul(w_t, x_t[:, 0:k])
                res = nl.copy(ps, dtype=x.dtype)
                nisa.dma_copy(dst=product[:, t * 512:t * 512 + k], src=res)
        return scaled, product
    return kernel


def test_compute_masked_to_a_box_costs_what_the_box_costs():
    """A mask "restricts the instruction to a sub-tile at no cost" (the NKI reference's masks):
    masked to the box that exists, a ragged tile's Vector, Scalar and Tensor Engine instructions
    take as long as the same instructions on the sliced box, not on the whole tile; the values are
    the same either way (up to fp32 rounding: the simulator's matmul is NumPy's BLAS, whose
    summation order over a 512-column tile and a 188-column one may differ, by CPU)."""
    x, w = rand(300, 700, seed=2), rand(128, 128, seed=3)
    masked = nkisim.run_kernel(ragged_compute(True), (x, w), {})
    sliced = nkisim.run_kernel(ragged_compute(False), (x, w), {})
    for got, want in zip(masked.outputs, sliced.outputs):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=0)
    durations = []
    for run in (masked, sliced):
        timeline = cost.estimate(run)
        durations.append(sorted((rec.opcode, slot.queue, round(slot.end - slot.start, 3))
                                for rec, slot in zip(run.trace, timeline.slots) if rec.opcode != "dma_copy"))
    assert durations[0] == durations[1]
    assert cost.estimate(masked).total_us == cost.estimate(sliced).total_us

@pytest.mark.parametrize("mask, box", [
    (lambda p, f: (p < 20) & (f >= 3) & (f < 7), (slice(0, 20), slice(3, 7))),
    (lambda p, f: p < 128, (slice(0, 128), slice(0, 8))),
    (lambda p, f: f < p, None),                       # a triangle is no box
    (lambda p, f: p > 200, None),                     # nothing kept
])
def test_the_box_a_mask_keeps(mask, box):
    i_p, i_f = nl.mgrid[0:128, 0:8]
    assert kept_box(mask(i_p, i_f), (128, 8)) == box


@nki.jit
def box_mask_past_the_tensor(x):
    i_p, i_f = nl.mgrid[0:128, 0:64]
    return_tile = nl.load(x[i_p, i_f], mask=(i_p < 100))  # <box-past-the-end>
    out = nl.ndarray((100, 64), dtype=x.dtype, buffer=nl.hbm)
    nisa.dma_copy(dst=out, src=return_tile[0:100, :])
    return out


def test_a_box_mask_that_still_reaches_past_the_tensor_is_out_of_bounds_at_its_line():
    with pytest.raises(errors.OutOfBoundsError) as info:
        nki.baremetal(box_mask_past_the_tensor)(rand(90, 64))
    assert info.value.site.lineno == line_of("box-past-the-end")
    assert "index range [0, 127] exceed dimension size of 90" in info.value.detail


# ----- a view that overhangs, of which only elements inside are used ----------------------------------

@nki.jit
def window_inside_an_overhanging_view(x):
    t = nl.ndarray((128, 8), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    window = t[:, 2:11]                      # overhangs the tile by three columns
    inner = nisa.tensor_copy(window[:, 0:6])     # columns 2..7: all inside
    out = nl.ndarray((128, 6), dtype=x.dtype, buffer=nl.hbm)
    nisa.dma_copy(dst=out, src=inner)
    return out


@nki.jit
def using_the_overhang(x):
    t = nl.ndarray((128, 8), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    window = t[:, 2:11]
    bad = nisa.tensor_copy(window)  # <overhang-used>
    out = nl.ndarray((128, 9), dtype=x.dtype, buffer=nl.hbm)
    nisa.dma_copy(dst=out, src=bad)
    return out


def test_an_overhanging_view_is_fine_while_the_elements_used_are_inside():
    x = rand(128, 8, seed=2)
    np.testing.assert_array_equal(nki.baremetal(window_inside_an_overhanging_view)(x), x[:, 2:8])
    with pytest.raises(errors.OutOfBoundsError) as info:
        nki.baremetal(using_the_overhang)(x)
    assert info.value.site.lineno == line_of("overhang-used")
    assert "dimension 1: index range [2, 10] exceed dimension size of 8" in info.value.detail


# ----- PSUM accumulation groups ------------------------------------------------------------------------

def accumulate(form: str):
    @nki.jit
    def kernel(a_t, b):
        k, m = a_t.shape
        _, n = b.shape
        out = nl.ndarray((m, n), dtype=b.dtype, buffer=nl.hbm)
        acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)    # never written before
        for kt in nl.affine_range(k // 128):
            a_sb = nl.ndarray((128, m), dtype=a_t.dtype, buffer=nl.sbuf)
            b_sb = nl.ndarray((128, n), dtype=b.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=a_sb, src=a_t[kt * 128:(kt + 1) * 128, :])
            nisa.dma_copy(dst=b_sb, src=b[kt * 128:(kt + 1) * 128, :])
            if form == "plus_equals":
                acc += nisa.nc_matmul(a_sb, b_sb)
            else:
                acc[...] = acc + nisa.nc_matmul(a_sb, b_sb)
        res = nisa.tensor_copy(acc, dtype=b.dtype)
        nisa.dma_copy(dst=out, src=res)
        return out
    return kernel


@pytest.mark.parametrize("form", ["plus_equals", "assign_sum"])
def test_both_accumulation_forms_sum_every_matmul_into_the_psum_tile(form):
    a_t, b = rand(384, 64, seed=3), rand(384, 96, seed=4)
    run = nkisim.run_kernel(accumulate(form), (a_t, b), {})
    np.testing.assert_allclose(run.outputs, a_t.T @ b, rtol=1e-4)
    matmuls = [r for r in run.trace if r.opcode == "nc_matmul"]
    assert len(matmuls) == 3 and all(r.accumulate for r in matmuls)
    assert not [r for r in run.trace if r.opcode == "tensor_tensor"]     # no element-wise add


@nki.jit
def two_psum_tiles_added(a_t, b):
    """Adding two PSUM tiles with tensor_tensor is still refused: at most one input in PSUM."""
    out = nl.ndarray((64, 96), dtype=b.dtype, buffer=nl.hbm)
    a_sb = nl.ndarray((128, 64), dtype=a_t.dtype, buffer=nl.sbuf)
    b_sb = nl.ndarray((128, 96), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_sb, src=a_t)
    nisa.dma_copy(dst=b_sb, src=b)
    p1 = nl.zeros((64, 96), dtype=nl.float32, buffer=nl.psum)
    p2 = nl.zeros((64, 96), dtype=nl.float32, buffer=nl.psum)
    p1 += nisa.nc_matmul(a_sb, b_sb)
    p2 += nisa.nc_matmul(a_sb, b_sb)
    both = nisa.tensor_tensor(p1, p2, op=nl.add)  # <two-psum>
    nisa.dma_copy(dst=out, src=nisa.tensor_copy(both))
    return out


def test_two_psum_operands_of_tensor_tensor_still_fail_at_the_kernels_line():
    with pytest.raises(errors.MemorySpaceError) as info:
        nki.baremetal(two_psum_tiles_added)(rand(128, 64), rand(128, 96))
    assert info.value.site.lineno == line_of("two-psum")
