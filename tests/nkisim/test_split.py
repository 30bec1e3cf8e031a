"""A program executed in several processes at once (nkisim.split) gives what one process gives,
bit for bit: outputs, the executed trace, printed text and the first error. The kernels are
written to trip an analysis that misses a dependency: tiles carried from one output block to
the next, PSUM accumulated across blocks, tiles written a part at a time, masked writes that
keep earlier values. Programs that cannot be split safely are refused, and the processes a split
forks die with the one that forked them."""
from __future__ import annotations

import mmap
import os
import signal
import struct
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import nkisim

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

from nkisim import dtypes, forked, split  # noqa: E402
from nkisim.execute import execute  # noqa: E402
from nkisim.program import ProgramError  # noqa: E402
from nkisim.runtime import trace_kernel  # noqa: E402
from nkisim.trace import Region  # noqa: E402
from reference_kernels import conv2d_optimized, conv2d_relaxed  # noqa: E402
from tests.nkisim.test_matmul_threads import read_psum_between_matmuls  # noqa: E402

BLOCKS = 6


def traced(kernel, args, kwargs=None):
    program, _ = trace_kernel(kernel, list(args), kwargs or {})
    return program


def shared_room(program) -> np.ndarray:
    """The output's memory as the grader gives it: a MAP_SHARED mapping forked parts write into."""
    alloc = next(a for a in program.allocs if a.id == program.outputs.alloc_id)
    dtype = dtypes.to_dtype(alloc.dtype)
    size = int(np.prod(alloc.shape))
    return np.frombuffer(mmap.mmap(-1, size * dtype.itemsize), dtype=dtype, count=size)


def one_process(program, args):
    with np.errstate(all="ignore"), threadpool_limits(limits=1, user_api="blas"):
        return execute(program, list(args))


def in_parts(program, args, parts):
    with np.errstate(all="ignore"), threadpool_limits(limits=1, user_api="blas"):
        return split.execute_split(program, list(args), parts, shared_room(program))


def assert_same_execution(program, args, processes: int, largest_share: float = split.WORTH_IT):
    parts = split.plan(program, processes, largest_share=largest_share, min_work_us=0.0)
    assert parts is not None, "the program was expected to split"
    assert len(parts) == processes and all(parts)
    one, many = one_process(program, args), in_parts(program, args, parts)
    a, b = np.asarray(one.outputs), np.asarray(many.outputs)
    assert a.shape == b.shape and a.dtype == b.dtype
    assert a.tobytes() == b.tobytes()
    assert len(one.trace) == len(many.trace) and all(x is y for x, y in zip(one.trace, many.trace))
    assert one.printed == many.printed
    return parts


# ----- the reference kernels: every instruction of the output's share, and the shared preparation -----

@pytest.mark.parametrize("module", [conv2d_optimized, conv2d_relaxed], ids=["optimized", "relaxed"])
@pytest.mark.parametrize("processes", [2, 3])
def test_a_conv2d_split_into_processes_gives_the_one_process_bits(module, processes):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 128, 32, 16), dtype=np.float32)
    w = rng.standard_normal((128, 128, 3, 3), dtype=np.float32)
    bias = rng.standard_normal(128, dtype=np.float32)
    program = traced(module.fused_conv2d_maxpool, [x, w, bias], {"pool_size": 2})
    parts = assert_same_execution(program, [x, w, bias], processes)
    shared = set(parts[0]).intersection(*map(set, parts[1:]))
    matmuls = [i for i, rec in enumerate(program.records) if rec.kind == "matmul"]
    # the output blocks' matmuls are each done once; only the weights' preparation is repeated
    assert sum(len(set(p) & set(matmuls)) for p in parts) <= len(matmuls) + len(shared)
    assert max(len(set(p) & set(matmuls)) for p in parts) < 0.8 * len(matmuls)


# ----- dependencies an analysis could miss ------------------------------------------------------------

def test_psum_accumulated_across_blocks_is_accumulated_in_every_part_that_stores_it():
    rng = np.random.default_rng(41)
    s = rng.standard_normal((128, 128), dtype=np.float32)
    m_all = rng.standard_normal((BLOCKS * 128, 256), dtype=np.float32)
    program = traced(read_psum_between_matmuls, [s, m_all])   # each block stores the running sum
    matmuls = {i for i, rec in enumerate(program.records) if rec.kind == "matmul"}
    for processes in (2, 3):
        parts = assert_same_execution(program, [s, m_all], processes, largest_share=1.0)
        assert matmuls <= set(parts[-1])          # the last block's sum needs every block's matmul


@nki.jit
def half_tile_rewritten_each_block(x):
    """A tile kept across blocks: each block rewrites one half and stores the whole tile, so
    every store but the first holds the block before's half too."""
    blocks = x.shape[0] // 128
    out = nl.ndarray((blocks * 128, 256), dtype=nl.float32, buffer=nl.hbm)
    keep = nisa.memset((128, 256), 1.5, nl.float32)
    for r in nl.sequential_range(blocks):
        half = (r % 2) * 128
        nisa.dma_copy(dst=keep[:, half:half + 128], src=x[r * 128:(r + 1) * 128, :])
        nisa.dma_copy(dst=out[r * 128:(r + 1) * 128, :], src=nisa.tensor_copy(keep))
    return out


def test_a_tile_written_a_part_at_a_time_keeps_the_parts_written_in_other_blocks():
    x = np.random.default_rng(42).standard_normal((BLOCKS * 128, 128), dtype=np.float32)
    program = traced(half_tile_rewritten_each_block, [x])
    assert_same_execution(program, [x], 2, largest_share=1.0)
    assert_same_execution(program, [x], 3, largest_share=1.0)


@nki.jit
def masked_load_over_the_block_before(x, rows_kept):
    """Each block loads its rows under a mask into a tile kept across blocks: elements outside the
    mask keep the block before's values. The mask is a band, no box (a box mask becomes the copy
    of its box, unmasked), so the program carries it."""
    blocks = x.shape[0] // 128
    out = nl.ndarray((blocks * 128, x.shape[1]), dtype=x.dtype, buffer=nl.hbm)
    keep = nisa.memset((128, x.shape[1]), -2.0, x.dtype)
    i_p, i_f = nl.mgrid[0:128, 0:x.shape[1]]
    for r in nl.sequential_range(blocks):
        keep[i_p, i_f] = nl.load(x[r * 128 + i_p, i_f], mask=(i_p < rows_kept[r]) & (i_f < i_p + 40))
        nl.store(out[r * 128 + i_p, i_f], value=keep)
    return out


def test_a_masked_write_keeps_what_an_earlier_block_wrote():
    rng = np.random.default_rng(43)
    x = rng.standard_normal((BLOCKS * 128, 64), dtype=np.float32)
    kept = [128, 20, 100, 7, 128, 64][:BLOCKS]
    program = traced(masked_load_over_the_block_before, [x], {"rows_kept": kept})
    assert any(rec.mask is not None for rec in program.records)
    assert_same_execution(program, [x], 2, largest_share=1.0)


@nki.jit
def independent_blocks_with_a_print(s, m_all, rows_stored=128):
    """Independent output blocks from one prepared tile, and a device_print of the first; each
    block stores its first `rows_stored` rows (the rest of the output is never written)."""
    blocks = m_all.shape[0] // 128
    out = nl.ndarray((blocks * 128, m_all.shape[1]), dtype=nl.float32, buffer=nl.hbm)
    s_sb = nl.ndarray((128, 128), dtype=s.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s_sb, src=s)
    for r in nl.affine_range(blocks):
        m_sb = nl.ndarray((128, m_all.shape[1]), dtype=m_all.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=m_sb, src=m_all[r * 128:(r + 1) * 128, :])
        acc = nl.ndarray((128, m_all.shape[1]), dtype=nl.float32, buffer=nl.psum)
        acc += nisa.nc_matmul(s_sb, m_sb)
        y = nisa.tensor_copy(acc)
        if r == 0:
            nl.device_print("first block", y[0:2, 0:3])
        nisa.dma_copy(dst=out[r * 128:r * 128 + rows_stored, :], src=y[0:rows_stored, :])
    return out


def test_printed_text_comes_in_program_order_from_whichever_part_printed_it():
    rng = np.random.default_rng(44)
    s = rng.standard_normal((128, 128), dtype=np.float32)
    m_all = rng.standard_normal((BLOCKS * 128, 256), dtype=np.float32)
    program = traced(independent_blocks_with_a_print, [s, m_all])
    assert sum(rec.kind == "print" for rec in program.records) == 1
    assert_same_execution(program, [s, m_all], 2)
    assert one_process(program, [s, m_all]).printed


# ----- programs that must not be split ----------------------------------------------------------------

@nki.jit
def output_read_back(x):
    out = nl.ndarray((2 * 128, x.shape[1]), dtype=x.dtype, buffer=nl.hbm)
    for r in nl.sequential_range(2):
        t = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r * 128:(r + 1) * 128, :])
        nisa.dma_copy(dst=out[r * 128:(r + 1) * 128, :], src=t)
    back = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=back, src=out[0:128, :])
    nisa.dma_copy(dst=out[128:256, :], src=back)
    return out


@nki.jit
def same_rows_stored_twice(x):
    """Blocks 0 and 3 store the same output rows: which part wrote last would decide them."""
    out = nl.ndarray((3 * 128, x.shape[1]), dtype=x.dtype, buffer=nl.hbm)
    for r in nl.sequential_range(4):
        t = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r * 128:(r + 1) * 128, :])
        nisa.dma_copy(dst=out[(r % 3) * 128:(r % 3 + 1) * 128, :], src=t)
    return out


@pytest.mark.parametrize("kernel", [output_read_back, same_rows_stored_twice])
def test_a_program_whose_parts_would_race_on_shared_memory_is_not_split(kernel):
    x = np.random.default_rng(45).standard_normal((4 * 128, 64), dtype=np.float32)
    program = traced(kernel, [x])
    assert split.plan(program, 2, largest_share=1.0, min_work_us=0.0) is None


def test_a_forged_program_writing_an_input_is_not_split():
    """Tracing refuses a kernel writing its input; a forged program could still do it, and the
    inputs are shared by every part."""
    rng = np.random.default_rng(46)
    s = rng.standard_normal((128, 128), dtype=np.float32)
    m_all = rng.standard_normal((BLOCKS * 128, 256), dtype=np.float32)
    program = traced(independent_blocks_with_a_print, [s, m_all])
    assert split.plan(program, 2, min_work_us=0.0) is not None
    m_input = next(a.id for a in program.allocs if a.input_index == 1)
    load = next(rec for rec in program.records[len(program.records) // 2:] if rec.opcode == "dma_copy"
                and rec.reads[0].alloc_id == m_input)
    load.writes[0], load.reads[0] = load.reads[0], load.writes[0]      # stored back into the input
    assert split.plan(program, 2, min_work_us=0.0) is None


def test_a_program_with_fewer_stores_than_processes_or_one_process_is_not_split():
    rng = np.random.default_rng(46)
    s = rng.standard_normal((128, 128), dtype=np.float32)
    m_all = rng.standard_normal((2 * 128, 256), dtype=np.float32)
    program = traced(independent_blocks_with_a_print, [s, m_all])
    assert split.plan(program, 1, min_work_us=0.0) is None
    assert split.plan(program, 3, largest_share=1.0, min_work_us=0.0) is None
    assert split.plan(program, 2, largest_share=1.0, min_work_us=0.0) is not None
    # and one whose work is a few milliseconds is not worth a fork
    assert split.plan(program, 2, largest_share=1.0) is None


# ----- errors and processes ------------------------------------------------------------------------------

def where(message: str) -> str:
    return "\n".join(line for line in message.splitlines() if not line.strip().startswith("at "))


def test_the_error_raised_is_the_one_the_whole_program_stops_at():
    """A forged program failing in blocks of several parts: the earliest failure in program
    order is raised, whichever process ran it, with the message one process gives."""
    rng = np.random.default_rng(47)
    s = rng.standard_normal((128, 128), dtype=np.float32)
    m_all = rng.standard_normal((BLOCKS * 128, 256), dtype=np.float32)
    program = traced(independent_blocks_with_a_print, [s, m_all])
    parts = split.plan(program, 3, min_work_us=0.0)
    assert parts is not None
    only = [sorted(set(p).difference(*(set(q) for q in parts if q is not p))) for p in parts]
    own_matmul = [[i for i in indices if program.records[i].kind == "matmul"] for indices in only]
    assert all(own_matmul)
    for broken_at in ((own_matmul[0][0], own_matmul[2][0]), (own_matmul[1][-1], own_matmul[2][-1]),
                      (own_matmul[2][0],), (own_matmul[1][0],)):
        broken = traced(independent_blocks_with_a_print, [s, m_all])
        for i in broken_at:
            m = broken.records[i].reads[1]              # 21 columns where 256 are written: cannot store
            broken.records[i].reads[1] = Region(m.alloc_id, m.buffer, m.start, (m.shape[0], 7, 3),
                                                (m.strides[0], 12, 4), m.itemsize, m.dtype, m.partitions)
        with pytest.raises(ProgramError) as alone:
            one_process(broken, [s, m_all])
        with pytest.raises(ProgramError) as split_up:
            in_parts(broken, [s, m_all], parts)
        assert f"instruction {min(broken_at)} " in str(alone.value)
        # the same text but for where in Python the check ran (a caller's line, not the kernel's)
        assert where(str(split_up.value)) == where(str(alone.value))


def test_a_forked_part_that_ends_without_a_word_is_an_error_not_a_hang():
    report = split._collect(forked.start(lambda: os._exit(3)))
    assert report["error"][0] == -1 and "without a result" in report["error"][2]


FORKS_A_PART = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, {root!r})
    from nkisim import forked
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        forked._die_with(parent)          # what a forked part does first
        time.sleep(3600)
        os._exit(0)
    print(pid, flush=True)
    time.sleep(3600)
""")


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="Linux /proc")
def test_a_forked_part_dies_with_the_process_that_forked_it():
    """The grader kills a timed-out executor: its forked parts must not run on (this one would
    sleep an hour)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.Popen([sys.executable, "-c", FORKS_A_PART.format(root=root)], cwd=root,
                            stdout=subprocess.PIPE, text=True)
    try:
        with proc.stdout:
            part = int(proc.stdout.readline())
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 120
        while not _gone(part) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(part)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_output_nothing_writes_holds_what_one_process_leaves_there_and_a_covered_one_is_not_filled():
    rng = np.random.default_rng(48)
    s = rng.standard_normal((128, 128), dtype=np.float32)
    m_all = rng.standard_normal((BLOCKS * 128, 256), dtype=np.float32)
    holes = traced(independent_blocks_with_a_print, [s, m_all], {"rows_stored": 64})
    parts = assert_same_execution(holes, [s, m_all], 2)
    assert not parts.covers_output
    assert np.isnan(np.asarray(in_parts(holes, [s, m_all], parts).outputs)[64:128]).all()
    whole = traced(independent_blocks_with_a_print, [s, m_all])
    parts = split.plan(whole, 2, min_work_us=0.0)
    assert parts.covers_output
    room = shared_room(whole)
    room[...] = 7.0               # starting values that would show through an unwritten element
    with np.errstate(all="ignore"), threadpool_limits(limits=1, user_api="blas"):
        done = split.execute_split(whole, [s, m_all], parts, room)
    assert np.asarray(done.outputs).tobytes() == np.asarray(one_process(whole, [s, m_all]).outputs).tobytes()


def test_a_forged_program_the_analysis_cannot_read_is_left_to_one_process():
    rng = np.random.default_rng(49)
    s = rng.standard_normal((128, 128), dtype=np.float32)
    m_all = rng.standard_normal((BLOCKS * 128, 256), dtype=np.float32)
    program = traced(independent_blocks_with_a_print, [s, m_all])
    program.records[3].reads = None                   # not a list of regions
    assert split.plan(program, 2, min_work_us=0.0) is None


def test_a_forked_function_sends_its_value_and_one_that_dies_writing_sends_none():
    done = forked.start(lambda: {"latency_us": 12.5, "profile": [1, 2]})
    assert done.report() == ({"latency_us": 12.5, "profile": [1, 2]}, 0)
    value, status = forked.start(lambda: os._exit(7)).report()          # died before a word
    assert value is None and os.waitstatus_to_exitcode(status) == 7
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:                       # killed halfway through its answer (its memory limit, say)
        os.write(writer, struct.pack("<Q", 100) + b'{"latency_')
        os._exit(9)
    os.close(writer)
    value, status = forked.Forked(pid, reader).report()
    assert value is None and os.waitstatus_to_exitcode(status) == 9


# ----- who owns which output elements, worked out on blocks of elements --------------------------

def _owners_element_by_element(parts_regions: list[list[Region]], size: int) -> bool | None:
    """The definition split._disjoint_outputs must agree with: one owner per element."""
    owner = np.zeros(size, dtype=np.uint8)
    for p, regions in enumerate(parts_regions, start=1):
        for r in regions:
            if r.offsets is not None:
                mine = owner[r.offsets]
                if np.any((mine != 0) & (mine != p)):
                    return None
                owner[r.offsets] = p
                continue
            if not np.prod(r.shape):
                continue
            mine = np.ndarray(r.shape, np.uint8, owner, r.start, tuple(s // r.itemsize for s in r.strides))
            if np.any((mine != 0) & (mine != p)):
                return None
            mine[...] = p
    return bool(owner.all())


class _Store:
    """What _disjoint_outputs reads of a record: its writes and stores."""

    def __init__(self, region: Region) -> None:
        self.writes, self.stores = [region], []


def _disjoint(parts_regions: list[list[Region]], out: Region, target) -> bool | None:
    records, chosen = [], []
    for regions in parts_regions:
        chosen.append(list(range(len(records), len(records) + len(regions))))
        records += [_Store(r) for r in regions]
    return split._disjoint_outputs(records, chosen, list(range(len(records))), out, target)


def _rows(start_row: int, rows: int, channels: int, height: int, width: int, first_col: int = 0,
          cols: int | None = None) -> Region:
    """A conv2d store: `rows` rows of every channel of a (channels, height, width) float32 output."""
    cols = width - first_col if cols is None else cols
    return Region(1, "hbm", start_row * width + first_col, (channels, rows, cols),
                  (height * width * 4, width * 4, 4), 4, "float32", 1)


def test_output_owners_are_found_on_whole_rows_as_on_elements():
    channels, height, width = 4, 12, 10
    size = channels * height * width
    out = Region(1, "hbm", 0, (channels, height, width), (height * width * 4, width * 4, 4), 4, "float32", 1)
    target = type("Target", (), {"shape": (channels, height, width)})()
    halves = [[_rows(0, 6, channels, height, width)], [_rows(6, 6, channels, height, width)]]
    assert split._block(size, [r for part in halves for r in part]) == width
    assert _disjoint(halves, out, target) is True
    short = [[_rows(0, 6, channels, height, width)], [_rows(6, 5, channels, height, width)]]
    assert _disjoint(short, out, target) is False              # the last row of each channel: nobody's
    # the attack: the second part also writes one row of the first's, and only that row overlaps
    overlapping = [[_rows(0, 6, channels, height, width)], [_rows(5, 7, channels, height, width)]]
    assert _disjoint(overlapping, out, target) is None
    # half a row: the blocks shrink to what both halves write whole, and the overlap is still seen
    half_rows = [[_rows(0, 6, channels, height, width), _rows(6, 1, channels, height, width, 0, 5)],
                 [_rows(6, 6, channels, height, width, 0, 5)]]
    assert split._block(size, [r for part in half_rows for r in part]) == 5
    assert _disjoint(half_rows, out, target) is None
    # runs of 2 at even starts, on rows of 7: blocks of one element (rows of odd length), else
    # the overlap at row 1, column 5 of each channel falls between blocks and is missed
    odd = Region(1, "hbm", 0, (2, 3, 7), (84, 28, 4), 4, "float32", 1)
    squares = [[_rows(1, 2, 2, 3, 7, 5, 2)], [_rows(0, 2, 2, 3, 7, 4, 2)]]
    assert split._block(42, [r for part in squares for r in part]) == 1
    assert _disjoint(squares, odd, type("Target", (), {"shape": (2, 3, 7)})()) is None


def test_output_owners_agree_with_the_element_by_element_definition_on_random_stores():
    rng = np.random.default_rng(71)
    seen = {None: 0, False: 0, True: 0}
    blocks = 0
    for trial in range(800):
        channels, height = (int(n) for n in rng.integers(1, 5, size=2))
        width = int(rng.integers(1, 13))
        size = channels * height * width
        out = Region(1, "hbm", 0, (channels, height, width), (height * width * 4, width * 4, 4), 4, "float32", 1)
        target = type("Target", (), {"shape": (channels, height, width)})()
        unit = int(rng.integers(1, 5))             # every run a multiple of it, starting anywhere or on one
        aligned = bool(rng.integers(0, 2))
        parts = _tiled(rng, channels, height, width) if trial % 3 == 0 else []
        for _ in range(0 if parts else int(rng.integers(2, 4))):
            regions = []
            for _ in range(int(rng.integers(1, 3))):
                kind = rng.integers(0, 10)
                if kind == 0:                       # gathered elements
                    offsets = rng.choice(size, size=min(3, size), replace=False)
                    regions.append(Region(1, "hbm", 0, (len(offsets),), None, 4, "float32", 1, offsets=offsets))
                    continue
                row = int(rng.integers(0, height))
                rows = int(rng.integers(1, height - row + 1))
                if unit > width:
                    col, cols = 0, width
                else:
                    col = int(rng.integers(0, width - unit + 1))
                    if aligned:
                        col -= col % unit
                    cols = unit * int(rng.integers(1, (width - col) // unit + 1))
                if kind == 1 and cols > 1:          # every other column: not contiguous
                    regions.append(Region(1, "hbm", row * width + col, (channels, rows, (cols + 1) // 2),
                                          (height * width * 4, width * 4, 8), 4, "float32", 1))
                else:
                    regions.append(_rows(row, rows, channels, height, width, col, cols))
            parts.append(regions)
        expected = _owners_element_by_element(parts, size)
        assert _disjoint(parts, out, target) == expected, trial
        seen[expected] += 1
        blocks += split._block(size, [r for regions in parts for r in regions]) > 1
    # each answer came up often enough to be tested, and many a time on blocks of several elements
    assert min(seen.values()) >= 20 and blocks >= 100, (seen, blocks)


def _tiled(rng, channels: int, height: int, width: int) -> list[list[Region]]:
    """Parts that write disjoint pieces of every row (rows dealt out to parts, each row cut at
    random columns), then now and then a piece dropped or one written by a second part too."""
    n_parts = int(rng.integers(2, 4))
    parts: list[list[Region]] = [[] for _ in range(n_parts)]
    for row in range(height):
        cuts = sorted({0, width, *(int(c) for c in rng.integers(1, width + 1, size=int(rng.integers(0, 3))))})
        for a, b in zip(cuts, cuts[1:]):
            parts[int(rng.integers(0, n_parts))].append(_rows(row, 1, channels, height, width, a, b - a))
    pieces = [(p, i) for p, regions in enumerate(parts) for i in range(len(regions))]
    change = rng.integers(0, 3)
    if change == 1 and len(pieces) > 1:
        p, i = pieces[int(rng.integers(0, len(pieces)))]
        del parts[p][i]
    elif change == 2:
        p, i = pieces[int(rng.integers(0, len(pieces)))]
        parts[(p + 1) % n_parts].append(parts[p][i])
    return [regions for regions in parts if regions]
