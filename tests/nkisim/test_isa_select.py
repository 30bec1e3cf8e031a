"""Selection on the Vector engine in both dialects against NumPy: tensor_copy_predicated (dst
kept where the predicate is false), range_select and select_reduce (selecting, and reducing
their maximum through the accumulator registers), and dropout (nkisim's seeded draw: the kept
fraction and the kept values). Each program survives encode / decode / validate and executes
to the same values; what the reference forbids is refused."""
import ml_dtypes
import numpy as np
import pytest

import nkisim
from nkisim import cost, errors
from nkisim import program as programs
from nkisim.cost.rules import COST_RULES
from nkisim.execute import execute
from nkisim.program import ProgramError
from nkisim.runtime import ArgSpec, trace_kernel
from nkisim.settings import HardwareLimits, SimSettings

nkisim.install()

import neuronxcc.nki as lnki  # noqa: E402
import neuronxcc.nki.isa as lisa  # noqa: E402
import neuronxcc.nki.language as lnl  # noqa: E402
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402
from kernel_helpers import lload, load, lstore, store  # noqa: E402

F32, BF16 = np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16)
FP32_MIN = np.finfo(np.float32).min


def rng(seed):
    return np.random.default_rng(seed)


def specs(args):
    """What tracing sees: shapes and dtypes of the arrays, the scalars themselves."""
    return [ArgSpec(a.shape, a.dtype) if isinstance(a, np.ndarray) else a for a in args]


def arrays(args):
    return [a for a in args if isinstance(a, np.ndarray)]


def round_trip(kernel, args):
    """The program through bytes and validation, executed: its outputs."""
    program, _ = trace_kernel(kernel, specs(args), {})
    again = programs.decode(programs.encode(program))
    programs.validate(again, HardwareLimits(), arrays(args))
    return execute(again, arrays(args)).outputs


def records(kernel, args, opcode):
    run = nkisim.run_kernel(kernel, tuple(args), {})
    return run, [r for r in run.program.records if r.opcode == opcode]


# ----- tensor_copy_predicated ---------------------------------------------------------------------

@nki.jit
def predicated_copy(old, src, predicate, reverse):
    dst = load(old)
    nisa.tensor_copy_predicated(dst=dst, src=load(src), predicate=load(predicate), reverse_pred=reverse)
    return store(dst)


@lnki.jit
def legacy_predicated_copy(old, src, predicate):
    dst = lload(old)
    lisa.tensor_copy_predicated(src=lload(src), dst=dst, predicate=lload(predicate))
    return lstore(dst)


@nki.jit
def predicated_fill(old, predicate):
    dst = load(old)
    nisa.tensor_copy_predicated(dst=dst, src=7, predicate=load(predicate))
    return store(dst)


@nki.jit
def predicated_copy_other_rank(old, src, predicate):
    """src (P, 8, 8) into dst (P, 64): equal elements per partition, as documented."""
    dst = load(old)
    nisa.tensor_copy_predicated(dst=dst, src=load(src), predicate=load(predicate))
    return store(dst)


def copy_inputs(dtype=F32):
    old = rng(1).standard_normal((128, 64)).astype(dtype)
    src = rng(2).standard_normal((128, 64)).astype(dtype)
    predicate = rng(3).integers(0, 3, (128, 64)).astype(np.uint8)    # 0, 1 and 2: nonzero is true
    return old, src, predicate


@pytest.mark.parametrize("reverse", [False, True])
def test_predicated_copy_keeps_dst_where_the_predicate_is_false(reverse):
    old, src, predicate = copy_inputs()
    want = np.where((predicate != 0) != reverse, src, old)
    np.testing.assert_array_equal(predicated_copy(old, src, predicate, reverse), want)
    np.testing.assert_array_equal(round_trip(predicated_copy, (old, src, predicate, reverse)), want)
    if not reverse:
        np.testing.assert_array_equal(legacy_predicated_copy(old, src, predicate), want)
        np.testing.assert_array_equal(round_trip(legacy_predicated_copy, (old, src, predicate)), want)


def test_the_predicated_copy_reads_the_dst_it_writes_so_program_order_keeps_the_old_values():
    old, src, predicate = copy_inputs()
    run, (rec,) = records(predicated_copy, (old, src, predicate, False), "tensor_copy_predicated")
    assert rec.writes[0].alloc_id in {r.alloc_id for r in rec.reads}
    run, (legacy,) = records(legacy_predicated_copy, (old, src, predicate), "tensor_copy_predicated")
    assert legacy.writes[0].alloc_id in {r.alloc_id for r in legacy.reads}


def test_predicated_copy_of_a_scalar_and_between_ranks():
    old = rng(4).integers(-50, 50, (128, 64)).astype(np.int32)
    _, _, predicate = copy_inputs()
    np.testing.assert_array_equal(predicated_fill(old, predicate), np.where(predicate != 0, 7, old))
    f_old, f_src, _ = copy_inputs(BF16)
    src3 = f_src.reshape(128, 8, 8)
    np.testing.assert_array_equal(predicated_copy_other_rank(f_old, src3, predicate),
                                  np.where(predicate != 0, f_src, f_old))


def test_predicated_copy_costs_twice_as_much_with_src_and_predicate_both_in_sbuf():
    """SDK 2.26 reference: max(MIN_II, 2N) cycles from SBUF, max(MIN_II, N) with one in PSUM."""

    @nki.jit
    def psum_src(old, src, predicate):
        dst = load(old)
        in_psum = nl.ndarray(src.shape, src.dtype, buffer=nl.psum)
        nisa.tensor_copy(dst=in_psum, src=load(src))
        nisa.tensor_copy_predicated(dst=dst, src=in_psum, predicate=load(predicate))
        return store(dst)

    old, src, predicate = (np.zeros((128, 512), F32), np.ones((128, 512), F32), np.ones((128, 512), np.uint8))
    _, (sbuf,) = records(predicated_copy, (old, src, predicate, False), "tensor_copy_predicated")
    run, (psum,) = records(psum_src, (old, src, predicate), "tensor_copy_predicated")
    np.testing.assert_array_equal(run.outputs, src)
    rule = COST_RULES["tensor_copy_predicated"]
    p = cost.DEFAULT_PARAMS
    overhead = p.dve_overhead_cycles / p.dve_ghz
    assert rule(sbuf, p).ns - overhead == pytest.approx(2 * (rule(psum, p).ns - overhead))


@pytest.mark.parametrize("body, error, words", [
    (lambda d, s, p: nisa.tensor_copy_predicated(dst=d, src=s, predicate=s), errors.UnsupportedOperationError,
     "predicate of 'tensor_copy_predicated' is float32"),
    (lambda d, s, p: nisa.tensor_copy_predicated(dst=d, src=p, predicate=p), errors.UnsupportedOperationError,
     "must share a dtype"),
    (lambda d, s, p: nisa.tensor_copy_predicated(dst=d, src=s[:, 0:32], predicate=p), errors.ShapeError,
     "as many elements per partition"),
    (lambda d, s, p: nisa.tensor_copy_predicated(dst=d, src=1.5, predicate=p.reshape((128, 64))[:, :]),
     None, None),
    (lambda d, s, p: nisa.tensor_copy_predicated(dst=d, src=s, predicate=p, reverse_pred=1),
     errors.ArgumentError, "True or False"),
], ids=["float-predicate", "dtype", "elements", "scalar-ok", "reverse-flag"])
def test_predicated_copy_refuses_what_the_reference_forbids(body, error, words):
    @nki.jit
    def kernel(a, p):
        d, s = load(a), load(a)
        body(d, s, load(p))
        return store(d)
    a, p = np.ones((128, 64), F32), np.ones((128, 64), np.uint8)
    if error is None:
        np.testing.assert_array_equal(kernel(a, p), np.full_like(a, 1.5))
        return
    with pytest.raises(error, match=words):
        kernel(a, p)


def test_predicated_copy_refuses_src_and_predicate_both_in_psum():
    @nki.jit
    def kernel(a):
        s = nl.ndarray(a.shape, a.dtype, buffer=nl.psum)
        p = nl.ndarray(a.shape, nl.uint32, buffer=nl.psum)
        nisa.tensor_copy(dst=s, src=load(a))
        nisa.memset(dst=p, value=1)
        d = load(a)
        nisa.tensor_copy_predicated(dst=d, src=s, predicate=p)
        return store(d)
    with pytest.raises(errors.MemorySpaceError, match="both in PSUM"):
        kernel(np.ones((128, 64), F32))


# ----- range_select -------------------------------------------------------------------------------

@nki.jit
def ranged(x, lo, hi):
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    best = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.range_select(dst=out, on_true_tile=load(x), comp_op0=nl.greater_equal, comp_op1=nl.less,
                      bound0=load(lo), bound1=load(hi), reduce_res=best, range_start=3)
    return store(out), store(best)


@lnki.jit
def legacy_ranged(x, lo, hi):
    best = lnl.ndarray((x.shape[0], 1), lnl.float32, buffer=lnl.sbuf)
    out = lisa.range_select(on_true_tile=lload(x), comp_op0=np.greater_equal, comp_op1=np.less, bound0=lload(lo),
                            bound1=lload(hi), reduce_res=best, range_start=3)
    return lstore(out), lstore(best)


def range_inputs():
    x = rng(5).standard_normal((128, 64)).astype(F32)
    lo = rng(6).integers(0, 40, (128, 1)).astype(F32)
    hi = lo + rng(7).integers(0, 30, (128, 1)).astype(F32)
    hi[0] = lo[0]                               # an empty range: the whole row is FP32_MIN
    return x, lo, hi


def range_expected(x, lo, hi, start=3):
    index = start + np.arange(x.shape[1], dtype=F32)
    selected = np.where((index >= lo) & (index < hi), x, FP32_MIN)
    return selected, selected.max(axis=1, keepdims=True)


def test_range_select_selects_by_the_free_index_and_reduces_its_maximum():
    args = range_inputs()
    want, best = range_expected(*args)
    for kernel in (ranged, legacy_ranged):
        out, got_best = kernel(*args)
        np.testing.assert_array_equal(out, want)
        np.testing.assert_array_equal(got_best, best)
        assert got_best[0, 0] == FP32_MIN
        again_out, again_best = round_trip(kernel, args)
        np.testing.assert_array_equal(again_out, want)
        np.testing.assert_array_equal(again_best, best)


def test_range_select_compares_the_index_in_fp32():
    """range_start + index is an fp32 sum: past 2**24 neighbouring indices round together."""
    x = rng(15).standard_normal((128, 8)).astype(F32)
    bound = np.full((128, 1), 2.0 ** 24, F32)
    out = _range_kernel(comp_op0=nl.equal, comp_op1=nl.equal, range_start=2 ** 24)(x, bound, bound)
    index = np.float32(2 ** 24) + np.arange(8, dtype=F32)      # 2**24 + 1 rounds to 2**24
    np.testing.assert_array_equal(out, np.where(index == bound, x, FP32_MIN))
    assert (out[:, :2] == x[:, :2]).all() and (out[:, 2:] == FP32_MIN).all()


def test_range_select_into_bfloat16_fills_with_minus_infinity():
    """The reference: FP32_MIN downcast to a 16-bit dst becomes -inf; reduce_res stays fp32."""

    @nki.jit
    def kernel(x, lo, hi):
        out = nl.ndarray(x.shape, nl.bfloat16, buffer=nl.sbuf)
        best = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
        nisa.range_select(dst=out, on_true_tile=load(x), comp_op0=nl.greater_equal, comp_op1=nl.less,
                          bound0=load(lo), bound1=load(hi), reduce_res=best)
        return store(out), store(best)
    x, lo, hi = range_inputs()
    want, best = range_expected(x.astype(BF16).astype(F32), lo, hi, start=0)
    out, got_best = kernel(x.astype(BF16), lo, hi)
    np.testing.assert_array_equal(out.astype(F32), np.where(want == FP32_MIN, -np.inf, want))
    np.testing.assert_array_equal(got_best, best)


@nki.jit
def chained(x, lo, hi, predicate):
    """range_select on the left half starts the chain (reset_reduce, nothing written out),
    select_reduce on the right half continues it and writes the maximum of both."""
    half = x.shape[1] // 2
    left = nl.ndarray((x.shape[0], half), nl.float32, buffer=nl.sbuf)
    right = nl.ndarray((x.shape[0], half), nl.float32, buffer=nl.sbuf)
    best = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    xs = load(x)
    nisa.range_select(dst=left, on_true_tile=xs[:, 0:half], comp_op0=nl.greater_equal, comp_op1=nl.less,
                      bound0=load(lo), bound1=load(hi))
    nisa.select_reduce(dst=right, predicate=load(predicate), on_true=xs[:, half:], on_false=-5.0,
                       reduce_res=best, reduce_cmd=nisa.reduce_cmd.reduce)
    return store(best)


def test_a_reduction_chain_runs_through_range_select_and_select_reduce():
    x, lo, hi = range_inputs()
    predicate = rng(8).integers(0, 2, (128, 32)).astype(np.int16)
    left, _ = range_expected(x[:, :32], lo, hi, start=0)
    right = np.where(predicate != 0, x[:, 32:], F32.type(-5.0))
    want = np.maximum(left.max(axis=1), right.max(axis=1)).reshape(128, 1)
    np.testing.assert_array_equal(chained(x, lo, hi, predicate), want)
    np.testing.assert_array_equal(round_trip(chained, (x, lo, hi, predicate)), want)


def _range_kernel(**overrides):
    @nki.jit
    def kernel(x, lo, hi):
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        kwargs = dict(dst=out, on_true_tile=load(x), comp_op0=nl.greater_equal, comp_op1=nl.less, bound0=load(lo),
                      bound1=load(hi))
        kwargs.update({k: (v(x) if callable(v) and k == "reduce_res" else v) for k, v in overrides.items()})
        nisa.range_select(**kwargs)
        return store(out)
    return kernel


def _column(x):
    return nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)


@pytest.mark.parametrize("overrides, error, words", [
    (dict(on_false_value=0.0), errors.UnsupportedOperationError, "fills with FP32_MIN"),
    (dict(comp_op0=nl.not_equal), errors.UnsupportedOperationError, "comp_op0 of 'range_select' must be one of"),
    (dict(reduce_op=nl.add), errors.UnsupportedOperationError, "must be a maximum"),
    (dict(reduce_cmd=nisa.reduce_cmd.idle, reduce_res=_column), errors.UnsupportedOperationError, "idle"),
    (dict(reduce_cmd=nisa.reduce_cmd.load_reduce), errors.UnsupportedOperationError, "no reduce_init"),
    (dict(reduce_cmd=3), errors.ArgumentError, "nisa.reduce_cmd"),
    (dict(range_start="3"), errors.ArgumentError, "range_start"),
    (dict(on_false_value=float(FP32_MIN)), None, None),
], ids=["fill", "not-equal", "add", "idle-with-result", "load-reduce", "raw-enum", "start", "fp32-min-ok"])
def test_range_select_refuses_what_the_hardware_cannot_do(overrides, error, words):
    args = range_inputs()
    kernel = _range_kernel(**overrides)
    if error is None:
        np.testing.assert_array_equal(kernel(*args), range_expected(*args, start=0)[0])
        return
    with pytest.raises(error, match=words):
        kernel(*args)


def test_legacy_range_select_keeps_sdk_2_26s_forced_reset_reduce():
    """2.26's compiler ignored reduce_cmd (NKI 0.3: "range_select now honours reduce_cmd"):
    the default idle still reduces; asking to continue a chain is refused."""
    args = range_inputs()

    @lnki.jit
    def continues(x, lo, hi):
        best = lnl.ndarray((x.shape[0], 1), lnl.float32, buffer=lnl.sbuf)
        out = lisa.range_select(on_true_tile=lload(x), comp_op0=np.greater_equal, comp_op1=np.less,
                                bound0=lload(lo), bound1=lload(hi), reduce_res=best,
                                reduce_cmd=lisa.reduce_cmd.reduce)
        return lstore(out)
    with pytest.raises(errors.UnsupportedOperationError, match="does not honour reduce_cmd"):
        continues(*args)

    @lnki.jit
    def other_fill(x, lo, hi):
        return lstore(lisa.range_select(on_true_tile=lload(x), comp_op0=np.greater_equal, comp_op1=np.less,
                                        bound0=lload(lo), bound1=lload(hi), on_false_value=0.0))
    with pytest.raises(errors.UnsupportedOperationError, match="fills with FP32_MIN"):
        other_fill(*args)


def test_range_select_needs_neuroncore_v3():
    with pytest.raises(errors.UnsupportedOperationError, match="NeuronCore-v3"):
        nkisim.run_kernel(legacy_ranged, range_inputs(), {}, settings=SimSettings(platform="trn1"))


# ----- select_reduce ------------------------------------------------------------------------------

@nki.jit
def selected(x, predicate, fallback, reverse):
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    best = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.select_reduce(dst=out, predicate=load(predicate), on_true=load(x), on_false=load(fallback),
                       reduce_res=best, reduce_cmd=nisa.reduce_cmd.reset_reduce, reverse_pred=reverse)
    return store(out), store(best)


@lnki.jit
def legacy_selected(x, predicate):
    out = lnl.ndarray(x.shape, lnl.float32, buffer=lnl.sbuf)
    lisa.select_reduce(dst=out, predicate=lload(predicate), on_true=lload(x), on_false=-2.5)
    return lstore(out)


def select_inputs():
    x = rng(9).standard_normal((128, 96)).astype(BF16)
    predicate = rng(10).integers(-2, 3, (128, 96)).astype(np.int8)
    fallback = rng(11).standard_normal((128, 1)).astype(F32)
    return x, predicate, fallback


@pytest.mark.parametrize("reverse", [False, True])
def test_select_reduce_selects_and_reduces_in_both_dialects(reverse):
    x, predicate, fallback = select_inputs()
    want = np.where((predicate != 0) != reverse, x.astype(F32), fallback)
    out, best = selected(x, predicate, fallback, reverse)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(best, want.max(axis=1, keepdims=True))
    if not reverse:
        again_out, again_best = round_trip(selected, (x, predicate, fallback, False))
        np.testing.assert_array_equal(again_out, want)
        np.testing.assert_array_equal(again_best, want.max(axis=1, keepdims=True))
        legacy_want = np.where(predicate != 0, x.astype(F32), F32.type(-2.5))
        np.testing.assert_array_equal(legacy_selected(x, predicate), legacy_want)
        np.testing.assert_array_equal(round_trip(legacy_selected, (x, predicate)), legacy_want)


@pytest.mark.parametrize("body, error, words", [
    (lambda o, x, p, i: nisa.select_reduce(dst=o, predicate=p, on_true=i, on_false=0.0),
     errors.UnsupportedOperationError, "may not be int32"),
    (lambda o, x, p, i: nisa.select_reduce(dst=o, predicate=p.reshape((128, 64)), on_true=x, on_false=0.0,
                                           reduce_cmd=nisa.reduce_cmd.load_reduce), errors.UnsupportedOperationError,
     "no reduce_init"),
    (lambda o, x, p, i: nisa.select_reduce(dst=o, predicate=x, on_true=x, on_false=0.0),
     errors.UnsupportedOperationError, "predicate of 'select_reduce' is float32"),
    (lambda o, x, p, i: nisa.select_reduce(dst=o, predicate=p, on_true=x, on_false=x),
     errors.ShapeError, "per-partition vector"),
    (lambda o, x, p, i: nisa.select_reduce(dst=o, predicate=p, on_true=x, on_false=0.0, reduce_op=nl.minimum),
     errors.UnsupportedOperationError, "must be a maximum"),
], ids=["int32-on-true", "load-reduce", "float-predicate", "on-false-tile", "minimum"])
def test_select_reduce_refuses_what_the_reference_forbids(body, error, words):
    @nki.jit
    def kernel(a, p, i):
        o = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        body(o, load(a), load(p), load(i))
        return store(o)
    with pytest.raises(error, match=words):
        kernel(np.ones((128, 64), F32), np.ones((128, 64), np.uint16), np.ones((128, 64), np.int32))


# ----- dropout ------------------------------------------------------------------------------------

@nki.jit
def dropped(x, prob):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dropout(dst=out, data=load(x), prob=prob)
    return store(out)


@nki.jit
def dropped_per_partition(x, prob):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dropout(dst=out, data=load(x), prob=load(prob))
    return store(out)


@lnki.jit
def legacy_dropped(x):
    return lstore(lisa.dropout(lload(x), 0.25))


def kept_fraction_is(out, x, prob):
    """Survivors unchanged, and the zeroed fraction within 5 sigma of prob."""
    kept = out != 0
    np.testing.assert_array_equal(out[kept], x[kept])
    sigma = np.sqrt(prob * (1 - prob) / x.size)
    assert abs((~kept).mean() - prob) <= 5 * sigma + 1e-12


def test_dropout_zeroes_with_the_probability_and_keeps_the_survivors_unscaled():
    x = rng(12).uniform(1.0, 2.0, (128, 512)).astype(F32)     # no zeros of its own
    out = dropped(x, 0.3)
    kept_fraction_is(out, x, 0.3)
    np.testing.assert_array_equal(dropped(x, 0.3), out)              # the same program, the same draw
    np.testing.assert_array_equal(round_trip(dropped, (x, 0.3)), out)
    np.testing.assert_array_equal(dropped(x, 0.0), x)
    np.testing.assert_array_equal(dropped(x, 1.0), np.zeros_like(x))
    legacy = legacy_dropped(x)
    kept_fraction_is(legacy, x, 0.25)
    np.testing.assert_array_equal(round_trip(legacy_dropped, (x,)), legacy)
    ints = rng(13).integers(1, 1000, (128, 512)).astype(np.int32)
    kept_fraction_is(dropped(ints, 0.5), ints, 0.5)


def test_dropout_with_one_probability_per_partition():
    x = rng(14).uniform(1.0, 2.0, (128, 256)).astype(BF16)
    prob = np.repeat(np.array([0.0, 1.0, 0.5, 0.1], F32), 32).reshape(128, 1)
    out = dropped_per_partition(x, prob)
    np.testing.assert_array_equal(out[:32], x[:32])
    np.testing.assert_array_equal(out[32:64], np.zeros_like(x[32:64]))
    kept_fraction_is(out[64:96].astype(F32), x[64:96].astype(F32), 0.5)
    kept_fraction_is(out[96:].astype(F32), x[96:].astype(F32), 0.1)


def test_two_dropouts_draw_apart():
    @nki.jit
    def twice(x):
        a = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        b = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        t = load(x)
        nisa.dropout(dst=a, data=t, prob=0.5)
        nisa.dropout(dst=b, data=t, prob=0.5)
        return store(a), store(b)
    x = np.ones((128, 256), F32)
    a, b = twice(x)
    assert 0.4 < ((a != 0) == (b != 0)).mean() < 0.6      # independent draws agree half the time


@pytest.mark.parametrize("body, error, words", [
    (lambda o, t: nisa.dropout(dst=o, data=t, prob=1.5), errors.UnsupportedOperationError, "between 0 and 1"),
    (lambda o, t: nisa.dropout(dst=o, data=t, prob=True), errors.ArgumentError, "prob of 'dropout'"),
], ids=["prob-range", "bool-prob"])
def test_dropout_refuses_bad_probabilities(body, error, words):
    @nki.jit
    def kernel(a):
        o = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        body(o, load(a))
        return store(o)
    with pytest.raises(error, match=words):
        kernel(np.ones((128, 64), F32))


def test_dropout_keeps_the_dtype_of_integer_data():
    @nki.jit
    def other_dst(a):
        o = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.dropout(dst=o, data=load(a), prob=0.5)
        return store(o)
    with pytest.raises(errors.UnsupportedOperationError, match="must have data's dtype"):
        other_dst(np.ones((128, 64), np.int32))

    @lnki.jit
    def legacy_cast(a):
        return lstore(lisa.dropout(lload(a), 0.5, dtype=np.float32))
    with pytest.raises(errors.UnsupportedOperationError, match="must keep its dtype"):
        legacy_cast(np.ones((128, 64), np.int32))


# ----- forged params are refused at execution -----------------------------------------------------

@pytest.mark.parametrize("kernel, args, opcode, forge", [
    (dropped, (np.ones((128, 64), F32), 0.5), "dropout", {"seed": -1}),
    (dropped, (np.ones((128, 64), F32), 0.5), "dropout", {"seed": "x"}),
    (ranged, range_inputs(), "range_select", {"cmp0": "not_equal"}),
    (ranged, range_inputs(), "range_select", {"start": [1]}),
    (predicated_copy, copy_inputs() + (False,), "tensor_copy_predicated", {"reverse": 1}),
    (predicated_copy, copy_inputs() + (False,), "tensor_copy_predicated", {"src": {"const": "a"}}),
], ids=["negative-seed", "text-seed", "comparison", "start", "reverse", "src"])
def test_forged_params_cannot_execute(kernel, args, opcode, forge):
    program, _ = trace_kernel(kernel, specs(args), {})
    again = programs.decode(programs.encode(program))
    for rec in again.records:
        if rec.opcode == opcode:
            rec.params = {**rec.params, **forge}      # a new dict: decoded records share their params
    with pytest.raises(ProgramError, match="cannot execute"):
        execute(again, arrays(args))
