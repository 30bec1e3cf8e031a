"""Small kernels with the bugs students write, each failing as it would on Trainium: either a
typed compile-time style error raised at the offending line, or wrong numbers when compared
with NumPy (and then we check *which* part is wrong). Next to several buggy kernels is the
correct version, to show the same harness passes a right kernel.
"""
from __future__ import annotations

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



def assert_raised_at(err: errors.NKISimError, code: str, tag: str) -> None:
    assert err.code == code, str(err)
    assert err.remedy, str(err)
    assert err.site is not None and os.path.abspath(err.site.filename) == THIS_FILE, str(err)
    assert err.site.lineno == line_of(tag), f"{err.site} is not the line of <{tag}>"


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def close(a, b):
    return np.allclose(a, b, rtol=1e-4, atol=1e-3)


# ======================================================================================================
# Matmul: out = lhsT.T @ rhs, K tiled by 128 and accumulated in PSUM
# ======================================================================================================
TILE_K = 128


def matmul_kernel(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.hbm)
    acc = nl.zeros((M, N), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(K // TILE_K):
        a_sb = nl.ndarray((TILE_K, M), dtype=lhsT.dtype, buffer=nl.sbuf)
        b_sb = nl.ndarray((TILE_K, N), dtype=rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_sb, src=lhsT[k * TILE_K:(k + 1) * TILE_K, :])
        nisa.dma_copy(dst=b_sb, src=rhs[k * TILE_K:(k + 1) * TILE_K, :])
        acc += nisa.nc_matmul(a_sb, b_sb)
    res = nisa.tensor_copy(acc, dtype=lhsT.dtype)
    nisa.dma_copy(dst=out, src=res)
    return out


def matmul_wrong_k_stride_kernel(lhsT, rhs):
    """Bug: steps K by the moving-tile width (512) while loading 128-row K tiles."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.hbm)
    acc = nl.zeros((M, N), nl.float32, buffer=nl.psum)
    for k0 in range(0, K, nl.tile_size.gemm_moving_fmax):
        a_sb = nl.ndarray((TILE_K, M), dtype=lhsT.dtype, buffer=nl.sbuf)
        b_sb = nl.ndarray((TILE_K, N), dtype=rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_sb, src=lhsT[k0:k0 + TILE_K, :])
        nisa.dma_copy(dst=b_sb, src=rhs[k0:k0 + TILE_K, :])
        acc += nisa.nc_matmul(a_sb, b_sb)
    res = nisa.tensor_copy(acc, dtype=lhsT.dtype)
    nisa.dma_copy(dst=out, src=res)
    return out


def matmul_evict_inside_loop_kernel(lhsT, rhs):
    """Bug: evicts PSUM to SBUF at the top of the K loop, so the stored copy is taken before
    the last K tile has been accumulated."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.hbm)
    acc = nl.zeros((M, N), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(K // TILE_K):
        res = nisa.tensor_copy(acc, dtype=lhsT.dtype)
        a_sb = nl.ndarray((TILE_K, M), dtype=lhsT.dtype, buffer=nl.sbuf)
        b_sb = nl.ndarray((TILE_K, N), dtype=rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_sb, src=lhsT[k * TILE_K:(k + 1) * TILE_K, :])
        nisa.dma_copy(dst=b_sb, src=rhs[k * TILE_K:(k + 1) * TILE_K, :])
        acc += nisa.nc_matmul(a_sb, b_sb)
    nisa.dma_copy(dst=out, src=res)
    return out


def matmul_ndarray_accumulator_kernel(lhsT, rhs):
    """Not a bug on hardware: the PSUM accumulator comes from nl.ndarray (uninitialised), and
    the first matmul of the accumulation group overwrites the bank instead of adding to it."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.hbm)
    acc = nl.ndarray((M, N), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(K // TILE_K):
        a_sb = nl.ndarray((TILE_K, M), dtype=lhsT.dtype, buffer=nl.sbuf)
        b_sb = nl.ndarray((TILE_K, N), dtype=rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_sb, src=lhsT[k * TILE_K:(k + 1) * TILE_K, :])
        nisa.dma_copy(dst=b_sb, src=rhs[k * TILE_K:(k + 1) * TILE_K, :])
        acc += nisa.nc_matmul(a_sb, b_sb)
    res = nisa.tensor_copy(acc, dtype=lhsT.dtype)
    nisa.dma_copy(dst=out, src=res)
    return out


def matmul_half_written_psum_kernel(lhsT, rhs):
    """Bug: writes the PSUM tile in two 256-column halves, but the loop starts at 1, so the
    first half of the uninitialised (nl.ndarray) tile is never written."""
    K, M = lhsT.shape          # K == 128: a single K tile
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.hbm)
    a_sb = nl.ndarray((K, M), dtype=lhsT.dtype, buffer=nl.sbuf)
    b_sb = nl.ndarray((K, N), dtype=rhs.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_sb, src=lhsT)
    nisa.dma_copy(dst=b_sb, src=rhs)
    res_psum = nl.ndarray((M, N), nl.float32, buffer=nl.psum)
    for n in nl.affine_range(1, N // 256):
        res_psum[:, n * 256:(n + 1) * 256] = nisa.nc_matmul(a_sb, b_sb[:, n * 256:(n + 1) * 256])
    res = nisa.tensor_copy(res_psum, dtype=lhsT.dtype)
    nisa.dma_copy(dst=out, src=res)
    return out


def matmul_too_many_accumulators_kernel(lhsT, rhs):
    """Bug: keeps one PSUM accumulator per 512-column tile alive for the whole K loop; with
    N = 4608 that is 9 accumulators for 8 PSUM banks."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.hbm)
    accs = [nl.zeros((M, 512), nl.float32, buffer=nl.psum) for _ in range(N // 512)]  # <nine-accs>
    for k in nl.affine_range(K // TILE_K):
        a_sb = nl.ndarray((TILE_K, M), dtype=lhsT.dtype, buffer=nl.sbuf)
        b_sb = nl.ndarray((TILE_K, N), dtype=rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_sb, src=lhsT[k * TILE_K:(k + 1) * TILE_K, :])
        nisa.dma_copy(dst=b_sb, src=rhs[k * TILE_K:(k + 1) * TILE_K, :])
        for n in nl.affine_range(N // 512):
            accs[n] += nisa.nc_matmul(a_sb, b_sb[:, n * 512:(n + 1) * 512])
    for n in nl.affine_range(N // 512):
        res = nisa.tensor_copy(accs[n], dtype=lhsT.dtype)
        nisa.dma_copy(dst=out[:, n * 512:(n + 1) * 512], src=res)
    return out


def matmul_one_accumulator_per_tile_kernel(lhsT, rhs):
    """The fix of the kernel above: loop over N tiles outside, one PSUM tile at a time."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.hbm)
    for n in nl.affine_range(N // 512):
        acc = nl.zeros((M, 512), nl.float32, buffer=nl.psum)
        for k in nl.affine_range(K // TILE_K):
            a_sb = nl.ndarray((TILE_K, M), dtype=lhsT.dtype, buffer=nl.sbuf)
            b_sb = nl.ndarray((TILE_K, 512), dtype=rhs.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=a_sb, src=lhsT[k * TILE_K:(k + 1) * TILE_K, :])
            nisa.dma_copy(dst=b_sb, src=rhs[k * TILE_K:(k + 1) * TILE_K, n * 512:(n + 1) * 512])
            acc += nisa.nc_matmul(a_sb, b_sb)
        res = nisa.tensor_copy(acc, dtype=lhsT.dtype)
        nisa.dma_copy(dst=out[:, n * 512:(n + 1) * 512], src=res)
    return out


@pytest.fixture(scope="module")
def mm_inputs():
    return rand(1024, 128, seed=1), rand(1024, 512, seed=2)


def test_matmul_correct(mm_inputs):
    lhsT, rhs = mm_inputs
    assert close(nki.baremetal(matmul_kernel)(lhsT, rhs), lhsT.T @ rhs)


def test_matmul_wrong_k_stride_skips_k_rows(mm_inputs):
    lhsT, rhs = mm_inputs
    out = nki.baremetal(matmul_wrong_k_stride_kernel)(lhsT, rhs)
    assert not close(out, lhsT.T @ rhs)
    # exactly K rows 0:128 and 512:640 were used; 128:512 and 640:1024 were skipped
    used = np.r_[0:128, 512:640]
    assert close(out, lhsT[used].T @ rhs[used])


def test_matmul_evicting_psum_inside_the_loop_stores_a_partial_sum(mm_inputs):
    lhsT, rhs = mm_inputs
    out = nki.baremetal(matmul_evict_inside_loop_kernel)(lhsT, rhs)
    assert not close(out, lhsT.T @ rhs)
    # the copy was taken before the last K tile (rows 896:1024) was accumulated
    assert close(out, lhsT[:896].T @ rhs[:896])


def test_matmul_group_opening_on_an_unwritten_psum_tile_overwrites_it(mm_inputs):
    lhsT, rhs = mm_inputs
    out = nki.baremetal(matmul_ndarray_accumulator_kernel)(lhsT, rhs)
    assert close(out, lhsT.T @ rhs)     # not NaN: the group's first matmul overwrote the garbage


def test_matmul_half_written_psum_tile_gives_nan_in_the_unwritten_half():
    lhsT, rhs = rand(128, 128, seed=3), rand(128, 512, seed=4)
    out = nki.baremetal(matmul_half_written_psum_kernel)(lhsT, rhs)
    ref = lhsT.T @ rhs
    assert not close(out, ref)
    assert np.isnan(out[:, :256]).all()
    assert close(out[:, 256:], ref[:, 256:])


def test_matmul_too_many_psum_accumulators():
    lhsT, rhs = rand(256, 128, seed=5), rand(256, 4608, seed=6)
    with pytest.raises(errors.AllocationError) as info:
        nki.baremetal(matmul_too_many_accumulators_kernel)(lhsT, rhs)
    assert_raised_at(info.value, "err_stack_overflow_psum", "nine-accs")
    assert "required PSUM banks 9 exceeds the available 8 banks" in info.value.detail
    # the fixed kernel computes the same product within the 8 banks
    assert close(nki.baremetal(matmul_one_accumulator_per_tile_kernel)(lhsT, rhs), lhsT.T @ rhs)


# ======================================================================================================
# 1-D convolution: channels on partitions, width on the free dim, K taps as K matmuls into PSUM.
#   out[co, j] = sum_t sum_ci w[t, ci, co] * x[ci, j + t]  (+ b[co])
# Output tiles of TW columns read an input window of TW + K - 1 columns (the halo).
# ======================================================================================================
TW = 128


def conv1d_bias_kernel(x, w, b):
    C_in, L = x.shape
    K, _, C_out = w.shape
    L_out = L - K + 1
    out = nl.ndarray((C_out, L_out), dtype=x.dtype, buffer=nl.hbm)
    w_sb = nl.ndarray((C_in, K, C_out), dtype=w.dtype, buffer=nl.sbuf)
    for t in nl.affine_range(K):
        nisa.dma_copy(dst=w_sb[:, t, :], src=w[t])
    b_sb = nl.ndarray((C_out, 1), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=b_sb, src=b)
    for j in nl.affine_range(L_out // TW):
        x_sb = nl.ndarray((C_in, TW + K - 1), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_sb, src=x[:, j * TW:j * TW + TW + K - 1])
        acc = nl.zeros((C_out, TW), nl.float32, buffer=nl.psum)
        for t in nl.affine_range(K):
            acc += nisa.nc_matmul(w_sb[:, t, :], x_sb[:, t:t + TW])
        res = nisa.tensor_scalar(acc, np.add, b_sb)
        nisa.dma_copy(dst=out[:, j * TW:(j + 1) * TW], src=res)
    return out


def conv1d_forgot_bias_kernel(x, w, b):
    """Bug: loads the bias but never adds it."""
    C_in, L = x.shape
    K, _, C_out = w.shape
    L_out = L - K + 1
    out = nl.ndarray((C_out, L_out), dtype=x.dtype, buffer=nl.hbm)
    w_sb = nl.ndarray((C_in, K, C_out), dtype=w.dtype, buffer=nl.sbuf)
    for t in nl.affine_range(K):
        nisa.dma_copy(dst=w_sb[:, t, :], src=w[t])
    b_sb = nl.ndarray((C_out, 1), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=b_sb, src=b)
    for j in nl.affine_range(L_out // TW):
        x_sb = nl.ndarray((C_in, TW + K - 1), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_sb, src=x[:, j * TW:j * TW + TW + K - 1])
        acc = nl.zeros((C_out, TW), nl.float32, buffer=nl.psum)
        for t in nl.affine_range(K):
            acc += nisa.nc_matmul(w_sb[:, t, :], x_sb[:, t:t + TW])
        res = nisa.tensor_copy(acc)
        nisa.dma_copy(dst=out[:, j * TW:(j + 1) * TW], src=res)
    return out


def conv1d_short_halo_kernel(x, w, b):
    """Bug: the halo is taken as K - 2 columns, so the last column of each input window is
    never loaded (the window tile is uninitialised there)."""
    C_in, L = x.shape
    K, _, C_out = w.shape
    L_out = L - K + 1
    halo = K - 2
    out = nl.ndarray((C_out, L_out), dtype=x.dtype, buffer=nl.hbm)
    w_sb = nl.ndarray((C_in, K, C_out), dtype=w.dtype, buffer=nl.sbuf)
    for t in nl.affine_range(K):
        nisa.dma_copy(dst=w_sb[:, t, :], src=w[t])
    b_sb = nl.ndarray((C_out, 1), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=b_sb, src=b)
    for j in nl.affine_range(L_out // TW):
        x_sb = nl.ndarray((C_in, TW + K - 1), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_sb[:, 0:TW + halo], src=x[:, j * TW:j * TW + TW + halo])
        acc = nl.zeros((C_out, TW), nl.float32, buffer=nl.psum)
        for t in nl.affine_range(K):
            acc += nisa.nc_matmul(w_sb[:, t, :], x_sb[:, t:t + TW])
        res = nisa.tensor_scalar(acc, np.add, b_sb)
        nisa.dma_copy(dst=out[:, j * TW:(j + 1) * TW], src=res)
    return out


def conv1d_shifted_window_kernel(x, w, b):
    """Bug: each input window starts one column late (j * TW + 1); the last window runs past
    the end of x, which the compiler rejects as a static out-of-bound access."""
    C_in, L = x.shape
    K, _, C_out = w.shape
    L_out = L - K + 1
    out = nl.ndarray((C_out, L_out), dtype=x.dtype, buffer=nl.hbm)
    w_sb = nl.ndarray((C_in, K, C_out), dtype=w.dtype, buffer=nl.sbuf)
    for t in nl.affine_range(K):
        nisa.dma_copy(dst=w_sb[:, t, :], src=w[t])
    b_sb = nl.ndarray((C_out, 1), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=b_sb, src=b)
    for j in nl.affine_range(L_out // TW):
        start = j * TW + 1
        x_sb = nl.ndarray((C_in, TW + K - 1), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_sb, src=x[:, start:start + TW + K - 1])  # <shifted-window>
        acc = nl.zeros((C_out, TW), nl.float32, buffer=nl.psum)
        for t in nl.affine_range(K):
            acc += nisa.nc_matmul(w_sb[:, t, :], x_sb[:, t:t + TW])
        res = nisa.tensor_scalar(acc, np.add, b_sb)
        nisa.dma_copy(dst=out[:, j * TW:(j + 1) * TW], src=res)
    return out


def conv1d_window_too_small_kernel(x, w, b):
    """Bug: the window tile itself is allocated without the halo; the DMA that fills it is
    given the full halo, so the element counts of dst and src differ."""
    C_in, L = x.shape
    K, _, C_out = w.shape
    L_out = L - K + 1
    out = nl.ndarray((C_out, L_out), dtype=x.dtype, buffer=nl.hbm)
    for j in nl.affine_range(L_out // TW):
        x_sb = nl.ndarray((C_in, TW), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_sb, src=x[:, j * TW:j * TW + TW + K - 1])  # <no-halo>
    return out


def conv1d_reference(x, w, b=None):
    K = w.shape[0]
    L_out = x.shape[1] - K + 1
    out = sum(w[t].T @ x[:, t:t + L_out] for t in range(K))
    return out if b is None else out + b[:, None]


@pytest.fixture(scope="module")
def conv_inputs():
    C_in, C_out, K, L = 128, 128, 3, 2 * TW + 2
    x = rand(C_in, L, seed=10)
    w = (rand(K, C_in, C_out, seed=11) * 0.1).astype(np.float32)
    b = (rand(C_out, seed=12) + 3.0).astype(np.float32)     # clearly non-zero
    return x, w, b


def test_conv1d_with_bias_correct(conv_inputs):
    x, w, b = conv_inputs
    assert close(nki.baremetal(conv1d_bias_kernel)(x, w, b), conv1d_reference(x, w, b))


def test_conv1d_forgetting_the_bias(conv_inputs):
    x, w, b = conv_inputs
    out = nki.baremetal(conv1d_forgot_bias_kernel)(x, w, b)
    ref = conv1d_reference(x, w, b)
    assert not close(out, ref)
    # wrong everywhere, by exactly the per-channel bias
    assert not np.isclose(out, ref, rtol=1e-4, atol=1e-3).any()
    assert close(out, conv1d_reference(x, w))
    assert close((ref - out).mean(axis=1), b)


def test_conv1d_halo_one_column_short(conv_inputs):
    x, w, b = conv_inputs
    out = nki.baremetal(conv1d_short_halo_kernel)(x, w, b)
    ref = conv1d_reference(x, w, b)
    assert not close(out, ref)
    last_cols = [j * TW + TW - 1 for j in range(out.shape[1] // TW)]      # 127 and 255
    bad = np.zeros(out.shape[1], dtype=bool)
    bad[last_cols] = True
    assert np.isnan(out[:, bad]).all()                 # the last output column of every tile
    assert not np.isnan(out[:, ~bad]).any()
    assert close(out[:, ~bad], ref[:, ~bad])            # everything else is right


def test_conv1d_window_shifted_by_one_is_out_of_bounds(conv_inputs):
    x, w, b = conv_inputs
    with pytest.raises(errors.OutOfBoundsError) as info:
        nki.baremetal(conv1d_shifted_window_kernel)(x, w, b)
    assert_raised_at(info.value, "err_tensor_access_out_of_bound", "shifted-window")
    assert ("Out-of-bound access for tensor `x` on dimension 1: index range [129, 258] exceed "
            "dimension size of 258") in info.value.detail


def test_conv1d_window_tile_without_halo(conv_inputs):
    x, w, b = conv_inputs
    with pytest.raises(errors.ShapeError) as info:
        nki.baremetal(conv1d_window_too_small_kernel)(x, w, b)
    assert_raised_at(info.value, "err_dma_shape_mismatch", "no-halo")
    assert "has 16640" in info.value.detail and "has 16384" in info.value.detail


# ======================================================================================================
# Vector add (course part 1 style): 1-D vectors processed ROW_CHUNK elements at a time
# ======================================================================================================
ROW_CHUNK = 128
ROW_CHUNK_TOO_BIG = 256


def vector_add_kernel(a_vec, b_vec):
    out = nl.ndarray(a_vec.shape, dtype=a_vec.dtype, buffer=nl.hbm)
    n = a_vec.shape[0]
    for i in nl.affine_range((n + ROW_CHUNK - 1) // ROW_CHUNK):
        lo = i * ROW_CHUNK
        hi = min(lo + ROW_CHUNK, n)
        a_tile = nl.ndarray((hi - lo, 1), dtype=a_vec.dtype, buffer=nl.sbuf)
        b_tile = nl.ndarray((hi - lo, 1), dtype=b_vec.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_tile, src=a_vec[lo:hi])
        nisa.dma_copy(dst=b_tile, src=b_vec[lo:hi])
        c_tile = nisa.tensor_tensor(a_tile, b_tile, op=nl.add)
        nisa.dma_copy(dst=out[lo:hi], src=c_tile)
    return out


def vector_add_256_rows_kernel(a_vec, b_vec):
    """Bug: ROW_CHUNK = 256 rows per tile, but SBUF has 128 partitions."""
    out = nl.ndarray(a_vec.shape, dtype=a_vec.dtype, buffer=nl.hbm)
    for i in nl.affine_range(a_vec.shape[0] // ROW_CHUNK_TOO_BIG):
        a_tile = nl.ndarray((ROW_CHUNK_TOO_BIG, 1), dtype=a_vec.dtype, buffer=nl.sbuf)  # <row-chunk>
        b_tile = nl.ndarray((ROW_CHUNK_TOO_BIG, 1), dtype=b_vec.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_tile, src=a_vec[i * ROW_CHUNK_TOO_BIG:(i + 1) * ROW_CHUNK_TOO_BIG])
        nisa.dma_copy(dst=b_tile, src=b_vec[i * ROW_CHUNK_TOO_BIG:(i + 1) * ROW_CHUNK_TOO_BIG])
        c_tile = nisa.tensor_tensor(a_tile, b_tile, op=nl.add)
        nisa.dma_copy(dst=out[i * ROW_CHUNK_TOO_BIG:(i + 1) * ROW_CHUNK_TOO_BIG], src=c_tile)
    return out


def vector_add_forgot_remainder_kernel(a_vec, b_vec):
    """Bug: n // ROW_CHUNK full tiles only; the last n % ROW_CHUNK outputs are never written."""
    out = nl.ndarray(a_vec.shape, dtype=a_vec.dtype, buffer=nl.hbm)
    for i in nl.affine_range(a_vec.shape[0] // ROW_CHUNK):
        a_tile = nl.ndarray((ROW_CHUNK, 1), dtype=a_vec.dtype, buffer=nl.sbuf)
        b_tile = nl.ndarray((ROW_CHUNK, 1), dtype=b_vec.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_tile, src=a_vec[i * ROW_CHUNK:(i + 1) * ROW_CHUNK])
        nisa.dma_copy(dst=b_tile, src=b_vec[i * ROW_CHUNK:(i + 1) * ROW_CHUNK])
        c_tile = nisa.tensor_tensor(a_tile, b_tile, op=nl.add)
        nisa.dma_copy(dst=out[i * ROW_CHUNK:(i + 1) * ROW_CHUNK], src=c_tile)
    return out


def vector_add_whole_vectors_in_sbuf_kernel(a_mat, b_mat):
    """Bug: (128, 32768) fp32 inputs loaded whole: 128 KiB per partition each, 256 KiB for
    the two, over the 208 KiB of SBUF a kernel may use."""
    out = nl.ndarray(a_mat.shape, dtype=a_mat.dtype, buffer=nl.hbm)
    a_sb = nl.ndarray(a_mat.shape, dtype=a_mat.dtype, buffer=nl.sbuf)
    b_sb = nl.ndarray(b_mat.shape, dtype=b_mat.dtype, buffer=nl.sbuf)  # <huge-sbuf>
    nisa.dma_copy(dst=a_sb, src=a_mat)
    nisa.dma_copy(dst=b_sb, src=b_mat)
    c_sb = nisa.tensor_tensor(a_sb, b_sb, op=nl.add)
    nisa.dma_copy(dst=out, src=c_sb)
    return out


def vector_add_partial_sbuf_result_kernel(a_mat, b_mat):
    """Bug: the result tile (an nl.ndarray) is filled 64 columns at a time by W // 64
    iterations; W = 500 is not a multiple of 64, so columns 448:500 are never written."""
    P, W = a_mat.shape
    out = nl.ndarray((P, W), dtype=a_mat.dtype, buffer=nl.hbm)
    a_sb = nl.ndarray((P, W), dtype=a_mat.dtype, buffer=nl.sbuf)
    b_sb = nl.ndarray((P, W), dtype=b_mat.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_sb, src=a_mat)
    nisa.dma_copy(dst=b_sb, src=b_mat)
    c_sb = nl.ndarray((P, W), dtype=a_mat.dtype, buffer=nl.sbuf)
    for j in nl.affine_range(W // 64):
        c_sb[:, j * 64:(j + 1) * 64] = nisa.tensor_tensor(a_sb[:, j * 64:(j + 1) * 64],
                                                         b_sb[:, j * 64:(j + 1) * 64], op=nl.add)
    nisa.dma_copy(dst=out, src=c_sb)
    return out


def test_vector_add_correct_including_a_ragged_last_tile():
    a, b = rand(1000, seed=20), rand(1000, seed=21)
    assert close(nki.baremetal(vector_add_kernel)(a, b), a + b)


def test_vector_add_with_256_row_chunks():
    a, b = rand(1024, seed=20), rand(1024, seed=21)
    with pytest.raises(errors.HardwareLimitError) as info:
        nki.baremetal(vector_add_256_rows_kernel)(a, b)
    assert_raised_at(info.value, "err_num_partition_exceed_arch_limit", "row-chunk")
    assert "number of partitions 256 exceed architecture limitation of 128" in info.value.detail
    assert isinstance(info.value, ValueError)


def test_vector_add_forgetting_the_remainder_leaves_output_unwritten():
    a, b = rand(1000, seed=20), rand(1000, seed=21)
    out = nki.baremetal(vector_add_forgot_remainder_kernel)(a, b)
    assert not close(out, a + b)
    assert close(out[:896], (a + b)[:896])
    assert np.isnan(out[896:]).all()


def test_vector_add_overflowing_sbuf():
    a, b = rand(128, 32768, seed=22), rand(128, 32768, seed=23)
    with pytest.raises(errors.AllocationError) as info:
        nki.baremetal(vector_add_whole_vectors_in_sbuf_kernel)(a, b)
    assert_raised_at(info.value, "err_stack_overflow_sbuf", "huge-sbuf")
    assert ("required SBUF 262144 bytes per partition exceeds the available 229368 bytes"
            in info.value.detail)


def test_vector_add_partially_written_sbuf_tile_gives_nan():
    a, b = rand(128, 500, seed=24), rand(128, 500, seed=25)
    out = nki.baremetal(vector_add_partial_sbuf_result_kernel)(a, b)
    assert not close(out, a + b)
    assert close(out[:, :448], (a + b)[:, :448])
    assert np.isnan(out[:, 448:]).all()


# ======================================================================================================
# Computing the answer on the host: device values cannot be read from Python
# ======================================================================================================

def host_numpy_kernel(a_mat, b_mat):
    out = nl.ndarray(a_mat.shape, dtype=a_mat.dtype, buffer=nl.hbm)
    a_sb = nl.ndarray(a_mat.shape, dtype=a_mat.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_sb, src=a_mat)
    a_host = np.asarray(a_sb)  # <host-asarray>
    return a_host + 1


def host_asarray_on_hbm_kernel(a_mat, b_mat):
    out = nl.ndarray(a_mat.shape, dtype=a_mat.dtype, buffer=nl.hbm)
    total = np.asarray(a_mat) + np.asarray(b_mat)  # <host-asarray-hbm>
    return out


def host_float_kernel(a_mat, b_mat):
    a_sb = nl.ndarray(a_mat.shape, dtype=a_mat.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_sb, src=a_mat)
    scale = float(a_sb[0, 0])  # <host-float>
    return scale


def host_branch_kernel(a_mat, b_mat):
    out = nl.ndarray(a_mat.shape, dtype=a_mat.dtype, buffer=nl.hbm)
    a_sb = nl.ndarray(a_mat.shape, dtype=a_mat.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_sb, src=a_mat)
    if a_sb[0:1, 0:1] > 0:  # <host-if>
        nisa.dma_copy(dst=out, src=a_sb)
    return out


def host_numpy_on_hbm_kernel(a_mat, b_mat):
    return np.add(a_mat, b_mat)  # <host-ufunc>


def host_numpy_sum_kernel(a_mat, b_mat):
    a_sb = nl.ndarray(a_mat.shape, dtype=a_mat.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_sb, src=a_mat)
    return np.sum(a_sb, axis=1)  # <host-sum>


@pytest.mark.parametrize("kernel, tag", [
    (host_numpy_kernel, "host-asarray"),
    (host_asarray_on_hbm_kernel, "host-asarray-hbm"),
    (host_float_kernel, "host-float"),
    (host_branch_kernel, "host-if"),
    (host_numpy_sum_kernel, "host-sum"),
])
def test_reading_device_values_on_the_host(kernel, tag):
    a, b = rand(128, 4, seed=30), rand(128, 4, seed=31)
    with pytest.raises(errors.DeviceValueError) as info:
        nki.baremetal(kernel)(a, b)
    assert_raised_at(info.value, "err_device_tensor_value_on_host", tag)
    assert "from host Python" in info.value.detail
    assert "nki.isa" in info.value.remedy


def test_numpy_ufunc_on_an_hbm_argument_is_refused():
    a, b = rand(128, 4, seed=30), rand(128, 4, seed=31)
    # a NumPy ufunc on device tensors is the NKI op of that name, which cannot read HBM
    with pytest.raises(errors.MemorySpaceError) as info:
        nki.baremetal(host_numpy_on_hbm_kernel)(a, b)
    assert "address space 'psum|sbuf'" in info.value.detail and "hbm" in info.value.detail
    assert "nisa.dma_copy" in info.value.remedy
