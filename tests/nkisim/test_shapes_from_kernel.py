"""Shapes a kernel gives (nl.ndarray/zeros/ones/full, nisa.memset, reshape) are checked when
the kernel gives them, and subscripts of tensors with an empty (size-0) dimension say what is
wrong: a clear error at the kernel's own line, never an exception from inside the simulator.

A negative size is refused at once: the tile would count negative bytes toward SBUF capacity
while tracing, which a hostile kernel could use to hide the tiles it really keeps. A size-0
dimension is allowed at creation (a remainder tile of an exact split is harmless while it is
not touched); reading or writing any element of it is out of bounds, as on hardware."""
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


def refused_at(exc_type, tag, kernel, *args):
    with pytest.raises(exc_type) as info:
        nki.baremetal(kernel)(*args)
    err = info.value
    assert err.remedy and len(err.remedy) > 10, str(err)
    assert err.site is not None and os.path.abspath(err.site.filename) == THIS_FILE, str(err)
    assert err.site.lineno == line_of(tag), f"{err.site} is not the line of <{tag}>"
    return err


def x8():
    return np.arange(8 * 3, dtype=np.float32).reshape(8, 3)


# ----- size-0 dimensions -------------------------------------------------------------------------

def index_into_empty_dimension(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    empty = nl.ndarray((8, 0, 3), nl.float32, buffer=nl.sbuf)
    row = empty[:, 0, :]  # <empty-int>
    nisa.dma_copy(dst=out, src=row)
    return out


def slice_into_empty_dimension(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    empty = nl.ndarray((8, 0, 3), nl.float32, buffer=nl.sbuf)
    rows = empty[:, 0:1, :]  # <empty-slice>
    nisa.dma_copy(dst=out, src=rows)
    return out


def index_into_empty_slice(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    tile = nl.ndarray((8, 4), nl.float32, buffer=nl.sbuf)
    none = tile[:, 2:2]
    col = none[:, 0]  # <empty-view>
    nisa.dma_copy(dst=out[:, 0], src=col)
    return out


def gather_from_empty_dimension(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    empty = nl.ndarray((8, 0), nl.float32, buffer=nl.sbuf)
    i_p, i_f = nl.arange(8)[:, None], nl.arange(3)[None, :]
    part = empty[i_p, i_f]  # <empty-gather>
    nisa.dma_copy(dst=out, src=part)
    return out


@pytest.mark.parametrize("kernel, tag", [(index_into_empty_dimension, "empty-int"),
                                         (slice_into_empty_dimension, "empty-slice"),
                                         (index_into_empty_slice, "empty-view"),
                                         (gather_from_empty_dimension, "empty-gather")])
def test_an_element_of_a_size_0_dimension_is_out_of_bounds_at_the_subscript(kernel, tag):
    err = refused_at(errors.OutOfBoundsError, tag, kernel, x8())
    assert err.code == "err_tensor_access_out_of_bound"
    assert "size of 0" in err.detail, str(err)


def untouched_remainder_tile(x):
    """An honest kernel: the remainder tile of an exact split has 0 columns and is never used."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    rest = nl.ndarray((8, x.shape[1] % 3), nl.float32, buffer=nl.sbuf)
    whole = rest[:, :]
    assert whole.shape == (8, 0)
    tile = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    nisa.dma_copy(dst=out, src=nisa.tensor_scalar(tile, np.add, 1.0))
    return out


def test_a_size_0_tile_that_is_not_touched_is_no_error():
    x = x8()
    np.testing.assert_array_equal(nki.baremetal(untouched_remainder_tile)(x), x + 1)


# ----- negative and fractional sizes -----------------------------------------------------------------

def make_tile(how, shape):
    if how == "ndarray":
        return nl.ndarray(shape, nl.float32, buffer=nl.sbuf)
    if how == "zeros":
        return nl.zeros(shape, nl.float32, buffer=nl.sbuf)
    if how == "ones":
        return nl.ones(shape, nl.float32, buffer=nl.sbuf)
    if how == "full":
        return nl.full(shape, 2.0, nl.float32, buffer=nl.sbuf)
    return nisa.memset(shape, 0.0, nl.float32)


def bad_shape(x, how, shape):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    tile = make_tile(how, shape)
    nisa.dma_copy(dst=out, src=nisa.tensor_copy(tile))
    return out


HOW = ["ndarray", "zeros", "ones", "full", "memset"]


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("shape, says", [((8, -3), "negative"), ((8, 2.5), "integer"),
                                         ((-8, 3), "negative")])
def test_a_negative_or_fractional_size_is_refused_where_the_kernel_gives_it(how, shape, says):
    with pytest.raises(errors.ShapeError) as info:
        nki.baremetal(bad_shape)(x8(), how, shape)
    err = info.value
    assert says in err.detail, str(err)
    assert err.remedy, str(err)
    assert os.path.abspath(err.site.filename) == THIS_FILE, str(err)


@pytest.mark.parametrize("how", HOW)
def test_an_integral_float_size_is_still_a_size(how):
    x = x8()
    expected = {"zeros": 0, "ones": 1, "full": 2, "memset": 0}.get(how)
    def kernel(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
        tile = make_tile(how, (8, 6 / 2))
        if how == "ndarray":
            nisa.dma_copy(dst=tile, src=x)
        nisa.dma_copy(dst=out, src=nisa.tensor_copy(tile))
        return out
    result = nki.baremetal(kernel)(x)
    np.testing.assert_array_equal(result, x if expected is None else np.full_like(x, expected))


def negative_reshape(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    flipped = x.reshape((-8, -3))  # <neg-reshape>
    nisa.dma_copy(dst=out, src=flipped)
    return out


def test_a_reshape_to_negative_sizes_is_refused():
    err = refused_at(errors.ShapeError, "neg-reshape", negative_reshape, x8())
    assert "negative" in err.detail, str(err)


# ----- the attack: a negative tile to hide SBUF use -------------------------------------------------

def hides_capacity(x, rebate):
    """Two 120 KiB-per-partition tiles do not fit in SBUF together; a tile of negative size
    would count -120 KiB and let them pass as fitting."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    first = nl.ndarray((128, 30720), nl.float32)
    if rebate:
        credit = nl.ndarray((128, -30720), nl.float32)  # <rebate>
    second = nl.ndarray((128, 30720), nl.float32)  # <second>
    nisa.dma_copy(dst=first[:, 0:512], src=x)
    nisa.dma_copy(dst=second[:, 0:512], src=first[:, 0:512])
    nisa.dma_copy(dst=out, src=second[:, 0:512])
    return out


def test_a_negative_size_tile_cannot_hide_sbuf_use():
    x = np.ones((128, 512), np.float32)
    refused_at(errors.AllocationError, "second", hides_capacity, x, False)   # the two do not fit
    err = refused_at(errors.ShapeError, "rebate", hides_capacity, x, True)
    assert "negative" in err.detail, str(err)
