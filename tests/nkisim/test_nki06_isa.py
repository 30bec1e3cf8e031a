"""The NKI 0.6 front end's instructions against NumPy, and against the legacy front end: the same
kernel written in both dialects traces the same instructions and computes the same bits.

Kernels are written as the 0.6 API reference has them: every nki.isa call takes its destination
first and returns nothing; outputs live in nl.shared_hbm."""
import pathlib

import ml_dtypes
import numpy as np
import pytest

import nkisim
from nkisim import errors

nkisim.install()

import neuronxcc.nki as lnki  # noqa: E402
import neuronxcc.nki.isa as lisa  # noqa: E402
import neuronxcc.nki.language as lnl  # noqa: E402
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402
from kernel_helpers import load, store  # noqa: E402

F32 = np.dtype(np.float32)
F16 = np.dtype(np.float16)
BF16 = np.dtype(ml_dtypes.bfloat16)


def rng(seed=0):
    return np.random.default_rng(seed)


def evict(psum_tile, dtype=None):
    """PSUM -> SBUF with tensor_copy, then to an output."""
    sb = nl.ndarray(psum_tile.shape, dtype or psum_tile.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=sb, src=psum_tile)
    return store(sb)


# ----- compute instructions against NumPy --------------------------------------------------------

@nki.jit
def add_kernel(a, b):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=out, data1=load(a), data2=load(b), op=nl.add)
    return store(out)


@nki.jit
def cast_copy(a):
    out = nl.ndarray(a.shape, nl.float16, buffer=nl.sbuf)
    nisa.tensor_copy(dst=out, src=load(a))
    return store(out)


@nki.jit
def scale_shift(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=out, data=load(a), op0=nl.multiply, operand0=3.0, op1=nl.subtract, operand1=1.5)
    return store(out)


@nki.jit
def row_max(a):
    out = nl.ndarray((a.shape[0], 1), a.dtype, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=out, op=nl.max, data=load(a), axis=1, keepdims=True)
    return store(out)


@nki.jit
def exp_bias(a, bias):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.activation(dst=out, op=nl.exp, data=load(a), bias=load(bias), scale=0.5)
    return store(out)


@nki.jit
def filled(a):
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.memset(dst=t, value=2.5)
    return store(t)


@nki.jit
def pe_transpose(a):
    t = nl.ndarray((a.shape[1], a.shape[0]), a.dtype, buffer=nl.psum)
    nisa.nc_transpose(dst=t, data=load(a))
    return evict(t)


@nki.jit
def column_sums(a):
    out = nl.ndarray((1, a.shape[1]), a.dtype, buffer=nl.sbuf)
    nisa.tensor_partition_reduce(dst=out, op=nl.add, data=load(a))
    return store(out)


@nki.jit
def index_pattern(a):
    t = nl.ndarray((a.shape[0], 4, 8), nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=t, pattern=[[8, 4], [1, 8]], offset=3, channel_multiplier=100)
    return store(t)


@nki.jit
def lower_triangle(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    # keep element (p, f) where p - f >= 0, else -1
    nisa.affine_select(dst=out, pattern=[[-1, a.shape[1]]], channel_multiplier=1, on_true_tile=load(a),
                       on_false_value=-1.0, cmp_op=nl.greater_equal)
    return store(out)


def test_element_wise_instructions_compute_what_numpy_does():
    a = rng(1).standard_normal((128, 64)).astype(F32)
    b = rng(2).standard_normal((128, 64)).astype(F32)
    bias = rng(3).standard_normal((128, 1)).astype(F32)
    np.testing.assert_array_equal(add_kernel(a, b), a + b)
    np.testing.assert_array_equal(cast_copy(a), a.astype(F16))
    np.testing.assert_allclose(scale_shift(a), a * 3.0 - 1.5, rtol=1e-6)
    np.testing.assert_array_equal(row_max(a), a.max(axis=1, keepdims=True))
    np.testing.assert_allclose(exp_bias(a, bias), np.exp(a * 0.5 + bias), rtol=1e-5)
    np.testing.assert_array_equal(filled(a), np.full_like(a, 2.5))
    np.testing.assert_array_equal(column_sums(a), a.sum(axis=0, keepdims=True, dtype=F32))


def test_transpose_and_index_patterns():
    a = rng(4).standard_normal((128, 96)).astype(F32)
    np.testing.assert_array_equal(pe_transpose(a), a.T)
    p, i, j = np.meshgrid(np.arange(16), np.arange(4), np.arange(8), indexing="ij")
    np.testing.assert_array_equal(index_pattern(np.zeros((16, 32), F32)), 3 + 100 * p + 8 * i + j)
    sq = rng(5).standard_normal((32, 32)).astype(F32)
    np.testing.assert_array_equal(lower_triangle(sq), np.where(np.tril(np.ones((32, 32), bool)), sq, -1.0))


# ----- nc_matmul: destination first, accumulation detected --------------------------------------

@nki.jit
def k_loop_matmul(a, b):
    """a (K, M), b (K, N): the K loop accumulates into one PSUM tile without zeroing it."""
    K, M = a.shape
    acc = nl.ndarray((M, b.shape[1]), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(K // 128):
        nisa.nc_matmul(dst=acc, stationary=load(a[k * 128:(k + 1) * 128, :]),
                       moving=load(b[k * 128:(k + 1) * 128, :]))
    return evict(acc)


@nki.jit
def two_groups_one_accumulator(a, b, restart):
    """Two products in turn through one PSUM tile. accumulate=None follows the documented rule, per
    PSUM location: a location a matmul wrote before is added to, so the second group adds onto the
    first; `restart` opens each group with accumulate=False, as the docs' accumulate=(k > 0) does."""
    out = nl.ndarray((2, a.shape[1], b.shape[1]), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((a.shape[1], b.shape[1]), nl.float32, buffer=nl.psum)
    for g in nl.affine_range(2):
        for k in nl.affine_range(2):
            nisa.nc_matmul(dst=acc, stationary=load(a[k * 128:(k + 1) * 128, :]),
                           moving=load(b[k * 128:(k + 1) * 128, :]), accumulate=(k > 0) if restart else None)
        sb = nl.ndarray(acc.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=sb, src=acc)
        nisa.dma_copy(dst=out[g], src=sb)
    return out


@nki.jit
def explicit_accumulate(a, b, flag):
    acc = nl.ndarray((a.shape[1], b.shape[1]), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=load(a), moving=load(b))
    nisa.nc_matmul(dst=acc, stationary=load(a), moving=load(b), accumulate=flag)
    return evict(acc)


def test_matmul_accumulates_per_psum_location():
    a = rng(6).standard_normal((384, 64)).astype(F32)
    b = rng(7).standard_normal((384, 100)).astype(F32)
    np.testing.assert_allclose(k_loop_matmul(a, b), a.T @ b, rtol=1e-4, atol=1e-4)
    a2, b2 = a[:256], b[:256]
    product = a2.T @ b2
    kept = two_groups_one_accumulator(a2, b2, False)
    np.testing.assert_allclose(kept[0], product, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(kept[1], 2 * product, rtol=1e-4, atol=1e-4)
    restarted = two_groups_one_accumulator(a2, b2, True)
    np.testing.assert_allclose(restarted[1], product, rtol=1e-4, atol=1e-4)


@nki.jit
def overlapping_windows(a, b):
    """Matmuls into overlapping PSUM windows (the convolution pattern): each location is
    overwritten by its first matmul and added to by the next, element by element."""
    acc = nl.ndarray((a.shape[1], 96), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc[:, 0:64], stationary=load(a), moving=load(b))
    nisa.nc_matmul(dst=acc[:, 0:64], stationary=load(a), moving=load(b))
    nisa.nc_matmul(dst=acc[:, 64:96], stationary=load(a), moving=load(b[:, 0:32]))
    return evict(acc)


def test_partly_written_psum_needs_an_explicit_accumulate():
    a = rng(12).standard_normal((128, 16)).astype(F32)
    b = rng(13).standard_normal((128, 64)).astype(F32)
    out = overlapping_windows(a, b)
    np.testing.assert_allclose(out[:, :64], 2 * (a.T @ b), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out[:, 64:], a.T @ b[:, :32], rtol=1e-4, atol=1e-4)

    @nki.jit
    def straddles(a, b):
        acc = nl.ndarray((a.shape[1], 96), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc[:, 0:64], stationary=load(a), moving=load(b))
        nisa.nc_matmul(dst=acc[:, 32:96], stationary=load(a), moving=load(b))
        return evict(acc)
    with pytest.raises(errors.UnsupportedOperationError, match="pass accumulate=True or accumulate=False"):
        straddles(a, b)

    @nki.jit
    def adds_onto_a_half_written_region(a, b):
        acc = nl.ndarray((a.shape[1], 96), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc[:, 0:64], stationary=load(a), moving=load(b))
        nisa.nc_matmul(dst=acc[:, 32:96], stationary=load(a), moving=load(b), accumulate=True)
        return evict(acc)
    with pytest.raises(errors.UnsupportedOperationError, match="no earlier matmul wrote whole"):
        adds_onto_a_half_written_region(a, b)


def test_explicit_accumulate_flag():
    a = rng(8).standard_normal((128, 32)).astype(F32)
    b = rng(9).standard_normal((128, 48)).astype(F32)
    np.testing.assert_allclose(explicit_accumulate(a, b, True), 2 * (a.T @ b), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(explicit_accumulate(a, b, False), a.T @ b, rtol=1e-4, atol=1e-4)


@nki.jit
def accumulates_onto_a_memset(a, b):
    acc = nl.ndarray((a.shape[1], b.shape[1]), nl.float32, buffer=nl.psum)
    nisa.memset(dst=acc, value=0.0)
    nisa.nc_matmul(dst=acc, stationary=load(a), moving=load(b), accumulate=True)
    return evict(acc)


def test_accumulating_onto_psum_no_matmul_initialised_is_refused():
    """Undefined behaviour on Trainium (the nc_matmul reference): a grade must not rest on it."""
    a = np.ones((128, 8), F32)
    with pytest.raises(errors.UnsupportedOperationError, match="undefined behaviour"):
        accumulates_onto_a_memset(a, a)


# ----- never-written memory reads as the sentinel -----------------------------------------------

@nki.jit
def reads_unwritten(a):
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[:, 0:8], src=a[:, 0:8])
    return store(t)


def test_a_read_of_never_written_memory_shows_nan():
    out = reads_unwritten(np.ones((128, 16), F32))
    assert np.all(out[:, :8] == 1.0) and np.all(np.isnan(out[:, 8:]))


# ----- both dialects: the same instructions, the same bits --------------------------------------

@nki.jit
def conv_like_current(x, w):
    """w (K, M) stationary, x (K, N) moving, bias-free ReLU eviction: the shape of a conv tile."""
    acc = nl.ndarray((w.shape[1], x.shape[1]), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(x.shape[0] // 128):
        nisa.nc_matmul(dst=acc, stationary=load(w[k * 128:(k + 1) * 128, :]),
                       moving=load(x[k * 128:(k + 1) * 128, :]))
    pooled = nl.ndarray((w.shape[1], x.shape[1] // 2), nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=pooled, op=nl.max, data=acc.reshape((w.shape[1], x.shape[1] // 2, 2)), axis=2)
    out = nl.ndarray(pooled.shape, x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=out, data=pooled, op0=nl.maximum, operand0=0.0)
    return store(out)


@lnki.jit
def conv_like_legacy(x, w):
    acc = lnl.zeros((w.shape[1], x.shape[1]), lnl.float32, buffer=lnl.psum)
    for k in lnl.affine_range(x.shape[0] // 128):
        ws = lnl.ndarray((128, w.shape[1]), w.dtype, buffer=lnl.sbuf)
        xs = lnl.ndarray((128, x.shape[1]), x.dtype, buffer=lnl.sbuf)
        lisa.dma_copy(dst=ws, src=w[k * 128:(k + 1) * 128, :])
        lisa.dma_copy(dst=xs, src=x[k * 128:(k + 1) * 128, :])
        acc += lisa.nc_matmul(ws, xs)
    pooled = lisa.tensor_reduce(lnl.max, acc.reshape((w.shape[1], x.shape[1] // 2, 2)), axis=2)
    out = lnl.ndarray(pooled.shape, x.dtype, buffer=lnl.sbuf)
    out[...] = lisa.tensor_scalar(pooled, op0=lnl.maximum, operand0=0.0, dtype=x.dtype)
    hbm = lnl.ndarray(out.shape, x.dtype, buffer=lnl.hbm)
    lisa.dma_copy(dst=hbm, src=out)
    return hbm


@pytest.mark.parametrize("dtype", [F32, F16])
def test_the_same_kernel_in_both_dialects_traces_the_same_instructions_and_bits(dtype):
    x = rng(10).standard_normal((256, 200)).astype(dtype)
    w = rng(11).standard_normal((256, 128)).astype(dtype)
    current = nkisim.run_kernel(conv_like_current, (x, w), {})
    legacy = nkisim.run_kernel(conv_like_legacy, (x, w), {})
    ops = [(r.opcode, r.engine, r.accumulate) for r in current.program.records]
    legacy_ops = [(r.opcode, r.engine, r.accumulate) for r in legacy.program.records if r.opcode != "memset"]
    # the legacy kernel zeroes its accumulator and adds every matmul; the current one's first
    # matmul overwrites: the same instructions otherwise
    assert [o[:2] for o in ops] == [o[:2] for o in legacy_ops]
    matmuls = [o[2] for o in ops if o[0] == "nc_matmul"]
    assert matmuls == [False, True]
    np.testing.assert_array_equal(current.outputs, legacy.outputs)


# ----- what the 0.6 instructions refuse -----------------------------------------------------------

def _kernel_calling(body):
    @nki.jit
    def kernel(a):
        t = load(a)
        body(t)
        return store(t)
    return kernel


A = np.ones((128, 64), F32)


@pytest.mark.parametrize("body, error, words", [
    (lambda t: nisa.tensor_copy(t), errors.ArgumentError, "takes its destination first"),
    (lambda t: nisa.tensor_copy(dst=t, src=t, dtype=nl.float16), errors.ArgumentError, "takes the dtype of dst"),
    (lambda t: nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.add, mask=None), errors.ArgumentError,
     "removed mask="),
    (lambda t: nisa.tensor_copy(dst=t, src=t, engine=5), errors.ArgumentError, "nisa.engine"),
    (lambda t: nisa.tensor_copy(dst=t, src=t, colour="red"), errors.ArgumentError, "unexpected keyword"),
    (lambda t: nisa.dma_copy(dst=t, src=t, dge_mode=2), errors.ArgumentError, "nisa.dge_mode"),
    (lambda t: nisa.tensor_copy(dst=t[:, 0:32], src=t), errors.ShapeError, "computes [128, 64]"),
    (lambda t: nisa.memset(dst=t, value="zero"), errors.UnsupportedOperationError, "fills with a number"),
], ids=["no-dst", "dtype", "mask", "raw-enum", "unknown-keyword", "raw-dge-mode", "dst-shape", "memset"])
def test_calls_that_do_not_fit_the_06_signatures_are_refused(body, error, words):
    with pytest.raises(error, match=None) as caught:
        _kernel_calling(body)(A)
    assert words in str(caught.value)
    assert "test_nki06_isa.py" in str(caught.value)      # at the kernel's own line



@nki.jit
def flattened_and_split_operands(a, w):
    """A (128, 6, 4) tile met by (128, 24) ones: a copy into a flat dst, a tensor_tensor of a 3-D and
    a 2-D tile, a matmul of a 3-D moving tile into a flat PSUM tile, and a reduction of a split view
    into a flat dst, as the 0.6 reference's shape rule (same partitions, same elements per
    partition) allows."""
    cube = load(a)
    flat = nl.ndarray((128, 24), a.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=flat, src=cube)
    total = nl.ndarray((128, 24), a.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=total, data1=cube, data2=flat, op=nl.add)
    acc = nl.ndarray((128, 24), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=load(w), moving=cube)
    pairs = nl.ndarray((128, 12), a.dtype, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=pairs, op=nl.maximum, data=flat.reshape((128, 6, 2, 2)), axis=(3,))
    return store(flat), store(total), evict(acc), store(pairs)


def test_operands_of_one_partition_count_and_size_meet_in_row_major_order():
    a, w = rng(4).random((128, 6, 4), dtype=np.float32), rng(5).random((128, 128), dtype=np.float32)
    flat, total, product, pairs = nki.simulate(flattened_and_split_operands)(a, w)
    rows = a.reshape(128, 24)
    np.testing.assert_array_equal(flat, rows)
    np.testing.assert_array_equal(total, rows + rows)
    np.testing.assert_allclose(product, w.T @ rows, rtol=1e-5)
    np.testing.assert_array_equal(pairs, rows.reshape(128, 6, 2, 2).max(axis=3).reshape(128, 12))


@pytest.mark.parametrize("body", [
    lambda t: nisa.tensor_copy(dst=nl.ndarray((64, 128), t.dtype, buffer=nl.sbuf), src=t),  # other partitions
    lambda t: nisa.tensor_copy(dst=t[:, 0:32].reshape((128, 4, 8)), src=t),         # fewer elements
    lambda t: nisa.tensor_tensor(dst=t, data1=t, data2=t[:, 0:32], op=nl.add),      # fewer elements
], ids=["partitions", "dst-elements", "operand-elements"])
def test_operands_of_another_partition_count_or_size_are_still_refused(body):
    with pytest.raises(errors.ShapeError) as caught:
        _kernel_calling(body)(A)
    assert "test_nki06_isa.py" in str(caught.value)
    assert "partition" in str(caught.value) or "element count" in str(caught.value)


@nki.jit
def dma_from_psum(a):
    acc = nl.ndarray((64, 64), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=load(a), moving=load(a))
    out = nl.ndarray((64, 64), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=acc)
    return out


@nki.jit
def matmul_into_sbuf(a):
    acc = nl.ndarray((64, 64), nl.float32, buffer=nl.sbuf)
    nisa.nc_matmul(dst=acc, stationary=load(a), moving=load(a))
    return store(acc)


@nki.jit
def writes_its_input(a):
    nisa.tensor_copy(dst=a, src=load(a))
    return a


def test_memory_rules_of_the_06_instructions():
    a = np.ones((128, 64), F32)
    with pytest.raises(errors.MemorySpaceError, match="cannot read PSUM"):
        dma_from_psum(a)
    with pytest.raises(errors.MemorySpaceError, match="must be a PSUM tile"):
        matmul_into_sbuf(a)
    with pytest.raises(errors.KernelContractError, match="read-only"):
        writes_its_input(a)


# ----- nki.language: creation and the experimental wrappers ---------------------------------------

@nki.jit
def identity_activation_with_bias(a, bias):
    """PSUM eviction on the Scalar engine with the bias fused: op=nl.copy is the activation
    table's identity in NKI 0.6 as in 0.1, while nl.copy(x) stays the wrapper."""
    x = nl.load(a)
    b = nl.load(bias)
    acc = nl.matmul(x, x, transpose_x=True)
    out = nl.ndarray(acc.shape, nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=out, op=nl.copy, data=acc, bias=b, scale=2.0)
    again = nl.copy(out, dtype=nl.float16)
    return store(out), store(again)


def test_nl_copy_is_both_the_identity_activation_and_the_copy_wrapper():
    a = rng(16).standard_normal((64, 64)).astype(F32)
    bias = rng(17).standard_normal((64, 1)).astype(F32)
    out, again = identity_activation_with_bias(a, bias)
    np.testing.assert_allclose(out, 2.0 * (a.T @ a) + bias, rtol=1e-4, atol=1e-4)
    assert again.dtype == np.float16
    np.testing.assert_allclose(again, out.astype(np.float16), rtol=1e-3)
    run = nkisim.run_kernel(identity_activation_with_bias, (a, bias), {})
    assert [r.opcode for r in run.trace if r.opcode in ("activation", "tensor_copy")] == ["activation", "tensor_copy"]


@nki.jit
def quarter_matmuls(x, y, tile_position, tile_size):
    """Two 32-row matmuls on their own PE row tiles (NeuronCore-v3's 4 x 32 row tiling)."""
    xs, ys = load(x), load(y)
    outs = []
    for q in range(2):
        acc = nl.ndarray((x.shape[1], y.shape[1]), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=xs[q * 32:(q + 1) * 32, :], moving=ys[q * 32:(q + 1) * 32, :],
                       tile_position=tuple(v * q for v in tile_position), tile_size=tile_size)
        outs.append(evict(acc))
    return tuple(outs)


@lnki.jit
def legacy_tiled_matmul(x, y, tile_position, tile_size):
    xs = lnl.load(x)
    ys = lnl.load(y)
    acc = lnl.zeros((x.shape[1], y.shape[1]), lnl.float32, buffer=lnl.psum)
    acc += lisa.nc_matmul(xs, ys, tile_position=tile_position, tile_size=tile_size)
    out = lnl.ndarray(acc.shape, lnl.float32, buffer=lnl.shared_hbm)
    lnl.store(out, lnl.copy(acc))
    return out


def test_pe_tiling_mode_computes_the_untiled_product_and_its_rules_are_the_references():
    x = rng(18).standard_normal((64, 32)).astype(F32)
    y = rng(19).standard_normal((64, 48)).astype(F32)
    first, second = quarter_matmuls(x, y, (32, 0), (32, 128))
    np.testing.assert_allclose(first, x[:32].T @ y[:32], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(second, x[32:].T @ y[32:], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(legacy_tiled_matmul(x, y, (64, 0), (64, 128)), x.T @ y, rtol=1e-5, atol=1e-5)
    # each rule of the reference's "Tiling mode", refused with what to do instead
    refused = {
        ((32, 0), ()): "must be given together",
        ((0, 0), (48, 128)): "must be one of 32, 64, 128",
        ((16, 0), (32, 128)): "start_row 16 must be a multiple",
        ((0, 96), (32, 64)): "start_column 96 must be a multiple",
    }
    for (position, size), message in refused.items():
        with pytest.raises(errors.UnsupportedOperationError, match=message):
            quarter_matmuls(x, y, position, size)
    with pytest.raises(errors.UnsupportedOperationError, match="does not fit the PE tile"):
        legacy_tiled_matmul(x, y, (0, 0), (32, 128))         # 64 contraction rows in a 32-row tile


@lnki.jit
def legacy_copy_with_oob_mode(a, oob_mode):
    tile = lnl.ndarray(a.shape, a.dtype, buffer=lnl.sbuf)
    lisa.dma_copy(dst=tile, src=a, oob_mode=oob_mode)
    out = lnl.ndarray(a.shape, a.dtype, buffer=lnl.shared_hbm)
    lisa.dma_copy(dst=out, src=tile)
    return out


@nki.jit
def transpose_with_priority(a, priority):
    t = nl.ndarray((a.shape[1], a.shape[0]), a.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=t, src=a, priority=priority)
    return store(t)


def test_dma_arguments_nkisim_cannot_honour_are_refused_not_ignored():
    a = rng(20).standard_normal((64, 32)).astype(F32)
    np.testing.assert_array_equal(legacy_copy_with_oob_mode(a, lisa.oob_mode.error), a)
    with pytest.raises(errors.UnsupportedOperationError, match="oob_mode=nisa.oob_mode.skip"):
        legacy_copy_with_oob_mode(a, lisa.oob_mode.skip)
    with pytest.raises(errors.ArgumentError, match="must be nisa.oob_mode.error or nisa.oob_mode.skip"):
        legacy_copy_with_oob_mode(a, "skip")
    np.testing.assert_array_equal(transpose_with_priority(a, 1), a.T)
    with pytest.raises(errors.ArgumentError, match="'priority' of 'nisa.dma_transpose' must be an integer"):
        transpose_with_priority(a, "high")


@nki.jit
def weights_by_dma_transpose(w):
    """A conv's weight blocks transposed by DMA straight into their slot of a resident layout:
    from HBM for the first block, from SBUF for the second."""
    w_t = nl.ndarray((w.shape[1], 2, w.shape[0]), w.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=w_t[:, 0, :], src=w)
    staged = load(w)
    nisa.dma_transpose(dst=w_t[:, 1, :], src=staged)
    return store(w_t)


@nki.jit
def dma_transpose_into(a, shape):
    t = nl.ndarray(shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=t, src=a)
    return store(t)


def test_dma_transpose_writes_its_destination_as_the_reference_says():
    w = rng(21).standard_normal((96, 128)).astype(F16)
    out = weights_by_dma_transpose(w)
    np.testing.assert_array_equal(out[:, 0, :], w.T)
    np.testing.assert_array_equal(out[:, 1, :], w.T)
    run = nkisim.run_kernel(weights_by_dma_transpose, (w,), {})
    # the DMA writes the slot itself: no copy behind it
    assert [r.opcode for r in run.trace].count("dma_transpose") == 2
    assert "tensor_copy" not in [r.opcode for r in run.trace]
    cube = rng(22).standard_normal((4, 8, 16)).astype(F32)
    np.testing.assert_array_equal(dma_transpose_into(cube, (16, 8, 4)), cube.transpose(2, 1, 0))
    with pytest.raises(errors.ShapeError, match="since NKI 0.4 they must be equal"):
        dma_transpose_into(cube, (16, 32))


@nki.jit
def hinted_matmul(x, y):
    """A matmul promising the Tensor Engine a moving operand of only 0.0 and 1.0."""
    acc = nl.ndarray((x.shape[1], y.shape[1]), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=load(x), moving=load(y), is_moving_onezero=True)
    return evict(acc)


@lnki.jit
def legacy_hinted_matmul(x, y):
    acc = lisa.nc_matmul(lnl.load(x), lnl.load(y), is_stationary_onezero=True)
    out = lnl.ndarray(acc.shape, lnl.float32, buffer=lnl.shared_hbm)
    lnl.store(out, lnl.copy(acc))
    return out


def test_a_zero_one_hint_the_operand_breaks_stops_the_run_at_its_line():
    x = rng(23).standard_normal((128, 32)).astype(F32)
    mask = (rng(24).random((128, 48)) > 0.5).astype(F32)
    np.testing.assert_allclose(hinted_matmul(x, mask), x.T @ mask, rtol=1e-5, atol=1e-5)
    with pytest.raises(errors.KernelContractError, match="is_moving_onezero=True.*values other than 0.0 and 1.0") as err:
        hinted_matmul(x, x)
    line = pathlib.Path(__file__).read_text().splitlines()[err.value.site.lineno - 1]
    assert err.value.site.filename == __file__ and "is_moving_onezero=True)" in line     # the kernel's own line
    np.testing.assert_allclose(legacy_hinted_matmul(mask[:, :32], x), mask[:, :32].T @ x, rtol=1e-5, atol=1e-5)
    with pytest.raises(errors.KernelContractError, match="is_stationary_onezero=True"):
        legacy_hinted_matmul(x, x)
    # a part executed in a forked process reports it as text; it comes back as the same error
    from nkisim import split
    again = split._rebuilt("KernelValueError", str(err.value))
    assert isinstance(again, errors.KernelValueError) and str(again) == str(err.value)


@nki.jit
def wrappers(a, b):
    x, y = nl.load(a), nl.load(b)
    product = nl.copy(nl.matmul(x, y, transpose_x=True))
    turned = nl.copy(nl.transpose(x))
    twos = nl.full(a.shape, 2.0, nl.float32)
    total = nl.add(nl.multiply(x, twos), y)
    outs = []
    for tile in (product, turned, total, nl.zeros((8, 4), nl.int32), nl.ones((8, 4), nl.float16)):
        out = nl.ndarray(tile.shape, tile.dtype, buffer=nl.shared_hbm)
        nl.store(out, tile)
        outs.append(out)
    return tuple(outs)


def test_the_language_functions_compute_what_numpy_does():
    a = rng(14).standard_normal((128, 64)).astype(F32)
    b = rng(15).standard_normal((128, 64)).astype(F32)
    product, turned, total, zeros, ones = wrappers(a, b)
    np.testing.assert_allclose(product, a.T @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(turned, a.T)
    np.testing.assert_allclose(total, 2 * a + b, rtol=1e-6)
    assert zeros.dtype == np.int32 and not zeros.any()
    assert ones.dtype == np.float16 and np.all(ones == 1)


@nki.jit
def matmul_without_transpose_x(a):
    x = nl.load(a)
    return nl.matmul(x, x)


def test_nl_matmul_without_transpose_x_says_what_0_6_supports():
    with pytest.raises(errors.NotSimulatedError, match="transpose_x=True"):
        matmul_without_transpose_x(np.ones((128, 64), F32))
