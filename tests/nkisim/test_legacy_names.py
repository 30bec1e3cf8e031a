"""The SDK 2.26 names the legacy dialect runs on the one instruction table with 2.26's own
signatures: nl.dropout, nl.shared_constant, nl.shared_identity_matrix, nl.atomic_rmw,
nisa.activation_reduce and the nki.compiler decorators. Each against NumPy (masks, odd shapes,
partition offsets), its documented errors, an undocumented keyword refused, and its program
through bytes and validation to the same values."""
import ml_dtypes
import numpy as np
import pytest

import nkisim
from nkisim import errors
from nkisim import program as programs
from nkisim.execute import execute
from nkisim.nki import names
from nkisim.runtime import ArgSpec, trace_kernel
from nkisim.settings import HardwareLimits, SimSettings

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402
import nki as nki06  # noqa: E402
import nki.isa as nisa06  # noqa: E402
import nki.language as nl06  # noqa: E402
from kernel_helpers import lload, load, lstore, store  # noqa: E402

F32, BF16 = np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16)


def rng(seed):
    return np.random.default_rng(seed)


def specs(args):
    return [ArgSpec(a.shape, a.dtype) if isinstance(a, np.ndarray) else a for a in args]


def round_trip(kernel, args):
    """The program through bytes and validation, executed: its outputs."""
    program, _ = trace_kernel(kernel, specs(args), {})
    again = programs.decode(programs.encode(program))
    programs.validate(again, HardwareLimits(), [a for a in args if isinstance(a, np.ndarray)])
    return execute(again, [a for a in args if isinstance(a, np.ndarray)]).outputs


def opcodes(kernel, args):
    program, _ = trace_kernel(kernel, specs(args), {})
    return [r.opcode for r in program.records]


def raises_in_kernel(error, words, body, *args):
    @nki.jit
    def kernel(x):
        body(lload(x))
        return lstore(lload(x))
    with pytest.raises(error, match=words) as caught:
        kernel(*(args or (np.ones((8, 4), F32),)))
    return caught.value


def test_the_names_left_the_not_simulated_tables():
    for name in ("dropout", "shared_constant", "shared_identity_matrix", "atomic_rmw"):
        assert name not in names.LANGUAGE_NOT_SIMULATED and callable(getattr(nl, name))
    assert "activation_reduce" not in names.ISA_NOT_SIMULATED and callable(nisa.activation_reduce)


# ----- nl.dropout(x, rate, *, dtype=None, mask=None) ----------------------------------------------

@nki.jit
def dropped(x, rate):
    """x[32:96] (a partition offset) through nl.dropout, the rest of x copied."""
    t = lload(x)
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    out[...] = nisa.tensor_copy(t)
    out[32:96] = nl.dropout(t[32:96], rate)
    return lstore(out)


def survivors_unscaled(out, x, rate):
    kept = out != 0
    np.testing.assert_array_equal(out[kept], x[kept])
    sigma = np.sqrt(rate * (1 - rate) / x.size)
    assert abs((~kept).mean() - rate) <= 5 * sigma + 1e-12


def test_dropout_zeroes_with_the_rate_at_a_partition_offset_and_round_trips():
    x = rng(1).uniform(1.0, 2.0, (128, 37)).astype(F32)          # no zeros of its own; odd free size
    out = dropped(x, 0.4)
    np.testing.assert_array_equal(out[:32], x[:32])
    np.testing.assert_array_equal(out[96:], x[96:])
    survivors_unscaled(out[32:96], x[32:96], 0.4)
    np.testing.assert_array_equal(round_trip(dropped, (x, 0.4)), out)
    np.testing.assert_array_equal(dropped(x, 0.0), x)
    assert np.all(dropped(x, 1.0)[32:96] == 0)
    assert "dropout" in opcodes(dropped, (x, 0.4))


@nki.jit
def dropped_masked_cast(x):
    out = nl.ndarray(x.shape, nl.float16, buffer=nl.sbuf)
    out[...] = nisa.memset(x.shape, 7.0, nl.float16)
    i_p, i_f = nl.mgrid[0:x.shape[0], 0:x.shape[1]]
    out[i_p, i_f] = nl.dropout(lload(x), 1.0, dtype=nl.float16, mask=(i_f < 5))
    return lstore(out)


def test_dropout_keeps_to_its_mask_and_casts_to_dtype():
    x = rng(2).uniform(1.0, 2.0, (45, 11)).astype(F32)
    out = dropped_masked_cast(x)
    assert out.dtype == np.float16
    assert np.all(out[:, :5] == 0) and np.all(out[:, 5:] == 7.0)
    np.testing.assert_array_equal(round_trip(dropped_masked_cast, (x,)), out)


@nki.jit
def dropped_by_tile(x, rate):
    """A one-partition x with its rate in a [1, 1] tile ("a tile with 1 element")."""
    return lstore(nl.dropout(lload(x), lload(rate)))


def test_dropout_takes_a_one_element_rate_tile():
    x = rng(3).uniform(1.0, 2.0, (1, 4096)).astype(F32)
    survivors_unscaled(dropped_by_tile(x, np.full((1, 1), 0.25, F32)), x, 0.25)
    np.testing.assert_array_equal(dropped_by_tile(x, np.ones((1, 1), F32)), np.zeros_like(x))


@pytest.mark.parametrize("body, error, words", [
    (lambda t: nl.dropout(t, 1.5), errors.UnsupportedOperationError, "rate of nl.dropout is 1.5"),
    (lambda t: nl.dropout(t, True), errors.ArgumentError, "rate of nl.dropout"),
    (lambda t: nl.dropout(t, "0.5"), errors.ArgumentError, "rate of nl.dropout"),
    (lambda t: nl.dropout(t, t[:, 0:1]), errors.ShapeError, "tile with 1 element"),
    (lambda t: nl.dropout(t, t[0:1, 0:1]), errors.NotSimulatedError, "not documented"),
    (lambda t: nl.dropout(t, 0.5, prob=0.5), errors.ArgumentError, "prob"),
    (lambda t: nl.dropout(t, 0.5, name="d"), errors.ArgumentError, "name"),
], ids=["range", "bool", "text", "many-elements", "one-element-many-partitions", "prob-keyword", "name-keyword"])
def test_dropout_refuses_what_2_26_does_not_document(body, error, words):
    raises_in_kernel(error, words, body)


# ----- nisa.activation_reduce(op, data, *, reduce_op, reduce_res, bias=None, scale=1.0, ...) ------

@nki.jit
def activated(x, bias):
    """rows 16..16+n of x (a partition offset), exp(x * 0.5 + bias) and its free-axis sum."""
    t = lload(x)
    n = x.shape[0] - 16
    res = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    out = nisa.activation_reduce(nl.exp, t[16:16 + n], reduce_op=nl.add, reduce_res=res[16:16 + n],
                                 bias=lload(bias)[16:16 + n], scale=0.5, dtype=nl.bfloat16)
    return lstore(out), lstore(res[16:16 + n])


def test_activation_reduce_activates_and_sums_the_free_axis():
    r = rng(4)
    x = r.uniform(-1, 1, (67, 3, 13)).astype(F32)                  # two free axes, both reduced
    bias = r.uniform(-1, 1, (67, 1)).astype(F32)
    act, res = activated(x, bias)
    expected = np.exp(x[16:].astype(np.float64) * 0.5 + bias[16:, :, None])
    assert str(act.dtype) == "bfloat16"
    np.testing.assert_allclose(act.astype(F32), expected, rtol=1e-2)
    np.testing.assert_allclose(res[:, 0], expected.sum(axis=(1, 2)), rtol=1e-5)
    for a, b in zip(round_trip(activated, (x, bias)), (act, res)):
        np.testing.assert_array_equal(a, b)
    assert opcodes(activated, (x, bias)).count("activation") == 1     # "equivalent to nisa.activation"


@nki.jit
def activated_plain(x, bias):
    res = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    out = nisa.activation_reduce(nl.tanh, lload(x), reduce_op=nl.add, reduce_res=res, bias=lload(bias), scale=2.0)
    return lstore(out), lstore(res)


@nki06.jit
def activated_06(x, bias):
    out = nl06.ndarray(x.shape, nl06.float32, buffer=nl06.sbuf)
    res = nl06.ndarray((x.shape[0], 1), nl06.float32, buffer=nl06.sbuf)
    nisa06.activation_reduce(dst=out, op=nl06.tanh, data=load(x), reduce_op=nl06.add, reduce_res=res,
                             bias=load(bias), scale=2.0)
    return store(out), store(res)


def test_activation_reduce_gives_the_same_values_in_both_dialects():
    r = rng(9)
    x = r.uniform(-1, 1, (128, 33)).astype(F32)
    bias = r.uniform(-1, 1, (128, 1)).astype(F32)
    expected = np.tanh(x.astype(np.float64) * 2 + bias)
    for kernel in (activated_plain, activated_06):
        act, res = kernel(x, bias)
        np.testing.assert_allclose(act, expected, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(res[:, 0], expected.sum(axis=1), rtol=1e-5, atol=1e-5)
        for a, b in zip(round_trip(kernel, (x, bias)), (act, res)):
            np.testing.assert_array_equal(a, b)


@nki.jit
def activated_max(x):
    res = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.activation_reduce(nl.copy, lload(x), reduce_op=nl.maximum, reduce_res=res)
    return lstore(res)


def test_activation_reduce_reduces_with_addition_only_on_neuroncore_v2():
    x = rng(5).uniform(-1, 1, (8, 9)).astype(F32)
    np.testing.assert_array_equal(activated_max(x)[:, 0], x.max(axis=1))     # gen3: the op named
    with pytest.raises(errors.UnsupportedOperationError, match="NeuronCore-v2 can only be an addition"):
        nkisim.run_kernel(activated_max, (x,), {}, settings=SimSettings(platform="trn1"))


def _reduce_into(shape, buffer=nl.sbuf):
    return nl.ndarray(shape, nl.float32, buffer=buffer)


@pytest.mark.parametrize("body, error, words", [
    (lambda t: nisa.activation_reduce(nl.exp, t, reduce_op=nl.add, reduce_res=_reduce_into((4, 1))),
     errors.ShapeError, "spans 4 partitions"),
    (lambda t: nisa.activation_reduce(nl.exp, t, reduce_op=nl.add, reduce_res=_reduce_into((8, 2))),
     errors.ShapeError, "one value per partition"),
    (lambda t: nisa.activation_reduce(nl.exp, t, reduce_op=nl.add, reduce_res=1.0),
     errors.ShapeError, "reduce_res"),
    (lambda t: nisa.activation_reduce(nl.exp, t, reduce_op=nl.add, reduce_res=_reduce_into((8, 1), nl.hbm)),
     errors.MemorySpaceError, "reduce_res"),
    (lambda t: nisa.activation_reduce(nl.add, t, reduce_op=nl.add, reduce_res=_reduce_into((8, 1))),
     errors.UnsupportedOperationError, "activation"),
    (lambda t: nisa.activation_reduce(nl.exp, t, reduce_op=nl.add, reduce_res=_reduce_into((8, 1)),
                                      mask=(nl.arange(8)[:, None] < 4)),
     errors.NotSimulatedError, "masked"),
    (lambda t: nisa.activation_reduce(nl.exp, t, nl.add, _reduce_into((8, 1))), errors.ArgumentError, "positional"),
    (lambda t: nisa.activation_reduce(nl.exp, t, reduce_op=nl.add, reduce_res=_reduce_into((8, 1)),
                                      reduce_cmd=nisa.reduce_cmd.reduce), errors.ArgumentError, "reduce_cmd"),
    (lambda t: nisa.activation_reduce(nl.exp, t, reduce_op=nl.add, reduce_res=_reduce_into((8, 1)),
                                      name="a"), errors.ArgumentError, "name"),
], ids=["partitions", "elements", "number", "hbm", "not-an-activation", "mask", "positional", "reduce-cmd", "name"])
def test_activation_reduce_refuses_what_2_26_does_not_document(body, error, words):
    raises_in_kernel(error, words, body)


# ----- nl.shared_constant(constant, dtype=None) and nl.shared_identity_matrix(n, dtype=uint8) -----

TABLE = np.arange(35, dtype=np.int32).reshape(5, 7) * 3


@nki.jit
def constants(x):
    c = nl.shared_constant(TABLE, dtype=nl.float32)
    eye = nl.shared_identity_matrix(n=x.shape[0], dtype=nl.bfloat16)
    default = nl.shared_identity_matrix(3)
    t = lload(x)
    product = nisa.nc_matmul(nl.load(eye), t)                       # the identity as a stationary
    return lstore(nl.load(c)), lstore(nisa.tensor_copy(product)), lstore(nl.load(default))


def test_shared_constants_hold_their_data_in_shared_hbm_and_round_trip():
    x = rng(6).uniform(-1, 1, (19, 23)).astype(BF16)
    c, product, default = constants(x)
    assert c.dtype == F32 and default.dtype == np.uint8
    np.testing.assert_array_equal(c, TABLE.astype(F32))
    np.testing.assert_array_equal(product, x.astype(F32))
    np.testing.assert_array_equal(default, np.eye(3, dtype=np.uint8))
    for a, b in zip(round_trip(constants, (x,)), (c, product, default)):
        np.testing.assert_array_equal(a, b)
    program, _ = trace_kernel(constants, specs((x,)), {})
    embedded = [r for r in program.records if r.opcode == "shared_constant"]
    assert len(embedded) == 3 and all(r.writes[0].buffer == "shared_hbm" for r in embedded)


@pytest.mark.parametrize("body, error, words", [
    (lambda t: nl.shared_constant("table.npy"), errors.ArgumentError, "NumPy array"),
    (lambda t: nl.shared_constant([1, 2, 3]), errors.ArgumentError, "NumPy array"),
    (lambda t: nl.shared_constant(np.zeros(1 << 25, np.float32)), errors.HardwareLimitError, "at most"),
    (lambda t: nl.shared_constant(TABLE, name="c"), errors.ArgumentError, "name"),
    (lambda t: nl.shared_identity_matrix(0), errors.ArgumentError, "positive int"),
    (lambda t: nl.shared_identity_matrix(4.0), errors.ArgumentError, "positive int"),
    (lambda t: nl.shared_identity_matrix(1 << 20), errors.HardwareLimitError, "at most"),
    (lambda t: nl.shared_identity_matrix(4, dst=t), errors.ArgumentError, "dst"),
], ids=["path", "list", "too-large", "name-keyword", "zero", "float", "huge", "dst-keyword"])
def test_shared_constants_refuse_what_2_26_does_not_document(body, error, words):
    raises_in_kernel(error, words, body)


# ----- nl.atomic_rmw(dst, value, op, *, mask=None) ------------------------------------------------

@nki.jit
def accumulated(base, x):
    """base + x[:, 2:9] into rows 5..36 of the output (HBM offsets), then + 1.5 on rows < 20 of it."""
    out = nl.ndarray(base.shape, base.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=lload(base))
    t = lload(x)
    nl.atomic_rmw(out[5:37, 0:7], value=t[:, 2:9], op=np.add)
    i_p, i_f = nl.mgrid[0:32, 0:7]
    nl.atomic_rmw(out[5 + i_p, i_f], 1.5, nl.add, mask=(i_p < 15))
    return out


def test_atomic_rmw_adds_into_hbm_under_its_mask_and_round_trips():
    r = rng(7)
    base = r.uniform(-1, 1, (40, 7)).astype(F32)
    x = r.uniform(-1, 1, (32, 11)).astype(F32)
    out = accumulated(base, x)
    expected = base.copy()
    expected[5:37] += x[:, 2:9]
    expected[5:20] += 1.5
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    np.testing.assert_array_equal(round_trip(accumulated, (base, x)), out)
    assert opcodes(accumulated, (base, x)).count("memset") == 1       # the scalar, as a tile


@pytest.mark.parametrize("body, error, words", [
    (lambda out, t: nl.atomic_rmw(out, t, np.multiply), errors.UnsupportedOperationError, "only np.add"),
    (lambda out, t: nl.atomic_rmw(t, t, np.add), errors.MemorySpaceError, "dst"),
    (lambda out, t: nl.atomic_rmw(out[0:4], t, np.add), errors.ShapeError, "elements"),
    (lambda out, t: nl.atomic_rmw(out, "1", np.add), errors.ShapeError, "tile or a number"),
    (lambda out, t: nl.atomic_rmw(out, t, np.add, dst_rmw_op=np.add), errors.ArgumentError, "dst_rmw_op"),
    (lambda out, t: nl.atomic_rmw(out, t, np.add, engine=nisa.engine.sync), errors.ArgumentError, "engine"),
], ids=["multiply", "sbuf-dst", "sizes", "text", "dst-rmw-op", "engine"])
def test_atomic_rmw_refuses_what_2_26_does_not_document(body, error, words):
    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = lload(x)
        nisa.dma_copy(dst=out, src=t)
        body(out, t)
        return out
    with pytest.raises(error, match=words):
        kernel(np.ones((8, 4), F32))


# ----- nki.compiler decorators ---------------------------------------------------------------------

def copied(x):
    return lstore(lload(x))


def test_compiler_decorators_mark_the_kernel_in_either_order_and_compute_the_same():
    x = rng(8).uniform(-1, 1, (8, 4)).astype(F32)
    documented = nki.compiler.enable_stack_allocator(nki.compiler.skip_middle_end_transformations(nki.jit(copied)))
    reversed_ = nki.compiler.skip_middle_end_transformations(
        nki.compiler.enable_stack_allocator(log_level=10)(nki.jit(copied)))
    forced = nki.compiler.force_auto_alloc()(nki.compiler.force_auto_alloc(nki.jit(copied)))
    for kernel in (documented, reversed_, forced):
        np.testing.assert_array_equal(nki.baremetal(kernel)(x), x)
    assert documented.stack_allocator_log_level == 50 and reversed_.stack_allocator_log_level == 10
    assert forced.force_auto_alloc


def test_enable_stack_allocator_needs_skip_middle_end_transformations():
    alone = nki.compiler.enable_stack_allocator(nki.jit(copied))
    with pytest.raises(errors.KernelContractError, match="must be used together"):
        alone(np.ones((8, 4), F32))


@pytest.mark.parametrize("call, words", [
    (lambda: nki.compiler.enable_stack_allocator(copied, level=10), "level"),
    (lambda: nki.compiler.enable_stack_allocator(log_level="debug"), "log_level"),
    (lambda: nki.compiler.enable_stack_allocator(log_level=-1), "log_level"),
    (lambda: nki.compiler.force_auto_alloc(copied, log_level=10), "log_level"),
    (lambda: nki.compiler.force_auto_alloc(copied, True), "positional"),
    (lambda: nki.compiler.skip_middle_end_transformations(copied, mode="x"), "mode"),
], ids=["stack-keyword", "stack-text-level", "stack-negative-level", "auto-keyword", "auto-positional",
        "skip-keyword"])
def test_compiler_decorators_refuse_undocumented_arguments(call, words):
    with pytest.raises(errors.ArgumentError, match=words):
        call()


# ----- nt.mutable_tensor: a parameter the kernel writes and returns ---------------------------------
def test_a_mutable_tensor_parameter_is_written_and_returned():
    import neuronxcc.nki as lnki
    import neuronxcc.nki.language as lnl
    import neuronxcc.nki.typing as nt

    @lnki.jit
    def accumulate(acc: nt.mutable_tensor, x, scale: "nt.mutable_tensor[128, 4]"):
        lnl.store(acc, lnl.add(lnl.load(acc), lnl.load(x)))
        lnl.store(scale[0:64], lnl.multiply(lnl.load(scale[0:64]), 2.0))
        return acc, scale

    acc, x = np.zeros((128, 4), np.float32), np.arange(512, dtype=np.float32).reshape(128, 4)
    scale = np.ones((128, 4), np.float32)
    got_acc, got_scale = accumulate(acc, x, scale)
    np.testing.assert_array_equal(got_acc, x)
    np.testing.assert_array_equal(got_scale, np.concatenate([np.full((64, 4), 2.0), np.ones((64, 4))]).astype(np.float32))
    assert (acc == 0).all() and (scale == 1).all()            # the caller's arrays are left alone


def test_a_mutable_tensor_not_returned_and_a_plain_parameter_written_are_refused():
    import neuronxcc.nki as lnki
    import neuronxcc.nki.language as lnl
    import neuronxcc.nki.typing as nt
    from nkisim import errors

    @lnki.jit
    def forgets(acc: nt.mutable_tensor):
        out = lnl.ndarray(acc.shape, acc.dtype, buffer=lnl.shared_hbm)
        lnl.store(out, lnl.load(acc))
        return out

    @lnki.jit
    def writes_input(acc):
        lnl.store(acc, lnl.load(acc))
        return acc

    a = np.zeros((128, 4), np.float32)
    with pytest.raises(errors.KernelContractError, match="err_mutable_parameter_not_returned"):
        forgets(a)
    with pytest.raises(errors.KernelContractError, match="read-only"):
        writes_input(a)
