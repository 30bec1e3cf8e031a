"""Conformance of every simulated nki.isa instruction with NumPy (nki-api.md sections 1.3, 1.4, 2.5).

Kernels are written the way students write them: DMA the inputs HBM -> SBUF, compute with
instructions, DMA the result into an `nl.hbm` output and return it.
"""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nkisim
from nkisim import errors
from nkisim.trace import Engine

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
FAST = settings(max_examples=25, deadline=None)
SMALL = settings(max_examples=10, deadline=None)


# ----- helpers used inside kernels --------------------------------------------------------------

def to_sbuf(src, dtype=None):
    """HBM tensor -> new SBUF tile (optionally cast by the DMA)."""
    tile = nl.ndarray(src.shape, dtype or src.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=src)
    return tile


def to_hbm(tile, dtype=None):
    """SBUF tile -> new HBM output."""
    out = nl.ndarray(tile.shape, dtype or tile.dtype, buffer=nl.hbm)
    nisa.dma_copy(dst=out, src=tile)
    return out


def psum_to_hbm(tile, dtype=None):
    """PSUM tile -> SBUF (tensor_copy eviction) -> HBM output."""
    return to_hbm(nisa.tensor_copy(tile, dtype=dtype))


def rng_for(seed):
    return np.random.default_rng(seed)


def trace_ops(run):
    return [(r.opcode, r.engine) for r in run.trace]


# ----- dma_copy ---------------------------------------------------------------------------------

@nki.jit
def dma_roundtrip_kernel(x):
    return to_hbm(to_sbuf(x))


def test_dma_copy_roundtrip_is_exact_and_traced_on_dma_engine():
    x = rng_for(0).standard_normal((128, 64)).astype(np.float32)
    run = nkisim.run_kernel(dma_roundtrip_kernel, (x,), {})
    np.testing.assert_array_equal(run.outputs, x)
    assert run.outputs.dtype == np.float32
    assert trace_ops(run) == [("dma_copy", Engine.DMA), ("dma_copy", Engine.DMA)]


@nki.jit
def dma_rank_change_kernel(v, m):
    # (128,) HBM vector <-> (128, 1) SBUF tile, as the course starter does
    col = nl.ndarray((v.shape[0], 1), v.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=col, src=v)
    out_v = nl.ndarray(v.shape, v.dtype, buffer=nl.hbm)
    nisa.dma_copy(dst=out_v, src=col)
    # (4, 6) HBM -> (4, 2, 3) SBUF -> (24,) HBM, row-major
    t3 = nl.ndarray((4, 2, 3), m.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t3, src=m)
    out_m = nl.ndarray((24,), m.dtype, buffer=nl.hbm)
    nisa.dma_copy(dst=out_m, src=t3)
    # a (128,) HBM vector into one column view t[:, j] of a wider tile, and into (P, 1, 1)
    wide = nl.zeros((v.shape[0], 3), v.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=wide[:, 1], src=v)
    out_w = to_hbm(wide)
    cube = nl.ndarray((v.shape[0], 1, 1), v.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=cube, src=v)
    out_c = to_hbm(cube)
    return out_v, out_m, out_w, out_c


def test_dma_copy_rank_change_with_equal_element_count():
    v = np.arange(128, dtype=np.float32)
    m = np.arange(24, dtype=np.float32).reshape(4, 6) * 0.5
    out_v, out_m, out_w, out_c = nki.baremetal(dma_rank_change_kernel)(v, m)
    np.testing.assert_array_equal(out_v, v)
    np.testing.assert_array_equal(out_m, m.reshape(24))
    expected_w = np.zeros((128, 3), np.float32)
    expected_w[:, 1] = v
    np.testing.assert_array_equal(out_w, expected_w)
    np.testing.assert_array_equal(out_c, v.reshape(128, 1, 1))


def test_dma_copy_hbm_to_hbm_with_reshape():
    @nki.jit
    def kernel(bias):
        scratch = nl.ndarray((bias.shape[0], 1), bias.dtype, buffer=nl.hbm)
        nisa.dma_copy(dst=scratch, src=bias)
        return to_hbm(to_sbuf(scratch))

    b = np.arange(16, dtype=np.float32)
    run = nkisim.run_kernel(kernel, (b,), {})
    np.testing.assert_array_equal(run.outputs, b.reshape(16, 1))
    assert run.trace[0].reads[0].buffer == "hbm" and run.trace[0].writes[0].buffer == "hbm"


@nki.jit
def dma_cast_kernel(x, mid_dtype=None):
    return to_hbm(to_sbuf(x, dtype=mid_dtype), dtype=x.dtype)


@FAST
@given(seed=st.integers(0, 2**32 - 1), mid=st.sampled_from([F16, BF16, F32]),
       p=st.integers(1, 128), f=st.integers(1, 64))
def test_dma_copy_casts_to_destination_dtype(seed, mid, p, f):
    x = (rng_for(seed).standard_normal((p, f)) * 100).astype(np.float32)
    out = nki.baremetal(dma_cast_kernel)(x, mid_dtype=mid)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, x.astype(mid).astype(np.float32))


@nki.jit
def dma_cast_out_kernel(x):
    return to_hbm(to_sbuf(x), dtype=nl.bfloat16)


def test_dma_copy_casts_into_bf16_hbm_output():
    x = np.linspace(-3, 3, 128 * 8, dtype=np.float32).reshape(128, 8) + np.float32(1e-3)
    out = nki.baremetal(dma_cast_out_kernel)(x)
    assert out.dtype == BF16
    np.testing.assert_array_equal(out, x.astype(BF16))


@nki.jit
def dma_rmw_kernel(a, b):
    out = to_hbm(to_sbuf(a))
    nisa.dma_copy(dst=out, src=to_sbuf(b), dst_rmw_op=np.add)
    # also accumulate into an SBUF tile
    acc = to_sbuf(a)
    nisa.dma_copy(dst=acc, src=b, dst_rmw_op=np.add)
    nisa.dma_copy(dst=acc, src=b, dst_rmw_op=np.add)
    return out, to_hbm(acc)


def test_dma_copy_dst_rmw_add_accumulates():
    r = rng_for(1)
    a = r.standard_normal((32, 16)).astype(np.float32)
    b = r.standard_normal((32, 16)).astype(np.float32)
    run = nkisim.run_kernel(dma_rmw_kernel, (a, b), {})
    out, acc = run.outputs
    np.testing.assert_allclose(out, a + b, rtol=1e-6)
    np.testing.assert_allclose(acc, a + 2 * b, rtol=1e-6, atol=1e-6)
    assert sum(r.accumulate for r in run.trace if r.opcode == "dma_copy") == 3


def test_dma_copy_rmw_rejects_other_ops():
    @nki.jit
    def kernel(a):
        out = to_hbm(to_sbuf(a))
        nisa.dma_copy(dst=out, src=a, dst_rmw_op=np.multiply)
        return out

    with pytest.raises(errors.UnsupportedOperationError):
        nki.baremetal(kernel)(np.ones((4, 4), np.float32))


def test_dma_copy_rejects_mismatched_sizes_and_psum():
    @nki.jit
    def sizes(a):
        t = nl.ndarray((4, 5), a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        return to_hbm(t)

    @nki.jit
    def psum(a):
        t = nl.zeros((4, 4), nl.float32, buffer=nl.psum)
        out = nl.ndarray((4, 4), nl.float32, buffer=nl.hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    a = np.ones((4, 4), np.float32)
    with pytest.raises(errors.ShapeError, match="same number of elements"):
        nki.baremetal(sizes)(a)
    with pytest.raises(errors.MemorySpaceError):
        nki.baremetal(psum)(a)


# ----- dma_transpose ---------------------------------------------------------------------------

@nki.jit
def dma_transpose_kernel(x, from_sbuf=False, axes=None):
    src = to_sbuf(x) if from_sbuf else x
    return to_hbm(nisa.dma_transpose(src, axes=axes))


@pytest.mark.parametrize("shape,perm", [((8, 16), (1, 0)), ((2, 3, 4), (2, 1, 0)),
                                        ((2, 3, 4, 5), (3, 1, 2, 0))])
@pytest.mark.parametrize("from_sbuf", [False, True])
@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_dma_transpose_matches_numpy_transpose(shape, perm, from_sbuf, dtype):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape).astype(dtype)
    out = nki.baremetal(dma_transpose_kernel)(x, from_sbuf=from_sbuf, axes=perm)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, np.transpose(x, perm))


def test_dma_transpose_default_axes_and_rejected_axes():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(nki.baremetal(dma_transpose_kernel)(x), x.T)
    with pytest.raises(errors.UnsupportedOperationError):
        nki.baremetal(dma_transpose_kernel)(np.zeros((2, 3, 4), np.float32), axes=(0, 2, 1))


# ----- nc_matmul --------------------------------------------------------------------------------

@nki.jit
def matmul_kernel(s, m, in_dtype=None):
    stationary = to_sbuf(s, dtype=in_dtype)
    moving = to_sbuf(m, dtype=in_dtype)
    res = nisa.nc_matmul(stationary, moving)
    assert res.dtype == nl.float32 and res.shape == (s.shape[1],) + tuple(m.shape[1:])
    return psum_to_hbm(res)


@FAST
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 128), m=st.integers(1, 128),
       n=st.integers(1, 512), in_dtype=st.sampled_from([F32, F16, BF16]))
def test_nc_matmul_2d_is_stationary_T_at_moving(seed, k, m, n, in_dtype):
    r = rng_for(seed)
    s = r.standard_normal((k, m)).astype(np.float32)
    mv = r.standard_normal((k, n)).astype(np.float32)
    out = nki.baremetal(matmul_kernel)(s, mv, in_dtype=in_dtype)
    assert out.dtype == np.float32 and out.shape == (m, n)
    # the inputs are rounded to in_dtype by the DMA, the products are summed in fp32
    s_in = s.astype(in_dtype).astype(np.float64)
    m_in = mv.astype(in_dtype).astype(np.float64)
    np.testing.assert_allclose(out, s_in.T @ m_in, rtol=1e-5, atol=1e-4)


@SMALL
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 128), m=st.integers(1, 128),
       a=st.integers(1, 8), b=st.integers(1, 64), in_dtype=st.sampled_from([F32, BF16]))
def test_nc_matmul_3d_moving_keeps_its_free_dims(seed, k, m, a, b, in_dtype):
    r = rng_for(seed)
    s = r.standard_normal((k, m)).astype(np.float32)
    mv = r.standard_normal((k, a, b)).astype(np.float32)
    out = nki.baremetal(matmul_kernel)(s, mv, in_dtype=in_dtype)
    assert out.shape == (m, a, b)
    expected = (s.astype(in_dtype).astype(np.float64).T
                @ mv.astype(in_dtype).astype(np.float64).reshape(k, a * b)).reshape(m, a, b)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("in_dtype", [F16, BF16])
def test_nc_matmul_accumulates_16bit_inputs_in_fp32(in_dtype):
    # 2048 + 127 * 1 is exact in fp32 but would stay 2048 if summed in fp16/bf16
    k = 128
    s = np.ones((k, 1), np.float32)
    mv = np.ones((k, 2), np.float32)
    mv[0, :] = 2048.0
    out = nki.baremetal(matmul_kernel)(s, mv, in_dtype=in_dtype)
    np.testing.assert_array_equal(out, np.full((1, 2), 2048.0 + 127.0, np.float32))


@nki.jit
def matmul_psum_accum_kernel(a, b):
    """C[M, N] = A[K, M].T @ B[K, N] with K split into 128-row tiles."""
    k_total, m = a.shape
    n = b.shape[1]
    kt = k_total // nl.tile_size.pmax
    acc = nl.zeros((m, n), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(kt):
        a_t = nl.ndarray((nl.tile_size.pmax, m), a.dtype, buffer=nl.sbuf)
        b_t = nl.ndarray((nl.tile_size.pmax, n), b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_t, src=a[k * 128:(k + 1) * 128, :])
        nisa.dma_copy(dst=b_t, src=b[k * 128:(k + 1) * 128, :])
        acc += nisa.nc_matmul(a_t, b_t)
    return psum_to_hbm(acc)


@pytest.mark.parametrize("in_dtype", [F32, F16, BF16])
def test_nc_matmul_psum_accumulation_over_k_tiles(in_dtype):
    r = rng_for(2)
    a = r.standard_normal((384, 64)).astype(in_dtype)
    b = r.standard_normal((384, 200)).astype(in_dtype)
    run = nkisim.run_kernel(matmul_psum_accum_kernel, (a, b), {})
    expected = a.astype(np.float64).T @ b.astype(np.float64)
    np.testing.assert_allclose(run.outputs, expected, rtol=1e-4, atol=1e-4)
    matmuls = [rec for rec in run.trace if rec.opcode == "nc_matmul"]
    assert len(matmuls) == 3
    # the Tensor Engine accumulates in PSUM itself: no Vector-engine add is emitted
    assert all(rec.accumulate and rec.engine is Engine.TENSOR for rec in matmuls)
    assert all(rec.writes[0].buffer == "psum" for rec in matmuls)
    assert not [rec for rec in run.trace if rec.opcode == "tensor_tensor"]


@nki.jit
def matmul_strided_view_kernel(w, x):
    # integer-indexed views of a 4-D SBUF weight tile as stationary, as conv kernels do
    w_t = to_sbuf(w)                                   # (K, M, 2, 2)
    x_t = to_sbuf(x)                                   # (K, N)
    out = nl.ndarray((w.shape[1], 2, 2, x.shape[1]), nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(2):
        for j in nl.affine_range(2):
            out[:, i, j, :] = nisa.nc_matmul(w_t[:, :, i, j], x_t)
    return to_hbm(out)


def test_nc_matmul_with_strided_integer_indexed_stationary_view():
    r = rng_for(3)
    w = r.standard_normal((16, 8, 2, 2)).astype(np.float32)
    x = r.standard_normal((16, 10)).astype(np.float32)
    out = nki.baremetal(matmul_strided_view_kernel)(w, x)
    expected = np.einsum("kmij,kn->mijn", w.astype(np.float64), x.astype(np.float64))
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("s_shape,m_shape,error", [
    ((128, 129), (128, 4), errors.HardwareLimitError),     # stationary free > 128
    ((128, 4), (128, 513), errors.HardwareLimitError),     # moving free > 512
    ((64, 4), (32, 4), errors.ShapeError),                 # contraction mismatch
])
def test_nc_matmul_enforces_tensor_engine_limits(s_shape, m_shape, error):
    with pytest.raises(error):
        nki.baremetal(matmul_kernel)(np.ones(s_shape, np.float32), np.ones(m_shape, np.float32))


def test_nc_matmul_rejects_psum_operand():
    @nki.jit
    def kernel(a):
        ps = nl.zeros((4, 4), nl.float32, buffer=nl.psum)
        return psum_to_hbm(nisa.nc_matmul(ps, to_sbuf(a)))

    with pytest.raises(errors.MemorySpaceError):
        nki.baremetal(kernel)(np.ones((4, 4), np.float32))


# ----- nc_transpose ------------------------------------------------------------------------------

@nki.jit
def transpose_kernel(x, engine=None, dtype=None):
    res = nisa.nc_transpose(to_sbuf(x), engine=engine, dtype=dtype) if engine is not None \
        else nisa.nc_transpose(to_sbuf(x), dtype=dtype)
    return to_hbm(nisa.tensor_copy(res))


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
@pytest.mark.parametrize("engine,shape,out_engine", [
    (None, (128, 128), Engine.TENSOR), (None, (7, 100), Engine.TENSOR),
    ("tensor", (32, 5), Engine.TENSOR), ("vector", (32, 32), Engine.VECTOR),
    ("vector", (3, 17), Engine.VECTOR)])
def test_nc_transpose_engines_preserve_dtype_and_values(dtype, engine, shape, out_engine):
    x = rng_for(4).standard_normal(shape).astype(dtype)
    eng = {None: None, "tensor": nisa.tensor_engine, "vector": nisa.vector_engine}[engine]
    run = nkisim.run_kernel(transpose_kernel, (x,), {"engine": eng})
    assert run.outputs.dtype == dtype
    np.testing.assert_array_equal(run.outputs, x.T)
    rec = next(r for r in run.trace if r.opcode == "nc_transpose")
    assert rec.engine is out_engine
    # the Tensor Engine writes PSUM; the Vector Engine result lands in SBUF
    assert rec.writes[0].buffer == ("psum" if out_engine is Engine.TENSOR else "sbuf")


def test_nc_transpose_flattens_free_dims_and_casts_with_dtype():
    x = rng_for(5).standard_normal((16, 3, 4)).astype(np.float32)
    out = nki.baremetal(transpose_kernel)(x, dtype=nl.float16)
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, x.reshape(16, 12).T.astype(np.float16))


@nki.jit
def transpose_into_buffers_kernel(x):
    t = to_sbuf(x)
    ps = nl.ndarray((x.shape[1], x.shape[0]), x.dtype, buffer=nl.psum)
    ps[...] = nisa.nc_transpose(t)                  # lands in PSUM directly
    sb = nl.zeros((x.shape[1], 2 * x.shape[0]), x.dtype, buffer=nl.sbuf)
    sb[:, x.shape[0]:] = nisa.nc_transpose(t)       # PSUM result copied into an SBUF slice
    return to_hbm(nisa.tensor_copy(ps)), to_hbm(sb)


def test_nc_transpose_result_assigned_into_psum_and_sbuf():
    x = rng_for(6).standard_normal((20, 24)).astype(np.float32)
    run = nkisim.run_kernel(transpose_into_buffers_kernel, (x,), {})
    from_psum, from_sbuf = run.outputs
    np.testing.assert_array_equal(from_psum, x.T)
    np.testing.assert_array_equal(from_sbuf[:, :20], np.zeros((24, 20), np.float32))
    np.testing.assert_array_equal(from_sbuf[:, 20:], x.T)
    ops = [r.opcode for r in run.trace]
    # ps[...] = ... retargets the transpose into PSUM; sb[...] = ... needs a PSUM -> SBUF copy
    i1, i2 = [i for i, op in enumerate(ops) if op == "nc_transpose"]
    assert run.trace[i1].writes[0].buffer == "psum" and ops[i1 + 1] != "tensor_copy"
    assert ops[i2 + 1] == "tensor_copy" and run.trace[i2 + 1].engine is Engine.SCALAR
    assert run.trace[i2 + 1].writes[0].buffer == "sbuf"
    assert ops.count("tensor_copy") == 2      # that copy and the final PSUM eviction


def test_nc_transpose_vector_engine_limit_is_32():
    with pytest.raises(errors.HardwareLimitError):
        nki.baremetal(transpose_kernel)(np.ones((33, 4), np.float32), engine=nisa.vector_engine)
    with pytest.raises(errors.HardwareLimitError):
        nki.baremetal(transpose_kernel)(np.ones((4, 129), np.float32))


# ----- tensor_copy -------------------------------------------------------------------------------

@nki.jit
def tensor_copy_kernel(x, dtype=None, engine=None):
    t = to_sbuf(x)
    res = nisa.tensor_copy(t, dtype=dtype) if engine is None else nisa.tensor_copy(t, dtype=dtype, engine=engine)
    return to_hbm(res)


@FAST
@given(seed=st.integers(0, 2**32 - 1), dtype=st.sampled_from([F32, F16, BF16, np.dtype(np.int32)]),
       p=st.integers(1, 128), f=st.integers(1, 48))
def test_tensor_copy_casts_like_numpy(seed, dtype, p, f):
    x = (rng_for(seed).standard_normal((p, f)) * 300).astype(np.float32)
    out = nki.baremetal(tensor_copy_kernel)(x, dtype=dtype)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, x.astype(dtype))


@nki.jit
def tensor_copy_engines_kernel(x):
    t = to_sbuf(x)
    ps = nl.zeros(x.shape, nl.float32, buffer=nl.psum)
    ps[...] = nisa.tensor_copy(t)                   # SBUF -> PSUM
    a = nisa.tensor_copy(ps)                        # PSUM source: Scalar engine
    b = nisa.tensor_copy(t)                         # SBUF source: Vector engine
    c = nisa.tensor_copy(t, engine=nisa.gpsimd_engine)
    d = nisa.tensor_copy(ps, engine=nisa.vector_engine)
    return to_hbm(a), to_hbm(b), to_hbm(c), to_hbm(d)


def test_tensor_copy_engine_choice_is_recorded():
    x = rng_for(7).standard_normal((16, 8)).astype(np.float32)
    run = nkisim.run_kernel(tensor_copy_engines_kernel, (x,), {})
    for out in run.outputs:
        np.testing.assert_array_equal(out, x)
    copies = [r for r in run.trace if r.opcode == "tensor_copy"]
    assert [(r.reads[0].buffer, r.engine) for r in copies] == [
        ("sbuf", Engine.VECTOR), ("psum", Engine.SCALAR), ("sbuf", Engine.VECTOR),
        ("sbuf", Engine.GPSIMD), ("psum", Engine.VECTOR)]
    assert copies[0].writes[0].buffer == "psum"


def test_tensor_copy_gpsimd_cannot_read_psum():
    @nki.jit
    def kernel(x):
        ps = nl.zeros(x.shape, nl.float32, buffer=nl.psum)
        return to_hbm(nisa.tensor_copy(ps, engine=nisa.gpsimd_engine))

    with pytest.raises(errors.MemorySpaceError):
        nki.baremetal(kernel)(np.ones((4, 4), np.float32))


# ----- tensor_tensor ------------------------------------------------------------------------------

@nki.jit
def tensor_tensor_kernel(a, b, op=None, dtype=None):
    return to_hbm(nisa.tensor_tensor(to_sbuf(a), to_sbuf(b), op=op, dtype=dtype))


ARITH = {
    "add": (nl.add, np.add), "subtract": (nl.subtract, np.subtract),
    "multiply": (nl.multiply, np.multiply), "divide": (nl.divide, np.divide),
    "maximum": (nl.maximum, np.maximum), "minimum": (nl.minimum, np.minimum),
    "power": (nl.power, np.power), "mod": (nl.mod, np.mod), "fmod": (nl.fmod, np.fmod),
}


def _operands_for(name, r, shape):
    a = r.uniform(-50, 50, shape).astype(np.float32)
    b = r.uniform(-50, 50, shape).astype(np.float32)
    if name in ("divide", "mod", "fmod"):
        b = (r.uniform(0.25, 8, shape) * r.choice([-1, 1], shape)).astype(np.float32)
    if name == "power":
        a = r.uniform(0.1, 4, shape).astype(np.float32)
        b = r.uniform(-2, 2, shape).astype(np.float32)
    return a, b


@FAST
@given(seed=st.integers(0, 2**32 - 1), name=st.sampled_from(sorted(ARITH)),
       p=st.integers(1, 128), f=st.integers(1, 64))
def test_tensor_tensor_arithmetic_ops(seed, name, p, f):
    a, b = _operands_for(name, rng_for(seed), (p, f))
    nl_op, np_op = ARITH[name]
    out = nki.baremetal(tensor_tensor_kernel)(a, b, op=nl_op)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, np_op(a, b), rtol=1e-6, atol=0)


COMPARE = {
    "equal": (nl.equal, np.equal), "not_equal": (nl.not_equal, np.not_equal),
    "greater": (nl.greater, np.greater), "greater_equal": (nl.greater_equal, np.greater_equal),
    "less": (nl.less, np.less), "less_equal": (nl.less_equal, np.less_equal),
    "logical_and": (nl.logical_and, np.logical_and), "logical_or": (nl.logical_or, np.logical_or),
    "logical_xor": (nl.logical_xor, np.logical_xor),
}


@FAST
@given(seed=st.integers(0, 2**32 - 1), name=st.sampled_from(sorted(COMPARE)),
       p=st.integers(1, 64), f=st.integers(1, 32))
def test_tensor_tensor_comparisons_and_logical_ops_give_0_or_1(seed, name, p, f):
    r = rng_for(seed)
    # few distinct values, so equal elements are common
    a = r.integers(-2, 3, (p, f)).astype(np.float32)
    b = r.integers(-2, 3, (p, f)).astype(np.float32)
    nl_op, np_op = COMPARE[name]
    out = nki.baremetal(tensor_tensor_kernel)(a, b, op=nl_op)
    np.testing.assert_array_equal(out, np_op(a, b).astype(np.float32))


BITWISE = {
    "bitwise_and": (nl.bitwise_and, np.bitwise_and), "bitwise_or": (nl.bitwise_or, np.bitwise_or),
    "bitwise_xor": (nl.bitwise_xor, np.bitwise_xor), "left_shift": (nl.left_shift, np.left_shift),
    "right_shift": (nl.right_shift, np.right_shift),
}


@SMALL
@given(seed=st.integers(0, 2**32 - 1), name=st.sampled_from(sorted(BITWISE)))
def test_tensor_tensor_bitwise_ops_on_integers(seed, name):
    r = rng_for(seed)
    a = r.integers(0, 2**20, (16, 8)).astype(np.int32)
    b = r.integers(0, 2**20, (16, 8)).astype(np.int32)
    if "shift" in name:
        b = r.integers(0, 8, (16, 8)).astype(np.int32)
    nl_op, np_op = BITWISE[name]
    out = nki.baremetal(tensor_tensor_kernel)(a, b, op=nl_op)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, np_op(a, b))


def test_tensor_tensor_bitwise_op_rejects_float_operands():
    x = np.ones((4, 4), np.float32)
    with pytest.raises(errors.UnsupportedOperationError):
        nki.baremetal(tensor_tensor_kernel)(x, x, op=nl.bitwise_and)


@pytest.mark.parametrize("big_shape,small_shape", [
    ((16, 10), (16,)), ((16, 10), (16, 1)), ((16, 4, 5), (16, 1, 1)), ((16, 4, 5), (16, 1)),
    ((16, 4, 5), (16,)), ((16, 4, 5), (16, 1, 5)), ((16, 4, 5), (16, 4, 1))])
@pytest.mark.parametrize("op,np_op", [(nl.add, np.add), (nl.subtract, np.subtract),
                                      (nl.multiply, np.multiply)])
@pytest.mark.parametrize("small_first", [False, True])
def test_tensor_tensor_free_dim_broadcasting(big_shape, small_shape, op, np_op, small_first):
    r = rng_for(8)
    big = r.standard_normal(big_shape).astype(np.float32)
    small = r.standard_normal(small_shape).astype(np.float32)
    # a per-partition operand spreads over every free dim: pad its free dims with 1s on the left
    small_b = small.reshape(small_shape[:1] + (1,) * (len(big_shape) - len(small_shape)) + small_shape[1:])
    args = (small, big) if small_first else (big, small)
    out = nki.baremetal(tensor_tensor_kernel)(*args, op=op)
    expected = np_op(small_b, big) if small_first else np_op(big, small_b)
    assert out.shape == big_shape
    np.testing.assert_array_equal(out, expected)


def test_tensor_tensor_per_partition_3d_operand_against_2d_tile():
    # (P, 1, 1) bias against a (P, F) tile: a per-partition value over every element.
    # (The result shape follows NumPy free-dim broadcasting, (P, 1, F); compare the elements.)
    r = rng_for(9)
    x = r.standard_normal((16, 10)).astype(np.float32)
    bias = r.standard_normal((16, 1, 1)).astype(np.float32)
    out = nki.baremetal(tensor_tensor_kernel)(x, bias, op=nl.add)
    assert out.size == x.size
    np.testing.assert_array_equal(out.reshape(16, 10), x + bias.reshape(16, 1))


def test_tensor_tensor_partition_mismatch_and_double_psum_are_errors():
    with pytest.raises(errors.PartitionMismatchError):
        nki.baremetal(tensor_tensor_kernel)(np.ones((8, 4), np.float32), np.ones((4, 4), np.float32), op=nl.add)
    with pytest.raises(errors.ShapeError):
        nki.baremetal(tensor_tensor_kernel)(np.ones((8, 4), np.float32), np.ones((8, 3), np.float32), op=nl.add)

    @nki.jit
    def two_psum(a):
        p1 = nl.zeros(a.shape, nl.float32, buffer=nl.psum)
        p2 = nl.zeros(a.shape, nl.float32, buffer=nl.psum)
        return to_hbm(nisa.tensor_tensor(p1, p2, op=nl.add))

    with pytest.raises(errors.MemorySpaceError):
        nki.baremetal(two_psum)(np.ones((4, 4), np.float32))


I8, U8, I16, I32, U32 = (np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.int32, np.uint32))


@pytest.mark.parametrize("da,db,expected", [
    (F32, F32, F32), (F16, F16, F16), (BF16, BF16, BF16), (F16, F32, F32), (BF16, F32, F32),
    (F16, BF16, F32), (I8, U8, I16), (I32, U32, F32), (I8, I32, I32), (I32, F16, F16),
    (U8, BF16, BF16)])
def test_tensor_tensor_dtype_promotion_and_rounding(da, db, expected):
    r = rng_for(10)
    a = r.integers(1, 60, (8, 16)).astype(np.float32) + np.float32(0.3)
    b = r.integers(1, 60, (8, 16)).astype(np.float32) * np.float32(1.7)
    a, b = a.astype(da), b.astype(db)
    out = nki.baremetal(tensor_tensor_kernel)(a, b, op=nl.multiply)
    assert out.dtype == expected
    # math in fp32, rounded once to the result dtype
    np.testing.assert_array_equal(out, (a.astype(np.float32) * b.astype(np.float32)).astype(expected))


@pytest.mark.parametrize("dtype", [F16, BF16, F32])
def test_tensor_tensor_dtype_argument_overrides_promotion(dtype):
    r = rng_for(11)
    a = r.standard_normal((8, 16)).astype(np.float32)
    b = r.standard_normal((8, 16)).astype(np.float32)
    out = nki.baremetal(tensor_tensor_kernel)(a, b, op=nl.add, dtype=dtype)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, (a + b).astype(dtype))


# ----- tensor_scalar ------------------------------------------------------------------------------

SCALAR_OPS = {"add": (nl.add, np.add), "subtract": (nl.subtract, np.subtract),
              "multiply": (nl.multiply, np.multiply), "maximum": (nl.maximum, np.maximum),
              "minimum": (nl.minimum, np.minimum), "divide": (nl.divide, np.divide)}


@nki.jit
def tensor_scalar_kernel(x, v0=None, v1=None, c0=0.0, c1=None, op0=None, op1=None,
                         reverse0=False, reverse1=False, dtype=None):
    t = to_sbuf(x)
    operand0 = to_sbuf(v0) if v0 is not None else c0
    operand1 = to_sbuf(v1) if v1 is not None else c1
    if op1 is None:
        res = nisa.tensor_scalar(t, op0, operand0, reverse0=reverse0, dtype=dtype)
    else:
        res = nisa.tensor_scalar(data=t, op0=op0, operand0=operand0, reverse0=reverse0,
                                 op1=op1, operand1=operand1, reverse1=reverse1, dtype=dtype)
    return to_hbm(res)


def _apply(np_op, x, c, reverse):
    return np_op(c, x) if reverse else np_op(x, c)


@FAST
@given(seed=st.integers(0, 2**32 - 1), p=st.integers(1, 128), f=st.integers(1, 32),
       name0=st.sampled_from(sorted(SCALAR_OPS)), name1=st.sampled_from([None] + sorted(SCALAR_OPS)),
       rev0=st.booleans(), rev1=st.booleans(), vec0=st.booleans(), vec1=st.booleans())
def test_tensor_scalar_two_ops_scalars_vectors_and_reverse(seed, p, f, name0, name1, rev0, rev1, vec0, vec1):
    r = rng_for(seed)

    def nonzero(shape):
        return (r.uniform(0.5, 4, shape) * r.choice([-1, 1], shape)).astype(np.float32)

    x = nonzero((p, f))
    kw = {"op0": SCALAR_OPS[name0][0], "reverse0": rev0}
    c0 = nonzero((p, 1)) if vec0 else np.float32(nonzero(()))
    if vec0:
        kw["v0"] = c0
    else:
        kw["c0"] = float(c0)
    expected = _apply(SCALAR_OPS[name0][1], x, c0, rev0)
    if name1 is not None:
        c1 = nonzero((p, 1)) if vec1 else np.float32(nonzero(()))
        kw.update(op1=SCALAR_OPS[name1][0], reverse1=rev1)
        if vec1:
            kw["v1"] = c1
        else:
            kw["c1"] = float(c1)
        expected = _apply(SCALAR_OPS[name1][1], expected, c1, rev1)
    out = nki.baremetal(tensor_scalar_kernel)(x, **kw)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_tensor_scalar_accepts_1d_partition_vector():
    x = rng_for(12).standard_normal((16, 6)).astype(np.float32)
    v = rng_for(13).standard_normal((16,)).astype(np.float32)
    out = nki.baremetal(tensor_scalar_kernel)(x, v0=v, op0=nl.add)
    np.testing.assert_array_equal(out, x + v[:, None])


@pytest.mark.parametrize("dtype", [F16, BF16])
def test_tensor_scalar_default_output_dtype_is_data_dtype_rounded(dtype):
    x = rng_for(14).standard_normal((32, 16)).astype(dtype)
    out = nki.baremetal(tensor_scalar_kernel)(x, op0=nl.multiply, c0=1.1, op1=nl.add, c1=0.37)
    assert out.dtype == dtype
    expected = (x.astype(np.float32) * np.float32(1.1) + np.float32(0.37)).astype(dtype)
    np.testing.assert_array_equal(out, expected)


def test_tensor_scalar_operand_shape_and_op_pairing_errors():
    x = np.ones((8, 4), np.float32)
    with pytest.raises(errors.ShapeError):
        nki.baremetal(tensor_scalar_kernel)(x, v0=np.ones((8, 2), np.float32), op0=nl.add)
    with pytest.raises(errors.UnsupportedOperationError):
        nki.baremetal(tensor_scalar_kernel)(x, op0=nl.add, c0=1.0, op1=nl.add, c1=None)


# ----- tensor_reduce ------------------------------------------------------------------------------

@nki.jit
def tensor_reduce_kernel(x, op=None, axis=None, view_shape=None, keepdims=False, negate=False, dtype=None):
    t = to_sbuf(x)
    if view_shape is not None:
        t = t.reshape(view_shape)
    return to_hbm(nisa.tensor_reduce(op=op, data=t, axis=axis, keepdims=keepdims, negate=negate, dtype=dtype))


REDUCE_OPS = [(nl.add, np.sum), (nl.maximum, np.max), (nl.minimum, np.min), (nl.max, np.max),
              (nl.min, np.min), (np.add, np.sum), (np.max, np.max), (nl.multiply, np.prod)]


@pytest.mark.parametrize("op,np_reduce", REDUCE_OPS, ids=lambda v: getattr(v, "__name__", repr(v)))
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("negate", [False, True])
def test_tensor_reduce_single_free_axis(op, np_reduce, keepdims, negate):
    x = rng_for(15).uniform(0.5, 1.5, (32, 24)).astype(np.float32)
    out = nki.baremetal(tensor_reduce_kernel)(x, op=op, axis=1, keepdims=keepdims, negate=negate)
    expected = np_reduce(x, axis=1, keepdims=keepdims) * (-1 if negate else 1)
    assert out.shape == expected.shape
    np.testing.assert_allclose(out, expected, rtol=1e-5)


@pytest.mark.parametrize("axis", [(2, 4), [1, 3], (1, 2, 3, 4), 3, (4,), (-1, 2)])
@pytest.mark.parametrize("op,np_reduce", [(nl.add, np.sum), (nl.max, np.max), (nl.minimum, np.min)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_tensor_reduce_non_consecutive_axes_on_reshaped_5d_tile(axis, op, np_reduce, keepdims):
    x = rng_for(16).standard_normal((16, 2 * 3 * 4 * 5)).astype(np.float32)
    shape5 = (16, 2, 3, 4, 5)
    out = nki.baremetal(tensor_reduce_kernel)(x, op=op, axis=axis, view_shape=shape5, keepdims=keepdims)
    np_axis = tuple(a % 5 for a in ((axis,) if isinstance(axis, int) else axis))
    expected = np_reduce(x.reshape(shape5), axis=np_axis, keepdims=keepdims)
    assert out.shape == expected.shape
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [F16, BF16])
def test_tensor_reduce_sums_in_fp32_and_rounds_once(dtype):
    # multiples of 1/8: every partial sum is exact in fp32, only the final write rounds
    x = (rng_for(17).integers(-64, 64, (8, 512)) / 8 + 40).astype(dtype)
    out = nki.baremetal(tensor_reduce_kernel)(x, op=nl.add, axis=1)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, x.astype(np.float32).sum(axis=1).astype(dtype))
    out32 = nki.baremetal(tensor_reduce_kernel)(x, op=nl.add, axis=1, dtype=nl.float32)
    np.testing.assert_array_equal(out32, x.astype(np.float32).sum(axis=1))


def test_tensor_reduce_rejects_partition_axis():
    with pytest.raises(errors.ShapeError, match="partition"):
        nki.baremetal(tensor_reduce_kernel)(np.ones((4, 4), np.float32), op=nl.add, axis=0)


# ----- activation ---------------------------------------------------------------------------------

def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


ACTIVATIONS = {
    "exp": (nl.exp, np.exp), "tanh": (nl.tanh, np.tanh), "sigmoid": (nl.sigmoid, _sigmoid),
    "relu": (nl.relu, lambda x: np.maximum(x, 0)), "square": (nl.square, np.square),
    "copy": (nl.copy, lambda x: x), "identity_np": (np.copy, lambda x: x),
    "silu": (nl.silu, lambda x: x * _sigmoid(x)),
    "gelu_apprx_tanh": (nl.gelu_apprx_tanh,
                        lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))),
    "abs": (nl.abs, np.abs), "sin": (nl.sin, np.sin),
}


@nki.jit
def activation_kernel(x, op=None, bias=None, scale=1.0, scale_vec=None, dtype=None):
    t = to_sbuf(x)
    b = to_sbuf(bias) if bias is not None else None
    s = to_sbuf(scale_vec) if scale_vec is not None else scale
    return to_hbm(nisa.activation(op=op, data=t, bias=b, scale=s, dtype=dtype))


@FAST
@given(seed=st.integers(0, 2**32 - 1), name=st.sampled_from(sorted(ACTIVATIONS)),
       scale=st.floats(-2, 2, width=32), use_bias=st.booleans(), vec_scale=st.booleans(),
       p=st.integers(1, 128), f=st.integers(1, 32))
def test_activation_is_f_of_data_times_scale_plus_bias(seed, name, scale, use_bias, vec_scale, p, f):
    r = rng_for(seed)
    x = r.uniform(-1.5, 1.5, (p, f)).astype(np.float32)
    bias = r.uniform(-1, 1, (p, 1)).astype(np.float32) if use_bias else None
    kw = {"op": ACTIVATIONS[name][0], "bias": bias}
    if vec_scale:
        scale_arr = r.uniform(-2, 2, (p, 1)).astype(np.float32)
        kw["scale_vec"] = scale_arr
    else:
        scale_arr = np.float32(scale)
        kw["scale"] = float(scale)
    out = nki.baremetal(activation_kernel)(x, **kw)
    pre = x.astype(np.float64) * scale_arr + (bias if bias is not None else 0)
    np.testing.assert_allclose(out, ACTIVATIONS[name][1](pre), rtol=2e-5, atol=2e-6)


def test_activation_accepts_numpy_scalar_scale_and_16bit_output():
    # scale=np.float32(...) is a compile-time scalar (it used to crash the tracer)
    x = rng_for(18).uniform(-1, 1, (16, 8)).astype(np.float32)
    out = nki.baremetal(activation_kernel)(x, op=nl.exp, scale=np.float32(0.5), dtype=nl.bfloat16)
    assert out.dtype == BF16
    np.testing.assert_array_equal(out, np.exp(x * np.float32(0.5)).astype(BF16))


@nki.jit
def activation_reduce_kernel(x, bias, reduce_op=None):
    t = to_sbuf(x)
    res = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    act = nisa.activation(op=nl.exp, data=t, bias=to_sbuf(bias), scale=2.0,
                          reduce_op=reduce_op, reduce_res=res)
    return to_hbm(act), to_hbm(res)


@pytest.mark.parametrize("reduce_op,np_reduce", [(nl.add, np.sum), (nl.maximum, np.max)])
def test_activation_reduce_res_receives_free_axis_reduction(reduce_op, np_reduce):
    r = rng_for(19)
    x = r.uniform(-1, 1, (32, 20)).astype(np.float32)
    bias = r.uniform(-1, 1, (32, 1)).astype(np.float32)
    act, res = nki.baremetal(activation_reduce_kernel)(x, bias, reduce_op=reduce_op)
    expected = np.exp(x.astype(np.float64) * 2 + bias)
    np.testing.assert_allclose(act, expected, rtol=1e-5)
    assert res.shape == (32, 1)
    np.testing.assert_allclose(res, np_reduce(expected, axis=1, keepdims=True), rtol=1e-5)


def test_activation_rejects_non_activation_op():
    with pytest.raises(errors.UnsupportedOperationError):
        nki.baremetal(activation_kernel)(np.ones((4, 4), np.float32), op=nl.add)


# ----- memset, iota, affine_select, tensor_partition_reduce ------------------------------------------

@nki.jit
def memset_kernel(ref, value=0.0, dtype=None, engine=None):
    if engine is None:
        t = nisa.memset(shape=ref.shape, value=value, dtype=dtype)
    else:
        t = nisa.memset(ref.shape, value, dtype, engine=engine)
    return to_hbm(t)


@pytest.mark.parametrize("dtype", [F32, F16, BF16, I32, U8])
@pytest.mark.parametrize("value", [0, 3.14159, -7])
def test_memset_fills_with_value_rounded_to_dtype(dtype, value):
    if dtype.kind in "iu":
        value = abs(int(value))
    ref = np.zeros((64, 24), np.float32)
    run = nkisim.run_kernel(memset_kernel, (ref,), {"value": value, "dtype": dtype})
    assert run.outputs.dtype == dtype
    np.testing.assert_array_equal(run.outputs, np.full((64, 24), value, dtype=dtype))
    assert run.trace[0].opcode == "memset" and run.trace[0].engine is Engine.VECTOR


def test_memset_on_gpsimd_engine():
    run = nkisim.run_kernel(memset_kernel, (np.zeros((8, 8), np.float32),),
                            {"value": 2.5, "dtype": nl.float32, "engine": nisa.gpsimd_engine})
    np.testing.assert_array_equal(run.outputs, np.full((8, 8), 2.5, np.float32))
    assert run.trace[0].engine is Engine.GPSIMD


@nki.jit
def iota_kernel(ref, dtype=None):
    p, f = ref.shape
    a = nisa.iota(nl.arange(p)[:, None] * f + nl.arange(f)[None, :], dtype=dtype)
    i_p, i_f = nl.mgrid[0:p, 0:f]
    b = nisa.iota(2 * i_f - i_p, dtype=dtype)
    return to_hbm(a), to_hbm(b)


@pytest.mark.parametrize("dtype", [I32, F32])
def test_iota_evaluates_index_expressions(dtype):
    run = nkisim.run_kernel(iota_kernel, (np.zeros((8, 16), np.float32),), {"dtype": dtype})
    a, b = run.outputs
    assert a.dtype == dtype and b.dtype == dtype
    np.testing.assert_array_equal(a, np.arange(128).reshape(8, 16).astype(dtype))
    i_p, i_f = np.mgrid[0:8, 0:16]
    np.testing.assert_array_equal(b, (2 * i_f - i_p).astype(dtype))
    assert {r.engine for r in run.trace if r.opcode == "iota"} == {Engine.GPSIMD}


@nki.jit
def affine_select_kernel(x):
    t = to_sbuf(x)
    i_p, i_f = nl.mgrid[0:x.shape[0], 0:x.shape[1]]
    lower = nisa.affine_select(i_p >= i_f, t, -9984.0)
    band = nisa.affine_select((i_f - i_p >= 0) & (i_f - i_p < 3), t, 0.0)
    return to_hbm(lower), to_hbm(band)


def test_affine_select_applies_affine_predicate():
    x = rng_for(20).standard_normal((16, 24)).astype(np.float32)
    lower, band = nki.baremetal(affine_select_kernel)(x)
    i_p, i_f = np.mgrid[0:16, 0:24]
    np.testing.assert_array_equal(lower, np.where(i_p >= i_f, x, np.float32(-9984.0)))
    np.testing.assert_array_equal(band, np.where((i_f - i_p >= 0) & (i_f - i_p < 3), x, np.float32(0)))


@nki.jit
def partition_reduce_kernel(x, op=None):
    return to_hbm(nisa.tensor_partition_reduce(op, to_sbuf(x)))


@pytest.mark.parametrize("op,np_reduce", [(nl.add, np.sum), (nl.maximum, np.max), (nl.minimum, np.min)])
def test_tensor_partition_reduce_reduces_across_partitions(op, np_reduce):
    x = rng_for(21).standard_normal((100, 12)).astype(np.float32)
    run = nkisim.run_kernel(partition_reduce_kernel, (x,), {"op": op})
    assert run.outputs.shape == (1, 12)
    np.testing.assert_allclose(run.outputs, np_reduce(x, axis=0, keepdims=True), rtol=1e-5, atol=1e-6)
    assert run.trace[1].engine is Engine.GPSIMD


# ----- 16-bit rounding on every write ------------------------------------------------------------------

@nki.jit
def writes_into_16bit_kernel(x, y, dtype=None):
    """Each instruction writes a 16-bit tile; every result is rounded to that dtype once."""
    a = to_sbuf(x)
    b = to_sbuf(y)
    p, f = x.shape
    outs = []
    dst = nl.ndarray((p, f), dtype, buffer=nl.sbuf)
    dst[...] = nisa.tensor_tensor(a, b, op=nl.add)                # fp32 result assigned into 16-bit
    outs.append(to_hbm(dst))
    outs.append(to_hbm(nisa.tensor_tensor(a, b, op=nl.multiply, dtype=dtype)))
    outs.append(to_hbm(nisa.tensor_scalar(a, nl.multiply, 3.3, dtype=dtype)))
    outs.append(to_hbm(nisa.activation(op=nl.exp, data=a, dtype=dtype)))
    outs.append(to_hbm(nisa.tensor_copy(a, dtype=dtype)))
    outs.append(to_hbm(nisa.tensor_reduce(nl.add, a, axis=1, keepdims=True, dtype=dtype)))
    ps = nl.zeros((f, f), nl.float32, buffer=nl.psum)
    ps += nisa.nc_matmul(a, b)
    outs.append(to_hbm(nisa.tensor_copy(ps, dtype=dtype)))
    return tuple(outs)


@pytest.mark.parametrize("dtype", [F16, BF16])
def test_every_write_to_a_16bit_tile_is_rounded(dtype):
    r = rng_for(22)
    x = r.uniform(-2, 2, (32, 16)).astype(np.float32)
    y = r.uniform(-2, 2, (32, 16)).astype(np.float32)
    outs = nki.baremetal(writes_into_16bit_kernel)(x, y, dtype=dtype)
    expected = [x + y, x * y, x * np.float32(3.3), np.exp(x), x, x.sum(axis=1, keepdims=True),
                x.T.astype(np.float64) @ y]
    for i, (out, exp) in enumerate(zip(outs, expected)):
        assert out.dtype == dtype, i
        if i in (3, 5, 6):    # transcendental / summation order: within half an ulp of the fp32 value
            np.testing.assert_allclose(out.astype(np.float32), exp, rtol=2 ** -7 if dtype == BF16 else 2 ** -10,
                                       atol=1e-5)
            # and exactly representable in dtype (it was rounded, not stored in fp32)
            np.testing.assert_array_equal(out.astype(np.float32).astype(dtype), out)
        else:
            np.testing.assert_array_equal(out, np.asarray(exp, np.float32).astype(dtype), err_msg=str(i))
