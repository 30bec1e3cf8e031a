"""SDK 2.26's direct allocation API (neuronxcc.nki.compiler's sbuf/psum alloc, mod_alloc,
auto_alloc; nkisim.direct_alloc): each logical tile's physical place by the documented rules,
values against NumPy, programs through bytes and validation, every documented error, the
all-direct-or-all-auto rule, force_auto_alloc, and logical tiles that share physical bytes (a
read after the slot was reused is the lifetime conflict the guide describes). A legacy-only API:
NKI 0.6 has no ncc.sbuf / ncc.psum, so every kernel here is in the legacy dialect."""
import importlib.util
import sys

import numpy as np
import pytest

import nkisim
from nkisim import direct_alloc, errors
from nkisim import program as programs
from nkisim.execute import execute
from nkisim.machine import Machine
from nkisim.runtime import ArgSpec, trace_kernel
from nkisim.settings import HardwareLimits

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.compiler as ncc  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402
from marker_lines import marker_lines  # noqa: E402

line_of = marker_lines(__file__)
# tensors with block dimensions are what direct allocation places; nkisim warns of them anyway
pytestmark = pytest.mark.filterwarnings("ignore::nkisim.instructions.language_ops.BlockDimensionWarning")
LIMITS = HardwareLimits()


def f32(*shape, seed=0):
    return np.random.default_rng(seed).random(shape, dtype=np.float32)


def run(kernel, *args):
    return nkisim.run_kernel(kernel, args, {})


def round_trip(kernel, *args):
    """The program through bytes and validation, executed: its outputs."""
    program, _ = trace_kernel(kernel, [ArgSpec(a.shape, a.dtype) for a in args], {})
    again = programs.decode(programs.encode(program))
    programs.validate(again, LIMITS, list(args))
    return execute(again, list(args)).outputs


def traced_machine(kernel, *args) -> Machine:
    return trace_kernel(kernel, [ArgSpec(a.shape, a.dtype) for a in args], {})[1]


def expect(error, code, words, kernel, *args, tag=None):
    with pytest.raises(error) as caught:
        run(kernel, *args)
    err = caught.value
    assert err.code == code, str(err)
    for w in words:
        assert w in str(err), str(err)
    if tag is not None:
        assert err.site.lineno == line_of(tag), str(err)
    return err


# ----- kernels ------------------------------------------------------------------------------------------

@nki.jit
def reversed_rows(x):
    """x (4*128, 64): each 128-row tile squared, its tiles placed back to front by sbuf.alloc."""
    n = x.shape[0] // 128
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    tiles = nl.ndarray((n, nl.par_dim(128), 64), nl.float32,
                       buffer=ncc.sbuf.alloc(lambda idx, pdim, fdim: (0, (3 - idx[0]) * fdim)))
    sq = nl.ndarray((n, nl.par_dim(128), 64), nl.float32,
                    buffer=ncc.sbuf.alloc(lambda idx, pdim, fdim: (0, 4096 + idx[0] * fdim)))
    for i in nl.affine_range(n):
        tiles[i] = nl.load(x[i * 128:(i + 1) * 128, :])
    for i in nl.affine_range(n):
        sq[i] = nl.multiply(tiles[i], tiles[i])
        nl.store(out[i * 128:(i + 1) * 128, :], sq[i])
    return out


@nki.jit
def double_buffered(x):
    """x (n*128, 256): exp of each row tile, loads and results rotating through two slots each."""
    n = x.shape[0] // 128
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    buf = nl.ndarray((n, nl.par_dim(128), 256), nl.float32,
                     buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
    res = nl.ndarray((n, nl.par_dim(128), 256), nl.float32,
                     buffer=ncc.sbuf.mod_alloc(base_addr=2048, num_free_tiles=(2,)))
    for i in nl.affine_range(n):
        buf[i] = nl.load(x[i * 128:(i + 1) * 128, :])
        res[i] = nl.exp(buf[i])
        nl.store(out[i * 128:(i + 1) * 128, :], res[i])
    return out


def load_all_then_use(x):
    """The rotation bug: every tile loaded before any is used, through two slots."""
    n = x.shape[0] // 128
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    buf = nl.ndarray((n, nl.par_dim(128), 256), nl.float32,
                     buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
    res = nl.ndarray((n, nl.par_dim(128), 256), nl.float32,
                     buffer=ncc.sbuf.mod_alloc(base_addr=2048, num_free_tiles=(2,)))
    for i in nl.affine_range(n):
        buf[i] = nl.load(x[i * 128:(i + 1) * 128, :])
    for i in nl.affine_range(n):
        res[i] = nl.exp(buf[i])  # <stale-read>
        nl.store(out[i * 128:(i + 1) * 128, :], res[i])
    return out


rotation_bug = nki.jit(load_all_then_use)


@nki.jit
def blocked_matmul(a_t, b):
    """a_t (K, 128), b (K, N): a_t.T @ b, K in 128-row tiles, N in 512-column PSUM tiles that
    rotate through two banks while each is accumulated, copied out and stored."""
    k_total, m = a_t.shape
    kt, nt = k_total // 128, b.shape[1] // 512
    out = nl.ndarray((m, b.shape[1]), nl.float32, buffer=nl.shared_hbm)
    a_sb = nl.ndarray((kt, nl.par_dim(128), m), nl.float32,
                      buffer=ncc.sbuf.alloc(lambda idx, pdim, fdim: (0, idx[0] * fdim)))
    b_sb = nl.ndarray((kt, nl.par_dim(128), 512), nl.float32,
                      buffer=ncc.sbuf.mod_alloc(base_addr=kt * m * 4, num_free_tiles=(kt,)))
    o_sb = nl.ndarray((nt, nl.par_dim(128), 512), nl.float32,
                      buffer=ncc.sbuf.mod_alloc(base_addr=kt * m * 4 + kt * 2048, num_free_tiles=(2,)))
    acc = nl.ndarray((nt, nl.par_dim(128), 512), nl.float32,
                     buffer=ncc.psum.mod_alloc(base_bank=2, num_bank_tiles=(2,)))
    for k in nl.affine_range(kt):
        a_sb[k] = nl.load(a_t[k * 128:(k + 1) * 128, :])
    for j in nl.affine_range(nt):
        for k in nl.affine_range(kt):
            b_sb[k] = nl.load(b[k * 128:(k + 1) * 128, j * 512:(j + 1) * 512])
        for k in nl.affine_range(kt):
            acc[j] += nisa.nc_matmul(a_sb[k], b_sb[k])
        o_sb[j] = nl.copy(acc[j])
        nl.store(out[:, j * 512:(j + 1) * 512], o_sb[j])
    return out


@nki.jit
def psum_one_bank_for_two(a_t, b):
    """Two accumulators in one bank (num_bank_tiles=(1,)), both filled before either is read."""
    out = nl.ndarray((128, 1024), nl.float32, buffer=nl.shared_hbm)
    a_sb = nl.ndarray((1, nl.par_dim(128), 128), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    b_sb = nl.ndarray((2, nl.par_dim(128), 512), nl.float32,
                      buffer=ncc.sbuf.mod_alloc(base_addr=512, num_free_tiles=(2,)))
    o_sb = nl.ndarray((2, nl.par_dim(128), 512), nl.float32,
                      buffer=ncc.sbuf.mod_alloc(base_addr=4608, num_free_tiles=(2,)))
    acc = nl.ndarray((2, nl.par_dim(128), 512), nl.float32, buffer=ncc.psum.mod_alloc(base_bank=5))
    a_sb[0] = nl.load(a_t)
    for j in nl.affine_range(2):
        b_sb[j] = nl.load(b[:, j * 512:(j + 1) * 512])
        acc[j] += nisa.nc_matmul(a_sb[0], b_sb[j])
    for j in nl.affine_range(2):
        o_sb[j] = nl.copy(acc[j])  # <psum-stale>
        nl.store(out[:, j * 512:(j + 1) * 512], o_sb[j])
    return out


# ----- values, places, programs ------------------------------------------------------------------------

def test_sbuf_alloc_with_a_lambda_places_each_tile_and_computes():
    x = f32(512, 64)
    np.testing.assert_array_equal(run(reversed_rows, x).outputs, x * x)
    np.testing.assert_array_equal(round_trip(reversed_rows, x), x * x)
    placed = list(traced_machine(reversed_rows, x).direct.placed.values())
    assert placed[0].starts == [(0, 768), (0, 512), (0, 256), (0, 0)]       # (3 - i) * 64 fp32
    assert placed[1].starts == [(0, 4096 + 256 * i) for i in range(4)]


def test_mod_alloc_double_buffers_a_loop_to_numpy_values():
    x = f32(6 * 128, 256, seed=1)
    expected = np.exp(x)
    np.testing.assert_allclose(run(double_buffered, x).outputs, expected, rtol=2e-6)
    np.testing.assert_allclose(round_trip(double_buffered, x), expected, rtol=2e-6)
    buf, res = traced_machine(double_buffered, x).direct.placed.values()
    assert buf.starts == [(0, (i % 2) * 1024) for i in range(6)]           # base 0 + (i % 2) * fdim
    assert res.starts == [(0, 2048 + (i % 2) * 1024) for i in range(6)]


def test_block_dimensions_of_a_direct_tensor_are_not_the_deprecated_form():
    """Block dimensions before nl.par_dim are direct allocation's documented shape: no warning."""
    import warnings
    from nkisim.instructions.language_ops import BlockDimensionWarning
    with warnings.catch_warnings():
        warnings.simplefilter("error", BlockDimensionWarning)
        run(double_buffered, f32(2 * 128, 256, seed=2))


def test_a_read_after_the_slot_was_reused_is_a_lifetime_conflict_at_the_kernel_line():
    err = expect(errors.KernelContractError, "err_direct_alloc_lifetime_conflict",
                 ("tile buf[0] is read after buf[2]", "SBUF bytes (partitions 0..127, bytes 0..1023)",
                  "on Trainium the read returns buf[2]'s data"),
                 rotation_bug, f32(4 * 128, 256), tag="stale-read")
    assert "num_free_tiles" in err.remedy and "before the next write" in err.remedy


def test_force_auto_alloc_allocates_the_buggy_kernel_automatically():
    x = f32(4 * 128, 256, seed=2)
    forced = ncc.force_auto_alloc(nki.jit(load_all_then_use))
    np.testing.assert_allclose(run(forced, x).outputs, np.exp(x), rtol=2e-6)
    np.testing.assert_allclose(round_trip(forced, x), np.exp(x), rtol=2e-6)
    machine = traced_machine(forced, x)
    assert machine.force_auto_alloc and machine.direct is None
    # the mark is taken by the one trace it was made for: the undecorated kernel still conflicts
    with pytest.raises(errors.KernelContractError):
        run(rotation_bug, x)


def test_force_auto_alloc_lets_direct_and_automatic_tensors_meet():
    @ncc.force_auto_alloc
    @nki.jit
    def mixed(x):
        t = nl.ndarray((1, nl.par_dim(128), 64), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
        t[0] = nl.load(x)
        u = nl.exp(t[0])           # an automatically allocated result
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.store(out, u)
        return out
    x = f32(128, 64)
    np.testing.assert_allclose(run(mixed, x).outputs, np.exp(x), rtol=2e-6)


def test_psum_mod_alloc_rotates_matmul_accumulators_through_two_banks():
    a_t, b = f32(256, 128, seed=3), f32(256, 10 * 512, seed=4)
    expected = a_t.T.astype(np.float64) @ b
    np.testing.assert_allclose(run(blocked_matmul, a_t, b).outputs, expected, rtol=1e-4)
    # ten logical PSUM tiles in two banks: validation counts the tiles live, not ten banks
    np.testing.assert_allclose(round_trip(blocked_matmul, a_t, b), expected, rtol=1e-4)
    acc = list(traced_machine(blocked_matmul, a_t, b).direct.placed.values())[-1]
    assert acc.buffer is nkisim.memory.Buffer.PSUM
    assert [start // 2048 for _, start in acc.starts] == [2 + j % 2 for j in range(10)]


def test_two_accumulators_in_one_bank_conflict():
    expect(errors.KernelContractError, "err_direct_alloc_lifetime_conflict",
           ("tile acc[0] is read after acc[1]", "PSUM bank 5 (partitions 0..127, bytes 0..2047 of the bank)"),
           psum_one_bank_for_two, f32(128, 128), f32(128, 1024), tag="psum-stale")


def test_mod_alloc_over_two_block_dimensions_and_partition_tiles():
    """32-partition tiles, blocks (2, 3): partition (i % 2) * 32 over num_par_tiles (2, 1),
    byte 64 + (j % 3) * 64 over num_free_tiles (1, 3): six tiles, six places."""
    @nki.jit
    def quarters(x):
        t = nl.ndarray((2, 3, nl.par_dim(32), 16), nl.float32,
                       buffer=ncc.sbuf.mod_alloc(base_addr=64, num_par_tiles=(2, 1), num_free_tiles=(1, 3)))
        r = nl.ndarray((2, 3, nl.par_dim(32), 16), nl.float32,
                       buffer=ncc.sbuf.mod_alloc(base_addr=1024, num_par_tiles=(2, 1), num_free_tiles=(1, 3)))
        out = nl.ndarray((2, 3, 32, 16), nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            for j in nl.affine_range(3):
                t[i, j] = nl.load(x[i, j])
        for i in nl.affine_range(2):
            for j in nl.affine_range(3):
                r[i, j] = nl.add(t[i, j], 1.0)
                nl.store(out[i, j], r[i, j])
        return out
    x = f32(2, 3, 32, 16, seed=7)
    np.testing.assert_array_equal(run(quarters, x).outputs, x + 1)
    np.testing.assert_array_equal(round_trip(quarters, x), x + 1)
    t = list(traced_machine(quarters, x).direct.placed.values())[0]
    assert t.starts == [(i * 32, 64 + j * 64) for i in range(2) for j in range(3)]


def test_mod_alloc_places_match_the_documented_rule():
    """The rule re-derived: each block index modulo num_*_tiles, linearised row-major, times the
    tile's partitions (bytes), plus the base."""
    sbuf = ncc.sbuf.mod_alloc(base_addr=64, num_par_tiles=(2, 1), num_free_tiles=(1, 3))
    places = [sbuf.func((i, j), 32, 64) for i in range(4) for j in range(5)]
    assert places == [((i % 2) * 32, 64 + (j % 3) * 64) for i in range(4) for j in range(5)]
    psum = ncc.psum.mod_alloc(base_bank=1, num_bank_tiles=(2, 3))
    assert [psum.func((i, j), 128, 2048) for i in range(2) for j in range(4)] == \
        [(1 + (i % 2) * 3 + j % 3, 0, 0) for i in range(2) for j in range(4)]
    assert ncc.sbuf.mod_alloc(base_addr=128).func((5,), 128, 512) == (0, 128)     # () : one tile
    assert ncc.sbuf.auto_alloc() is nl.sbuf and ncc.psum.auto_alloc() is nl.psum


def test_partition_tiles_of_one_tensor_and_partial_writes_do_not_conflict():
    @nki.jit
    def halves(x):
        """Four 32-partition tiles side by side in partitions (num_par_tiles=(4,)); then two
        tiles sharing a slot, each written in a different half of it, both read afterwards."""
        out = nl.ndarray((2, 128, 64), nl.float32, buffer=nl.shared_hbm)
        q = nl.ndarray((4, nl.par_dim(32), 64), nl.float32,
                       buffer=ncc.sbuf.mod_alloc(base_addr=0, num_par_tiles=(4,)))
        for i in nl.affine_range(4):
            q[i] = nl.load(x[0, i * 32:(i + 1) * 32, :])
        s = nl.ndarray((2, nl.par_dim(128), 64), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=256))
        s[0, :, 0:32] = nl.load(x[1, :, 0:32])
        s[1, :, 32:64] = nl.load(x[1, :, 32:64])
        r = nl.ndarray((2, nl.par_dim(128), 64), nl.float32,
                       buffer=ncc.sbuf.mod_alloc(base_addr=512, num_free_tiles=(2,)))
        for i in nl.affine_range(4):
            r[0, i * 32:(i + 1) * 32, :] = nl.copy(q[i])
        r[1, :, 0:32] = nl.copy(s[0, :, 0:32])
        r[1, :, 32:64] = nl.copy(s[1, :, 32:64])
        nl.store(out[0], r[0])
        nl.store(out[1], r[1])
        return out
    x = f32(2, 128, 64, seed=5)
    np.testing.assert_array_equal(run(halves, x).outputs, x)
    q = list(traced_machine(halves, x).direct.placed.values())[0]
    assert q.starts == [(0, 0), (32, 0), (64, 0), (96, 0)]


def test_tensors_of_overlapping_places_conflict_and_a_tile_never_written_reads_uninitialised():
    @nki.jit
    def overlap(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t0 = nl.ndarray((2, nl.par_dim(128), 256), nl.float32,
                        buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
        t1 = nl.ndarray((2, nl.par_dim(128), 256), nl.float32,
                        buffer=ncc.sbuf.mod_alloc(base_addr=1024, num_free_tiles=(2,)))
        t0[1] = nl.load(x)
        t1[0] = nl.load(x)             # the same bytes as t0[1]
        nl.store(out, t0[1])  # <overlap>
        return out
    expect(errors.KernelContractError, "err_direct_alloc_lifetime_conflict",
           ("tile t0[1] is read after t1[0]", "bytes 1024..2047"), overlap, f32(128, 256), tag="overlap")

    @nki.jit
    def never_written(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((2, nl.par_dim(128), 256), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
        t[0] = nl.load(x)
        nl.store(out, t[1])            # t[1] shares t[0]'s slot but was never written: garbage
        return out
    assert np.isnan(run(never_written, f32(128, 256)).outputs).all()


def test_direct_allocations_do_not_count_in_the_automatic_totals():
    """Sixty-four logical 4 KiB tiles (256 KiB per partition, more than SBUF) in two slots."""
    def copy_through(buffer):
        @nki.jit
        def kernel(x):
            out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
            t = nl.ndarray((64, nl.par_dim(128), 1024), nl.float32, buffer=buffer())
            for i in nl.affine_range(64):
                t[i] = nl.load(x[i])
                nl.store(out[i], t[i])
            return out
        return kernel
    x = f32(64, 128, 1024, seed=6)
    direct = copy_through(lambda: ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
    np.testing.assert_array_equal(run(direct, x).outputs, x)
    np.testing.assert_array_equal(round_trip(direct, x), x)
    with pytest.raises(errors.AllocationError):
        run(copy_through(lambda: nl.sbuf), x)


def test_an_ordinary_kernel_has_no_direct_state():
    x = f32(4 * 128, 256)
    program, machine = trace_kernel(ncc.force_auto_alloc(nki.jit(load_all_then_use)),
                                    [ArgSpec(x.shape, x.dtype)], {})
    assert machine.direct is None


    @nki.jit
    def plain(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.exp(nl.load(a[0:128])))      # automatic tiles, read: nothing to refuse
        return out
    assert traced_machine(plain, f32(128, 256)).direct is None


# ----- the documented errors ----------------------------------------------------------------------------

def one_tile_kernel(buffer_of, shape=(1, nl.par_dim(128), 64), dtype=nl.float32):
    @nki.jit
    def kernel(x):
        t = nl.ndarray(shape, dtype, buffer=buffer_of())  # <declared>
        out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        t[0] = nl.load(x)
        nl.store(out, t[0])
        return out
    return kernel


@pytest.mark.parametrize("place, pdim, words", [
    ((32, 0), 128, "a tile of 128 partitions must start at partition 0"),
    ((32, 0), 64, "a tile of 64 partitions must start at partition 0 or 64"),
    ((16, 0), 32, "must start at partition 0 or 32 or 64 or 96"),
    ((0, LIMITS.sbuf_usable_bytes - 100), 128, f"end past the {LIMITS.sbuf_usable_bytes} usable bytes"),
    ((0, -4), 128, "end past the"),
])
def test_sbuf_places_outside_the_rules_are_refused(place, pdim, words):
    kernel = one_tile_kernel(lambda: ncc.sbuf.alloc(lambda idx, p, f: place), (1, nl.par_dim(pdim), 64))
    err = expect(errors.HardwareLimitError, "err_invalid_direct_allocation", ("tile t[0] is placed", words),
                 kernel, f32(128, 64), tag="declared")
    assert err.remedy


@pytest.mark.parametrize("returned", [0, (0,), (0, 1.5), (True, 0), "0, 0", (0, 0, 0)])
def test_a_func_returning_anything_but_two_ints_is_refused(returned):
    kernel = one_tile_kernel(lambda: ncc.sbuf.alloc(lambda idx, p, f: returned))
    expect(errors.ArgumentError, "err_unsupported_args", ("must return a tuple of 2 ints",), kernel,
           f32(128, 64), tag="declared")


def test_func_receives_the_block_index_partitions_and_bytes_per_partition():
    seen = []

    def record(idx, pdim_size, fdim_size):
        seen.append((idx, pdim_size, fdim_size))
        return 0, (len(seen) - 1) * fdim_size

    @nki.jit
    def declares(x):
        t = nl.ndarray((2, 3, nl.par_dim(64), 4, 32), nl.bfloat16, buffer=ncc.sbuf.alloc(record))
        out = nl.ndarray((64, 4, 32), nl.bfloat16, buffer=nl.shared_hbm)
        t[1, 2] = nl.load(x)
        nl.store(out, t[1, 2])
        return out
    x = f32(64, 4, 32).astype(nl.bfloat16)
    np.testing.assert_array_equal(run(declares, x).outputs, x)
    assert seen == [((i, j), 64, 4 * 32 * 2) for i in range(2) for j in range(3)]
    assert all(type(i) is int for idx, _, _ in seen for i in idx)


def test_an_access_is_its_bounding_box_in_each_tile_it_touches():
    """Placed.boxes: a view over two tiles (its strides), and element offsets (a gathered view)."""
    @nki.jit
    def both_tiles(x):
        t = nl.ndarray((2, nl.par_dim(128), 64), nl.float32,
                       buffer=ncc.sbuf.alloc(lambda idx, p, f: (0, 1000 + 2000 * idx[0])))
        out = nl.ndarray((2, 128, 64), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=t, src=x)                 # both tiles in one instruction
        nisa.dma_copy(dst=out, src=t)
        return out
    x = f32(2, 128, 64)
    np.testing.assert_array_equal(run(both_tiles, x).outputs, x)
    placed = next(iter(traced_machine(both_tiles, x).direct.placed.values()))
    # elements 64 * 5 + 3 .. 64 * 9 + 10 of tile 1: partitions 5..9, free elements 3..10 (bounding box)
    offsets = 128 * 64 + np.array([64 * 5 + 3, 64 * 9 + 10, 64 * 7 + 4])
    assert placed._gathered(offsets) == [(1, 5, 10, 3, 11)]
    assert placed._gathered(np.array([], dtype=np.int64)) == []


@pytest.mark.parametrize("place, words", [
    ((8, 0, 0), "PSUM has banks 0..7"),
    ((-1, 0, 0), "PSUM has banks 0..7"),
    ((0, 64, 0), "starts at partition 0 and byte 0 of its bank"),
    ((0, 0, 512), "starts at partition 0 and byte 0 of its bank"),
])
def test_psum_places_outside_the_rules_are_refused(place, words):
    kernel = one_tile_kernel(lambda: ncc.psum.alloc(lambda idx, p, f: place))
    expect(errors.HardwareLimitError, "err_invalid_direct_allocation", (words,), kernel, f32(128, 64),
           tag="declared")


def test_a_psum_tile_over_one_bank_is_refused():
    kernel = one_tile_kernel(lambda: ncc.psum.mod_alloc(base_bank=0), (2, nl.par_dim(128), 1024))
    expect(errors.HardwareLimitError, "err_psum_tile_exceeds_bank", ("4096 bytes per partition per tile",),
           kernel, f32(128, 64), tag="declared")


@pytest.mark.parametrize("make, error, words", [
    (lambda: ncc.sbuf.mod_alloc(base_addr=0, base_partition=32), errors.UnsupportedOperationError,
     "base_partition of ncc.sbuf.mod_alloc must be 0"),
    (lambda: ncc.sbuf.mod_alloc(base_addr=-1), errors.ArgumentError, "base_addr"),
    (lambda: ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=2), errors.ArgumentError, "tuple of positive ints"),
    (lambda: ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(0,)), errors.ArgumentError, "tuple of positive"),
    (lambda: ncc.sbuf.mod_alloc(0), errors.ArgumentError, "positional"),
    (lambda: ncc.sbuf.mod_alloc(), errors.ArgumentError, "base_addr"),
    (lambda: ncc.sbuf.mod_alloc(base_addr=0, align=32), errors.ArgumentError, "align"),
    (lambda: ncc.psum.mod_alloc(base_bank=0, base_addr=64), errors.UnsupportedOperationError,
     "base_addr of ncc.psum.mod_alloc must be 0"),
    (lambda: ncc.psum.mod_alloc(base_bank=0, base_partition=64), errors.UnsupportedOperationError,
     "base_partition"),
    (lambda: ncc.psum.mod_alloc(base_bank=0, num_par_tiles=(2,)), errors.UnsupportedOperationError,
     "() or all ones"),
    (lambda: ncc.psum.mod_alloc(base_bank=0, num_free_tiles=(2,)), errors.UnsupportedOperationError,
     "() or all ones"),
    (lambda: ncc.psum.mod_alloc(base_addr=0), errors.ArgumentError, "base_bank"),
    (lambda: ncc.sbuf.alloc(3), errors.ArgumentError, "takes a callable"),
    (lambda: ncc.psum.auto_alloc(1), errors.ArgumentError, "positional"),
])
def test_allocator_arguments_are_checked(make, error, words):
    with pytest.raises(error, match=words):
        make()


def test_num_free_tiles_needs_one_entry_per_block_dimension():
    kernel = one_tile_kernel(lambda: ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2, 2)))
    expect(errors.ArgumentError, "err_unsupported_args", ("num_free_tiles=(2, 2)", "1 block dimensions"),
           kernel, f32(128, 64), tag="declared")


def test_too_many_logical_tiles_are_refused():
    kernel = one_tile_kernel(lambda: ncc.sbuf.mod_alloc(base_addr=0),
                             (direct_alloc.MAX_LOGICAL_TILES + 1, nl.par_dim(1), 1))
    expect(errors.UnsupportedOperationError, "err_not_simulated", ("logical tiles",), kernel, f32(128, 64),
           tag="declared")


# ----- all direct or all automatic -----------------------------------------------------------------------

@nki.jit
def auto_then_direct(x):
    a = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
    t = nl.ndarray((1, nl.par_dim(128), 64), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))  # <second>
    return a, t


@nki.jit
def direct_then_auto_psum(x):
    t = nl.ndarray((1, nl.par_dim(128), 64), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    p = nl.ndarray((128, 64), nl.float32, buffer=ncc.psum.auto_alloc())  # <auto-psum>
    return t, p


@nki.jit
def kept_result(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((1, nl.par_dim(128), 64), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    t[0] = nl.load(x)
    e = nl.exp(t[0])                   # the compiler would allocate e
    nl.store(out, e)  # <kept>
    return out


@nki.jit
def hbm_scratch(x):
    t = nl.ndarray((1, nl.par_dim(128), 64), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    scratch = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)  # <hbm>
    return t, scratch


def test_mixing_direct_and_automatic_allocation_is_refused():
    x = f32(128, 64)
    expect(errors.KernelContractError, "err_mixed_direct_and_auto_allocation",
           ("the sbuf tensor float32[128, 64]", "allocated automatically before this ncc.sbuf.mod_alloc",
            "cannot mix automatic allocation"), auto_then_direct, x, tag="second")
    expect(errors.KernelContractError, "err_mixed_direct_and_auto_allocation",
           ("float32[128, 64] in psum", "is allocated automatically"), direct_then_auto_psum, x, tag="auto-psum")
    err = expect(errors.KernelContractError, "err_mixed_direct_and_auto_allocation",
                 ("is allocated automatically (an instruction's own result)",
                  "the tensors returned by instructions included"), kept_result, x, tag="kept")
    assert "t[...] = nl.load(...)" in err.remedy


def test_a_non_io_hbm_tensor_is_refused_in_an_allocated_kernel():
    expect(errors.KernelContractError, "err_non_io_hbm_tensor_in_allocated_kernel",
           ("Non IO HBM tensor is not supported in allocated NKI kernel",), hbm_scratch, f32(128, 64), tag="hbm")


# ----- the module binds ------------------------------------------------------------------------------------

def test_a_kernel_file_binding_the_allocators_at_import_loads(tmp_path):
    path = tmp_path / "bound_at_import.py"
    path.write_text(
        "import neuronxcc.nki as nki\n"
        "import neuronxcc.nki.compiler as ncc\n"
        "import neuronxcc.nki.language as nl\n"
        "from neuronxcc.nki.compiler import psum\n"
        "MOD = ncc.sbuf.mod_alloc\n"
        "PLACE = ncc.sbuf.alloc\n"
        "BANKS = psum.mod_alloc\n"
        "AUTO = (ncc.sbuf.auto_alloc, ncc.psum.auto_alloc, ncc.psum.alloc)\n"
        "@nki.jit\n"
        "def kernel(x):\n"
        "    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)\n"
        "    t = nl.ndarray((2, nl.par_dim(128), 64), nl.float32, buffer=MOD(base_addr=0, num_free_tiles=(2,)))\n"
        "    for i in nl.affine_range(2):\n"
        "        t[i] = nl.load(x[i])\n"
        "        nl.store(out[i], t[i])\n"
        "    return out\n")
    spec = importlib.util.spec_from_file_location("bound_at_import", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.pop("bound_at_import", None)
    spec.loader.exec_module(module)
    x = f32(2, 128, 64)
    np.testing.assert_array_equal(run(module.kernel, x).outputs, x)


def test_an_unknown_allocator_name_says_what_there_is():
    with pytest.raises(errors.NoSuchNameError, match="did you mean nki.compiler.sbuf.mod_alloc"):
        ncc.sbuf.modalloc  # noqa: B018


def test_sbuf_min_align_is_the_one_nl_gives():
    assert direct_alloc.SBUF_MIN_ALIGN == nl.tile_size.sbuf_min_align


def filled_kernel(two_slots):
    @nki.jit
    def offsets(x):
        """nl.zeros and nl.full into direct PSUM and SBUF tiles: x + 2 per tile, through PSUM."""
        out = nl.ndarray((3, 128, 512), nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((3, nl.par_dim(128), 512), nl.float32,
                       buffer=ncc.psum.mod_alloc(base_bank=0, num_bank_tiles=(3,)))
        two = nl.full((3, nl.par_dim(128), 512), 2.0, nl.float32,
                      buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=two_slots))
        t = nl.ndarray((3, nl.par_dim(128), 512), nl.float32,
                       buffer=ncc.sbuf.mod_alloc(base_addr=6144, num_free_tiles=(3,)))
        r = nl.ndarray((3, nl.par_dim(128), 512), nl.float32,
                       buffer=ncc.sbuf.mod_alloc(base_addr=12288, num_free_tiles=(2,)))
        for i in nl.affine_range(3):
            t[i] = nl.load(x[i])
            acc[i] += t[i]
            r[i] = nl.add(acc[i], two[i])  # <two-read>
            nl.store(out[i], r[i])
        return out
    return offsets


def test_filled_tensors_take_direct_allocators_too():
    x = f32(3, 128, 512, seed=8)
    np.testing.assert_allclose(run(filled_kernel((3,)), x).outputs, x + 2, rtol=1e-6)
    np.testing.assert_allclose(round_trip(filled_kernel((3,)), x), x + 2, rtol=1e-6)
    # one physical tile for `two`'s three logical ones: nl.full writes all three at once, so
    # two[0]'s bytes are two[2]'s by the time it is read
    expect(errors.KernelContractError, "err_direct_alloc_lifetime_conflict", ("tile two[0] is read after two[2]",),
           filled_kernel(()), x, tag="two-read")


def test_engine_registers_are_no_automatic_tensor():
    """tensor_scalar_reduce keeps the Vector engine's accumulator registers (Machine.engine_state):
    state of the engine, which a kernel allocating directly may use."""
    @nki.jit
    def row_sums(x):
        out = nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((1, nl.par_dim(128), 64), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
        y = nl.ndarray((1, nl.par_dim(128), 64), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=256))
        s = nl.ndarray((1, nl.par_dim(128), 1), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=512))
        t[0] = nl.load(x)
        y[0] = nisa.tensor_scalar_reduce(data=t[0], op0=np.multiply, operand0=2.0, reduce_op=np.add,
                                         reduce_res=s[0])
        nl.store(out, s[0])
        return out
    x = f32(128, 64, seed=9)
    np.testing.assert_allclose(run(row_sums, x).outputs, (2 * x).sum(axis=1, keepdims=True), rtol=1e-5)
    machine = traced_machine(row_sums, x)
    assert machine.engine_tiles and machine.direct is not None


# ----- what sharing a slot costs: the writes wait for the bytes' other tiles ----------------------------

def rotating(slots: int):
    @nki.jit
    def kernel(x):
        """exp of each 128-row tile, loads and results rotating through `slots` slots each."""
        n = x.shape[0] // 128
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((n, nl.par_dim(128), 512), nl.float32,
                         buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(slots,)))
        res = nl.ndarray((n, nl.par_dim(128), 512), nl.float32,
                         buffer=ncc.sbuf.mod_alloc(base_addr=8192, num_free_tiles=(slots,)))
        for i in nl.affine_range(n):
            buf[i] = nl.load(x[i * 128:(i + 1) * 128, :])
            res[i] = nl.exp(buf[i])
            nl.store(out[i * 128:(i + 1) * 128, :], res[i])
        return out
    return kernel


def test_a_write_into_a_slot_waits_for_the_reads_of_the_tile_that_had_it():
    from nkisim import cost
    x = f32(8 * 128, 512)
    one, two = run(rotating(1), x), run(rotating(2), x)
    np.testing.assert_array_equal(one.outputs, two.outputs)

    def writes_of_buf(run_):
        exps = [r for r in run_.trace if r.opcode == "activation"]
        buf = exps[0].reads[0].alloc_id
        return [r for r in run_.trace if any(w.alloc_id == buf for w in r.writes)], exps
    # one slot: tile i's copy into buf waits for tile i-1's exp (the read of those bytes) and
    # tile i's exp (writing res) for the store of res[i-1]
    fills, exps = writes_of_buf(one)
    stores = [r for r in one.trace if r.opcode == "dma_copy" and r.writes[0].buffer == "shared_hbm"]
    assert len(fills) == len(exps) == len(stores) == 8
    assert all(exps[i - 1].index in fills[i].attrs["after"] for i in range(1, 8))
    assert all(stores[i - 1].index in exps[i].attrs["after"] for i in range(1, 8))
    # two slots: tile i waits for tile i-2's reads, never for tile i-1's
    fills2, exps2 = writes_of_buf(two)
    assert "after" not in fills2[1].attrs
    assert all(exps2[i - 2].index in fills2[i].attrs["after"] and exps2[i - 1].index not in fills2[i].attrs["after"]
               for i in range(2, 8))
    serial, overlapped = cost.estimate(one).total_ns, cost.estimate(two).total_ns
    assert serial > 1.2 * overlapped, (serial, overlapped)


def test_slot_waits_survive_the_program_format_and_change_no_value():
    x = f32(4 * 128, 512)
    program, _ = trace_kernel(rotating(1), [ArgSpec(x.shape, x.dtype)], {})
    again = programs.decode(programs.encode(program))
    programs.validate(again, LIMITS, [x])
    assert [r.attrs.get("after") for r in again.records] == [r.attrs.get("after") for r in program.records]
    np.testing.assert_array_equal(execute(again, [x]).outputs, np.exp(x))
