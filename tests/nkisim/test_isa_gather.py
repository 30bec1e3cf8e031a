"""Cross-partition movement and gathers against NumPy, in both dialects: nc_stream_shuffle,
nc_n_gather (legacy nl.gather_flattened), sequence_bounds and (NKI 0.6 only) nonzero_with_count;
their documented errors, the runtime bounds checks on index data, program round trips, costs,
and what stays refused (local_gather) with the reason."""
import ml_dtypes
import numpy as np
import pytest

import nkisim
from nkisim import errors
from nkisim import program as programs
from nkisim.cost import rules
from nkisim.cost.params import DEFAULT_PARAMS
from nkisim.execute import execute
from nkisim.runtime import ArgSpec, trace_kernel
from nkisim.settings import HardwareLimits

nkisim.install()

import neuronxcc.nki as lnki  # noqa: E402
import neuronxcc.nki.isa as lisa  # noqa: E402
import neuronxcc.nki.language as lnl  # noqa: E402
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402
from kernel_helpers import load, store  # noqa: E402

F32 = np.dtype(np.float32)
BF16 = np.dtype(ml_dtypes.bfloat16)
U32 = np.dtype(np.uint32)
I32 = np.dtype(np.int32)

# reverse each quadrant, but leave partitions 3 and 17 of every quadrant as dst had them
MASK = [255 if i in (3, 17) else 31 - i for i in range(32)]


def rng(seed=0):
    return np.random.default_rng(seed)


def lstore(tile):
    out = lnl.ndarray(tile.shape, tile.dtype, buffer=lnl.shared_hbm)
    lnl.store(out, tile)
    return out


def shuffled(src, dst, mask):
    """What the ISA reference says the shuffle leaves in dst."""
    out = dst.copy()
    for i in range(dst.shape[0]):
        e = mask[i % 32]
        if e != 255:
            out[i] = src[(i // 32) * 32 + e]
    return out


def bounds(ids):
    """The ISA reference's sequence_bounds, as a loop: [start, end) of each run, padding n and -1."""
    n = len(ids)
    starts, ends = np.zeros(n, np.int64), np.zeros(n, np.int64)
    for i in range(n):
        starts[i] = n if ids[i] == 0 else (starts[i - 1] if i and ids[i] == ids[i - 1] else i)
    for i in range(n - 1, -1, -1):
        ends[i] = -1 if ids[i] == 0 else (ends[i + 1] if i < n - 1 and ids[i] == ids[i + 1] else i + 1)
    return np.stack([starts, ends])[None]


# ----- nc_stream_shuffle -------------------------------------------------------------------------

@nki.jit
def shuffle_current(a, b):
    dst = load(b)
    nisa.nc_stream_shuffle(dst=dst, src=load(a), shuffle_mask=MASK)
    return store(dst)


@lnki.jit
def shuffle_legacy(a, b):
    dst = lnl.load(b)
    lisa.nc_stream_shuffle(lnl.load(a), dst, MASK)
    return lstore(dst)


@nki.jit
def shuffle_through_psum(a):
    """Vector reads and writes PSUM: a full reversal (no 255) from SBUF into PSUM."""
    acc = nl.ndarray(a.shape, a.dtype, buffer=nl.psum)
    nisa.nc_stream_shuffle(dst=acc, src=load(a), shuffle_mask=list(range(31, -1, -1)))
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=out, src=acc)
    return store(out)


@nki.jit
def shuffle_in_place(a):
    t = load(a)
    nisa.nc_stream_shuffle(dst=t, src=t, shuffle_mask=[(i + 1) % 32 for i in range(32)])
    return store(t)


@nki.jit
def shuffle_second_quadrant(a, b):
    """32 active partitions: src and dst may start on different quadrants."""
    dst = load(b)
    src = load(a)
    nisa.nc_stream_shuffle(dst=dst[96:128, :], src=src[32:64, :], shuffle_mask=MASK)
    return store(dst)


@pytest.mark.parametrize("dtype", [F32, BF16, I32])
def test_stream_shuffle_moves_partitions_within_quadrants_in_both_dialects(dtype):
    a = (rng(1).standard_normal((128, 48)) * 100).astype(dtype)
    b = (rng(2).standard_normal((128, 48)) * 100).astype(dtype)
    want = shuffled(a, b, MASK)
    np.testing.assert_array_equal(shuffle_current(a, b), want)
    np.testing.assert_array_equal(shuffle_legacy(a, b), want)


@lnki.jit
def shuffle_legacy_masked(a, b):
    """mask= (legacy) applies to dst: partitions it leaves out keep their values."""
    dst = lnl.load(b)
    i_p = lnl.arange(128)[:, None]
    lisa.nc_stream_shuffle(lnl.load(a), dst, list(range(31, -1, -1)), mask=(i_p < 64))
    return lstore(dst)


def test_legacy_stream_shuffle_honours_its_mask():
    a = rng(17).standard_normal((128, 8)).astype(F32)
    b = rng(18).standard_normal((128, 8)).astype(F32)
    want = b.copy()
    want[:64] = shuffled(a, b, list(range(31, -1, -1)))[:64]
    np.testing.assert_array_equal(shuffle_legacy_masked(a, b), want)


def test_stream_shuffle_through_psum_in_place_and_across_quadrants():
    a = rng(3).standard_normal((128, 16)).astype(F32)
    b = rng(4).standard_normal((128, 16)).astype(F32)
    np.testing.assert_array_equal(shuffle_through_psum(a), shuffled(a, a, list(range(31, -1, -1))))
    np.testing.assert_array_equal(shuffle_in_place(a), shuffled(a, a, [(i + 1) % 32 for i in range(32)]))
    want = b.copy()
    want[96:128] = shuffled(a[32:64], b[96:128], MASK)
    np.testing.assert_array_equal(shuffle_second_quadrant(a, b), want)


def test_stream_shuffle_reads_dst_only_when_an_entry_keeps_a_partition():
    a = np.ones((128, 8), F32)
    keeping = trace_kernel(shuffle_current, [a, a], {})[0]
    moving = trace_kernel(shuffle_in_place, [a], {})[0]
    shuffle = [r for r in keeping.records if r.opcode == "nc_stream_shuffle"][0]
    assert len(shuffle.reads) == 2 and shuffle.reads[1] == shuffle.writes[0]
    assert len([r for r in moving.records if r.opcode == "nc_stream_shuffle"][0].reads) == 1
    # the cost is src's pass, whatever dst's reading adds: max(MIN_II, N) Vector cycles
    assert rules.COST_RULES["nc_stream_shuffle"](shuffle, DEFAULT_PARAMS).ns == pytest.approx(
        (DEFAULT_PARAMS.dve_min_ii + DEFAULT_PARAMS.dve_overhead_cycles) / DEFAULT_PARAMS.dve_ghz)


def _shuffle_calling(body):
    @nki.jit
    def kernel(a):
        t = load(a)
        body(t)
        return store(t)
    return kernel


A = np.ones((128, 8), F32)


@pytest.mark.parametrize("body, error, words", [
    (lambda t: nisa.nc_stream_shuffle(dst=t, src=t, shuffle_mask=list(range(16))), errors.ShapeError,
     "needs exactly 32"),
    (lambda t: nisa.nc_stream_shuffle(dst=t, src=t, shuffle_mask=[40] * 32), errors.ShapeError,
     "source partition 0..31"),
    (lambda t: nisa.nc_stream_shuffle(dst=t, src=t, shuffle_mask=[0.5] * 32), errors.ShapeError, "must be an int"),
    (lambda t: nisa.nc_stream_shuffle(dst=t[16:48, :], src=t[64:96, :], shuffle_mask=MASK), errors.ShapeError,
     "starts at partition 16"),
    (lambda t: nisa.nc_stream_shuffle(dst=t[0:64, :], src=t[32:96, :], shuffle_mask=MASK), errors.ShapeError,
     "starts at partition 32"),
    (lambda t: nisa.nc_stream_shuffle(dst=t[0:64, :], src=t[0:32, :], shuffle_mask=list(range(32))),
     errors.ShapeError, "has 32 partitions"),
    (lambda t: nisa.nc_stream_shuffle(dst=t[:, 0:4], src=t, shuffle_mask=MASK), errors.ShapeError,
     "as many elements per partition"),
    (lambda t: nisa.nc_stream_shuffle(dst=nl.ndarray((128, 8), nl.float16, buffer=nl.sbuf), src=t,
                                      shuffle_mask=MASK), errors.UnsupportedOperationError, "unchanged"),
], ids=["short-mask", "entry-range", "entry-type", "start-32", "start-64", "beyond-src", "free-size", "dtype"])
def test_stream_shuffle_refuses_what_the_reference_forbids(body, error, words):
    with pytest.raises(error) as caught:
        _shuffle_calling(body)(A)
    assert words in str(caught.value)


def test_legacy_stream_shuffle_refuses_a_cast_and_an_affine_mask_entry():
    @lnki.jit
    def cast(a):
        t = lnl.load(a)
        lisa.nc_stream_shuffle(t, t, MASK, dtype=lnl.float16)
        return lstore(t)

    @lnki.jit
    def affine(a):
        t = lnl.load(a)
        lisa.nc_stream_shuffle(t, t, [lnl.arange(32)[:, None]] * 32)
        return lstore(t)

    with pytest.raises(errors.UnsupportedOperationError, match="moves elements unchanged"):
        cast(A)
    with pytest.raises(errors.UnsupportedOperationError, match="affine expression") as caught:
        affine(A)
    assert caught.value.code == "err_not_simulated"


# ----- nc_n_gather / nl.gather_flattened ---------------------------------------------------------

@nki.jit
def gather_current(data, idx):
    out = nl.ndarray(idx.shape, data.dtype, buffer=nl.sbuf)
    nisa.nc_n_gather(dst=out, data=load(data), indices=load(idx))
    return store(out)


@nki.jit
def gather_into_flat(data, idx):
    """dst needs only indices' elements per partition, not its free shape."""
    out = nl.ndarray((idx.shape[0], idx.size // idx.shape[0]), data.dtype, buffer=nl.sbuf)
    nisa.nc_n_gather(dst=out, data=load(data), indices=load(idx))
    return store(out)


@lnki.jit
def gather_legacy(data, idx):
    return lstore(lnl.gather_flattened(lnl.load(data), lnl.load(idx)))


@lnki.jit
def gather_legacy_cast(data, idx):
    return lstore(lnl.gather_flattened(lnl.load(data), lnl.load(idx), dtype=lnl.float16))


def take(data, idx):
    flat = data.reshape(data.shape[0], -1)
    return np.take_along_axis(flat, idx.reshape(idx.shape[0], -1).astype(np.int64), 1).reshape(idx.shape)


@pytest.mark.parametrize("dshape, ishape", [((128, 512), (128, 700)), ((64, 8, 16), (64, 4, 5)),
                                            ((16, 2, 3, 4), (16, 6))])
def test_n_gather_takes_along_each_partitions_flattened_row_in_both_dialects(dshape, ishape):
    data = rng(5).standard_normal(dshape).astype(F32)
    row = int(np.prod(dshape[1:]))
    idx = rng(6).integers(0, row, ishape).astype(U32)
    want = take(data, idx)
    np.testing.assert_array_equal(gather_current(data, idx), want)
    np.testing.assert_array_equal(gather_legacy(data, idx), want)
    np.testing.assert_array_equal(gather_into_flat(data, idx), want.reshape(ishape[0], -1))
    np.testing.assert_array_equal(gather_legacy_cast(data, idx), want.astype(np.float16))


def test_n_gather_keeps_integer_bits():
    data = rng(7).integers(-2**31, 2**31 - 1, (32, 40)).astype(I32)
    idx = rng(8).integers(0, 40, (32, 40)).astype(U32)
    np.testing.assert_array_equal(gather_current(data, idx), take(data, idx))


def test_an_index_out_of_bounds_is_an_error_naming_it_when_the_program_runs():
    data = np.zeros((8, 10), F32)
    idx = np.zeros((8, 4), U32)
    idx[5, 2] = 10
    # tracing sees only shapes: the index values arrive with the inputs
    for kernel in (gather_current, gather_legacy):
        with pytest.raises(programs.ProgramError) as caught:
            kernel(data, idx)
        text = str(caught.value)
        assert "index 10 (partition 5, element 2" in text and "0..9" in text


@pytest.mark.parametrize("make, error, words", [
    (lambda d, i: nisa.nc_n_gather(dst=nl.ndarray(i.shape, nl.float32, buffer=nl.sbuf), data=d,
                                   indices=nl.ndarray(i.shape, nl.int32, buffer=nl.sbuf)),
     errors.UnsupportedOperationError, "must be uint32"),
    (lambda d, i: nisa.nc_n_gather(dst=nl.ndarray(i.shape, nl.float16, buffer=nl.sbuf), data=d, indices=i),
     errors.UnsupportedOperationError, "dtype of data"),
    (lambda d, i: nisa.nc_n_gather(dst=nl.ndarray(i.shape, nl.float32, buffer=nl.psum), data=d, indices=i),
     errors.MemorySpaceError, "cannot reach PSUM"),
    (lambda d, i: nisa.nc_n_gather(dst=nl.ndarray((128, 3), nl.float32, buffer=nl.sbuf), data=d, indices=i),
     errors.ShapeError, "as many elements per partition"),
    (lambda d, i: nisa.nc_n_gather(dst=nl.ndarray((32, 4), nl.float32, buffer=nl.sbuf), data=d[0:64, :],
                                   indices=i[0:32, :]),
     errors.ShapeError, "same partitions"),
], ids=["index-dtype", "dst-dtype", "psum", "dst-size", "partitions"])
def test_n_gather_refuses_what_the_reference_forbids(make, error, words):
    @nki.jit
    def kernel(data, idx):
        d, i = load(data), load(idx)
        make(d, i)
        return store(d)
    with pytest.raises(error) as caught:
        kernel(np.zeros((128, 16), F32), np.zeros((128, 4), U32))
    assert words in str(caught.value)


def test_legacy_gather_refuses_psum_data():
    @lnki.jit
    def kernel(data, idx):
        acc = lnl.zeros((128, 16), lnl.float32, buffer=lnl.psum)
        return lstore(lnl.gather_flattened(acc, lnl.load(idx)))
    with pytest.raises(errors.MemorySpaceError):
        kernel(np.zeros((128, 16), F32), np.zeros((128, 4), U32))


def test_n_gather_costs_one_gpsimd_start_per_512_elements():
    p = DEFAULT_PARAMS
    for n, starts in ((100, 1), (512, 1), (513, 2), (1600, 4)):
        data, idx = np.zeros((128, 64), F32), np.zeros((128, n), U32)
        rec = [r for r in trace_kernel(gather_current, [data, idx], {})[0].records if r.opcode == "nc_n_gather"][0]
        cost = rules.COST_RULES["nc_n_gather"](rec, p)
        assert cost.queue == "POOL"
        assert cost.ns == pytest.approx((n + starts * p.pool_overhead_cycles) / p.pool_ghz)


# ----- sequence_bounds ---------------------------------------------------------------------------

@nki.jit
def bounds_current(ids):
    out = nl.ndarray((1, 2, ids.shape[1]), ids.dtype, buffer=nl.sbuf)
    nisa.sequence_bounds(dst=out, segment_ids=load(ids))
    return store(out)


@lnki.jit
def bounds_legacy(ids):
    return lstore(lisa.sequence_bounds(segment_ids=lnl.load(ids)))


@lnki.jit
def bounds_legacy_float(ids):
    return lstore(lisa.sequence_bounds(segment_ids=lnl.load(ids), dtype=lnl.float32))


IDS = np.array([[0, 1, 1, 1, 2, 2, 0, 0, 3, 1, 1, 0, 4]], np.int32)


@pytest.mark.parametrize("dtype", [I32, F32])
def test_sequence_bounds_gives_each_runs_start_and_end_in_both_dialects(dtype):
    ids = IDS.astype(dtype)
    want = bounds(ids[0])
    np.testing.assert_array_equal(bounds_current(ids), want.astype(dtype))
    np.testing.assert_array_equal(bounds_legacy(ids), want.astype(dtype))
    np.testing.assert_array_equal(bounds_legacy_float(IDS), want.astype(F32))
    long = rng(9).integers(0, 4, (1, 512)).astype(dtype)
    np.testing.assert_array_equal(bounds_current(long), bounds(long[0]).astype(dtype))


def test_sequence_bounds_refuses_what_the_reference_forbids():
    with pytest.raises(errors.ShapeError, match="partition dimension 1"):
        bounds_legacy(np.zeros((2, 8), I32))
    with pytest.raises(errors.UnsupportedOperationError, match="float32 or int32"):
        bounds_legacy(np.zeros((1, 8), np.int16))
    with pytest.raises(errors.UnsupportedOperationError, match="float32 or int32"):
        lnki.jit(lambda ids: lstore(lisa.sequence_bounds(segment_ids=lnl.load(ids), dtype=lnl.float16)))(
            np.zeros((1, 8), I32))
    with pytest.raises(programs.ProgramError, match=r"segment id -2 at element 3 is not a non-negative"):
        bounds_current(np.array([[1, 1, 0, -2]], I32))
    with pytest.raises(programs.ProgramError, match="segment id 1.5"):
        bounds_current(np.array([[1, 1.5]], F32))


# ----- nonzero_with_count (NKI 0.6) -------------------------------------------------------------

@nki.jit
def nonzero_current(a, before):
    out = load(before)
    nisa.nonzero_with_count(dst=out, src=load(a), index_offset=16, padding_val=-1)
    return store(out)


def nonzeros(a, before, offset, padding):
    """The reference's behaviour in partitions 0, 16, ..., 112; the others keep dst's values."""
    out = before.copy()
    for r in range(0, a.shape[0], 16):
        found = [i + offset for i in range(a.shape[1]) if a[r, i] != 0]
        out[r] = found + [padding] * (a.shape[1] - len(found)) + [len(found)]
    return out


@pytest.mark.parametrize("dtype", [F32, I32])
def test_nonzero_with_count_fills_each_cores_first_partition(dtype):
    a = (rng(14).random((128, 24)) < 0.3).astype(dtype) * rng(15).integers(1, 9, (128, 24)).astype(dtype)
    a[32] = 0                         # no nonzero: all padding, count 0
    a[48] = 1                         # all nonzero
    before = rng(16).integers(-50, 50, (128, 25)).astype(I32)
    np.testing.assert_array_equal(nonzero_current(a, before), nonzeros(a, before, 16, -1))


def test_nonzero_with_count_refuses_what_the_reference_forbids():
    def kernel_with(body):
        @nki.jit
        def kernel(a):
            t = load(a)
            body(t)
            return store(t)
        return kernel
    wrong = [
        (lambda t: nisa.nonzero_with_count(dst=nl.ndarray((128, 8), nl.int32, buffer=nl.sbuf), src=t),
         errors.ShapeError, "one more element"),
        (lambda t: nisa.nonzero_with_count(dst=nl.ndarray((128, 9), nl.float32, buffer=nl.sbuf), src=t),
         errors.UnsupportedOperationError, "int32 dst"),
        (lambda t: nisa.nonzero_with_count(dst=nl.ndarray((128, 9), nl.int32, buffer=nl.sbuf), src=t,
                                           padding_val=0.5), errors.UnsupportedOperationError, "int32 number"),
        (lambda t: nisa.nonzero_with_count(dst=nl.ndarray((128, 9), nl.int32, buffer=nl.psum), src=t),
         errors.MemorySpaceError, "sbuf"),
        (lambda t: nisa.nonzero_with_count(dst=nl.ndarray((128, 9), nl.int32, buffer=nl.sbuf)[0:64, :],
                                           src=t[64:128, :]), errors.UnsupportedOperationError, "different partitions"),
    ]
    for body, error, words in wrong:
        with pytest.raises(error) as caught:
            kernel_with(body)(A)
        assert words in str(caught.value)


# ----- the program crosses the trust boundary ----------------------------------------------------

@nki.jit
def all_four(a, b, data, idx, ids, z, before):
    dst = load(b)
    nisa.nc_stream_shuffle(dst=dst, src=load(a), shuffle_mask=MASK)
    g = nl.ndarray(idx.shape, data.dtype, buffer=nl.sbuf)
    nisa.nc_n_gather(dst=g, data=load(data), indices=load(idx))
    s = nl.ndarray((1, 2, ids.shape[1]), ids.dtype, buffer=nl.sbuf)
    nisa.sequence_bounds(dst=s, segment_ids=load(ids))
    nz = load(before)
    nisa.nonzero_with_count(dst=nz, src=load(z), index_offset=3, padding_val=-7)
    return store(dst), store(g), store(s), store(nz)


def test_a_traced_program_round_trips_validates_and_executes_to_the_same_values():
    a = rng(10).standard_normal((128, 32)).astype(F32)
    b = rng(11).standard_normal((128, 32)).astype(F32)
    data = rng(12).standard_normal((128, 64)).astype(F32)
    idx = rng(13).integers(0, 64, (128, 20)).astype(U32)
    z = (rng(14).random((128, 24)) < 0.4).astype(F32)
    before = rng(15).integers(-9, 9, (128, 25)).astype(I32)
    args = [a, b, data, idx, IDS, z, before]
    program, _ = trace_kernel(all_four, [ArgSpec(x.shape, x.dtype) for x in args], {})
    again = programs.decode(programs.encode(program))
    programs.validate(again, HardwareLimits(), args)
    local = execute(program, args).outputs
    remote = execute(again, args).outputs
    wants = (shuffled(a, b, MASK), take(data, idx), bounds(IDS[0]).astype(I32), nonzeros(z, before, 3, -7))
    for got, want in zip(remote, wants, strict=True):
        np.testing.assert_array_equal(got, want)
    for x, y in zip(local, remote):
        np.testing.assert_array_equal(x, y)
    assert {r.opcode for r in again.records} >= {"nc_stream_shuffle", "nc_n_gather", "sequence_bounds",
                                                 "nonzero_with_count"}


def test_a_forged_shuffle_mask_is_refused_when_it_executes():
    a = np.ones((128, 8), F32)
    program, _ = trace_kernel(shuffle_current, [a, a], {})
    shuffle = [r for r in program.records if r.opcode == "nc_stream_shuffle"][0]
    shuffle.params["mask"] = [300] * 32
    with pytest.raises(programs.ProgramError, match="shuffle mask is 32 ints"):
        execute(program, [a, a])


# ----- what stays refused, and why ---------------------------------------------------------------

def test_local_gather_is_refused_saying_why():
    @nki.jit
    def current(a):
        t = load(a)
        nisa.local_gather(dst=t, src_buffer=t, index=t)
        return store(t)

    @lnki.jit
    def legacy(a):
        t = lnl.load(a)
        return lstore(lisa.local_gather(t, t))

    for kernel in (current, legacy):
        with pytest.raises(errors.NotSimulatedError) as caught:
            kernel(A)
        assert "which source elements" in str(caught.value)
