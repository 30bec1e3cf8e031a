"""NKI 0.6's nisa.rand_set_state / rand_get_state on Trainium2 (the GpSimd engine's XORWOW state,
6 uint32 words a lane) and the GpSimd nisa.rng that draws from it, against a plain-Python XORWOW
written here (Marsaglia 2003, nkisim's reading of the words: x0..x4 then the counter d): a get
after a set returns the seeds, the draws follow each lane's generator, a restored state replays
them, the documented refusals, the program's round trip through encode / decode / validate, and
forged records. Neither instruction is in the SDK 2.26 reference, so the legacy dialect has
neither."""
import mmap

import numpy as np
import pytest

import nkisim
from nkisim import cost, errors, split
from nkisim import program as programs
from nkisim.cost.rules import COST_RULES
from nkisim.execute import execute
from nkisim.runtime import ArgSpec, trace_kernel
from nkisim.settings import HardwareLimits, SimSettings
from nkisim.trace import Engine, Region

nkisim.install()

import neuronxcc.nki.isa as lisa  # noqa: E402
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402
from kernel_helpers import load, store  # noqa: E402

MASK = 0xFFFFFFFF


def reference_stream(words, n):
    """n outputs of one lane's XORWOW from its six words, and its words after them."""
    x0, x1, x2, x3, x4, d = (int(w) for w in words)
    out = []
    for _ in range(n):
        t = (x0 ^ (x0 >> 2)) & MASK
        x0, x1, x2, x3 = x1, x2, x3, x4
        x4 = (x4 ^ (x4 << 4) ^ t ^ (t << 1)) & MASK
        d = (d + 362437) & MASK
        out.append((x4 + d) & MASK)
    return out, [x0, x1, x2, x3, x4, d]


def reference(seeds, n):
    """Every lane's n outputs ([lanes, n] uint32) and states after them."""
    streams = [reference_stream(row, n) for row in seeds]
    return (np.array([s for s, _ in streams], np.uint64).astype(np.uint32).reshape(len(seeds), n),
            np.array([w for _, w in streams], np.uint64).astype(np.uint32))


def seeds_of(seed, lanes=128):
    return np.random.default_rng(seed).integers(1, 2 ** 32, size=(lanes, 6), dtype=np.uint32)


def specs(args):
    return [ArgSpec(a.shape, a.dtype) for a in args]


def round_trip(kernel, args, inputs):
    """Traced from the shapes of `args`, through bytes and validation, executed on `inputs`."""
    program, _ = trace_kernel(kernel, specs(args), {})
    again = programs.decode(programs.encode(program))
    programs.validate(again, HardwareLimits(), list(inputs))
    return execute(again, list(inputs)).outputs


def state_tile(lanes=128):
    return nl.ndarray((lanes, 6), nl.uint32, buffer=nl.sbuf)


# ----- set, get --------------------------------------------------------------------------------------

@nki.jit
def set_then_get(seeds):
    s = load(seeds)
    nisa.rand_set_state(s)
    got = state_tile(seeds.shape[0])
    nisa.rand_get_state(dst=got, engine=nisa.engine.gpsimd, name="saved")
    return store(got)


def test_a_get_after_a_set_returns_the_seeds():
    for lanes in (128, 16):
        seeds = seeds_of(lanes, lanes)
        np.testing.assert_array_equal(set_then_get(seeds), seeds)


@nki.jit
def lanes_32_to_63(seeds):
    """Seeds on partitions 32..63 of a full tile seed lanes 32..63; the get reads those lanes."""
    s = state_tile()
    nisa.memset(dst=s, value=0)
    nisa.dma_copy(dst=s[32:64, :], src=seeds)
    nisa.rand_set_state(src_seeds=s[32:64, :])
    got = state_tile()
    nisa.memset(dst=got, value=7)
    nisa.rand_get_state(got[32:64, :])
    return store(got)


def test_a_tile_on_some_partitions_sets_and_gets_their_lanes_only():
    seeds = seeds_of(3, 32)
    got = lanes_32_to_63(seeds)
    np.testing.assert_array_equal(got[32:64], seeds)
    assert (got[:32] == 7).all() and (got[64:] == 7).all()


# ----- draws -----------------------------------------------------------------------------------------

@nki.jit
def two_draws(seeds):
    nisa.rand_set_state(load(seeds))
    first = nl.ndarray((128, 40), nl.uint32, buffer=nl.sbuf)
    nisa.rng(dst=first, engine=nisa.engine.gpsimd)
    second = nl.ndarray((128, 3, 5), nl.uint16, buffer=nl.sbuf)
    nisa.rng(second, engine=nisa.engine.gpsimd)
    after = state_tile()
    nisa.rand_get_state(after)
    return store(first), store(second), store(after)


def test_gpsimd_draws_after_a_set_follow_each_lanes_xorwow():
    seeds = seeds_of(1)
    first, second, after = two_draws(seeds)
    bits, words = reference(seeds, 55)
    np.testing.assert_array_equal(first, bits[:, :40])
    assert second.dtype == np.uint16
    np.testing.assert_array_equal(second, bits[:, 40:].astype(np.uint16).reshape(128, 3, 5))   # row-major, low bits
    np.testing.assert_array_equal(after, words)


def test_the_program_draws_from_the_seeds_it_reads_when_it_runs():
    traced_with, run_with = seeds_of(1), seeds_of(2)
    again = round_trip(two_draws, (traced_with,), (run_with,))
    for got, expected in zip(again, two_draws(run_with)):
        np.testing.assert_array_equal(got, expected)
    assert (again[0] != two_draws(traced_with)[0]).mean() > 0.99


@nki.jit
def replayed(seeds):
    """Draw, save the state, draw, restore it, draw again: the last two draws match."""
    nisa.rand_set_state(load(seeds))
    warm = nl.ndarray((128, 9), nl.uint32, buffer=nl.sbuf)
    nisa.rng(warm, engine=nisa.engine.gpsimd)
    saved = state_tile()
    nisa.rand_get_state(saved)
    a = nl.ndarray((128, 24), nl.int8, buffer=nl.sbuf)
    nisa.rng(a, engine=nisa.engine.gpsimd)
    nisa.rand_set_state(saved)
    b = nl.ndarray((128, 24), nl.int8, buffer=nl.sbuf)
    nisa.rng(b, engine=nisa.engine.gpsimd)
    return store(warm), store(a), store(b)


def test_restoring_a_saved_state_replays_the_same_draws():
    seeds = seeds_of(4)
    warm, a, b = replayed(seeds)
    np.testing.assert_array_equal(a, b)
    bits, _ = reference(seeds, 33)
    np.testing.assert_array_equal(warm, bits[:, :9])
    np.testing.assert_array_equal(a, bits[:, 9:].astype(np.int8))
    again = round_trip(replayed, (seeds,), (seeds,))
    for got, expected in zip(again, (warm, a, b)):
        np.testing.assert_array_equal(got, expected)


@nki.jit
def lanes_draw(seeds):
    nisa.rand_set_state(load(seeds))
    bits = nl.ndarray((128, 64), nl.uint32, buffer=nl.sbuf)
    nisa.rng(bits[32:64, :], engine=nisa.engine.gpsimd)      # lanes 32..63 step; the others keep their state
    nisa.rng(bits[0:32, :], engine=nisa.engine.gpsimd)
    after = state_tile()
    nisa.rand_get_state(after)
    return store(bits[0:64, :]), store(after)


def test_each_lane_draws_its_own_stream():
    seeds = np.repeat(seeds_of(5, 2), 64, axis=0)        # lanes 0..63 one seed, 64..127 another
    bits, after = lanes_draw(seeds)
    expected, words = reference(seeds[:1], 64)
    np.testing.assert_array_equal(bits, np.repeat(expected, 64, axis=0))   # the same seed: the same stream
    np.testing.assert_array_equal(after[:64], np.repeat(words, 64, axis=0))
    np.testing.assert_array_equal(after[64:], seeds[64:])                 # undrawn lanes keep the seeds
    distinct = seeds_of(6)
    bits, _ = lanes_draw(distinct)
    np.testing.assert_array_equal(bits, reference(distinct[:64], 64)[0])
    assert len({row.tobytes() for row in bits}) == 64


def test_all_zero_words_give_the_weyl_sequence():
    """Not refused: x0..x4 stay 0, so each output is the counter, d + k * 362437 (mod 2**32)."""
    seeds = np.zeros((128, 6), np.uint32)
    seeds[:, 5] = np.arange(128, dtype=np.uint32)
    first, _, after = two_draws(seeds)
    k = np.arange(1, 41, dtype=np.uint64)
    np.testing.assert_array_equal(first, ((seeds[:, 5:6].astype(np.uint64) + 362437 * k) % 2 ** 32).astype(np.uint32))
    np.testing.assert_array_equal(after[:, :5], 0)


@nki.jit
def unseeded_gpsimd(x):
    a = nl.ndarray((128, 32), nl.uint32, buffer=nl.sbuf)
    nisa.rng(a, engine=nisa.engine.gpsimd)
    return store(a)


@nki.jit
def seeded_elsewhere(seeds):
    """Lanes 0..31 seeded; a draw on lanes 64..127 draws nkisim's own bits, as unseeded."""
    nisa.rand_set_state(load(seeds))
    a = nl.ndarray((128, 32), nl.uint32, buffer=nl.sbuf)
    nisa.rng(a[64:128, :], engine=nisa.engine.gpsimd)
    return store(a[64:128, :])


def test_a_gpsimd_rng_on_unseeded_lanes_draws_nkisims_own_bits():
    x = np.zeros((1, 1), np.uint32)
    bits = unseeded_gpsimd(x)
    np.testing.assert_array_equal(bits, unseeded_gpsimd(x))          # the program's own seed
    assert len(np.unique(bits)) > bits.size * 0.99
    other = seeded_elsewhere(seeds_of(7, 32))
    np.testing.assert_array_equal(other, seeded_elsewhere(seeds_of(8, 32)))   # the seeds of lanes 0..31 do not matter
    run = nkisim.run_kernel(seeded_elsewhere, (seeds_of(7, 32),), {})
    rec = next(r for r in run.program.records if r.opcode == "rng")
    assert rec.reads == [] and "seed" in rec.params


@nki.jit
def vector_draw(seeds):
    nisa.rand_set_state(load(seeds))
    a = nl.ndarray((128, 16), nl.uint32, buffer=nl.sbuf)
    nisa.rng(a)                                            # engine.vector, 0.6's default
    return store(a)


def test_the_vector_engines_rng_does_not_draw_from_the_gpsimd_state():
    np.testing.assert_array_equal(vector_draw(seeds_of(9)), vector_draw(seeds_of(10)))
    run = nkisim.run_kernel(vector_draw, (seeds_of(9),), {})
    rec = next(r for r in run.program.records if r.opcode == "rng")
    assert rec.engine is Engine.VECTOR and rec.reads == [] and "seed" in rec.params


# ----- refusals --------------------------------------------------------------------------------------

def set_from(shape=(128, 6), dtype=nl.uint32, buffer=nl.sbuf, **kwargs):
    def body():
        s = nl.ndarray(shape, dtype, buffer=buffer)
        nisa.memset(dst=s, value=1)
        nisa.rand_set_state(s, **kwargs)
    return body


def get_into(shape=(128, 6), dtype=nl.uint32, buffer=nl.sbuf, seed_first=True, **kwargs):
    def body():
        if seed_first:
            set_from()()
        d = nl.ndarray(shape, dtype, buffer=buffer)
        nisa.rand_get_state(d, **kwargs)
    return body


def partial_draw():
    set_from(shape=(32, 6))()
    a = nl.ndarray((128, 8), nl.uint32, buffer=nl.sbuf)
    nisa.rng(a, engine=nisa.engine.gpsimd)


def partial_get():
    set_from(shape=(32, 6))()
    nisa.rand_get_state(state_tile(64))


@pytest.mark.parametrize("body, error, code, words", [
    (set_from(dtype=nl.int32), errors.UnsupportedOperationError, "err_instruction_unsupported_dtypes", "uint32"),
    (get_into(dtype=nl.float32), errors.UnsupportedOperationError, "err_instruction_unsupported_dtypes", "uint32"),
    (set_from(shape=(128, 5)), errors.ShapeError, "err_param_shape_mismatch", "6 uint32 words a lane"),
    (set_from(shape=(128, 2, 3)), errors.ShapeError, "err_param_shape_mismatch", "2-D"),
    (get_into(shape=(128, 24)), errors.ShapeError, "err_param_shape_mismatch", "6 uint32 words a lane"),
    (set_from(buffer=nl.psum), errors.MemorySpaceError, "err_unsupported_memory", "GpSimd"),
    (get_into(buffer=nl.psum), errors.MemorySpaceError, "err_unsupported_memory", "GpSimd"),
    (set_from(engine=nisa.engine.vector), errors.UnsupportedOperationError,
     "err_instruction_unsupported_on_target", "NeuronCore-v4"),
    (get_into(engine=nisa.engine.vector), errors.UnsupportedOperationError,
     "err_instruction_unsupported_on_target", "NeuronCore-v4"),
    (set_from(engine=nisa.engine.scalar), errors.UnsupportedOperationError, "err_instruction_engine_unsupported",
     "GpSimd"),
    (set_from(engine=3), errors.ArgumentError, "err_unsupported_args", "nisa.engine"),
    (set_from(name=""), errors.ArgumentError, "err_unsupported_args", "non-empty string"),
    (get_into(seed_first=False), errors.KernelContractError, "err_rng_state_uninitialized", "no nisa.rand_set_state"),
    (partial_get, errors.KernelContractError, "err_rng_state_uninitialized", "only some"),
    (partial_draw, errors.KernelContractError, "err_rng_state_uninitialized", "only some"),
], ids=["int32-seeds", "float-dst", "five-words", "3-d-seeds", "vector-sized-dst", "psum-seeds", "psum-dst",
        "vector-set", "vector-get", "scalar-engine", "raw-engine-code", "empty-name", "get-before-set",
        "get-partly-seeded", "draw-partly-seeded"])
def test_the_state_instructions_refuse_what_the_reference_forbids(body, error, code, words):
    @nki.jit
    def kernel(x):
        body()
        return store(load(x))
    with pytest.raises(error, match=words) as caught:
        kernel(np.zeros((1, 1), np.uint32))
    assert caught.value.code == code


def test_the_state_instructions_need_neuroncore_v3():
    @nki.jit
    def kernel(seeds):
        nisa.rand_set_state(load(seeds))
        return store(load(seeds))
    with pytest.raises(errors.UnsupportedOperationError, match="NeuronCore-v3") as caught:
        nkisim.run_kernel(kernel, (seeds_of(0),), {}, settings=SimSettings(platform="trn1"))
    assert caught.value.code == "err_instruction_unsupported_on_target"


def test_neither_is_in_the_legacy_dialect():
    for name in ("rand_set_state", "rand_get_state"):
        with pytest.raises(errors.NKISimError):
            getattr(lisa, name)


# ----- records, cost, forged programs ----------------------------------------------------------------

def test_the_state_records_run_on_gpsimd_and_cost_six_words_a_partition():
    run = nkisim.run_kernel(two_draws, (seeds_of(1),), {})
    recs = {r.opcode: r for r in run.program.records if r.opcode in ("rand_set_state", "rand_get_state")}
    p = cost.CostParams()
    for opcode, rec in recs.items():
        assert rec.engine is Engine.GPSIMD
        assert (len(rec.reads), len(rec.writes)) == (1, 1)
        assert rec.writes[0].elements_per_partition == 6
        charged = COST_RULES[opcode](rec, p)
        assert charged.queue == "POOL"
        assert charged.ns == pytest.approx((6 + p.pool_overhead_cycles) / p.pool_ghz)
    draws = [r for r in run.program.records if r.opcode == "rng"]
    assert [(len(r.reads), len(r.writes)) for r in draws] == [(1, 2), (1, 2)]
    assert all(r.params == {"xorwow": True} for r in draws)
    assert cost.estimate(run).total_ns > 0


def traced_program(kernel, args):
    program, _ = trace_kernel(kernel, specs(args), {})
    return programs.decode(programs.encode(program))


def test_forged_state_records_are_refused():
    seeds = seeds_of(1)
    limits = HardwareLimits()

    def forged(opcode, change):
        program = traced_program(two_draws, (seeds,))
        change(next(r for r in program.records if r.opcode == opcode))
        return program

    def runs(program):
        programs.validate(program, limits, [seeds])
        return execute(program, [seeds])

    for params in ({"xorwow": 1}, {"xorwow": "yes"}):
        with pytest.raises(programs.ProgramError, match="cannot execute"):
            runs(forged("rng", lambda rec: setattr(rec, "params", params)))

    def five_words(rec):
        r = rec.reads[0]
        rec.reads[0] = Region(r.alloc_id, r.buffer, r.start, (128, 5), r.strides, r.itemsize, r.dtype, 128)
    with pytest.raises(programs.ProgramError, match="cannot execute"):
        runs(forged("rand_set_state", five_words))
    with pytest.raises(programs.ProgramError, match="claims"):
        runs(forged("rand_set_state", lambda rec: setattr(rec, "kind", "rng_seed")))
    with pytest.raises(programs.ProgramError):
        runs(forged("rand_get_state", lambda rec: setattr(rec, "engine", Engine.VECTOR)))


@nki.jit
def blocks_of_draws(seeds, x):
    """Six blocks of one output, each drawn on GpSimd after one rand_set_state and summed with x
    by the DMA engines: every block's bits depend on the draws before it."""
    out = nl.ndarray((6 * 128, 64), nl.float32, buffer=nl.shared_hbm)
    nisa.rand_set_state(load(seeds))
    for i in range(6):
        bits = nl.ndarray((128, 64), nl.uint16, buffer=nl.sbuf)
        nisa.rng(bits, engine=nisa.engine.gpsimd)
        nisa.dma_compute(dst=out[i * 128:(i + 1) * 128, :], srcs=[bits, x], reduce_op=nl.add)
    return out


def test_a_split_execution_draws_the_same_bits():
    args = [seeds_of(11), np.random.default_rng(4).normal(size=(128, 64)).astype(np.float32)]
    program, _ = trace_kernel(blocks_of_draws, specs(args), {})
    parts = split.plan(program, 2, largest_share=1.0, min_work_us=0.0)
    assert parts is not None and len(parts) == 2
    alloc = next(a for a in program.allocs if a.id == program.outputs.alloc_id)
    size = int(np.prod(alloc.shape))
    room = np.frombuffer(mmap.mmap(-1, size * 4), dtype=np.float32, count=size)
    one = np.asarray(execute(program, args).outputs)
    many = np.asarray(split.execute_split(program, args, parts, room).outputs)
    assert one.tobytes() == many.tobytes()
    bits, _ = reference(args[0], 6 * 64)
    expected = np.concatenate([bits[:, i * 64:(i + 1) * 64].astype(np.uint16) for i in range(6)])
    np.testing.assert_array_equal(one, expected.astype(np.float32) + np.tile(args[1], (6, 1)))
