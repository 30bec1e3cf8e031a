"""NKI 0.6's nisa.topk against a NumPy reference written from the reference's prose: each group of
16 partitions one problem read as a snake, the k largest in ascending order written in the same
snake layout with their snake indices; ties, NaN, the slots the reference leaves unspecified,
partial and whole tiles; its documented errors; a program round trip, a forged record and the
documented cost (4*n + K GpSimd cycles)."""
import ml_dtypes
import numpy as np
import pytest

import nkisim
from nkisim import errors
from nkisim import program as programs
from nkisim.cost.params import CostParams
from nkisim.cost.rules import COST_RULES
from nkisim.execute import execute
from nkisim.runtime import ArgSpec, trace_kernel
from nkisim.settings import HardwareLimits, SimSettings

nkisim.install()

import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402
from kernel_helpers import load, sbuf, store  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)
U32 = np.dtype(np.uint32)
BEFORE_VAL, BEFORE_IDX = -5.0, 7          # what the destinations held before topk


def reference(src, n, k):
    """The reference's reading as plain loops: per group of 16 partitions, snake element s is
    src[16 g + s % 16, s // 16]; the k largest of s < n ascending (ties by ascending index, the
    lower indices kept at the cut, NaN above every number), result j at partition j % 16,
    position j // 16; positions past ceil(k/16) keep what they held, the rest of the last
    written position is NaN / 0xFFFFFFFF."""
    parts, _ = src.shape
    vals = np.full((parts, k), BEFORE_VAL, np.float32)
    idx = np.full((parts, k), BEFORE_IDX, np.uint32)
    written = -(-k // 16)
    for g in range(parts // 16):
        snake = [float(src[16 * g + s % 16, s // 16]) for s in range(n)]
        ranked = sorted(range(n), key=lambda s: (np.isnan(snake[s]), snake[s] if not np.isnan(snake[s]) else 0.0, -s))
        chosen = sorted(ranked[n - k:], key=lambda s: (np.isnan(snake[s]), snake[s] if not np.isnan(snake[s]) else 0.0, s))
        for j in range(written * 16):
            p, c = 16 * g + j % 16, j // 16
            vals[p, c] = snake[chosen[j]] if j < k else np.nan
            idx[p, c] = chosen[j] if j < k else 0xFFFFFFFF
    return vals, idx


def kernel_for(n, k, parts):
    @nki.jit
    def top(x):
        v, i = sbuf((parts, k), nl.bfloat16), sbuf((parts, k), nl.uint32)
        nisa.memset(dst=v, value=BEFORE_VAL)
        nisa.memset(dst=i, value=BEFORE_IDX)
        nisa.topk(val_dst=v, idx_dst=i, src=load(x), n=n)
        return store(v), store(i)
    return top


@pytest.mark.parametrize("parts, free, n, k", [(16, 8, 128, 16), (32, 8, 100, 4), (128, 40, 600, 37),
                                               (16, 1, 8, 8), (48, 4, 61, 20)])
def test_values_and_indices_match_the_reference(parts, free, n, k):
    x = np.random.default_rng(n + k).standard_normal((parts, free)).astype(BF16)
    got_v, got_i = kernel_for(n, k, parts)(x)
    want_v, want_i = reference(x, n, k)
    np.testing.assert_array_equal(got_v.astype(np.float32), want_v)
    np.testing.assert_array_equal(got_i, want_i)


def test_each_group_is_its_own_problem_and_reads_only_n_elements():
    x = np.zeros((32, 4), BF16)
    x[0:16] = -1.0
    x[16:32] = 1.0
    x[3, 3] = 100.0                  # snake index 51, past n = 40: ignored
    x[5, 1] = 9.0                    # group 0's snake index 21
    got_v, got_i = kernel_for(40, 1, 32)(x)
    assert float(got_v[0, 0]) == 9.0 and got_i[0, 0] == 21
    assert float(got_v[16, 0]) == 1.0 and got_i[16, 0] == 0      # all equal: the lowest index
    assert (got_v[1:16, 0].astype(np.float32) != got_v[1:16, 0].astype(np.float32)).all()   # unspecified: NaN


def test_never_written_source_memory_shows_as_nan_results():
    @nki.jit
    def unwritten(x):
        src = sbuf((16, 4), nl.bfloat16)
        nisa.dma_copy(dst=src[:, 0:2], src=x)
        v, i = sbuf((16, 2), nl.bfloat16), sbuf((16, 2), nl.uint32)
        nisa.topk(val_dst=v, idx_dst=i, src=src, n=64)
        return store(v)

    got = unwritten(np.ones((16, 2), BF16)).astype(np.float32)
    assert np.isnan(got[:, 1]).all()          # results 16..31: the NaN of the never-written half


@pytest.mark.parametrize("body, error, words", [
    (lambda x: nisa.topk(val_dst=sbuf((16, 4), nl.float32), idx_dst=sbuf((16, 4), nl.uint32),
                         src=load(x), n=16), errors.UnsupportedOperationError, "bfloat16"),
    (lambda x: nisa.topk(val_dst=sbuf((16, 4), nl.bfloat16), idx_dst=sbuf((16, 4), nl.int32),
                         src=load(x), n=16), errors.UnsupportedOperationError, "uint32"),
    (lambda x: nisa.topk(val_dst=sbuf((16, 4), nl.bfloat16), idx_dst=sbuf((16, 4), nl.uint32),
                         src=load(x), n=4), errors.ShapeError, "n of 'topk' is 4"),
    (lambda x: nisa.topk(val_dst=sbuf((16, 40), nl.bfloat16), idx_dst=sbuf((16, 40), nl.uint32),
                         src=load(x), n=32), errors.ShapeError, "at most n = 32"),
    (lambda x: nisa.topk(val_dst=sbuf((16, 4), nl.bfloat16), idx_dst=sbuf((16, 4), nl.uint32),
                         src=load(x), n=100), errors.ShapeError, "ceil"),
    (lambda x: nisa.topk(val_dst=sbuf((16, 4), nl.bfloat16), idx_dst=sbuf((16, 5), nl.uint32),
                         src=load(x), n=16), errors.ShapeError, "same free size"),
    (lambda x: nisa.topk(val_dst=sbuf((8, 4), nl.bfloat16), idx_dst=sbuf((8, 4), nl.uint32),
                         src=load(x)[0:8], n=16), errors.ShapeError, "groups of 16"),
    (lambda x: nisa.topk(val_dst=sbuf((32, 4), nl.bfloat16)[8:24], idx_dst=sbuf((16, 4), nl.uint32),
                         src=load(x), n=16), errors.NotSimulatedError, "starts on partition 8"),
    (lambda x: nisa.topk(val_dst=nl.ndarray((16, 4), nl.bfloat16, buffer=nl.psum), idx_dst=sbuf((16, 4), nl.uint32),
                         src=load(x), n=16), errors.MemorySpaceError, "sbuf"),
    (lambda x: nisa.topk(val_dst=sbuf((16, 4), nl.bfloat16), idx_dst=sbuf((16, 4), nl.uint32),
                         src=load(x), n=16.0), errors.UnsupportedOperationError, "must be an int"),
    (lambda x: nisa.topk(sbuf((16, 4), nl.bfloat16), sbuf((16, 4), nl.uint32), load(x), 16, k=4),
     errors.ArgumentError, "k"),
])
def test_documented_errors(body, error, words):
    @nki.jit
    def kernel(x):
        body(x)
        return store(load(x))

    with pytest.raises(error, match=words):
        kernel(np.ones((16, 4), BF16))


def test_topk_needs_neuroncore_v3():
    with pytest.raises(errors.UnsupportedOperationError, match="NeuronCore-v3"):
        nkisim.run_kernel(kernel_for(16, 4, 16), (np.ones((16, 4), BF16),), {}, settings=SimSettings(platform="trn1"))


def test_a_program_round_trips_and_a_forged_k_is_refused():
    x = np.random.default_rng(3).standard_normal((32, 8)).astype(BF16)
    kernel = kernel_for(100, 20, 32)
    program, _ = trace_kernel(kernel, [ArgSpec(x.shape, x.dtype)], {})
    again = programs.decode(programs.encode(program))
    programs.validate(again, HardwareLimits(), [x])
    got = execute(again, [x]).outputs
    want = reference(x, 100, 20)
    np.testing.assert_array_equal(got[0].astype(np.float32), want[0])
    np.testing.assert_array_equal(got[1], want[1])
    record = next(r for r in again.records if r.opcode == "topk")
    record.params["k"] = 10 ** 9
    with pytest.raises(programs.ProgramError, match="topk"):
        execute(again, [x])


def test_cost_is_the_documented_four_n_plus_k_gpsimd_cycles():
    x = np.ones((128, 40), BF16)
    run = nkisim.run_kernel(kernel_for(600, 37, 128), (x,), {})
    record = next(r for r in run.trace if r.opcode == "topk")
    p = CostParams()
    cost = COST_RULES["topk"](record, p)
    assert cost.queue == "POOL"
    assert cost.ns == pytest.approx((4 * 600 + 37 + p.pool_overhead_cycles) / p.pool_ghz)
