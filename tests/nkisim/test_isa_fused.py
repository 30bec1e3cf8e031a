"""The Vector engine's fused arithmetic and scans (scalar_tensor_tensor, tensor_tensor_scan,
tensor_scalar_reduce, tensor_scalar_cumulative, reciprocal) against NumPy in both dialects,
their accumulator chains, the errors they document, a program's round trip and their costs."""
import ml_dtypes
import numpy as np
import pytest

import nkisim
from nkisim import cost, errors
from nkisim import program as programs
from nkisim.cost.rules import COST_RULES
from nkisim.execute import execute
from nkisim.settings import HardwareLimits

nkisim.install()

import neuronxcc.nki as lnki  # noqa: E402
import neuronxcc.nki.isa as lisa  # noqa: E402
import neuronxcc.nki.language as lnl  # noqa: E402
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402
from kernel_helpers import lload, load, lstore, sbuf, store  # noqa: E402

F32 = np.dtype(np.float32)
BF16 = np.dtype(ml_dtypes.bfloat16)


def rng(seed):
    return np.random.default_rng(seed)


def normal(seed, shape):
    return rng(seed).standard_normal(shape).astype(F32)


def run(kernel, *args):
    return nkisim.run_kernel(kernel, args, {})


# ----- scalar_tensor_tensor ----------------------------------------------------------------------

@lnki.jit
def stt_legacy(a, col, b):
    plain = lisa.scalar_tensor_tensor(data=lload(a), op0=lnl.subtract, operand0=lload(col), op1=lnl.multiply,
                                      operand1=lload(b))
    flipped = lisa.scalar_tensor_tensor(data=lload(a), op0=lnl.subtract, operand0=2.0, reverse0=True,
                                        op1=lnl.subtract, operand1=lload(b), reverse1=True, dtype=lnl.bfloat16)
    return lstore(plain), lstore(flipped)


@nki.jit
def stt_current(a, col, b):
    plain, flipped = sbuf(a.shape), sbuf(a.shape, nl.bfloat16)
    nisa.scalar_tensor_tensor(dst=plain, data=load(a), op0=nl.subtract, operand0=load(col), op1=nl.multiply,
                              operand1=load(b))
    nisa.scalar_tensor_tensor(dst=flipped, data=load(a), op0=nl.subtract, operand0=2.0, op1=nl.subtract,
                              operand1=load(b), reverse0=True, reverse1=True)
    return store(plain), store(flipped)


def test_scalar_tensor_tensor_computes_what_numpy_does_in_both_dialects():
    a, col, b = normal(1, (128, 64)), normal(2, (128, 1)), normal(3, (128, 64))
    want_plain = (a - col) * b
    want_flipped = (b - (np.float32(2.0) - a)).astype(BF16)
    for kernel in (stt_legacy, stt_current):
        plain, flipped = run(kernel, a, col, b).outputs
        np.testing.assert_array_equal(plain, want_plain)
        assert flipped.dtype == BF16
        np.testing.assert_array_equal(flipped, want_flipped)


# ----- tensor_tensor_scan ------------------------------------------------------------------------

def scan_reference(d0, d1, initial, op0, op1, reverse0=False, reverse1=False):
    prev = np.broadcast_to(np.float32(initial) if np.isscalar(initial) else initial[:, 0], d0.shape[:1])
    out = np.empty_like(d0)
    for i in range(d0.shape[1]):
        x = op0(prev, d0[:, i]) if reverse0 else op0(d0[:, i], prev)
        out[:, i] = op1(d1[:, i], x) if reverse1 else op1(x, d1[:, i])
        prev = out[:, i]
    return out


@lnki.jit
def scan_legacy(d0, d1, start):
    decay = lisa.tensor_tensor_scan(lload(d0), lload(d1), lload(start), lnl.multiply, lnl.add)
    flipped = lisa.tensor_tensor_scan(lload(d0), lload(d1), 0.5, lnl.subtract, lnl.subtract, reverse0=True,
                                      reverse1=True)
    return lstore(decay), lstore(flipped)


@nki.jit
def scan_current(d0, d1, start):
    decay, flipped = sbuf(d0.shape), sbuf(d0.shape)
    nisa.tensor_tensor_scan(dst=decay, data0=load(d0), data1=load(d1), initial=load(start), op0=nl.multiply,
                            op1=nl.add)
    nisa.tensor_tensor_scan(dst=flipped, data0=load(d0), data1=load(d1), initial=0.5, op0=nl.subtract,
                            op1=nl.subtract, reverse0=True, reverse1=True)
    return store(decay), store(flipped)


def test_tensor_tensor_scan_runs_the_documented_recurrence_in_both_dialects():
    d0 = rng(4).uniform(0.5, 1.0, (128, 40)).astype(F32)
    d1, start = normal(5, (128, 40)), normal(6, (128, 1))
    want_decay = scan_reference(d0, d1, start, np.multiply, np.add)
    want_flipped = scan_reference(d0, d1, 0.5, np.subtract, np.subtract, True, True)
    for kernel in (scan_legacy, scan_current):
        decay, flipped = run(kernel, d0, d1, start).outputs
        np.testing.assert_array_equal(decay, want_decay)
        np.testing.assert_array_equal(flipped, want_flipped)


# ----- reciprocal --------------------------------------------------------------------------------

@lnki.jit
def reciprocal_legacy(a):
    return lstore(lisa.reciprocal(lload(a))), lstore(lisa.reciprocal(lload(a), dtype=lnl.bfloat16))


@nki.jit
def reciprocal_current(a):
    full, narrow = sbuf(a.shape), sbuf(a.shape, nl.bfloat16)
    nisa.reciprocal(dst=full, data=load(a))
    nisa.reciprocal(narrow, load(a))
    return store(full), store(narrow)


def test_reciprocal_is_fp32_one_over_x_in_both_dialects():
    a = rng(7).uniform(0.1, 10.0, (128, 96)).astype(F32) * rng(8).choice([-1, 1], (128, 96)).astype(F32)
    for kernel in (reciprocal_legacy, reciprocal_current):
        full, narrow = run(kernel, a).outputs
        np.testing.assert_array_equal(full, np.float32(1.0) / a)
        np.testing.assert_array_equal(narrow, (np.float32(1.0) / a).astype(BF16))
        assert [r.engine.name for r in run(kernel, a).program.records if r.opcode == "reciprocal"] == ["VECTOR"] * 2


# ----- tensor_scalar_reduce ----------------------------------------------------------------------

@lnki.jit
def reduce_legacy(a, col):
    total = lnl.ndarray((a.shape[0], 1), lnl.float32, buffer=lnl.sbuf)
    top = lnl.ndarray((a.shape[0], 1), lnl.float32, buffer=lnl.sbuf)
    doubled = lisa.tensor_scalar_reduce(data=lload(a), op0=lnl.multiply, operand0=2.0, reduce_op=lnl.add,
                                        reduce_res=total)
    shifted = lisa.tensor_scalar_reduce(data=lload(a), op0=lnl.add, operand0=lload(col), reduce_op=np.max,
                                        reduce_res=top)
    return lstore(doubled), lstore(total), lstore(shifted), lstore(top)


@nki.jit
def reduce_current(a, col):
    doubled, shifted = sbuf(a.shape), sbuf(a.shape)
    total, top = sbuf((a.shape[0], 1)), sbuf((a.shape[0], 1))
    nisa.tensor_scalar_reduce(dst=doubled, data=load(a), op0=nl.multiply, operand0=2.0, reduce_op=nl.add,
                              reduce_res=total)
    nisa.tensor_scalar_reduce(dst=shifted, data=load(a), op0=nl.add, operand0=load(col), reduce_op=nl.maximum,
                              reduce_res=top)
    return store(doubled), store(total), store(shifted), store(top)


def test_tensor_scalar_reduce_computes_and_reduces_in_both_dialects():
    a, col = normal(9, (128, 80)), normal(10, (128, 1))
    for kernel in (reduce_legacy, reduce_current):
        doubled, total, shifted, top = run(kernel, a, col).outputs
        np.testing.assert_array_equal(doubled, a * 2)
        np.testing.assert_allclose(total, (a * 2).sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(shifted, a + col)
        np.testing.assert_array_equal(top, (a + col).max(axis=1, keepdims=True))


@nki.jit
def three_call_chain(a):
    """Three column blocks, one running sum: only the last call writes reduce_res. Rows 64..127
    run a chain of their own in between, which leaves rows 0..63's registers alone."""
    x, y = load(a), sbuf(a.shape)
    total, other = sbuf((64, 1)), sbuf((64, 1))
    red = nisa.reduce_cmd.reduce
    nisa.tensor_scalar_reduce(dst=y[0:64, 0:32], data=x[0:64, 0:32], op0=nl.add, operand0=1.0, reduce_op=nl.add)
    nisa.tensor_scalar_reduce(dst=y[64:128, :], data=x[64:128, :], op0=nl.add, operand0=1.0, reduce_op=nl.add,
                              reduce_res=other)
    nisa.tensor_scalar_reduce(dst=y[0:64, 32:64], data=x[0:64, 32:64], op0=nl.add, operand0=1.0,
                              reduce_op=nl.add, reduce_res=None, reduce_cmd=red)
    nisa.tensor_scalar_reduce(dst=y[0:64, 64:96], data=x[0:64, 64:96], op0=nl.add, operand0=1.0,
                              reduce_op=nl.add, reduce_cmd=red, reduce_res=total)
    return store(y), store(total), store(other)


def test_a_chain_of_three_calls_carries_the_sum_in_the_accumulator():
    a = normal(11, (128, 96))
    done = run(three_call_chain, a)
    y, total, other = done.outputs
    np.testing.assert_array_equal(y, a + 1)
    np.testing.assert_allclose(total, (a[0:64] + 1).sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(other, (a[64:] + 1).sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-5)
    chain = [r for r in done.program.records if r.opcode == "tensor_scalar_reduce"]
    assert [len(r.writes) for r in chain] == [2, 3, 2, 3]      # the registers, and reduce_res when given
    assert chain[2].params["reduce"]["how"] == "continue"


@nki.jit
def loaded_and_negated(a, col):
    y, res = sbuf(a.shape), sbuf((a.shape[0], 1))
    nisa.tensor_scalar_reduce(dst=y, data=load(a), op0=nl.multiply, operand0=load(col), reduce_op=nl.maximum,
                              reduce_cmd=nisa.reduce_cmd.load_reduce, reduce_init=0.5, reduce_res=res,
                              reduce_res_negate=True)
    return store(res)


@nki.jit
def idle_then_restart(a):
    x, y, z, res = load(a), sbuf(a.shape), sbuf(a.shape), sbuf((a.shape[0], 1))
    nisa.tensor_scalar_reduce(dst=y, data=x, op0=nl.multiply, operand0=3.0, reduce_op=nl.add,
                              reduce_cmd=nisa.reduce_cmd.idle)
    nisa.tensor_scalar_reduce(dst=z, data=x, op0=nl.add, operand0=0.0, reduce_op=nl.minimum, reduce_res=res)
    return store(y), store(res)


def test_an_idle_call_computes_and_the_next_reset_reduce_starts_afresh():
    a = normal(17, (128, 24))
    y, res = run(idle_then_restart, a).outputs
    np.testing.assert_array_equal(y, a * 3)
    np.testing.assert_array_equal(res, a.min(axis=1, keepdims=True))


def test_load_reduce_starts_from_reduce_init_and_negate_flips_only_the_result():
    a, col = normal(12, (128, 16)), normal(13, (128, 1))
    want = -np.maximum(np.float32(0.5), (a * col).max(axis=1, keepdims=True))
    np.testing.assert_array_equal(run(loaded_and_negated, a, col).outputs, want)


# ----- tensor_scalar_cumulative (NKI 0.6 only) ---------------------------------------------------

@nki.jit
def running_values(a, start, b):
    x, s = load(a), load(start)
    doubled_sum, peak, halves, alternating, total = (sbuf(a.shape), sbuf(a.shape), sbuf(a.shape),
                                                      sbuf(a.shape), sbuf((a.shape[0], 1)))
    nisa.tensor_scalar_cumulative(dst=doubled_sum, src=x, op0=nl.multiply, op1=nl.add, imm0=2.0)
    nisa.tensor_scalar_cumulative(dst=peak, src=x, op0=nl.add, op1=nl.maximum, imm0=0.0, imm1=s,
                                  reduce_cmd=nisa.reduce_cmd.load_reduce)
    half = a.shape[1] // 2
    nisa.tensor_scalar_cumulative(dst=halves[:, 0:half], src=x[:, 0:half], op0=nl.add, op1=nl.add, imm0=0.0)
    nisa.tensor_scalar_cumulative(dst=halves[:, half:], src=x[:, half:], op0=nl.add, op1=nl.add, imm0=0.0,
                                  reduce_cmd=nisa.reduce_cmd.reduce)
    # the registers are shared: tensor_scalar_reduce continues from the running sum's last value
    scratch = sbuf(a.shape)
    nisa.tensor_scalar_reduce(dst=scratch, data=load(b), op0=nl.add, operand0=0.0, reduce_op=nl.add,
                              reduce_cmd=nisa.reduce_cmd.reduce, reduce_res=total)
    nisa.tensor_scalar_cumulative(dst=alternating, src=x, op0=nl.subtract, op1=nl.subtract, imm0=1.0)
    return store(doubled_sum), store(peak), store(halves), store(total), store(alternating)


def test_tensor_scalar_cumulative_follows_the_documented_pseudo_code():
    a, start, b = normal(14, (128, 48)), normal(15, (128, 1)), normal(16, (128, 48))
    doubled_sum, peak, halves, total, alternating = run(running_values, a, start, b).outputs
    np.testing.assert_array_equal(doubled_sum, np.cumsum(a * 2, axis=1, dtype=F32))
    np.testing.assert_array_equal(peak, np.maximum.accumulate(np.concatenate([start, a], axis=1), axis=1)[:, 1:])
    np.testing.assert_array_equal(halves, np.cumsum(a, axis=1, dtype=F32))
    np.testing.assert_allclose(total, a.sum(axis=1, keepdims=True) + b.sum(axis=1, keepdims=True), rtol=1e-5,
                               atol=1e-4)
    reg, want = np.zeros(128, F32), np.empty_like(a)
    for i in range(a.shape[1]):          # reg = op1(op0(x, imm0), reg): (x - 1) - reg
        reg = want[:, i] = (a[:, i] - np.float32(1.0)) - reg
    np.testing.assert_array_equal(alternating, want)


def test_tensor_scalar_cumulative_is_not_in_the_legacy_dialect():
    with pytest.raises(AttributeError):
        lisa.tensor_scalar_cumulative


# ----- the documented errors ---------------------------------------------------------------------

def current_error(body, *args):
    kernel = nki.jit(body)
    with pytest.raises(errors.NKISimError) as caught:
        run(kernel, *args)
    return caught.value


def legacy_error(body, *args):
    kernel = lnki.jit(body)
    with pytest.raises(errors.NKISimError) as caught:
        run(kernel, *args)
    return caught.value


A = normal(20, (128, 32))


def _stt_both_psum(a):
    p1, p2 = nl.ndarray(a.shape, nl.float32, buffer=nl.psum), nl.ndarray(a.shape, nl.float32, buffer=nl.psum)
    nisa.tensor_copy(dst=p1, src=load(a))
    nisa.tensor_copy(dst=p2, src=load(a))
    nisa.scalar_tensor_tensor(dst=sbuf(a.shape), data=p1, op0=nl.add, operand0=1.0, op1=nl.add, operand1=p2)


def _stt_bitvec(a):
    nisa.scalar_tensor_tensor(dst=sbuf(a.shape), data=load(a), op0=nl.bitwise_and, operand0=1, op1=nl.add,
                              operand1=load(a))


def _stt_shape(a):
    x = load(a)
    nisa.scalar_tensor_tensor(dst=sbuf(a.shape), data=x, op0=nl.add, operand0=1.0, op1=nl.add, operand1=x[:, 0:16])


def _scan_3d(a):
    x = load(a).reshape((128, 4, 8))
    nisa.tensor_tensor_scan(dst=sbuf((128, 4, 8)), data0=x, data1=x, initial=0.0, op0=nl.add, op1=nl.add)


def _reduce_reverse(a):
    nisa.tensor_scalar_reduce(dst=sbuf(a.shape), data=load(a), op0=nl.subtract, operand0=1.0, reduce_op=nl.add,
                              reverse0=True, reduce_res=sbuf((128, 1)))


def _reduce_subtract(a):
    nisa.tensor_scalar_reduce(dst=sbuf(a.shape), data=load(a), op0=nl.add, operand0=1.0, reduce_op=nl.subtract,
                              reduce_res=sbuf((128, 1)))


def _reduce_raw_cmd(a):
    nisa.tensor_scalar_reduce(dst=sbuf(a.shape), data=load(a), op0=nl.add, operand0=1.0, reduce_op=nl.add,
                              reduce_cmd=3)


def _reduce_init_without_load(a):
    nisa.tensor_scalar_reduce(dst=sbuf(a.shape), data=load(a), op0=nl.add, operand0=1.0, reduce_op=nl.add,
                              reduce_init=1.0)


def _load_without_init(a):
    nisa.tensor_scalar_reduce(dst=sbuf(a.shape), data=load(a), op0=nl.add, operand0=1.0, reduce_op=nl.add,
                              reduce_cmd=nisa.reduce_cmd.load_reduce)


def _continue_after_idle(a):
    x = load(a)
    nisa.tensor_scalar_reduce(dst=sbuf(a.shape), data=x, op0=nl.add, operand0=1.0, reduce_op=nl.add,
                              reduce_cmd=nisa.reduce_cmd.idle)
    nisa.tensor_scalar_reduce(dst=sbuf(a.shape), data=x, op0=nl.add, operand0=1.0, reduce_op=nl.add,
                              reduce_cmd=nisa.reduce_cmd.reduce, reduce_res=sbuf((128, 1)))


def _reduce_res_shape(a):
    nisa.tensor_scalar_reduce(dst=sbuf(a.shape), data=load(a), op0=nl.add, operand0=1.0, reduce_op=nl.add,
                              reduce_res=sbuf((128, 2)))


def _cumulative_int32(a):
    t = sbuf(a.shape, nl.int32)
    nisa.iota(dst=t, pattern=[[1, a.shape[1]]])
    nisa.tensor_scalar_cumulative(dst=sbuf(a.shape), src=t, op0=nl.add, op1=nl.add, imm0=0.0)


def _cumulative_idle(a):
    nisa.tensor_scalar_cumulative(dst=sbuf(a.shape), src=load(a), op0=nl.add, op1=nl.add, imm0=0.0,
                                  reduce_cmd=nisa.reduce_cmd.idle)


def _cumulative_imm1_without_load(a):
    nisa.tensor_scalar_cumulative(dst=sbuf(a.shape), src=load(a), op0=nl.add, op1=nl.add, imm0=0.0, imm1=2.0)


def _cumulative_op1(a):
    nisa.tensor_scalar_cumulative(dst=sbuf(a.shape), src=load(a), op0=nl.add, op1=nl.equal, imm0=0.0)


@pytest.mark.parametrize("body, kind, fragment", [
    (_stt_both_psum, errors.MemorySpaceError, "both in PSUM"),
    (_stt_bitvec, errors.UnsupportedOperationError, "bitvec"),
    (_stt_shape, errors.ShapeError, "must have the shape of data"),
    (_scan_3d, errors.UnsupportedOperationError, "reshape the tiles"),
    (_reduce_reverse, errors.UnsupportedOperationError, "not supported yet"),
    (_reduce_subtract, errors.UnsupportedOperationError, "subtracting reduction"),
    (_reduce_raw_cmd, errors.ArgumentError, "nisa.reduce_cmd"),
    (_reduce_init_without_load, errors.UnsupportedOperationError, "only with reduce_cmd=load_reduce"),
    (_load_without_init, errors.UnsupportedOperationError, "needs reduce_init"),
    (_continue_after_idle, errors.UnsupportedOperationError, "idle-mode"),
    (_reduce_res_shape, errors.ShapeError, "one value per partition"),
    (_cumulative_int32, errors.UnsupportedOperationError, "int32 and uint32"),
    (_cumulative_idle, errors.UnsupportedOperationError, "reset_reduce, reduce and load_reduce only"),
    (_cumulative_imm1_without_load, errors.UnsupportedOperationError, "imm1 of 'tensor_scalar_cumulative'"),
    (_cumulative_op1, errors.UnsupportedOperationError, "is not one of"),
])
def test_documented_errors_in_the_current_dialect(body, kind, fragment):
    err = current_error(body, A)
    assert isinstance(err, kind), err
    assert fragment in str(err)
    assert err.code


def _legacy_scan_mask(a):
    x = lload(a)
    i_p, i_f = lnl.mgrid[0:128, 0:32]
    lisa.tensor_tensor_scan(x, x, 0.0, lnl.add, lnl.add, mask=(i_f < 16))


def _legacy_reduce_cmd(a):
    res = lnl.ndarray((128, 1), lnl.float32, buffer=lnl.sbuf)
    lisa.tensor_scalar_reduce(data=lload(a), op0=lnl.add, operand0=1.0, reduce_op=lnl.add, reduce_res=res,
                              reduce_cmd=lisa.reduce_cmd.reduce)


def _legacy_reduce_without_res(a):
    lisa.tensor_scalar_reduce(data=lload(a), op0=lnl.add, operand0=1.0, reduce_op=lnl.add)


def _legacy_positional_stt(a):
    x = lload(a)
    lisa.scalar_tensor_tensor(x, lnl.add, 1.0, lnl.add, x)


@pytest.mark.parametrize("body, kind, fragment", [
    (_legacy_scan_mask, errors.UnsupportedOperationError, "mask="),
    (_legacy_reduce_cmd, errors.ArgumentError, "reduce_cmd"),
    (_legacy_reduce_without_res, errors.ArgumentError, "reduce_res"),
    (_legacy_positional_stt, errors.ArgumentError, "positional"),
])
def test_documented_errors_in_the_legacy_dialect(body, kind, fragment):
    err = legacy_error(body, A)
    assert isinstance(err, kind), err
    assert fragment in str(err)


@lnki.jit
def masked_reciprocal(a):
    out = lnl.ndarray(a.shape, lnl.float32, buffer=lnl.sbuf)
    out[...] = lisa.memset((128, 32), 7.0, lnl.float32)
    i_p, i_f = lnl.mgrid[0:128, 0:32]
    out[i_p, i_f] = lisa.reciprocal(lload(a), mask=(i_f < 16))
    return lstore(out)


def test_a_legacy_mask_keeps_the_element_wise_instructions_to_its_elements():
    out = run(masked_reciprocal, A).outputs
    np.testing.assert_array_equal(out[:, :16], np.float32(1.0) / A[:, :16])
    assert np.all(out[:, 16:] == 7.0)


def test_exponential_says_it_needs_trainium3_and_what_to_use_on_trainium2():
    @nki.jit
    def kernel(x):
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.exponential(dst=t, src=t)
        return x
    with pytest.raises(errors.UnsupportedOperationError) as caught:
        kernel(np.zeros((4, 4), np.float32))
    text = f"{caught.value} {caught.value.remedy}"
    assert "Trainium3" in text and "Trainium2" in text and "nisa.activation" in text and "nl.exp" in text


# ----- a traced program survives encoding and executes to the same values ------------------------

@pytest.mark.parametrize("kernel, args", [
    (running_values, (normal(30, (128, 48)), normal(31, (128, 1)), normal(32, (128, 48)))),
    (three_call_chain, (normal(33, (128, 96)),)),
    (scan_current, (normal(34, (128, 40)), normal(35, (128, 40)), normal(36, (128, 1)))),
    (stt_current, (normal(37, (128, 64)), normal(38, (128, 1)), normal(39, (128, 64)))),
    (reciprocal_legacy, (normal(40, (128, 96)),)),
])
def test_programs_round_trip_and_execute_to_the_same_values(kernel, args):
    local = run(kernel, *args)
    decoded = programs.decode(programs.encode(local.program))
    programs.validate(decoded, HardwareLimits(), list(args))
    again = execute(decoded, list(args))
    for got, want in zip(again.outputs, local.outputs):
        np.testing.assert_array_equal(got, want)
    assert cost.schedule(again.trace, cost.DEFAULT_PARAMS, dge=True).total_us == pytest.approx(
        cost.estimate(local).total_us)


# ----- costs -------------------------------------------------------------------------------------

def costs_of(kernel, *args) -> dict:
    out = {}
    for rec in run(kernel, *args).program.records:
        if rec.engine.name in ("VECTOR", "SCALAR"):
            out.setdefault(rec.opcode, []).append(COST_RULES[rec.opcode](rec, cost.DEFAULT_PARAMS).ns)
    return out


@nki.jit
def both_reciprocals(a):
    x, vector, scalar = load(a), sbuf(a.shape), sbuf(a.shape)
    nisa.reciprocal(dst=vector, data=x)
    nisa.activation(dst=scalar, op=nl.reciprocal, data=x)
    return store(vector), store(scalar)


def test_vector_reciprocal_costs_about_eight_scalar_reciprocals_on_large_tiles():
    big = costs_of(both_reciprocals, np.ones((128, 4096), F32))
    assert 7.5 < big["reciprocal"][0] / big["activation"][0] < 8.1
    small = costs_of(both_reciprocals, np.ones((128, 16), F32))
    # "comparable" under 64 elements, "due to instruction initiation intervals" (SDK 2.21
    # nki.isa.reciprocal). This compared the engines' occupancy (< 1.5x) while ACT's fixed cost
    # was 140 cycles fitted as one duration; the Trn2 profiles measure ACT holding (N + 60)
    # cycles with its result 108 ns later (DVE: 92 ns), so what a lone small instruction costs
    # is the time until its result: about 265 against 172 ns at 16 elements, not 8x
    p = cost.DEFAULT_PARAMS
    assert small["reciprocal"][0] + p.dve_pipeline_ns < 2 * (small["activation"][0] + p.act_pipeline_ns)


@nki.jit
def stt_variants(a, b):
    x, y = load(a), load(b)
    nisa.scalar_tensor_tensor(dst=sbuf(a.shape, nl.bfloat16), data=x, op0=nl.subtract, operand0=1.0,
                              op1=nl.multiply, operand1=y)
    nisa.scalar_tensor_tensor(dst=sbuf(a.shape, nl.bfloat16), data=x, op0=nl.add, operand0=1.0,
                              op1=nl.multiply, operand1=y)
    nisa.tensor_scalar(dst=sbuf(a.shape), data=x, op0=nl.add, operand0=1.0)
    last = sbuf(a.shape)
    nisa.tensor_scalar_reduce(dst=last, data=x, op0=nl.add, operand0=1.0, reduce_op=nl.add)
    return store(last)


def test_scalar_tensor_tensor_has_its_documented_fast_case_and_reduce_adds_one_min_ii():
    a = np.ones((128, 2048), BF16)
    c = costs_of(stt_variants, a, a)
    fast, slow = c["scalar_tensor_tensor"]
    overhead = cost.DEFAULT_PARAMS.dve_overhead_cycles / cost.DEFAULT_PARAMS.dve_ghz
    assert (slow - overhead) / (fast - overhead) == pytest.approx(2.0)
    min_ii = cost.DEFAULT_PARAMS.dve_min_ii / cost.DEFAULT_PARAMS.dve_ghz
    assert c["tensor_scalar_reduce"][0] == pytest.approx(c["tensor_scalar"][0] + min_ii, rel=0.02)


@pytest.mark.parametrize("opcode, forged", [
    ("tensor_scalar_reduce", {"reduce": {"op": "add", "how": "continue", "read": 99}}),
    ("tensor_scalar_reduce", {"reduce": {"op": "divide", "how": "reset"}}),
    ("tensor_scalar_cumulative", {"reduce": {"op": "equal", "how": "reset"}}),
    ("tensor_scalar_cumulative", {"reduce": {"op": "add", "how": "load", "init_read": 7}}),
    ("tensor_tensor_scan", {"op0": "bitwise_and"}),
    ("scalar_tensor_tensor", {"operand0": {"const": "1.0"}}),
])
def test_forged_params_make_the_instruction_fail_to_execute(opcode, forged):
    args = (normal(41, (128, 48)), normal(42, (128, 1)), normal(43, (128, 48)))
    kernel = {"tensor_tensor_scan": scan_current, "scalar_tensor_tensor": stt_current}.get(opcode, running_values)
    if opcode == "tensor_tensor_scan":
        args = (args[0], args[2], args[1])
    decoded = programs.decode(programs.encode(run(kernel, *args).program))
    rec = next(r for r in decoded.records if r.opcode == opcode)
    rec.params = {**rec.params, **forged}
    with pytest.raises(programs.ProgramError, match="cannot execute"):
        execute(decoded, [np.ascontiguousarray(a) for a in args])
