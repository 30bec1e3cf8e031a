"""NKI 0.6's NeuronCore-v4 (Trainium3) instructions on the trn3 model: nisa.quantize_mx and
nisa.nc_matmul_mx (OCP MX: E8M0 scales, x4-packed FP8/FP4), nisa.exponential, nisa.activate2
(with nl.bypass, nl.prelu, nl.abs_max, nl.abs_min), nisa.rand2 and nc_matmul's BF16 PSUM dst.
Values against NumPy written here from the documented definitions; each refused on trn2 and trn1
at the kernel's line; each cost by its rule."""
import os

import ml_dtypes
import numpy as np
import pytest

import nkisim
from marker_lines import marker_lines
from nkisim import cost, errors
from nkisim import program as programs
from nkisim.cost.rules import COST_RULES
from nkisim.execute import execute
from nkisim.runtime import ArgSpec, trace_kernel
from nkisim.settings import HardwareLimits, SimSettings

nkisim.install()

import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

THIS_FILE = os.path.abspath(__file__)
line_of = marker_lines(THIS_FILE)
TRN1, TRN2, TRN3 = (SimSettings(platform=p) for p in ("trn1", "trn2", "trn3"))
P3 = cost.params_for("trn3")
BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3, E5M2, FP4 = (np.dtype(t) for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.float4_e2m1fn))


def run(kernel, *args, settings=TRN3):
    return nkisim.run_kernel(kernel, args, {}, settings=settings)


def records(r, opcode):
    return [rec for rec in r.trace if rec.opcode == opcode]


def load(src, dtype=None):
    t = nl.ndarray(src.shape, dtype or src.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=src)
    return t


def store(t):
    out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def evict(psum, dtype=nl.float32):
    t = nl.ndarray(psum.shape, dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=t, src=psum)
    return store(t)


# ----- the documented MX numerics, in NumPy ---------------------------------------------------------

def scale_row(p):
    """The scale row of data partition p: its quadrant's rows 0..3, one per 8 partitions."""
    return 32 * (p // 32) + (p % 32) // 8


def reference_quantize(x, fp8, emax):
    """OCP MX with the 0.6 reference's doubled block scale: per group of 8 partitions x 4 values,
    E8M0 exponent floor(log2(amax)) - emax + 1; values x / scale rounded to nearest even."""
    parts, f = x.shape
    words = np.zeros((parts, f // 4), np.uint32)
    codes = {}
    for g in range(parts // 8):
        for c in range(f // 4):
            block = x[8 * g:8 * g + 8, 4 * c:4 * c + 4].astype(np.float64)
            amax = np.abs(block).max()
            e = int(np.floor(np.log2(amax))) - emax + 1 if amax > 0 else -127
            codes[(g, c)] = e + 127
            q = (block / 2.0 ** e).astype(np.float32).astype(fp8).view(np.uint8)
            for r in range(8):
                words[8 * g + r, c] = sum(int(q[r, j]) << (8 * j) for j in range(4))
    scale = np.zeros((parts, f // 4), np.uint8)
    for (g, c), code in codes.items():
        scale[scale_row(8 * g), c] = code
    return words, scale


def dequantize(words, scale, fmt):
    """[P, F] x4 words and their scale tile as [P, F, 4] float64 values."""
    parts, f = words.shape
    if fmt == "fp4":
        nib = np.stack([(words.astype(np.uint16) >> (4 * j)) & 0xF for j in range(4)], -1).astype(np.uint8)
        vals = nib.view(FP4).astype(np.float64)
    else:
        vals = words.astype("<u4").view(np.uint8).reshape(parts, f, 4).view(fmt).astype(np.float64)
    rows = np.array([scale_row(p) for p in range(parts)])
    return vals * (2.0 ** (scale[rows].astype(np.float64) - 127))[:, :, None]


def mx_product(sw, ss, sfmt, mw, ms, mfmt):
    a, b = dequantize(sw, ss, sfmt), dequantize(mw, ms, mfmt)
    return np.einsum("kmj,knj->mn", a, b)


def assert_fp32_sum(out, sw, ss, sfmt, mw, ms, mfmt):
    """out is the exact product up to fp32 accumulation: within k * 4 * eps of the sum of the
    terms' magnitudes (random FP8 values cancel)."""
    a, b = dequantize(sw, ss, sfmt), dequantize(mw, ms, mfmt)
    exact, size = np.einsum("kmj,knj->mn", a, b), np.einsum("kmj,knj->mn", np.abs(a), np.abs(b))
    bound = a.shape[0] * 4 * np.finfo(np.float32).eps * size + 1e-30
    assert np.all(np.abs(out - exact) <= bound)
    assert np.abs(out - exact).max() < 1e-3 * np.abs(exact).max()


def random_fp8_words(rng, shape, fmt):
    """Words of four finite FP8 values each (NaN bytes replaced by 0)."""
    raw = rng.integers(0, 256, size=shape + (4,), dtype=np.uint8)
    vals = raw.view(fmt).astype(np.float32)
    raw[~np.isfinite(vals)] = 0
    return raw.view("<u4").reshape(shape).astype(np.uint32)


# ----- quantize_mx ----------------------------------------------------------------------------------

@nki.jit
def quantize_kernel(x):
    src = load(x)
    q = nl.ndarray((x.shape[0], x.shape[1] // 4), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    scale = nl.ndarray((x.shape[0], x.shape[1] // 4), nl.uint8, buffer=nl.sbuf)
    nisa.memset(dst=scale, value=7)                       # rows the instruction must leave alone
    nisa.quantize_mx(dst=q, src=src, dst_scale=scale)
    words = nl.ndarray(q.shape, nl.uint32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=words, src=q.view(nl.uint32))
    return store(words), store(scale)


@pytest.mark.parametrize("dtype", [BF16, np.dtype(np.float16)])
def test_quantize_mx_follows_the_doubled_ocp_scale_and_fills_only_its_scale_rows(dtype):
    x = (np.random.default_rng(1).standard_normal((128, 64)) * np.logspace(-3, 3, 64)).astype(dtype)
    x[8:16, 4:8] = 0                                       # an all-zero group
    words, scale = run(quantize_kernel, x).outputs
    ref_words, ref_scale = reference_quantize(x.astype(np.float32), E4M3, 8)
    np.testing.assert_array_equal(words, ref_words)
    used = sorted({scale_row(p) for p in range(128)})
    assert used == [r for q in range(4) for r in range(32 * q, 32 * q + 4)]
    np.testing.assert_array_equal(scale[used], ref_scale[used])
    assert np.all(np.delete(scale, used, axis=0) == 7)
    assert scale[scale_row(8), 1] == 0                     # the zero group: the smallest scale, 2**-127


@nki.jit
def quantize_e5m2_e8m0(x):
    q = nl.ndarray((x.shape[0], x.shape[1] // 4), nl.float8_e5m2_x4, buffer=nl.sbuf)
    scale = nl.ndarray((4, x.shape[1] // 4), nl.float8_e8m0fnu, buffer=nl.sbuf)
    nisa.quantize_mx(dst=q, src=load(x), dst_scale=scale)
    words = nl.ndarray(q.shape, nl.uint32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=words, src=q.view(nl.uint32))
    bits = nl.ndarray(scale.shape, nl.uint8, buffer=nl.sbuf)
    nisa.tensor_copy(dst=bits, src=scale.view(nl.uint8))
    return store(words), store(bits)


def test_quantize_mx_to_e5m2_with_e8m0_scales_of_a_32_partition_tile():
    x = np.random.default_rng(2).standard_normal((32, 16)).astype(BF16) * BF16.type(300)
    words, bits = run(quantize_e5m2_e8m0, x).outputs
    ref_words, ref_scale = reference_quantize(x.astype(np.float32), E5M2, 15)
    np.testing.assert_array_equal(words, ref_words)
    np.testing.assert_array_equal(bits, ref_scale[:4])


# ----- nc_matmul_mx -----------------------------------------------------------------------------------

@nki.jit
def mx_matmul_kernel(sw, ss, mw, ms):
    """Host words as x4 tiles (fp8 from uint32, fp4 from uint16), scales as uint8."""
    sx = load(sw).view(nl.float8_e4m3fn_x4 if sw.dtype == nl.uint32 else nl.float4_e2m1fn_x4)
    mx = load(mw).view(nl.float8_e5m2_x4 if mw.dtype == nl.uint32 else nl.float4_e2m1fn_x4)
    out = nl.ndarray((sw.shape[1], mw.shape[1]), nl.float32, buffer=nl.psum)
    nisa.nc_matmul_mx(dst=out, stationary=sx, moving=mx, stationary_scale=load(ss), moving_scale=load(ms))
    return evict(out)


def scales(rng, parts, free):
    s = np.zeros((parts, free), np.uint8)
    for p in range(0, parts, 8):
        s[scale_row(p)] = rng.integers(120, 134, size=free)
    return s


@pytest.mark.parametrize("k, m, n", [(128, 128, 512), (64, 32, 100), (32, 2, 8)])
def test_nc_matmul_mx_is_the_dequantized_product(k, m, n):
    rng = np.random.default_rng(k + n)
    sw, mw = random_fp8_words(rng, (k, m), E4M3), random_fp8_words(rng, (k, n), E5M2)
    ss, ms = scales(rng, k, m), scales(rng, k, n)
    out = run(mx_matmul_kernel, sw, ss, mw, ms).outputs
    assert_fp32_sum(out, sw, ss, E4M3, mw, ms, E5M2)


def test_nc_matmul_mx_multiplies_mxfp4_by_mxfp8():
    rng = np.random.default_rng(5)
    sw = rng.integers(0, 2 ** 16, size=(64, 16), dtype=np.uint16)
    mw = random_fp8_words(rng, (64, 64), E5M2)
    ss, ms = scales(rng, 64, 16), scales(rng, 64, 64)
    out = run(mx_matmul_kernel, sw, ss, mw, ms).outputs
    assert_fp32_sum(out, sw, ss, "fp4", mw, ms, E5M2)


@nki.jit
def quantize_then_matmul_bf16(a, b):
    qa = nl.ndarray((128, a.shape[1] // 4), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    qb = nl.ndarray((128, b.shape[1] // 4), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    sa = nl.ndarray((128, a.shape[1] // 4), nl.float8_e8m0fnu, buffer=nl.sbuf)
    sb = nl.ndarray((128, b.shape[1] // 4), nl.float8_e8m0fnu, buffer=nl.sbuf)
    nisa.quantize_mx(dst=qa, src=load(a), dst_scale=sa)
    nisa.quantize_mx(dst=qb, src=load(b), dst_scale=sb)
    out = nl.ndarray((qa.shape[1], qb.shape[1]), nl.bfloat16, buffer=nl.psum)
    nisa.nc_matmul_mx(dst=out, stationary=qa, moving=qb, stationary_scale=sa, moving_scale=sb)
    nisa.nc_matmul_mx(dst=out, stationary=qa, moving=qb, stationary_scale=sa, moving_scale=sb, accumulate=True)
    return evict(out, nl.float32)


def test_quantized_operands_multiply_into_a_bf16_psum_that_accumulates_in_fp32_then_rounds():
    rng = np.random.default_rng(7)
    a, b = (rng.standard_normal(s).astype(BF16) for s in ((128, 256), (128, 1024)))
    out = run(quantize_then_matmul_bf16, a, b).outputs
    wa, ka = reference_quantize(a.astype(np.float32), E4M3, 8)
    wb, kb = reference_quantize(b.astype(np.float32), E4M3, 8)
    once = mx_product(wa, ka, E4M3, wb, kb, E4M3).astype(np.float32)
    first = once.astype(BF16)
    expected = (first.astype(np.float32) + once).astype(BF16).astype(np.float32)
    # the engine's fp32 sum and NumPy's differ in their last bits, so a bf16 rounding may land one
    # bf16 step apart; every value is a bf16 (rounded on each write) and within that step
    np.testing.assert_array_equal(out, out.astype(BF16).astype(np.float32))
    np.testing.assert_allclose(out, expected, rtol=2 ** -7, atol=1e-6)
    assert np.mean(out == expected) > 0.99
    # and the quantization error itself is what MXFP8 promises against the bf16 product
    exact = a.astype(np.float64).reshape(128, 64, 4).transpose(0, 2, 1).reshape(512, 64).T @ \
        b.astype(np.float64).reshape(128, 256, 4).transpose(0, 2, 1).reshape(512, 256)
    assert np.abs(2 * exact - out).max() < 0.05 * np.abs(2 * exact).max()


# ----- nc_matmul's BF16 PSUM dst ----------------------------------------------------------------------

@nki.jit
def bf16_psum_matmul(a, b):
    out = nl.ndarray((a.shape[1], b.shape[1]), nl.bfloat16, buffer=nl.psum)
    sa, sb = load(a), load(b)
    nisa.nc_matmul(dst=out, stationary=sa, moving=sb)  # <bf16-psum>
    nisa.nc_matmul(dst=out, stationary=sa, moving=sb)
    return evict(out)


@nki.jit
def fp32_psum_matmul(a, b):
    out = nl.ndarray((a.shape[1], b.shape[1]), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=out, stationary=load(a), moving=load(b))
    return evict(out)


def test_nc_matmul_writes_and_accumulates_a_bf16_psum_on_trn3():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((128, 64)).astype(BF16), rng.standard_normal((128, 256)).astype(BF16)
    # the fp32 product as the Tensor Engine sums it (its order of additions, not BLAS's on this
    # machine: one fp32 ulp apart, a product near a bf16 rounding boundary rounds the other way)
    once = run(fp32_psum_matmul, a, b).outputs
    np.testing.assert_allclose(once, a.astype(np.float64).T @ b.astype(np.float64), rtol=1e-5, atol=1e-5)
    expected = (once.astype(BF16).astype(np.float32) + once).astype(BF16).astype(np.float32)
    np.testing.assert_allclose(run(bf16_psum_matmul, a, b).outputs, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("settings", [TRN2, TRN1], ids=["trn2", "trn1"])
def test_a_bf16_psum_dst_is_refused_before_neuroncore_v4(settings):
    a = np.zeros((128, 64), BF16)
    with pytest.raises(errors.UnsupportedOperationError) as caught:
        run(bf16_psum_matmul, a, a, settings=settings)
    err = caught.value
    assert err.site.lineno == line_of("bf16-psum") and os.path.abspath(err.site.filename) == THIS_FILE
    assert "NeuronCore-v2 and NeuronCore-v3" in str(err) and "trn3" in err.remedy


# ----- exponential ------------------------------------------------------------------------------------

@nki.jit
def exp_kernel(x, row_max):
    src, mx = load(x), load(row_max)
    dst = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    total = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.exponential(dst=dst, src=src, max_value=mx, reduce_res=total, reduce_cmd=nisa.reduce_cmd.reset_reduce)
    shifted = nl.ndarray(x.shape, nl.bfloat16, buffer=nl.sbuf)
    nisa.exponential(dst=shifted, src=src, max_value=1.5)
    both = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.exponential(dst=dst, src=src, max_value=mx, reduce_cmd=nisa.reduce_cmd.load_reduce, reduce_init=2.0)
    nisa.exponential(dst=dst, src=src, max_value=mx, reduce_res=both, reduce_cmd=nisa.reduce_cmd.reduce)
    return store(dst), store(total), store(shifted), store(both)


def test_exponential_subtracts_the_max_and_sums_into_the_accumulator():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((128, 96)).astype(np.float32)
    row_max = x.max(axis=1, keepdims=True)
    dst, total, shifted, both = run(exp_kernel, x, row_max).outputs
    e = np.exp(x - row_max)
    np.testing.assert_allclose(dst, e, rtol=1e-6)
    np.testing.assert_allclose(total[:, 0], e.sum(axis=1), rtol=1e-5)
    np.testing.assert_array_equal(shifted, np.exp(x - np.float32(1.5)).astype(BF16))
    np.testing.assert_allclose(both[:, 0], 2.0 + 2 * e.sum(axis=1), rtol=1e-5)


# ----- activate2 ----------------------------------------------------------------------------------------

@nki.jit
def activate2_kernel(x, col, alpha):
    src, c, a = load(x), load(col), load(alpha)
    out1 = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    nisa.activate2(dst=out1, op=nl.tanh, data=src, imm0=2.0, imm1=c, op0=nl.multiply, op1=nl.subtract, reverse1=True)
    out2 = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    biggest = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.activate2(dst=out2, op=nl.prelu, data=src, imm0=c, imm1=0.0, op0=nl.subtract, op1=nl.bypass,
                   relu_param=a, reduce_op=nl.abs_max, reduce_res=biggest, reduce_cmd=nisa.reduce_cmd.reset_reduce)
    out3 = nl.ndarray(x.shape, nl.float32, buffer=nl.psum)
    least = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.activate2(dst=out3, op=nl.exp, data=src, imm0=0.0, imm1=0.0, op0=nl.bypass, op1=nl.bypass,
                   reduce_op=nl.abs_min, reduce_res=least, reduce_cmd=nisa.reduce_cmd.reset_reduce)
    total = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.activate2(dst=out1, op=nl.square, data=src, imm0=0.5, imm1=0.0, op0=nl.add, op1=nl.bypass,
                   reduce_op=nl.add, reduce_res=total, reduce_cmd=nisa.reduce_cmd.reset_reduce)
    nisa.activate2(dst=out1, op=nl.square, data=src, imm0=0.5, imm1=0.0, op0=nl.add, op1=nl.bypass,
                   reduce_op=nl.add, reduce_res=total, reduce_cmd=nisa.reduce_cmd.reduce)
    first = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    nisa.activate2(dst=first, op=nl.tanh, data=src, imm0=2.0, imm1=c, op0=nl.multiply, op1=nl.subtract,
                   reverse1=True)
    return store(first), store(out2), store(biggest), evict(out3), store(least), store(total)


def test_activate2_runs_its_three_stages():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((64, 40)).astype(np.float32)
    col = rng.standard_normal((64, 1)).astype(np.float32)
    alpha = rng.uniform(0.05, 0.3, (64, 1)).astype(np.float32)
    first, out2, biggest, out3, least, total = run(activate2_kernel, x, col, alpha).outputs
    np.testing.assert_allclose(first, np.tanh(col - x * 2.0), rtol=1e-6, atol=1e-7)      # imm1 - (x * 2)
    shifted = x - col
    prelu = np.where(shifted >= 0, shifted, alpha * shifted)
    np.testing.assert_allclose(out2, prelu, rtol=1e-6)
    np.testing.assert_allclose(biggest[:, 0], np.abs(prelu).max(axis=1), rtol=1e-6)
    np.testing.assert_allclose(out3, np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(least[:, 0], np.abs(np.exp(x)).min(axis=1), rtol=1e-6)
    np.testing.assert_allclose(total[:, 0], 2 * ((x + 0.5) ** 2).sum(axis=1), rtol=1e-5)


# ----- rand2 --------------------------------------------------------------------------------------------

@nki.jit
def rand2_kernel(lo):
    bounds = load(lo)
    upper = nl.ndarray(lo.shape, nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=upper, data=bounds, op0=nl.add, operand0=3.0)
    u = nl.ndarray((lo.shape[0], 2048), nl.float32, buffer=nl.sbuf)
    nisa.rand2(dst=u, min=bounds, max=upper)
    k = nl.ndarray((lo.shape[0], 64), nl.int32, buffer=nl.psum)
    nisa.rand2(dst=k, min=-5.0, max=5.0)
    ks = nl.ndarray(k.shape, nl.int32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=ks, src=k)
    return store(u), store(ks)


def test_rand2_draws_uniform_values_in_each_partitions_bounds_the_same_on_every_run():
    lo = np.linspace(-10, 10, 32, dtype=np.float32).reshape(32, 1)
    u, k = run(rand2_kernel, lo).outputs
    assert np.all(u >= lo) and np.all(u <= lo + 3)
    np.testing.assert_allclose(((u - lo) / 3).mean(axis=1), 0.5, atol=0.05)
    assert np.all(np.abs(k) <= 5) and len(np.unique(k)) > 5
    again_u, again_k = run(rand2_kernel, lo).outputs
    np.testing.assert_array_equal(u, again_u)
    np.testing.assert_array_equal(k, again_k)


# ----- each refused before NeuronCore-v4, at the kernel's line -----------------------------------------

@nki.jit
def each_trn3_instruction(x, which):
    t = load(x)
    if which.shape[0] == 1:
        q = nl.ndarray((32, 4), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        s = nl.ndarray((4, 4), nl.uint8, buffer=nl.sbuf)
        nisa.quantize_mx(dst=q, src=t, dst_scale=s)  # <quantize_mx>
    elif which.shape[0] == 2:
        w = nl.ndarray((32, 4), nl.uint32, buffer=nl.sbuf)
        nisa.memset(dst=w, value=0)
        s = nl.ndarray((4, 4), nl.uint8, buffer=nl.sbuf)
        nisa.memset(dst=s, value=127)
        out = nl.ndarray((4, 4), nl.float32, buffer=nl.psum)
        q = w.view(nl.float8_e4m3fn_x4)
        nisa.nc_matmul_mx(dst=out, stationary=q, moving=q, stationary_scale=s, moving_scale=s)  # <nc_matmul_mx>
    elif which.shape[0] == 3:
        nisa.exponential(dst=t, src=t, max_value=1.0)  # <exponential>
    elif which.shape[0] == 4:
        nisa.activate2(dst=t, op=nl.exp, data=t, imm0=1.0, imm1=0.0, op0=nl.multiply, op1=nl.bypass)  # <activate2>
    else:
        nisa.rand2(dst=t, min=0.0, max=1.0)  # <rand2>
    return store(t)


TRN3_INSTRUCTIONS = ["quantize_mx", "nc_matmul_mx", "exponential", "activate2", "rand2"]


@pytest.mark.parametrize("settings", [TRN2, TRN1], ids=["trn2", "trn1"])
@pytest.mark.parametrize("index, instr", list(enumerate(TRN3_INSTRUCTIONS, start=1)))
def test_each_trn3_instruction_is_refused_before_neuroncore_v4(index, instr, settings):
    x = np.zeros((32, 16), BF16 if instr == "quantize_mx" else np.float32)
    with pytest.raises(errors.UnsupportedOperationError) as caught:
        run(each_trn3_instruction, x, np.zeros((index,), np.float32), settings=settings)
    err = caught.value
    assert err.code == "err_instruction_unsupported_on_target"
    assert err.site.lineno == line_of(instr) and os.path.abspath(err.site.filename) == THIS_FILE
    assert f"nisa.{instr} is available only on NeuronCore-v4" in str(err)
    assert 'platform = "trn3"' in err.remedy and "NEURON_PLATFORM_TARGET_OVERRIDE=trn3" in err.remedy


@pytest.mark.parametrize("index", range(1, 6))
def test_each_trn3_instruction_runs_on_trn3(index):
    x = np.ones((32, 16), BF16 if index == 1 else np.float32)
    run(each_trn3_instruction, x, np.zeros((index,), np.float32))


# ----- the names and their misuse ------------------------------------------------------------------------

def test_the_trn3_names_are_bindings_not_stand_ins():
    for name in TRN3_INSTRUCTIONS:
        assert callable(getattr(nisa, name)) and getattr(nisa, name).__module__.startswith("nkisim.nki06")
    assert nl.float8_e8m0fnu == np.dtype(ml_dtypes.float8_e8m0fnu)
    assert [nl.float8_e5m2_x4.itemsize, nl.float8_e4m3fn_x4.itemsize, nl.float4_e2m1fn_x4.itemsize] == [4, 4, 2]
    assert {nl.bypass.name, nl.prelu.name, nl.abs_max.name, nl.abs_min.name} == {"bypass", "prelu", "abs_max",
                                                                                  "abs_min"}


@nki.jit
def misuse(x, which):
    t = load(x)
    if which.shape[0] == 1:
        nisa.activation(dst=t, op=nl.prelu, data=t)
    elif which.shape[0] == 2:
        nisa.tensor_reduce(dst=t[:, 0:1], op=nl.abs_max, data=t, axis=1)
    elif which.shape[0] == 3:
        nisa.activate2(dst=t, op=nl.exp, data=t, imm0=1.0, imm1=1.0, op0=nl.add, op1=nl.add)
    elif which.shape[0] == 4:
        nisa.activate2(dst=t, op=nl.exp, data=t, imm0=1.0, imm1=0.0, op0=nl.add, op1=nl.bypass, relu_param=0.5)
    elif which.shape[0] == 5:
        w = nl.ndarray((32, 4), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        nisa.memset(dst=w, value=1)
    else:
        q = nl.ndarray((32, 4), nl.float4_e2m1fn_x4, buffer=nl.sbuf)
        s = nl.ndarray((4, 4), nl.uint8, buffer=nl.sbuf)
        nisa.quantize_mx(dst=q, src=t, dst_scale=s)
    return store(t)


@pytest.mark.parametrize("which, words", [(1, "not supported in 'activation'"), (2, "not supported"),
                                          (3, "not a tensor-scalar stage"), (4, "nl.prelu only"),
                                          (5, "only value=0"), (6, "MXFP8 only")])
def test_misuse_of_the_trn3_stages_and_types_is_refused(which, words):
    x = np.zeros((32, 16), BF16 if which == 6 else np.float32)
    with pytest.raises(errors.NKISimError, match=words):
        run(misuse, x, np.zeros((which,), np.float32))


# ----- costs follow their rules ---------------------------------------------------------------------------

@nki.jit
def costed(a, b, x):
    qa = nl.ndarray((128, 128), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    qb = nl.ndarray((128, 512), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    sa = nl.ndarray((128, 128), nl.uint8, buffer=nl.sbuf)
    sb = nl.ndarray((128, 512), nl.uint8, buffer=nl.sbuf)
    la, lb = load(a), load(b)
    nisa.quantize_mx(dst=qa, src=la, dst_scale=sa)
    nisa.quantize_mx(dst=qb, src=lb, dst_scale=sb)
    mx = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    nisa.nc_matmul_mx(dst=mx, stationary=qa, moving=qb, stationary_scale=sa, moving_scale=sb)
    plain = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=plain, stationary=la[:, 0:128], moving=lb[:, 0:512])
    t = load(x)
    e = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    nisa.exponential(dst=e, src=t)
    nisa.activate2(dst=e, op=nl.exp, data=t, imm0=1.0, imm1=0.0, op0=nl.multiply, op1=nl.bypass)
    nisa.activation(dst=e, op=nl.exp, data=t)
    nisa.rand2(dst=e, min=0.0, max=1.0)
    return evict(mx), evict(plain), store(e)


def test_the_trn3_instructions_cost_by_their_rules():
    a, b = np.ones((128, 512), BF16), np.ones((128, 2048), BF16)
    x = np.ones((128, 1000), np.float32)
    r = run(costed, a, b, x)

    def ns(opcode, i=0):
        rec = records(r, opcode)[i]
        return COST_RULES[opcode](rec, P3)
    # MX: 4x the BF16 work in the time a BF16 matmul of as many moving columns takes [A4]
    mx, plain = ns("nc_matmul_mx"), ns("nc_matmul")
    assert mx.queue == "PE" and mx.ns == pytest.approx(plain.ns)
    assert mx.ns == pytest.approx((512 + P3.pe_overhead_cycles) / P3.pe_ghz)
    # quantize_mx: 4 source elements a partition a cycle on the Vector engine
    for i, n in enumerate((512, 2048)):
        q = ns("quantize_mx", i)
        assert q.queue == "DVE" and q.ns == pytest.approx((n / 4 + P3.dve_overhead_cycles) / P3.dve_ghz)
    # exponential: 4x the Scalar engine's exp
    activation = ns("activation")
    e = ns("exponential")
    assert e.queue == "DVE" and e.ns == pytest.approx(1000 / (4 * P3.act_ghz) + P3.dve_overhead_cycles / P3.dve_ghz)
    assert (activation.ns - P3.act_overhead_cycles / P3.act_ghz) == pytest.approx(
        4 * (e.ns - P3.dve_overhead_cycles / P3.dve_ghz))
    # activate2 holds the Scalar engine as activation does
    assert ns("activate2").queue == "ACT" and ns("activate2").ns == pytest.approx(activation.ns)
    # rand2: 4 values a lane a cycle
    assert ns("rand2").ns == pytest.approx((1000 / 4 + P3.dve_overhead_cycles) / P3.dve_ghz)
    assert cost.estimate(r).total_ns > 0


# ----- a traced program survives encoding ------------------------------------------------------------------

def test_an_mx_program_round_trips_through_its_encoding():
    rng = np.random.default_rng(8)
    sw, mw = random_fp8_words(rng, (64, 32), E4M3), random_fp8_words(rng, (64, 48), E5M2)
    ss, ms = scales(rng, 64, 32), scales(rng, 64, 48)
    args = (sw, ss, mw, ms)
    program, _ = trace_kernel(mx_matmul_kernel, [ArgSpec(v.shape, v.dtype) for v in args], {}, TRN3)
    again = programs.decode(programs.encode(program))
    programs.validate(again, HardwareLimits(), list(args))
    out = execute(again, list(args)).outputs
    assert_fp32_sum(out, sw, ss, E4M3, mw, ms, E5M2)
