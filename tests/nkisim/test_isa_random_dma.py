"""NKI 0.6's dma_compute (the DMA engines' fp32 sum of up to 16 sources) and random bits
(nisa.rng, seeded by nisa.set_rng_seed: nkisim's draw, not the hardware's stream) against NumPy:
values, the seed's run-time value deciding the bits, truncation to the integer dtypes, a
generous uniformity check, the documented refusals, the programs' round trip through encode /
decode / validate, and what validation holds a decoded record to. Neither instruction is in the
SDK 2.26 reference, so the legacy dialect has neither."""
import mmap

import ml_dtypes
import numpy as np
import pytest

import nkisim
from nkisim import cost, errors, split
from nkisim import program as programs
from nkisim.cost.rules import COST_RULES, DmaCost
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

F32, BF16 = np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16)
INTEGERS = [np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32]


def rng(seed):
    return np.random.default_rng(seed)


def specs(args):
    return [ArgSpec(a.shape, a.dtype) for a in args]


def traced(kernel, args):
    program, _ = trace_kernel(kernel, specs(args), {})
    return programs.decode(programs.encode(program))


def round_trip(kernel, args, inputs=None):
    """Traced from shapes only, through bytes and validation, executed on `inputs` (default the
    arrays traced for): its outputs."""
    again = traced(kernel, args)
    inputs = list(args) if inputs is None else list(inputs)
    programs.validate(again, HardwareLimits(), inputs)
    return execute(again, inputs).outputs


def records(kernel, args, opcode):
    run = nkisim.run_kernel(kernel, tuple(args), {})
    return run, [r for r in run.program.records if r.opcode == opcode]


def fp32_sum(*arrays):
    total = arrays[0].astype(F32)
    for a in arrays[1:]:
        total = total + a.astype(F32)
    return total


# ----- dma_compute ---------------------------------------------------------------------------------

@nki.jit
def three_way(a, b, c):
    """HBM and SBUF sources of three dtypes, summed into a bf16 SBUF tile and an fp32 HBM tensor."""
    sb = load(b)
    tile = nl.ndarray(a.shape, nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_compute(dst=tile, srcs=[a, sb, load(c)], reduce_op=nl.add)
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    nisa.dma_compute(out, [a, sb, c], nl.add, scales=[1.0, 1.0, 1.0])
    return store(tile), out


def three_inputs():
    g = rng(1)
    return (g.normal(size=(128, 96)).astype(F32), g.normal(size=(128, 96)).astype(F32),
            g.normal(size=(128, 96)).astype(BF16))


def test_dma_compute_sums_its_sources_in_fp32_into_dst_of_any_buffer_and_dtype():
    a, b, c = three_inputs()
    tile, out = three_way(a, b, c)
    expected = fp32_sum(a, b, c)
    assert tile.dtype == BF16 and out.dtype == F32
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(tile, expected.astype(BF16))
    again = round_trip(three_way, (a, b, c))
    np.testing.assert_array_equal(again[0], tile)
    np.testing.assert_array_equal(again[1], out)


def test_dma_compute_takes_one_to_sixteen_sources_of_equal_element_counts():
    @nki.jit
    def many(x, n):
        out = nl.ndarray((64, 32), nl.float32, buffer=nl.shared_hbm)   # another shape, the same count
        nisa.dma_compute(dst=out, srcs=[x] * n, reduce_op=nl.add)
        return out
    x = rng(2).normal(size=(32, 64)).astype(F32)
    np.testing.assert_array_equal(many(x, 1), x.reshape(64, 32))
    np.testing.assert_array_equal(many(x, 16), fp32_sum(*[x] * 16).reshape(64, 32))
    with pytest.raises(errors.UnsupportedOperationError, match="1 to 16 sources"):
        many(x, 17)


def test_dma_compute_accumulates_into_a_source_it_also_writes():
    @nki.jit
    def accumulate(x, y):
        acc = load(x)
        nisa.dma_compute(dst=acc, srcs=[acc, y], reduce_op=nl.add)
        nisa.dma_compute(dst=acc, srcs=[acc, y], reduce_op=nl.add)
        return store(acc)
    x, y = rng(3).normal(size=(2, 128, 40)).astype(F32)
    np.testing.assert_array_equal(accumulate(x, y), (x + y) + y)
    np.testing.assert_array_equal(round_trip(accumulate, (x, y)), (x + y) + y)


def psum_source(x):
    p = nl.ndarray(x.shape, nl.float32, buffer=nl.psum)
    nisa.tensor_copy(dst=p, src=load(x))
    return p


@pytest.mark.parametrize("call, error, words", [
    (lambda o, x: nisa.dma_compute(o, [x, x], nl.multiply), errors.UnsupportedOperationError, "must be nl.add"),
    (lambda o, x: nisa.dma_compute(o, [x, x], nl.add, scales=[1.0, 2.0]), errors.UnsupportedOperationError,
     "scale of 1.0 only"),
    (lambda o, x: nisa.dma_compute(o, [x, x], nl.add, scales=[1.0]), errors.ArgumentError, "one number per source"),
    (lambda o, x: nisa.dma_compute(o, x, nl.add), errors.ArgumentError, "must be a list of tensors"),
    (lambda o, x: nisa.dma_compute(o, [], nl.add), errors.UnsupportedOperationError, "1 to 16 sources"),
    (lambda o, x: nisa.dma_compute(o, [x, x[0:64, :]], nl.add), errors.ShapeError, "as many as dst"),
    (lambda o, x: nisa.dma_compute(o, [x, psum_source(x)], nl.add), errors.MemorySpaceError, "PSUM"),
    (lambda o, x: nisa.dma_compute(x, [o, o], nl.add), errors.KernelContractError, "read-only"),
    (lambda o, x: nisa.dma_compute(o, [x], nl.add, oob_mode=nisa.oob_mode.skip), errors.UnsupportedOperationError,
     "indirect"),
    (lambda o, x: nisa.dma_compute(o, [x], nl.add, oob_mode=1), errors.ArgumentError, "nisa.oob_mode"),
    (lambda o, x: nisa.dma_compute(o, [x], nl.add, unique_indices=False), errors.UnsupportedOperationError,
     "vector_offset"),
], ids=["multiply", "scale-2", "scales-count", "not-a-list", "no-source", "element-count", "psum-source",
        "dst-is-an-input", "oob-skip", "raw-oob-code", "non-unique"])
def test_dma_compute_refuses_what_the_reference_forbids(call, error, words):
    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        call(out, x)
        return out
    with pytest.raises(error, match=words):
        kernel(np.ones((128, 32), F32))


def test_dma_compute_is_only_in_the_current_dialect():
    with pytest.raises(errors.NKISimError):
        lisa.dma_compute        # not in the SDK 2.26 reference


def test_dma_compute_moves_every_source_on_the_dma_queues_with_a_static_issue():
    a, b, c = three_inputs()
    run, (to_sbuf, to_hbm) = records(three_way, (a, b, c), "dma_compute")
    rule, p = COST_RULES["dma_compute"], cost.CostParams()
    moved = rule(to_hbm, p)
    assert isinstance(moved, DmaCost)
    assert moved.nbytes == a.nbytes + b.nbytes + c.nbytes          # each source read once
    assert to_hbm.attrs["dge_mode"] == 0                            # prebuilt descriptors
    assert cost.rules.dma_issue_queues(to_hbm, True, p.dge_default_queues) == ("DMA-issue",)
    reads = to_hbm.reads
    to_hbm.reads = reads[:1]
    one = rule(to_hbm, p)
    to_hbm.reads = reads
    assert one.nbytes < moved.nbytes and one.descriptors < moved.descriptors
    assert cost.estimate(run).total_ns > 0


def test_validation_holds_a_decoded_dma_compute_to_the_dma_rules():
    @nki.jit
    def with_psum(x):
        p = psum_source(x)
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nisa.dma_compute(dst=out, srcs=[x, x], reduce_op=nl.add)
        tile = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=tile, src=p)
        return out, store(tile)
    x = np.ones((128, 32), F32)
    limits = HardwareLimits()

    def forged(change):
        program = traced(with_psum, (x,))
        rec = next(r for r in program.records if r.opcode == "dma_compute")
        psum = next(r.writes[0] for r in program.records if r.writes and r.writes[0].buffer == "psum")
        change(rec, psum)
        return program

    programs.validate(forged(lambda rec, psum: None), limits, [x])
    with pytest.raises(programs.ProgramError, match="PSUM"):
        programs.validate(forged(lambda rec, psum: rec.reads.__setitem__(1, psum)), limits, [x])
    with pytest.raises(programs.ProgramError, match="at most 16 sources"):
        programs.validate(forged(lambda rec, psum: rec.reads.extend(rec.reads * 8)), limits, [x])
    def shorter(rec, psum):
        r = rec.reads[1]
        rec.reads[1] = Region(r.alloc_id, r.buffer, r.start, (64, 32), r.strides, r.itemsize, r.dtype, 64)
    with pytest.raises(programs.ProgramError, match="destination's size"):
        programs.validate(forged(shorter), limits, [x])


# ----- rng and set_rng_seed ------------------------------------------------------------------------

def seeded_draws(dtype=nl.uint32, shape=(128, 256), reseed=False):
    @nki.jit
    def kernel(seed):
        s = load(seed)
        nisa.set_rng_seed(s)
        first = nl.ndarray(shape, dtype, buffer=nl.sbuf)
        nisa.rng(dst=first)
        second = nl.ndarray(shape, dtype, buffer=nl.sbuf)
        if reseed:
            nisa.set_rng_seed(src_seeds=s)
        nisa.rng(second, engine=nisa.engine.vector)
        return store(first), store(second)
    return kernel


def seed(n, dtype=np.int32):
    return np.array([[n]], dtype)


def test_the_same_seed_gives_the_same_sequence_and_another_seed_other_bits():
    kernel = seeded_draws()
    first, second = kernel(seed(42))
    again_first, again_second = kernel(seed(42))
    np.testing.assert_array_equal(first, again_first)
    np.testing.assert_array_equal(second, again_second)
    assert (first == second).mean() < 0.01                      # the sequence moves on
    other_first, other_second = kernel(seed(43))
    assert (first == other_first).mean() < 0.01 and (second == other_second).mean() < 0.01
    re_first, re_second = seeded_draws(reseed=True)(seed(42))
    np.testing.assert_array_equal(re_first, first)              # a new seed restarts the sequence
    np.testing.assert_array_equal(re_second, first)
    np.testing.assert_array_equal(kernel(seed(42, np.uint32))[0], first)   # the seed's 32 bits


def test_the_seed_is_the_value_the_program_reads_when_it_runs():
    """One program, traced from shapes: the bits follow the seed it is executed with."""
    kernel = seeded_draws()
    with_42 = round_trip(kernel, (seed(42),))
    np.testing.assert_array_equal(with_42[0], kernel(seed(42))[0])
    with_7 = round_trip(kernel, (seed(42),), inputs=(seed(7),))
    np.testing.assert_array_equal(with_7[0], kernel(seed(7))[0])
    assert (with_7[0] == with_42[0]).mean() < 0.01


@pytest.mark.parametrize("dtype", INTEGERS, ids=[np.dtype(d).name for d in INTEGERS])
def test_rng_keeps_the_least_significant_bits_of_each_32_bit_draw(dtype):
    bits = seeded_draws(nl.uint32)(seed(5))[0]
    narrow = seeded_draws(dtype)(seed(5))[0]
    assert narrow.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(narrow, bits.astype(dtype))     # NumPy's narrowing keeps the low bits
    np.testing.assert_array_equal(narrow.view(np.dtype(dtype).str.replace("i", "u")),
                                  (bits & np.uint32((1 << 8 * np.dtype(dtype).itemsize) - 1)).astype(
                                      np.dtype(dtype).str.replace("i", "u")))


def test_rng_bits_look_uniform():
    """Each of the 32 bits is set about half the time, and bytes fill their 256 values evenly
    (bounds generous enough never to fail by chance)."""
    bits = seeded_draws(shape=(128, 512))(seed(11))[0]
    n = bits.size
    for b in range(32):
        share = ((bits >> np.uint32(b)) & np.uint32(1)).mean()
        assert abs(share - 0.5) < 6 * np.sqrt(0.25 / n)
    counts = np.bincount((bits & np.uint32(0xFF)).ravel(), minlength=256)
    expected = n / 256
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 255 + 10 * np.sqrt(2 * 255)                    # mean 255, sd ~22.6


@nki.jit
def unseeded(x):
    a = nl.ndarray((128, 128), nl.uint16, buffer=nl.sbuf)
    b = nl.ndarray((128, 128), nl.uint16, buffer=nl.psum)      # the Vector engine writes PSUM too
    nisa.rng(dst=a)
    nisa.rng(dst=b)
    c = nl.ndarray((128, 128), nl.uint16, buffer=nl.sbuf)
    nisa.tensor_copy(dst=c, src=b)
    return store(a), store(c)


def test_unseeded_draws_are_the_programs_own_and_differ_from_each_other():
    x = np.zeros((1, 1), np.int32)
    a, c = unseeded(x)
    again = unseeded(x)
    np.testing.assert_array_equal(a, again[0])
    np.testing.assert_array_equal(c, again[1])
    assert (a == c).mean() < 0.01
    trip = round_trip(unseeded, (x,))
    np.testing.assert_array_equal(trip[0], a)
    np.testing.assert_array_equal(trip[1], c)


def test_the_seed_seeds_the_vector_engine_only():
    @nki.jit
    def on_gpsimd(seed):
        nisa.set_rng_seed(load(seed))
        g = nl.ndarray((128, 64), nl.uint32, buffer=nl.sbuf)
        nisa.rng(dst=g, engine=nisa.engine.gpsimd)
        return store(g)
    np.testing.assert_array_equal(on_gpsimd(seed(1)), on_gpsimd(seed(2)))
    run, (rec,) = records(on_gpsimd, (seed(1),), "rng")
    assert rec.engine is Engine.GPSIMD
    assert COST_RULES["rng"](rec, cost.CostParams()).queue == "POOL"


def test_rng_programs_keep_their_records_and_cost():
    run, recs = records(seeded_draws(), (seed(3),), "rng")
    assert [len(r.reads) for r in recs] == [1, 1] and [len(r.writes) for r in recs] == [2, 2]
    assert cost.estimate(run).total_ns > 0
    _, (seeding,) = records(seeded_draws(), (seed(3),), "set_rng_seed")
    assert seeding.writes[0].shape == (1, 2)


def rng_into(dst_dtype=nl.uint32, buffer=nl.sbuf, **kwargs):
    def body():
        t = nl.ndarray((128, 64), dst_dtype, buffer=buffer)
        nisa.rng(dst=t, **kwargs)
    return body


def seed_from(shape=(1, 1), dtype=nl.int32, buffer=nl.sbuf):
    def body():
        s = nl.ndarray(shape, dtype, buffer=buffer)
        nisa.memset(dst=s, value=0 if dtype != nl.float32 else 0.0) if buffer != nl.shared_hbm else None
        nisa.set_rng_seed(s)
    return body


@pytest.mark.parametrize("body, error, words", [
    (rng_into(nl.float32), errors.UnsupportedOperationError, "integer tile"),
    (rng_into(engine=nisa.engine.unknown), errors.UnsupportedOperationError, "set_rng_seed applies"),
    (rng_into(engine=nisa.engine.scalar), errors.UnsupportedOperationError, "Vector or GpSimd"),
    (rng_into(engine=5), errors.ArgumentError, "nisa.engine"),
    (rng_into(buffer=nl.psum, engine=nisa.engine.gpsimd), errors.MemorySpaceError, "GpSimd"),
    (seed_from(shape=(1, 2)), errors.ShapeError, r"\[1, 1\] tensor"),
    (seed_from(dtype=nl.float32), errors.UnsupportedOperationError, "int32 or uint32"),
    (seed_from(dtype=nl.int16), errors.UnsupportedOperationError, "int32 or uint32"),
    (seed_from(buffer=nl.shared_hbm), errors.MemorySpaceError, "src_seeds"),
], ids=["float-dst", "unknown-engine", "scalar-engine", "raw-engine-code", "gpsimd-psum", "seed-shape",
        "float-seed", "16-bit-seed", "hbm-seed"])
def test_rng_and_set_rng_seed_refuse_what_the_reference_forbids(body, error, words):
    @nki.jit
    def kernel(x):
        body()
        return store(load(x))
    with pytest.raises(error, match=words):
        kernel(np.zeros((1, 1), np.int32))


def test_gpsimd_rng_needs_neuroncore_v3():
    @nki.jit
    def kernel(x):
        t = nl.ndarray((128, 64), nl.uint32, buffer=nl.sbuf)
        nisa.rng(dst=t, engine=nisa.engine.gpsimd)
        return store(t)
    with pytest.raises(errors.UnsupportedOperationError, match="NeuronCore-v3"):
        nkisim.run_kernel(kernel, (np.zeros((1, 1), np.int32),), {}, settings=SimSettings(platform="trn1"))


def test_rand2_is_refused_before_trainium3_with_what_to_use():
    """(rand2 on Trainium3: tests/nkisim/test_isa_trn3.py; rand_set_state / rand_get_state:
    tests/nkisim/test_isa_rand_state.py)"""
    @nki.jit
    def kernel(x):
        t = load(x)
        nisa.rand2(dst=t, min=0.0, max=1.0)
        return store(t)
    with pytest.raises(errors.UnsupportedOperationError, match="NeuronCore-v4") as caught:
        kernel(np.zeros((1, 6), np.float32))
    assert "nisa.rng" in caught.value.remedy and "trn3" in caught.value.remedy


def test_neither_is_in_the_legacy_dialect():
    for name in ("rng", "set_rng_seed"):
        with pytest.raises(errors.NKISimError):
            getattr(lisa, name)


def test_forged_rng_records_cannot_execute():
    program = traced(seeded_draws(), (seed(3),))
    rec = next(r for r in program.records if r.opcode == "rng")
    rec.params = {"seeded": "yes"}
    with pytest.raises(programs.ProgramError, match="cannot execute"):
        execute(program, [seed(3)])
    program = traced(unseeded, (seed(0),))
    rec = next(r for r in program.records if r.opcode == "rng")
    rec.params = {"seed": 2 ** 70}
    with pytest.raises(programs.ProgramError, match="cannot execute"):
        execute(program, [seed(0)])


@nki.jit
def blocks_of_bits(seed, x):
    """Six blocks of one output, each drawn by the Vector engine after one seed and summed with
    x by the DMA engines: every block's bits depend on the draws before it."""
    out = nl.ndarray((6 * 128, 64), nl.float32, buffer=nl.shared_hbm)
    nisa.set_rng_seed(load(seed))
    for i in range(6):
        bits = nl.ndarray((128, 64), nl.uint16, buffer=nl.sbuf)
        nisa.rng(dst=bits)
        nisa.dma_compute(dst=out[i * 128:(i + 1) * 128, :], srcs=[bits, x], reduce_op=nl.add)
    return out


def test_a_split_execution_draws_the_same_bits():
    args = [seed(9), rng(4).normal(size=(128, 64)).astype(F32)]
    program, _ = trace_kernel(blocks_of_bits, specs(args), {})
    parts = split.plan(program, 2, largest_share=1.0, min_work_us=0.0)
    assert parts is not None and len(parts) == 2
    alloc = next(a for a in program.allocs if a.id == program.outputs.alloc_id)
    room = np.frombuffer(mmap.mmap(-1, int(np.prod(alloc.shape)) * 4), dtype=F32, count=int(np.prod(alloc.shape)))
    one = execute(program, args).outputs
    many = split.execute_split(program, args, parts, room).outputs
    assert np.asarray(one).tobytes() == np.asarray(many).tobytes()
    blocks = np.asarray(one).reshape(6, 128, 64) - args[1]
    assert all((blocks[i] != blocks[i + 1]).mean() > 0.99 for i in range(5))
