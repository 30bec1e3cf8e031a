"""PSUM accumulation executes bit for bit as its semantics say, whichever way the executor
takes: a first accumulating write covering a fresh tile adds to zeros (no garbage fill, no
written-flags), later ones add in place in fp32, and a first write covering part of the tile
still keeps the elements nothing wrote at zero for the next one."""
from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_limits

import nkisim

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


def products(a_t: np.ndarray, b: np.ndarray, cols=slice(None)) -> list[np.ndarray]:
    """Each 128-row block's matmul as the executor computes it (fp32, one BLAS thread)."""
    with threadpool_limits(limits=1, user_api="blas"):
        return [a_t[k:k + 128].T @ b[k:k + 128, cols] for k in range(0, a_t.shape[0], 128)]


@nki.jit
def whole_tile_group(a_t, b):
    k, m = a_t.shape
    n = b.shape[1]
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.hbm)
    acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    for kt in nl.affine_range(k // 128):
        a_sb = nl.ndarray((128, m), dtype=a_t.dtype, buffer=nl.sbuf)
        b_sb = nl.ndarray((128, n), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_sb, src=a_t[kt * 128:(kt + 1) * 128, :])
        nisa.dma_copy(dst=b_sb, src=b[kt * 128:(kt + 1) * 128, :])
        acc += nisa.nc_matmul(a_sb, b_sb)
    nisa.dma_copy(dst=out, src=nisa.tensor_copy(acc))
    return out


@nki.jit
def halves_first(a_t, b):
    """The first two matmuls each write half of the tile, the third all of it."""
    m, n = a_t.shape[1], b.shape[1]
    half = n // 2
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.hbm)
    acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    a_sb = nl.ndarray((128, m), dtype=a_t.dtype, buffer=nl.sbuf)
    b_sb = nl.ndarray((128, n), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_sb, src=a_t[0:128, :])
    nisa.dma_copy(dst=b_sb, src=b[0:128, :])
    acc[:, 0:half] += nisa.nc_matmul(a_sb, b_sb[:, 0:half])
    acc[:, half:n] += nisa.nc_matmul(a_sb, b_sb[:, half:n])
    acc += nisa.nc_matmul(a_sb, b_sb)
    nisa.dma_copy(dst=out, src=nisa.tensor_copy(acc))
    return out


def test_a_whole_tile_group_is_zero_plus_each_product_in_order():
    rng = np.random.default_rng(11)
    a_t = rng.standard_normal((384, 64), dtype=np.float32)
    b = rng.standard_normal((384, 96), dtype=np.float32)
    b[:, 5] = -0.0           # products of -0.0: the first add to zero makes them +0.0
    a_t[:, 7] = np.nan
    out = nkisim.run_kernel(whole_tile_group, (a_t, b), {}).outputs
    expected = np.float32(0)
    for p in products(a_t, b):
        expected = expected + p
    assert np.array_equal(bits(out), bits(expected))


def test_a_group_whose_first_writes_cover_halves_adds_each_to_zero():
    rng = np.random.default_rng(12)
    a_t = rng.standard_normal((128, 64), dtype=np.float32)
    b = rng.standard_normal((128, 96), dtype=np.float32)
    out = nkisim.run_kernel(halves_first, (a_t, b), {}).outputs
    (left,), (right,), (whole,) = products(a_t, b, slice(0, 48)), products(a_t, b, slice(48, 96)), products(a_t, b)
    expected = (np.float32(0) + np.concatenate([left, right], axis=1)) + whole
    assert np.array_equal(bits(out), bits(expected))


@nki.jit
def product_kept(a_t, b):
    """The matmul's own result tile is read again after it was accumulated: it still holds the
    product (the executor skips filling such a tile only when nothing reads it again)."""
    m, n = a_t.shape[1], b.shape[1]
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.hbm)
    acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    a_sb = nl.ndarray((128, m), dtype=a_t.dtype, buffer=nl.sbuf)
    b_sb = nl.ndarray((128, n), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_sb, src=a_t[0:128, :])
    nisa.dma_copy(dst=b_sb, src=b[0:128, :])
    acc += nisa.nc_matmul(a_sb, b_sb)
    product = nisa.nc_matmul(a_sb, b_sb)
    acc += product
    total = nisa.tensor_tensor(nisa.tensor_copy(acc), product, op=nl.add)
    nisa.dma_copy(dst=out, src=total)
    return out


def test_a_matmul_result_read_after_its_accumulation_still_holds_the_product():
    rng = np.random.default_rng(13)
    a_t = rng.standard_normal((128, 64), dtype=np.float32)
    b = rng.standard_normal((128, 96), dtype=np.float32)
    out = nkisim.run_kernel(product_kept, (a_t, b), {}).outputs
    (p,) = products(a_t, b)
    expected = ((np.float32(0) + p) + p) + p
    assert np.array_equal(bits(out), bits(expected))


@nki.jit
def row_windows(w_t, x, step):
    """One matmul per window x[:, r:r+2, c:c+w:step] of a padded image tile, as conv2d kernels
    take them: the rows of such a window are not one matrix in memory."""
    m = w_t.shape[1]
    rows, width = 2, (x.shape[2] - 2) // step
    out = nl.ndarray((2, m, rows, width), dtype=nl.float32, buffer=nl.hbm)
    w_sb = nl.ndarray(w_t.shape, dtype=w_t.dtype, buffer=nl.sbuf)
    x_sb = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=w_sb, src=w_t)
    nisa.dma_copy(dst=x_sb, src=x)
    for i in nl.affine_range(2):
        acc = nl.ndarray((m, rows, width), dtype=nl.float32, buffer=nl.psum)
        acc[...] = nisa.nc_matmul(w_sb, x_sb[:, i + 1:i + 1 + rows, i:i + width * step:step])
        nisa.dma_copy(dst=out[i], src=nisa.tensor_copy(acc))
    return out


def test_a_window_of_rows_multiplies_as_the_window_copied_into_one_matrix():
    """A window of rows, with or without a step along the row, multiplies as the window copied
    into one matrix would, bit for bit."""
    rng = np.random.default_rng(7)
    w_t = rng.standard_normal((128, 128)).astype(np.float32)
    x = rng.standard_normal((128, 6, 40)).astype(np.float32)
    for step in (1, 2):
        out = nki.simulate_kernel(row_windows, w_t, x, step)
        width = (x.shape[2] - 2) // step
        for i in range(2):
            window = np.ascontiguousarray(x[:, i + 1:i + 3, i:i + width * step:step]).reshape(128, -1)
            with threadpool_limits(limits=1, user_api="blas"):
                want = (w_t.T @ window).reshape(128, 2, width)
            np.testing.assert_array_equal(bits(out[i]), bits(want))


@nki.jit
def reread_then_rewritten(w_t, x, y):
    """fp16 operands read by three matmuls, then half of the moving tile overwritten with y's
    values and read again: the last product must see the new values."""
    m, n = w_t.shape[1], x.shape[1]
    out = nl.ndarray((4, m, n), dtype=nl.float32, buffer=nl.hbm)
    w_sb = nl.ndarray(w_t.shape, dtype=w_t.dtype, buffer=nl.sbuf)
    x_sb = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=w_sb, src=w_t)
    nisa.dma_copy(dst=x_sb, src=x)
    for i in range(3):
        acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
        acc[...] = nisa.nc_matmul(w_sb, x_sb)
        nisa.dma_copy(dst=out[i], src=nisa.tensor_copy(acc))
    nisa.dma_copy(dst=x_sb[:, 0:n // 2], src=y[:, 0:n // 2])
    acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    acc[...] = nisa.nc_matmul(w_sb, x_sb)
    nisa.dma_copy(dst=out[3], src=nisa.tensor_copy(acc))
    return out


def test_narrow_operands_read_again_after_a_write_have_the_new_values():
    """The executor widens an fp16 tile read many times once (not at every matmul); a write
    to it must make the next matmul see the written values."""
    rng = np.random.default_rng(9)
    w_t = rng.standard_normal((128, 128)).astype(np.float16)
    x = rng.standard_normal((128, 256)).astype(np.float16)
    y = rng.standard_normal((128, 256)).astype(np.float16)
    out = nki.simulate_kernel(reread_then_rewritten, w_t, x, y)
    x_new = np.concatenate([y[:, :128], x[:, 128:]], axis=1)
    with threadpool_limits(limits=1, user_api="blas"):
        before = w_t.astype(np.float32).T @ x.astype(np.float32)
        after = w_t.astype(np.float32).T @ x_new.astype(np.float32)
    for i in range(3):
        np.testing.assert_array_equal(bits(out[i]), bits(before))
    np.testing.assert_array_equal(bits(out[3]), bits(after))


@nki.jit
def result_then_rewritten(x):
    """y, a whole new tile, is copied to z; then half of y is overwritten: z keeps y's old values."""
    out = nl.ndarray((2,) + x.shape, dtype=x.dtype, buffer=nl.hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    y = nisa.tensor_tensor(t, t, op=nl.add)
    z = nisa.tensor_copy(y)
    y[:, 0:2] = nisa.tensor_scalar(t[:, 0:2], np.multiply, 0.0)
    nisa.dma_copy(dst=out[0], src=y)
    nisa.dma_copy(dst=out[1], src=z)
    return out


def test_a_result_tile_taken_as_memory_is_not_shared_with_what_was_copied_from_it():
    """The executor takes a fresh result as its tile's memory (no copy); later writes to that
    tile must not reach a copy made from it."""
    x = np.random.default_rng(3).standard_normal((128, 4)).astype(np.float32)
    out = nki.simulate_kernel(result_then_rewritten, x)
    np.testing.assert_array_equal(out[1], x + x)
    np.testing.assert_array_equal(out[0], np.concatenate([np.zeros((128, 2), np.float32), (x + x)[:, 2:]], axis=1))
