"""nki.language, tensor semantics and the kernel contract of the simulated `neuronxcc.nki`
(nki-api.md sections 1.1, 1.2, 2 and 6)."""
import sys

import ml_dtypes
import numpy as np
import pytest

import nkisim
from nkisim import errors
from nkisim.settings import SimSettings
from nkisim.trace import Engine

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)


def to_sbuf(src, dtype=None):
    tile = nl.ndarray(src.shape, dtype or src.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=src)
    return tile


def to_hbm(tile, dtype=None):
    out = nl.ndarray(tile.shape, dtype or tile.dtype, buffer=nl.hbm)
    nisa.dma_copy(dst=out, src=tile)
    return out


def rand(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# ----- install / imports / entry points -----------------------------------------------------------

def test_install_makes_neuronxcc_nki_importable():
    import neuronxcc
    import neuronxcc.nki.compiler
    import neuronxcc.nki.isa.constants
    import neuronxcc.nki.typing
    from neuronxcc.nki import baremetal, benchmark

    import nkisim.nki
    assert nkisim.installed()
    # a view of nkisim.nki holding NKI's names only (test_forms), not the module itself
    assert neuronxcc.nki.jit is nkisim.nki.jit and neuronxcc.nki.language is nkisim.nki.language
    assert sys.modules["neuronxcc.nki.language"] is nkisim.nki.language
    assert sys.modules["neuronxcc.nki.isa"] is nkisim.nki.isa
    assert baremetal is nkisim.nki.baremetal and benchmark is nkisim.nki.benchmark
    assert neuronxcc.nki.isa.constants.engine.vector == nisa.vector_engine
    view = sys.modules["neuronxcc.nki"]
    nkisim.install()              # idempotent
    assert sys.modules["neuronxcc.nki"] is view is neuronxcc.nki


@nki.jit
def add_kernel(a, b):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.hbm)
    nisa.dma_copy(dst=out, src=nisa.tensor_tensor(to_sbuf(a), to_sbuf(b), op=nl.add))
    return out


def test_baremetal_run_kernel_simulate_and_direct_call_agree():
    a, b = rand(16, 8, seed=1), rand(16, 8, seed=2)
    expected = a + b
    np.testing.assert_array_equal(nki.baremetal(add_kernel)(a, b), expected)
    np.testing.assert_array_equal(nki.baremetal()(add_kernel)(a, b), expected)
    np.testing.assert_array_equal(nki.simulate_kernel(add_kernel, a, b), expected)
    np.testing.assert_array_equal(add_kernel(a, b), expected)
    run = nkisim.run_kernel(add_kernel, (a, b), {})
    np.testing.assert_array_equal(run.outputs, expected)
    assert [r.opcode for r in run.trace] == ["dma_copy", "dma_copy", "tensor_tensor", "dma_copy"]


def test_course_decorator_stack_in_either_order():
    @nki.compiler.skip_middle_end_transformations
    @nki.jit
    def k1(a, b):
        return add_kernel(a, b)

    @nki.jit
    @nki.compiler.skip_middle_end_transformations
    def k2(a, b):
        return add_kernel(a, b)

    a, b = rand(4, 4, seed=3), rand(4, 4, seed=4)
    for k in (k1, k2):
        np.testing.assert_array_equal(nki.baremetal(k)(a, b), a + b)
        assert k.skip_middle_end


def test_kernel_takes_extra_python_keyword():
    @nki.jit
    def scaled(a, pool_size=1):
        return to_hbm(nisa.tensor_scalar(to_sbuf(a), nl.multiply, float(pool_size)))

    a = rand(8, 8, seed=5)
    np.testing.assert_array_equal(nki.baremetal(scaled)(a, pool_size=3), a * np.float32(3))


@pytest.mark.parametrize("style", ["decorator_factory", "kernel_first"])
def test_benchmark_runs_the_kernel_and_returns_outputs(style):
    a, b = rand(8, 8, seed=6), rand(8, 8, seed=7)
    if style == "decorator_factory":
        bench = nki.benchmark(warmup=5, iters=20, save_neff_name="file.neff",
                              additional_compile_opt="--disable-dge")(add_kernel)
    else:
        bench = nki.benchmark(add_kernel, warmup=1, iters=10, save_neff_name="file.neff")
    np.testing.assert_array_equal(bench(a, b), a + b)
    assert bench.benchmark_result is not None
    assert bench.benchmark_result.nc_latency is not None


def test_benchmark_nc_latency_percentiles_from_cost_model():
    """The one test that depends on the cost model (nkisim.cost) being present: before it
    landed, get_latency_percentile raised errors.LatencyUnavailableError. Values are only
    checked for shape (positive, finite, ordered), not calibrated magnitudes."""
    bench = nki.benchmark(warmup=1, iters=10)(add_kernel)
    bench(rand(8, 8), rand(8, 8, seed=1))
    latency = bench.benchmark_result.nc_latency
    p0, p50, p99 = (latency.get_latency_percentile(p) for p in (0, 50, 99))
    assert all(isinstance(v, float) and np.isfinite(v) and v > 0 for v in (p0, p50, p99))
    assert p0 <= p50 <= p99


@pytest.mark.parametrize("call", [
    lambda: nl.zeros((4, 4), nl.float32),
    lambda: nl.ndarray((4, 4), nl.float32, buffer=nl.sbuf),
    lambda: nl.full((4, 4), 2.0, nl.float32),
    lambda: nisa.memset((4, 4), 0.0, nl.float32),
    lambda: nisa.iota(nl.arange(4)[:, None], nl.int32),
])
def test_nki_api_outside_a_kernel_raises(call):
    with pytest.raises(errors.OutsideKernelError, match="outside of NKI kernels"):
        call()


# ----- kernel contract --------------------------------------------------------------------------------

def test_returning_an_sbuf_tile_is_a_contract_error():
    @nki.jit
    def kernel(a):
        return to_sbuf(a)

    with pytest.raises(errors.KernelContractError, match="HBM"):
        nki.baremetal(kernel)(rand(4, 4))


def test_returning_its_own_input_is_a_contract_error():
    @nki.jit
    def kernel(a):
        return a

    with pytest.raises(errors.KernelContractError, match="own input"):
        nki.baremetal(kernel)(rand(4, 4))


def test_returning_an_unwritten_output_is_a_contract_error():
    @nki.jit
    def kernel(a):
        return nl.ndarray(a.shape, a.dtype, buffer=nl.hbm)

    with pytest.raises(errors.KernelContractError, match="never written"):
        nki.baremetal(kernel)(rand(4, 4))


def test_returning_nothing_is_a_contract_error():
    @nki.jit
    def kernel(a):
        to_hbm(to_sbuf(a))

    with pytest.raises(errors.KernelContractError):
        nki.baremetal(kernel)(rand(4, 4))


def test_kernel_inputs_are_read_only():
    @nki.jit
    def dma_into_input(a):
        nisa.dma_copy(dst=a, src=to_sbuf(a))
        return to_hbm(to_sbuf(a))

    @nki.jit
    def assign_into_input(a):
        a[...] = to_sbuf(a)
        return to_hbm(to_sbuf(a))

    x = rand(4, 4)
    before = x.copy()
    for kernel in (dma_into_input, assign_into_input):
        with pytest.raises(errors.KernelContractError, match="read-only"):
            nki.baremetal(kernel)(x)
    np.testing.assert_array_equal(x, before)


def test_uninitialised_sbuf_and_psum_read_as_nan_by_default():
    @nki.jit
    def kernel(a):
        garbage = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        ps = nl.ndarray(a.shape, nl.float32, buffer=nl.psum)
        half = nl.ndarray(a.shape, nl.bfloat16, buffer=nl.sbuf)
        half[:, 0:2] = to_sbuf(a)[:, 0:2]
        return to_hbm(garbage), to_hbm(nisa.tensor_copy(ps)), to_hbm(half)

    a = rand(8, 4)
    garbage, ps, half = nki.baremetal(kernel)(a)
    assert np.isnan(garbage).all()
    assert np.isnan(ps).all()
    np.testing.assert_array_equal(half[:, :2], a[:, :2].astype(BF16))
    assert np.isnan(half[:, 2:].astype(np.float32)).all()


def test_nested_jit_helper_kernel_called_inside_a_kernel():
    @nki.jit
    def helper(x_tile, y_tile):
        """A helper kernel that takes and returns SBUF tiles."""
        return nisa.tensor_tensor(x_tile, y_tile, op=nl.multiply)

    @nki.jit
    def outer(a, b):
        prod = helper(to_sbuf(a), to_sbuf(b))
        return to_hbm(helper(prod, prod))

    a, b = rand(8, 8, seed=8), rand(8, 8, seed=9)
    np.testing.assert_allclose(nki.baremetal(outer)(a, b), (a * b) ** 2, rtol=1e-6)


# ----- host reads are refused ------------------------------------------------------------------------

HOST_READS = {
    "np.asarray": lambda t: np.asarray(t),
    "float(t[0, 0])": lambda t: float(t[0, 0]),
    "iterate": lambda t: [row for row in t],
    "if tile": lambda t: 1 if t else 0,
    "int": lambda t: int(t[0, 0]),
    "tolist": lambda t: t.tolist(),
}


@pytest.mark.parametrize("what", sorted(HOST_READS))
@pytest.mark.parametrize("where", ["sbuf", "hbm_input"])
def test_reading_device_values_from_host_python_is_refused(what, where):
    @nki.jit
    def kernel(a):
        t = to_sbuf(a) if where == "sbuf" else a
        HOST_READS[what](t)
        return to_hbm(to_sbuf(a))

    with pytest.raises(errors.DeviceValueError) as info:
        nki.baremetal(kernel)(rand(4, 4))
    message = str(info.value)
    assert "from host Python" in message
    assert "nki.isa instructions" in message and "nl.device_print" in message   # the remedy
    assert "test_language.py" in message                                        # the kernel's line


# ----- creation -----------------------------------------------------------------------------------------

@nki.jit
def creation_kernel(a):
    p, f = a.shape
    info = {}
    nd = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=nd, src=a)
    z = nl.zeros((p, f), nl.float32, buffer=nl.sbuf)
    o = nl.ones((p, f), dtype=nl.float16)
    fu = nl.full((p, f), 3.3, nl.bfloat16)
    zl = nl.zeros_like(nd)
    el = nl.empty_like(o)
    el[...] = nd
    zp = nl.zeros((p, f), nl.float32, buffer=nl.psum)
    for name, t in dict(nd=nd, z=z, o=o, fu=fu, zl=zl, el=el, zp=zp).items():
        info[name] = (t.shape, t.dtype, t.buffer)
    creation_kernel.info = info
    return (to_hbm(nd), to_hbm(z), to_hbm(o), to_hbm(fu), to_hbm(zl), to_hbm(el),
            to_hbm(nisa.tensor_copy(zp)))


def test_creation_functions():
    a = rand(8, 6)
    nd, z, o, fu, zl, el, zp = nki.baremetal(creation_kernel)(a)
    info = creation_kernel.info
    np.testing.assert_array_equal(nd, a)
    np.testing.assert_array_equal(z, np.zeros((8, 6), np.float32))
    np.testing.assert_array_equal(o, np.ones((8, 6), np.float16))
    assert fu.dtype == BF16
    np.testing.assert_array_equal(fu, np.full((8, 6), 3.3, dtype=BF16))
    assert zl.dtype == np.float32
    np.testing.assert_array_equal(zl, np.zeros((8, 6)))
    np.testing.assert_array_equal(el, a.astype(np.float16))
    np.testing.assert_array_equal(zp, np.zeros((8, 6)))
    assert info["nd"] == ((8, 6), np.float32, nl.sbuf)
    assert info["o"] == ((8, 6), np.float16, nl.sbuf)          # default buffer is SBUF
    assert info["zl"] == ((8, 6), np.float32, nl.sbuf)
    assert info["el"] == ((8, 6), np.float16, nl.sbuf)         # shape/dtype/buffer of `a`
    assert info["zp"][2] is nl.psum


def test_hbm_tensor_with_initial_value_is_an_error():
    @nki.jit
    def kernel(a):
        return nl.zeros(a.shape, nl.float32, buffer=nl.hbm)

    with pytest.raises(errors.MemorySpaceError, match="initial value"):
        nki.baremetal(kernel)(rand(4, 4))


def test_partition_dim_over_128_is_an_error():
    @nki.jit
    def kernel(a):
        return to_hbm(nl.zeros((129, 4), nl.float32))

    with pytest.raises(errors.HardwareLimitError, match="partitions"):
        nki.baremetal(kernel)(rand(4, 4))


def test_tile_size_constants():
    assert nl.tile_size.pmax == 128
    assert nl.tile_size.psum_fmax == 512
    assert nl.tile_size.gemm_stationary_fmax == 128
    assert nl.tile_size.gemm_moving_fmax == 512
    assert nl.tile_size.bn_stats_fmax == 512


# ----- data movement: copy, load/store, transposes, matmul, broadcast_to ------------------------------

def test_nl_copy_evicts_psum_with_dtype():
    @nki.jit
    def kernel(a, b):
        ps = nl.zeros((a.shape[1], b.shape[1]), nl.float32, buffer=nl.psum)
        ps += nisa.nc_matmul(to_sbuf(a), to_sbuf(b))
        return to_hbm(nl.copy(ps, dtype=nl.float16)), to_hbm(nl.copy(to_sbuf(a)))

    a, b = rand(32, 16, seed=10), rand(32, 24, seed=11)
    run = nkisim.run_kernel(kernel, (a, b), {})
    out16, same = run.outputs
    assert out16.dtype == np.float16
    np.testing.assert_allclose(out16, (a.T.astype(np.float64) @ b).astype(np.float16), rtol=1e-3, atol=1e-3)
    np.testing.assert_array_equal(same, a)
    copies = [r for r in run.trace if r.opcode == "tensor_copy"]
    assert [(c.reads[0].buffer, c.engine) for c in copies] == [("psum", Engine.SCALAR), ("sbuf", Engine.VECTOR)]


def test_nl_copy_is_bit_exact_for_same_dtype_and_takes_src_keyword():
    # nl.copy is also the activation identity op code; called on a tile it must be a plain
    # copy (tensor_copy), not an fp32 round trip that loses int32 values above 2**24
    @nki.jit
    def kernel(a):
        return to_hbm(nl.copy(to_sbuf(a))), to_hbm(nl.copy(src=to_sbuf(a), dtype=nl.float32))

    a = np.array([[2**24 + 1, -(2**30) - 3], [7, 2**31 - 1]], np.int32)
    same, as_float = nki.baremetal(kernel)(a)
    assert same.dtype == np.int32
    np.testing.assert_array_equal(same, a)
    np.testing.assert_array_equal(as_float, a.astype(np.float32))


def test_nl_load_and_store():
    @nki.jit
    def kernel(a):
        t = nl.load(a)
        t16 = nl.load(a[0:4, :], dtype=nl.float16)
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.hbm)
        nl.store(out, value=nisa.tensor_scalar(t, nl.add, 1.0))
        out16 = nl.ndarray(t16.shape, nl.float16, buffer=nl.hbm)
        nl.store(out16, t16)
        ps = nl.zeros(a.shape, nl.float32, buffer=nl.psum)
        ps[...] = t
        outp = nl.ndarray(a.shape, a.dtype, buffer=nl.hbm)
        nl.store(outp, ps)                           # PSUM value: an extra copy first
        return out, out16, outp

    a = rand(8, 16, seed=12)
    run = nkisim.run_kernel(kernel, (a,), {})
    out, out16, outp = run.outputs
    np.testing.assert_array_equal(out, a + np.float32(1))
    np.testing.assert_array_equal(out16, a[:4].astype(np.float16))
    np.testing.assert_array_equal(outp, a)
    ops = [r.opcode for r in run.trace]
    assert ops[-2:] == ["tensor_copy", "dma_copy"]
    assert ops[0] == "dma_copy" and run.trace[0].engine is Engine.DMA


def test_nl_load_transpose2d():
    @nki.jit
    def kernel(a):
        return to_hbm(nl.load_transpose2d(a))

    a = rand(24, 40, seed=13)
    np.testing.assert_array_equal(nki.baremetal(kernel)(a), a.T)


def test_nl_transpose_of_2d_tile():
    @nki.jit
    def kernel(a):
        t = nl.transpose(to_sbuf(a))
        kernel.buffer = t.buffer
        return to_hbm(nl.copy(t))

    a = rand(20, 30, seed=14)
    np.testing.assert_array_equal(nki.baremetal(kernel)(a), a.T)
    assert kernel.buffer is nl.psum


@pytest.mark.parametrize("shape,error", [((4, 2, 2), errors.ShapeError), ((8, 129), errors.HardwareLimitError)])
def test_nl_transpose_rejects_rank_3_and_dims_over_128(shape, error):
    @nki.jit
    def kernel(a):
        return to_hbm(nl.copy(nl.transpose(to_sbuf(a))))

    with pytest.raises(error):
        nki.baremetal(kernel)(np.ones(shape, np.float32))


@pytest.mark.parametrize("transpose_x", [False, True])
def test_nl_matmul(transpose_x):
    @nki.jit
    def kernel(x, y):
        res = nl.matmul(to_sbuf(x), to_sbuf(y), transpose_x=transpose_x)
        kernel.res = (res.buffer, res.dtype)
        return to_hbm(nl.copy(res))

    r = np.random.default_rng(15)
    m, k, n = 48, 64, 100
    x = r.standard_normal((k, m) if transpose_x else (m, k)).astype(np.float32)
    y = r.standard_normal((k, n)).astype(np.float32)
    out = nki.baremetal(kernel)(x, y)
    expected = (x.T if transpose_x else x).astype(np.float64) @ y
    assert out.shape == (m, n)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    assert kernel.res == (nl.psum, np.float32)


def test_nl_broadcast_to_and_tensor_broadcast_to():
    @nki.jit
    def kernel(col, row):
        c = to_sbuf(col)                               # (P, 1)
        r = to_sbuf(row)                               # (1, F)
        a = nl.broadcast_to(c, shape=(col.shape[0], row.shape[1]))
        b = r.broadcast_to((col.shape[0], row.shape[1]))
        same = nl.broadcast_to(c, shape=c.shape)
        kernel.same = same is c
        return to_hbm(a), to_hbm(b)

    col = rand(16, 1, seed=16)
    row = rand(1, 12, seed=17)
    a, b = nki.baremetal(kernel)(col, row)
    np.testing.assert_array_equal(a, np.broadcast_to(col, (16, 12)))
    np.testing.assert_array_equal(b, np.broadcast_to(row, (16, 12)))
    assert kernel.same


def test_device_print_writes_to_stdout(capsys):
    @nki.jit
    def kernel(a):
        t = to_sbuf(a)
        assert nl.device_print("tile_value", t) is None
        return to_hbm(t)

    a = np.array([[1.5, -2.0], [3.25, 4.0]], np.float32)
    run = nkisim.run_kernel(kernel, (a,), {})
    printed = capsys.readouterr().out
    assert "tile_value" in printed
    for v in ("1.5", "-2.", "3.25", "4."):
        assert v in printed
    assert run.printed and run.printed[0].startswith("tile_value")


# ----- iterators -------------------------------------------------------------------------------------------

def test_ranges_give_python_ints():
    seen = {}

    @nki.jit
    def kernel(a):
        seen["affine"] = list(nl.affine_range(3))
        seen["sequential"] = list(nl.sequential_range(1, 4))
        seen["static"] = list(nl.static_range(2))
        seen["float_arg"] = list(nl.affine_range(8 / 4))
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.hbm)
        t = to_sbuf(a)
        for i in nl.affine_range(a.shape[1]):
            if i % 2 == 0:                              # Python control flow on the index
                nisa.dma_copy(dst=out[:, i:i + 1], src=t[:, i:i + 1])
            else:
                nisa.dma_copy(dst=out[:, i:i + 1], src=nisa.tensor_scalar(t[:, i:i + 1], nl.multiply, -1.0))
        return out

    a = rand(4, 6, seed=18)
    out = nki.baremetal(kernel)(a)
    assert seen == {"affine": [0, 1, 2], "sequential": [1, 2, 3], "static": [0, 1], "float_arg": [0, 1]}
    assert all(type(i) is int for v in seen.values() for i in v)
    np.testing.assert_array_equal(out, a * np.where(np.arange(6) % 2 == 0, 1, -1).astype(np.float32))


def test_device_print_with_a_mask_prints_only_the_elements_it_keeps(capsys):
    """The reference: mask "controls whether/how this instruction is executed". A masked print
    shows the elements the predicate keeps and marks the others, so nothing is dropped silently."""
    @nki.jit
    def kernel(a):
        t = to_sbuf(a)
        i_p, i_f = nl.mgrid[0:4, 0:3]
        nl.device_print("top rows", t, mask=(i_p < 2))
        return to_hbm(t)

    a = (np.arange(12, dtype=np.float32) + 100).reshape(4, 3)
    run = nkisim.run_kernel(kernel, (a,), {})
    text = run.printed[0]
    assert text.startswith("top rows")
    for kept in ("100.0", "105.0"):
        assert kept in text
    for left_out in ("106.0", "111.0"):
        assert left_out not in text
    assert text.count("--") == 6


def test_device_print_mask_of_a_value_that_is_no_tile_is_refused():
    @nki.jit
    def kernel(a):
        t = to_sbuf(a)
        i_p = nl.arange(4)[:, None]
        nl.device_print("count", 3, mask=(i_p < 2))
        return to_hbm(t)

    with pytest.raises(errors.UnsupportedOperationError, match="masks the elements of a tile"):
        nki.baremetal(kernel)(rand(4, 3))


# ----- indexing --------------------------------------------------------------------------------------------

def test_mgrid_even_odd_column_split_reads_and_interleaving_writes():
    @nki.jit
    def kernel(a):
        p, f = a.shape
        t = to_sbuf(a)
        i_p, i_f = nl.mgrid[0:p, 0:f // 2]
        even = nisa.tensor_copy(t[i_p, 2 * i_f])
        odd = nisa.tensor_copy(t[i_p, 2 * i_f + 1])
        # write them back swapped: odd columns into even positions and vice versa
        swapped = nl.ndarray((p, f), a.dtype, buffer=nl.sbuf)
        swapped[i_p, 2 * i_f] = odd
        swapped[i_p, 2 * i_f + 1] = even
        grid = nl.mgrid[0:p, 0:f]
        rev = nl.ndarray((p, f), a.dtype, buffer=nl.sbuf)
        rev[grid.p, grid.x] = t[grid.p, f - 1 - grid.x]
        return to_hbm(even), to_hbm(odd), to_hbm(swapped), to_hbm(rev)

    a = rand(8, 10, seed=19)
    even, odd, swapped, rev = nki.baremetal(kernel)(a)
    np.testing.assert_array_equal(even, a[:, 0::2])
    np.testing.assert_array_equal(odd, a[:, 1::2])
    expected = np.empty_like(a)
    expected[:, 0::2], expected[:, 1::2] = a[:, 1::2], a[:, 0::2]
    np.testing.assert_array_equal(swapped, expected)
    np.testing.assert_array_equal(rev, a[:, ::-1])


def test_arange_advanced_indexing():
    @nki.jit
    def kernel(a):
        p, f = a.shape
        i_p = nl.arange(p)[:, None]
        i_f = nl.arange(f // 2)[None, :]
        first_half = nisa.tensor_copy(to_sbuf(a)[i_p, i_f])
        # advanced indexing on the HBM side of a DMA: every other row
        rows = nl.ndarray((p // 2, f), a.dtype, buffer=nl.sbuf)
        j_p = nl.arange(p // 2)[:, None]
        j_f = nl.arange(f)[None, :]
        nisa.dma_copy(dst=rows, src=a[2 * j_p, j_f])
        return to_hbm(first_half), to_hbm(rows)

    a = rand(8, 6, seed=20)
    first_half, rows = nki.baremetal(kernel)(a)
    np.testing.assert_array_equal(first_half, a[:, :3])
    np.testing.assert_array_equal(rows, a[0::2])


def test_advanced_indexing_through_views_of_a_4d_input_reads_what_numpy_reads():
    """Row loads of a conv input the way a student writes them (`nl.load(X[b, ci * 128 + i_p, row,
    i_f])`), through a reshaped view, a stepped slice and integer indices: the gathered elements
    are found from the view's strides, and must be the ones NumPy's own indexing picks."""
    @nki.jit
    def kernel(x):
        b, c, h, w = x.shape
        i_p = nl.arange(c // 2)[:, None]
        i_f = nl.arange(w)[None, :]
        row = nl.load(x[1, c // 2 + i_p, 3, i_f])                     # the base tensor
        stepped = x[:, :, 1::2, :]                                     # every other row
        odd_row = nl.load(stepped[0, i_p, 2, i_f])
        flat = x.reshape((b, c, h * w))
        i_g = nl.arange(w // 2)[None, :]
        strided = nl.load(flat[1, 2 * i_p + 1, 2 * w + 2 * i_g])     # odd channels, even columns
        bcast = nl.load(x[0, i_p, 0, 0 * i_f + 1])                    # a broadcast column index
        return to_hbm(row), to_hbm(odd_row), to_hbm(strided), to_hbm(bcast)

    x = rand(2, 8, 6, 10, seed=21)
    row, odd_row, strided, bcast = nki.baremetal(kernel)(x)
    np.testing.assert_array_equal(row, x[1, 4:, 3, :])
    np.testing.assert_array_equal(odd_row, x[0, :4, 5, :])
    np.testing.assert_array_equal(strided, x[1, 1::2, 2, 0::2])
    np.testing.assert_array_equal(bcast, np.repeat(x[0, :4, 0, 1:2], 10, axis=1))


def test_an_affine_advanced_subscript_is_the_access_the_slices_spell():
    """`t[i_p, 2 * i_f + 1]` and `t[:, 1::2]` touch the same elements in the same order: the
    program (and so the cost model) sees one and the same strided access, on SBUF tiles and on
    HBM views alike; a reversed or broadcast index, which no slice spells, is strided too."""
    def run(use_mgrid):
        @nki.jit
        def kernel(a):
            p, f = a.shape
            t = to_sbuf(a)
            if use_mgrid:
                i_p, i_f = nl.mgrid[0:p, 0:f // 2]
                views = [t[i_p, 2 * i_f + 1], t[i_p, f - 1 - 2 * i_f], t[i_p, 0 * i_f + 3]]
                rows = a.reshape((p // 2, 2, f))[nl.arange(p // 2)[:, None], 1, nl.arange(f)[None, :]]
            else:
                views = [t[:, 1::2]]
                rows = a.reshape((p // 2, 2, f))[:, 1, :]
            tiles = [nl.load(rows)] + [nisa.tensor_copy(v) for v in views]
            return tuple(to_hbm(v) for v in tiles)

        a = rand(8, 10, seed=22)
        done = nkisim.run_kernel(kernel, (a,), {})
        reads = [rec.reads[0] for rec in done.trace[1:] if rec.writes and rec.writes[0].buffer != "hbm"]
        return a, [(r.buffer, r.start, tuple(r.shape), r.strides) for r in reads], \
            [r.offsets is None for r in reads], [np.asarray(o) for o in done.outputs]

    a, gathered, strided, values = run(True)
    _, sliced, _, _ = run(False)
    assert gathered[:2] == sliced and all(strided)
    for got, want in zip(values, (a[1::2], a[:, 1::2], a[:, ::-1][:, ::2], np.repeat(a[:, 3:4], 5, axis=1))):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("bad", ["mixed", "arange_1d"])
def test_invalid_advanced_indexing_is_an_error(bad):
    @nki.jit
    def kernel(a):
        t = to_sbuf(a)
        if bad == "mixed":
            i_f = nl.arange(2)[None, :]
            view = t[:, i_f]
        else:
            view = t[nl.arange(4), nl.arange(4)]
        return to_hbm(nisa.tensor_copy(view))

    with pytest.raises(errors.IndexingError):
        nki.baremetal(kernel)(rand(4, 4))


def test_basic_indexing_views_write_through_to_parent():
    @nki.jit
    def kernel(a):
        p, f = a.shape
        big = nl.zeros((p, 4 * f), nl.float32, buffer=nl.sbuf)
        t = to_sbuf(a)
        view = big[:, f:2 * f]                         # a view, no copy
        view[...] = t                                  # assignment through the view
        nisa.dma_copy(dst=big[:, 2 * f:3 * f], src=a)  # DMA into a slice
        inner = big[:, 3 * f:4 * f]
        inner[0:2, 0:1] = 7.0                          # view of a view, scalar fill
        return to_hbm(big)

    a = rand(4, 3, seed=21)
    out = nki.baremetal(kernel)(a)
    expected = np.zeros((4, 12), np.float32)
    expected[:, 3:6] = a
    expected[:, 6:9] = a
    expected[0:2, 9] = 7.0
    np.testing.assert_array_equal(out, expected)


def test_integer_index_drops_dim_and_leading_dims_select():
    @nki.jit
    def kernel(x):
        # x: (2, 8, 16) in HBM; x[1, :, 0:5] -> (8, 5); x[:, 1, 0:2] -> (2, 2)
        a = to_sbuf(x[1, :, 0:5])
        b = to_sbuf(x[:, 1, 0:2])
        c = to_sbuf(x[1])
        kernel.shapes = (a.shape, b.shape, c.shape)
        return to_hbm(a), to_hbm(b), to_hbm(c)

    x = rand(2, 8, 16, seed=22)
    a, b, c = nki.baremetal(kernel)(x)
    assert kernel.shapes == ((8, 5), (2, 2), (8, 16))
    np.testing.assert_array_equal(a, x[1, :, 0:5])
    np.testing.assert_array_equal(b, x[:, 1, 0:2])
    np.testing.assert_array_equal(c, x[1])


def test_negative_and_ellipsis_indexing():
    @nki.jit
    def kernel(a):
        t = to_sbuf(a)                                 # (4, 3, 5)
        last = nisa.tensor_copy(t[:, -1])              # (4, 5)
        tail = nisa.tensor_copy(t[..., -2:])           # (4, 3, 2)
        mid = nisa.tensor_copy(t[-2:, ..., 1])         # (2, 3)
        out = nl.zeros(a.shape, nl.float32, buffer=nl.sbuf)
        out[..., 0] = t[..., -1]
        return to_hbm(last), to_hbm(tail), to_hbm(mid), to_hbm(out)

    a = rand(4, 3, 5, seed=23)
    last, tail, mid, out = nki.baremetal(kernel)(a)
    np.testing.assert_array_equal(last, a[:, -1])
    np.testing.assert_array_equal(tail, a[..., -2:])
    np.testing.assert_array_equal(mid, a[-2:, ..., 1])
    expected = np.zeros_like(a)
    expected[..., 0] = a[..., -1]
    np.testing.assert_array_equal(out, expected)


def test_step_slicing_on_a_free_dim():
    @nki.jit
    def kernel(a):
        p, w = a.shape
        t = to_sbuf(a)
        pooled = nisa.tensor_tensor(t[:, 0:w:2], t[:, 1:w:2], op=nl.maximum)
        spread = nl.zeros((p, w), nl.float32, buffer=nl.sbuf)
        spread[:, 1:w:2] = pooled
        return to_hbm(pooled), to_hbm(spread)

    a = rand(8, 10, seed=24)
    pooled, spread = nki.baremetal(kernel)(a)
    np.testing.assert_array_equal(pooled, np.maximum(a[:, 0::2], a[:, 1::2]))
    expected = np.zeros_like(a)
    expected[:, 1::2] = pooled
    np.testing.assert_array_equal(spread, expected)


def test_step_along_partition_dim_and_out_of_bounds_are_errors():
    @nki.jit
    def strided(a):
        return to_hbm(nisa.tensor_copy(to_sbuf(a)[0:4:2, :]))

    @nki.jit
    def oob(a):
        return to_hbm(nisa.tensor_copy(to_sbuf(a)[:, 0:5]))

    with pytest.raises(errors.IndexingError, match="partition"):
        nki.baremetal(strided)(rand(4, 4))
    with pytest.raises(errors.OutOfBoundsError):
        nki.baremetal(oob)(rand(4, 4))


# ----- tensor methods ----------------------------------------------------------------------------------------

def test_reshape_forms_on_tiles_and_hbm():
    @nki.jit
    def kernel(v):
        n = v.shape[0]
        m = v.reshape((4, n // 4))                     # 1-D HBM input -> 2-D view
        t = to_sbuf(m)                                 # (4, 12)
        a = t.reshape((4, 3, 4))
        b = t.reshape(shape=(4, 2, 6))                 # keyword form
        c = t.reshape(4, n / 8, 2.0)                   # integral floats from '/'
        d = a.reshape((4, -1))
        kernel.shapes = (m.shape, a.shape, b.shape, c.shape, d.shape)
        out = nl.ndarray((4, 3, 4), v.dtype, buffer=nl.hbm)
        nisa.dma_copy(dst=out, src=a)
        flat = nl.ndarray((n,), v.dtype, buffer=nl.hbm)
        nisa.dma_copy(dst=flat.reshape((4, n // 4)), src=nisa.tensor_copy(c))
        return out, to_hbm(b), flat

    v = np.arange(48, dtype=np.float32)
    out, b, flat = nki.baremetal(kernel)(v)
    assert kernel.shapes == ((4, 12), (4, 3, 4), (4, 2, 6), (4, 6, 2), (4, 12))
    np.testing.assert_array_equal(out, v.reshape(4, 3, 4))
    np.testing.assert_array_equal(b, v.reshape(4, 2, 6))
    np.testing.assert_array_equal(flat, v)


def test_reshape_of_a_strided_view_and_of_psum():
    @nki.jit
    def kernel(a):
        t = to_sbuf(a)                                 # (4, 12)
        strided = t[:, 0:12:2].reshape((4, 2, 3))      # a non-contiguous view
        ps = nl.zeros((4, 12), nl.float32, buffer=nl.psum)
        ps[...] = t
        reduced = nisa.tensor_reduce(nl.add, ps.reshape((4, 3, 4)), axis=2)
        return to_hbm(nisa.tensor_copy(strided)), to_hbm(reduced)

    a = rand(4, 12, seed=25)
    strided, reduced = nki.baremetal(kernel)(a)
    np.testing.assert_array_equal(strided, a[:, 0::2].reshape(4, 2, 3))
    np.testing.assert_allclose(reduced, a.reshape(4, 3, 4).sum(axis=2), rtol=1e-6)


@pytest.mark.parametrize("shape,match", [((8, 6), "partition"), ((4, 5), "elements"), ((4, 2.5, 2), "integer")])
def test_invalid_reshapes(shape, match):
    @nki.jit
    def kernel(a):
        return to_hbm(nisa.tensor_copy(to_sbuf(a).reshape(shape)))

    with pytest.raises(errors.ShapeError, match=match):
        nki.baremetal(kernel)(rand(4, 12))


def test_expand_dims_astype_view():
    @nki.jit
    def kernel(a):
        t = to_sbuf(a)                                 # (8, 6) fp32
        e = t.expand_dims(2)                           # (8, 6, 1)
        h = t.astype(nl.bfloat16)
        bits = t.view(nl.int32)
        kernel.info = (e.shape, h.dtype, bits.dtype, bits.shape)
        return to_hbm(nisa.tensor_copy(e)), to_hbm(h), to_hbm(bits)

    a = rand(8, 6, seed=26)
    e, h, bits = nki.baremetal(kernel)(a)
    assert kernel.info == ((8, 6, 1), BF16, np.int32, (8, 6))
    np.testing.assert_array_equal(e, a[:, :, None])
    np.testing.assert_array_equal(h, a.astype(BF16))
    np.testing.assert_array_equal(bits, a.view(np.int32))


def test_assert_shape():
    @nki.jit
    def kernel(a):
        t = to_sbuf(a).assert_shape((4, 4))
        to_sbuf(a).assert_shape((4, 5))
        return to_hbm(t)

    with pytest.raises(errors.ShapeError):
        nki.baremetal(kernel)(rand(4, 4))


# ----- operators, in-place updates, assignment ------------------------------------------------------------------

def test_operators_on_tiles():
    @nki.jit
    def kernel(a, b):
        x, y = to_sbuf(a), to_sbuf(b)
        results = [x + y, x - y, x * y, x / y, x > y, x <= y, x == y, x + 1.5, 2.0 * x, 1.0 - x, -x,
                   abs(x), x * 0.5 + y]
        return tuple(to_hbm(r) for r in results)

    r = np.random.default_rng(27)
    a = r.integers(-3, 4, (8, 5)).astype(np.float32)
    b = r.integers(1, 4, (8, 5)).astype(np.float32) * r.choice([-1, 1], (8, 5)).astype(np.float32)
    outs = nki.baremetal(kernel)(a, b)
    expected = [a + b, a - b, a * b, a / b, (a > b), (a <= b), (a == b), a + 1.5, 2 * a, 1 - a, -a,
                np.abs(a), a * 0.5 + b]
    assert len(outs) == len(expected)
    for i, (out, exp) in enumerate(zip(outs, expected)):
        np.testing.assert_array_equal(out, np.asarray(exp, np.float32), err_msg=f"result {i}")


def test_operator_with_python_float_promotes_16bit_to_fp32():
    @nki.jit
    def kernel(a):
        t = to_sbuf(a)
        return to_hbm(t + 1.2), to_hbm(t + t)

    a = rand(4, 4, seed=28, dtype=np.float16)
    plus_scalar, plus_tile = nki.baremetal(kernel)(a)
    assert plus_scalar.dtype == np.float32               # Python float is a weak fp32
    np.testing.assert_array_equal(plus_scalar, a.astype(np.float32) + np.float32(1.2))
    assert plus_tile.dtype == np.float16
    np.testing.assert_array_equal(plus_tile, (a.astype(np.float32) * 2).astype(np.float16))


def test_inplace_updates_into_psum_and_sbuf():
    @nki.jit
    def kernel(a, b):
        x, y = to_sbuf(a), to_sbuf(b)
        acc = nl.zeros(a.shape, nl.float32, buffer=nl.sbuf)
        acc += x
        acc += y
        acc *= 2.0
        acc -= x
        ps = nl.zeros(a.shape, nl.float32, buffer=nl.psum)
        ps += x                                        # tile += tile into PSUM (Vector add)
        ps += 1.0
        half = nl.zeros(a.shape, nl.float16, buffer=nl.sbuf)
        half += x                                      # rounded to fp16 on write
        col = nl.zeros((a.shape[0], 2), nl.float32, buffer=nl.sbuf)
        col[:, 1:2] += x[:, 0:1]                       # through a view
        i_p, i_f = nl.mgrid[0:a.shape[0], 0:a.shape[1] // 2]
        x[i_p, 2 * i_f] += 100.0                       # through an advanced-index view
        return to_hbm(acc), to_hbm(nisa.tensor_copy(ps)), to_hbm(half), to_hbm(col), to_hbm(x)

    a, b = rand(8, 6, seed=29), rand(8, 6, seed=30)
    run = nkisim.run_kernel(kernel, (a, b), {})
    acc, ps, half, col, x = run.outputs
    expected_x = a.copy()
    expected_x[:, 0::2] += np.float32(100)
    np.testing.assert_array_equal(x, expected_x)
    np.testing.assert_allclose(acc, (a + b) * 2 - a, rtol=1e-6)
    np.testing.assert_allclose(ps, a + 1, rtol=1e-6)
    assert half.dtype == np.float16
    np.testing.assert_array_equal(half, a.astype(np.float16))
    np.testing.assert_array_equal(col, np.stack([np.zeros(8, np.float32), a[:, 0]], axis=1))
    # no Tensor Engine instruction here: += of tiles are Vector-engine instructions
    assert Engine.TENSOR not in {r.engine for r in run.trace}


def test_psum_accumulation_of_matmuls_with_plus_equals():
    @nki.jit
    def kernel(a, b):
        k_tiles = a.shape[0] // 32
        ps = nl.zeros((a.shape[1], b.shape[1]), nl.float32, buffer=nl.psum)
        for k in nl.sequential_range(k_tiles):
            ps += nisa.nc_matmul(to_sbuf(a[k * 32:(k + 1) * 32]), to_sbuf(b[k * 32:(k + 1) * 32]))
        return to_hbm(nl.copy(ps))

    a, b = rand(96, 16, seed=31), rand(96, 40, seed=32)
    run = nkisim.run_kernel(kernel, (a, b), {})
    np.testing.assert_allclose(run.outputs, a.T.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    assert [r.accumulate for r in run.trace if r.opcode == "nc_matmul"] == [True] * 3


def test_assigning_instruction_results_into_slices_of_a_larger_buffer():
    @nki.jit
    def kernel(a):
        p, f = a.shape
        t = to_sbuf(a)
        big = nl.ndarray((p, 3 * f), nl.float32, buffer=nl.sbuf)
        for j in nl.affine_range(3):
            big[:, j * f:(j + 1) * f] = nisa.tensor_scalar(t, nl.multiply, float(j + 1))
        return to_hbm(big)

    a = rand(8, 5, seed=33)
    run = nkisim.run_kernel(kernel, (a,), {})
    np.testing.assert_array_equal(run.outputs, np.concatenate([a, 2 * a, 3 * a], axis=1))
    # each result is written straight into the slice: no extra copies
    assert [r.opcode for r in run.trace].count("tensor_copy") == 0
    assert [r.opcode for r in run.trace].count("tensor_scalar") == 3


def test_assignment_broadcasts_value_and_rejects_smaller_destination():
    @nki.jit
    def ok(a):
        big = nl.ndarray((a.shape[0], 6), nl.float32, buffer=nl.sbuf)
        big[...] = to_sbuf(a)[:, 0:1]                  # (P, 1) spread over (P, 6)
        return to_hbm(big)

    @nki.jit
    def bad(a):
        small = nl.ndarray((a.shape[0], 1), nl.float32, buffer=nl.sbuf)
        small[...] = to_sbuf(a)
        return to_hbm(small)

    a = rand(4, 3, seed=34)
    np.testing.assert_array_equal(nki.baremetal(ok)(a), np.repeat(a[:, 0:1], 6, axis=1))
    with pytest.raises(errors.ShapeError):
        nki.baremetal(bad)(a)


# ----- ops as functions and op codes ---------------------------------------------------------------------------

def test_alu_ops_callable_as_functions():
    @nki.jit
    def kernel(a, b):
        x, y = to_sbuf(a), to_sbuf(b)
        return (to_hbm(nl.add(x, y)), to_hbm(nl.exp(x)), to_hbm(nl.max(x, axis=1)),
                to_hbm(nl.sum(x, axis=1, keepdims=True)), to_hbm(nl.maximum(x, 0.0)),
                to_hbm(nl.multiply(x, y, dtype=nl.bfloat16)), to_hbm(nl.mean(x, axis=1)),
                to_hbm(nl.negative(x)), to_hbm(nl.where(x > y, x, y)))

    a, b = rand(8, 6, seed=35), rand(8, 6, seed=36)
    outs = nki.baremetal(kernel)(a, b)
    add, ex, mx, sm, relu, mul16, mean, neg, where = outs
    np.testing.assert_array_equal(add, a + b)
    np.testing.assert_allclose(ex, np.exp(a.astype(np.float64)), rtol=1e-6)
    np.testing.assert_array_equal(mx, a.max(axis=1))
    np.testing.assert_allclose(sm, a.sum(axis=1, keepdims=True), rtol=1e-6)
    np.testing.assert_array_equal(relu, np.maximum(a, 0))
    assert mul16.dtype == BF16
    np.testing.assert_array_equal(mul16, (a * b).astype(BF16))
    np.testing.assert_allclose(mean, a.mean(axis=1), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(neg, -a)
    np.testing.assert_array_equal(where, np.maximum(a, b))


@pytest.mark.parametrize("np_op,nl_op", [(np.add, nl.add), (np.maximum, nl.maximum), (np.multiply, nl.multiply),
                                         (np.subtract, nl.subtract), (np.minimum, nl.minimum)])
def test_numpy_ufuncs_accepted_as_op_codes(np_op, nl_op):
    @nki.jit
    def kernel(a, b):
        x, y = to_sbuf(a), to_sbuf(b)
        r1 = nisa.tensor_tensor(x, y, op=np_op)
        r2 = nisa.tensor_scalar(x, np_op, 0.5)
        r3 = nisa.tensor_reduce(np_op, x, axis=1) if np_op is not np.subtract else nisa.tensor_copy(x[:, 0])
        return to_hbm(r1), to_hbm(r2), to_hbm(r3)

    a, b = rand(8, 6, seed=37), rand(8, 6, seed=38)
    r1, r2, r3 = nki.baremetal(kernel)(a, b)
    np.testing.assert_array_equal(r1, np_op(a, b))
    np.testing.assert_array_equal(r2, np_op(a, np.float32(0.5)))
    if np_op is not np.subtract:
        np.testing.assert_allclose(r3, np_op.reduce(a, axis=1), rtol=1e-6)


def test_non_nki_callable_is_rejected_as_op():
    import math

    @nki.jit
    def kernel(a):
        t = to_sbuf(a)
        return to_hbm(nisa.tensor_scalar(t, math.sin, 1.0))

    with pytest.raises(errors.UnsupportedOperationError):
        nki.baremetal(kernel)(rand(4, 4))


def test_block_dimension_allocation_warns():
    @nki.jit
    def kernel(a):
        blocks = nl.ndarray((2, nl.par_dim(a.shape[0]), a.shape[1]), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=blocks[1], src=a)
        return to_hbm(nisa.tensor_copy(blocks[1]))

    a = rand(4, 4, seed=39)
    with pytest.warns(nl.BlockDimensionWarning):
        out = nki.baremetal(kernel)(a)
    np.testing.assert_array_equal(out, a)
    with pytest.raises(errors.ShapeError):
        nkisim.run_kernel(kernel, (a,), {}, settings=SimSettings(block_dims_are_errors=True))
