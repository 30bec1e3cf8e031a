"""Matmul products on worker threads (execute(threads=N), nkisim.products) give the same bits as
one thread, on kernels written to catch a product stored late or computed from a tile already
overwritten: each is compared bit for bit between 1 and several threads and with NumPy's
answer. Tiles are 128x512 so a product takes long enough for a missed hazard to show."""
from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import nkisim

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

from nkisim.execute import execute  # noqa: E402
from nkisim.program import ProgramError  # noqa: E402
from nkisim.runtime import trace_kernel  # noqa: E402

N = 512
ROUNDS = 12


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


def product(s: np.ndarray, m: np.ndarray) -> np.ndarray:
    """One matmul as the PE array computes it: stationary (K, M) and moving (K, N) in fp32."""
    return s.astype(np.float32).T @ m.astype(np.float32)


def run(kernel, args, threads: int):
    program, _ = trace_kernel(kernel, args, {})
    with np.errstate(all="ignore"), threadpool_limits(limits=1, user_api="blas"):
        return execute(program, list(args), threads=threads).outputs


def same_at_every_thread_count(kernel, args, expected: np.ndarray) -> None:
    one = run(kernel, args, 1)
    assert np.array_equal(bits(one), bits(expected))
    for threads in (2, 3):
        assert np.array_equal(bits(run(kernel, args, threads)), bits(one)), f"{threads} threads"


@nki.jit
def overwrite_operands(s_all, m_all):
    """Each round's matmul is followed at once by DMA writes over its moving and stationary
    tiles (in place: the product may still be reading them); every product accumulates."""
    rounds = s_all.shape[0] // 128
    out = nl.ndarray((128, m_all.shape[1]), dtype=nl.float32, buffer=nl.hbm)
    acc = nl.ndarray((128, m_all.shape[1]), dtype=nl.float32, buffer=nl.psum)
    s_sb = nl.ndarray((128, 128), dtype=s_all.dtype, buffer=nl.sbuf)
    m_sb = nl.ndarray((128, m_all.shape[1]), dtype=m_all.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s_sb, src=s_all[0:128, :])
    nisa.dma_copy(dst=m_sb, src=m_all[0:128, :])
    for r in nl.sequential_range(rounds):
        acc += nisa.nc_matmul(s_sb, m_sb)
        if r + 1 < rounds:
            nisa.dma_copy(dst=m_sb, src=m_all[(r + 1) * 128:(r + 2) * 128, :])
            nisa.dma_copy(dst=s_sb, src=s_all[(r + 1) * 128:(r + 2) * 128, :])
    nisa.dma_copy(dst=out, src=nisa.tensor_copy(acc))
    return out


@pytest.mark.parametrize("dtype", [np.float32, "bfloat16"])
def test_a_tile_overwritten_right_after_its_matmul_is_multiplied_as_it_was(dtype):
    rng = np.random.default_rng(31)
    s_all = rng.standard_normal((ROUNDS * 128, 128), dtype=np.float32)
    m_all = rng.standard_normal((ROUNDS * 128, N), dtype=np.float32)
    if dtype != np.float32:
        import ml_dtypes
        s_all, m_all = s_all.astype(ml_dtypes.bfloat16), m_all.astype(ml_dtypes.bfloat16)
    with threadpool_limits(limits=1, user_api="blas"):
        expected = np.float32(0)
        for r in range(ROUNDS):
            expected = expected + product(s_all[r * 128:(r + 1) * 128], m_all[r * 128:(r + 1) * 128])
    same_at_every_thread_count(overwrite_operands, (s_all, m_all), expected)


@nki.jit
def read_psum_between_matmuls(s, m_all):
    """PSUM read (copied out) right after each accumulation, before the next one."""
    rounds = m_all.shape[0] // 128
    out = nl.ndarray((rounds * 128, m_all.shape[1]), dtype=nl.float32, buffer=nl.hbm)
    acc = nl.ndarray((128, m_all.shape[1]), dtype=nl.float32, buffer=nl.psum)
    s_sb = nl.ndarray((128, 128), dtype=s.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s_sb, src=s)
    for r in nl.sequential_range(rounds):
        m_sb = nl.ndarray((128, m_all.shape[1]), dtype=m_all.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=m_sb, src=m_all[r * 128:(r + 1) * 128, :])
        acc += nisa.nc_matmul(s_sb, m_sb)
        nisa.dma_copy(dst=out[r * 128:(r + 1) * 128, :], src=nisa.tensor_copy(acc))
    return out


def test_psum_read_right_after_accumulating_holds_every_product_so_far():
    rng = np.random.default_rng(32)
    s = rng.standard_normal((128, 128), dtype=np.float32)
    m_all = rng.standard_normal((ROUNDS * 128, N), dtype=np.float32)
    with threadpool_limits(limits=1, user_api="blas"):
        running, rows = np.float32(0), []
        for r in range(ROUNDS):
            running = running + product(s, m_all[r * 128:(r + 1) * 128])
            rows.append(running)
    same_at_every_thread_count(read_psum_between_matmuls, (s, m_all), np.concatenate(rows))


@nki.jit
def fresh_tiles_each_round(s_all, m_all):
    """Tiles allocated in the loop (the executor frees each after its last use, and the next
    round's take their place), a PSUM tile per round copied out and freed at once."""
    rounds = s_all.shape[0] // 128
    out = nl.ndarray((rounds * 128, m_all.shape[1]), dtype=nl.float32, buffer=nl.hbm)
    for r in nl.sequential_range(rounds):
        s_sb = nl.ndarray((128, 128), dtype=s_all.dtype, buffer=nl.sbuf)
        m_sb = nl.ndarray((128, m_all.shape[1]), dtype=m_all.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=s_sb, src=s_all[r * 128:(r + 1) * 128, :])
        nisa.dma_copy(dst=m_sb, src=m_all[r * 128:(r + 1) * 128, :])
        acc = nl.ndarray((128, m_all.shape[1]), dtype=nl.float32, buffer=nl.psum)
        acc += nisa.nc_matmul(s_sb, m_sb)
        acc += nisa.nc_matmul(m_sb[:, 0:128], m_sb)
        nisa.dma_copy(dst=out[r * 128:(r + 1) * 128, :], src=nisa.tensor_copy(acc))
    return out


def test_tiles_freed_and_allocated_again_in_a_loop_keep_their_own_values():
    rng = np.random.default_rng(33)
    s_all = rng.standard_normal((ROUNDS * 128, 128), dtype=np.float32)
    m_all = rng.standard_normal((ROUNDS * 128, N), dtype=np.float32)
    with threadpool_limits(limits=1, user_api="blas"):
        rows = []
        for r in range(ROUNDS):
            s, m = s_all[r * 128:(r + 1) * 128], m_all[r * 128:(r + 1) * 128]
            rows.append(np.float32(0) + product(s, m) + product(m[:, 0:128], m))
    same_at_every_thread_count(fresh_tiles_each_round, (s_all, m_all), np.concatenate(rows))


@nki.jit
def two_groups_interleaved(s_all, m_all):
    """Two accumulation groups, their matmuls alternating, each PSUM tile copied out once."""
    rounds = s_all.shape[0] // 128
    out = nl.ndarray((256, m_all.shape[1]), dtype=nl.float32, buffer=nl.hbm)
    even = nl.ndarray((128, m_all.shape[1]), dtype=nl.float32, buffer=nl.psum)
    odd = nl.ndarray((128, m_all.shape[1]), dtype=nl.float32, buffer=nl.psum)
    for r in nl.sequential_range(rounds):
        s_sb = nl.ndarray((128, 128), dtype=s_all.dtype, buffer=nl.sbuf)
        m_sb = nl.ndarray((128, m_all.shape[1]), dtype=m_all.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=s_sb, src=s_all[r * 128:(r + 1) * 128, :])
        nisa.dma_copy(dst=m_sb, src=m_all[r * 128:(r + 1) * 128, :])
        even += nisa.nc_matmul(s_sb, m_sb)
        odd += nisa.nc_matmul(m_sb[:, 128:256], m_sb)
    nisa.dma_copy(dst=out[0:128, :], src=nisa.tensor_copy(even))
    nisa.dma_copy(dst=out[128:256, :], src=nisa.tensor_copy(odd))
    return out


def test_two_accumulation_groups_interleaved_each_add_in_program_order():
    rng = np.random.default_rng(34)
    s_all = rng.standard_normal((ROUNDS * 128, 128), dtype=np.float32)
    m_all = rng.standard_normal((ROUNDS * 128, N), dtype=np.float32)
    with threadpool_limits(limits=1, user_api="blas"):
        even = odd = np.float32(0)
        for r in range(ROUNDS):
            s, m = s_all[r * 128:(r + 1) * 128], m_all[r * 128:(r + 1) * 128]
            even = even + product(s, m)
            odd = odd + product(m[:, 128:256], m)
    same_at_every_thread_count(two_groups_interleaved, (s_all, m_all), np.concatenate([even, odd]))


@nki.jit
def overwrite_psum_between_matmuls(s_all, m_all, x):
    """Each round, after a matmul accumulates, a copy overwrites the PSUM tile's first 128
    columns; the next matmul adds to what the copy left."""
    rounds = s_all.shape[0] // 128
    out = nl.ndarray((128, m_all.shape[1]), dtype=nl.float32, buffer=nl.hbm)
    acc = nl.ndarray((128, m_all.shape[1]), dtype=nl.float32, buffer=nl.psum)
    x_sb = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x_sb, src=x)
    for r in nl.sequential_range(rounds):
        s_sb = nl.ndarray((128, 128), dtype=s_all.dtype, buffer=nl.sbuf)
        m_sb = nl.ndarray((128, m_all.shape[1]), dtype=m_all.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=s_sb, src=s_all[r * 128:(r + 1) * 128, :])
        nisa.dma_copy(dst=m_sb, src=m_all[r * 128:(r + 1) * 128, :])
        acc += nisa.nc_matmul(s_sb, m_sb)
        acc[:, 0:128] = nisa.tensor_copy(x_sb)
    nisa.dma_copy(dst=out, src=nisa.tensor_copy(acc))
    return out


def test_psum_overwritten_between_matmuls_keeps_the_writes_in_program_order():
    rng = np.random.default_rng(37)
    s_all = rng.standard_normal((ROUNDS * 128, 128), dtype=np.float32)
    m_all = rng.standard_normal((ROUNDS * 128, N), dtype=np.float32)
    x = rng.standard_normal((128, 128), dtype=np.float32)
    with threadpool_limits(limits=1, user_api="blas"):
        expected = np.zeros((128, N), dtype=np.float32)
        for r in range(ROUNDS):
            expected = expected + product(s_all[r * 128:(r + 1) * 128], m_all[r * 128:(r + 1) * 128])
            expected[:, 0:128] = x
    same_at_every_thread_count(overwrite_psum_between_matmuls, (s_all, m_all, x), expected)


@nki.jit
def print_psum_each_round(s, m_all):
    """nl.device_print of the PSUM tile right after each accumulation."""
    rounds = m_all.shape[0] // 128
    out = nl.ndarray((128, m_all.shape[1]), dtype=nl.float32, buffer=nl.hbm)
    acc = nl.ndarray((128, m_all.shape[1]), dtype=nl.float32, buffer=nl.psum)
    s_sb = nl.ndarray((128, 128), dtype=s.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s_sb, src=s)
    for r in nl.sequential_range(rounds):
        m_sb = nl.ndarray((128, m_all.shape[1]), dtype=m_all.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=m_sb, src=m_all[r * 128:(r + 1) * 128, :])
        acc += nisa.nc_matmul(s_sb, m_sb)
        nl.device_print("acc", acc)
    nisa.dma_copy(dst=out, src=nisa.tensor_copy(acc))
    return out


def test_device_print_of_psum_shows_every_product_so_far_and_prints_in_order(capsys):
    rng = np.random.default_rng(38)
    s = rng.standard_normal((128, 128), dtype=np.float32)
    m_all = rng.standard_normal((4 * 128, N), dtype=np.float32)
    program, _ = trace_kernel(print_psum_each_round, (s, m_all), {})
    runs = []
    for threads in (1, 2):
        with np.errstate(all="ignore"), threadpool_limits(limits=1, user_api="blas"):
            done = execute(program, [s, m_all], threads=threads, echo=True)
        runs.append((done.printed, capsys.readouterr().out))
    assert runs[0] == runs[1]                       # the texts, and what echo wrote, in order
    printed = runs[0][0]
    assert len(printed) == 4 and len(set(printed)) == 4 and all(t.startswith("acc") for t in printed)


def test_a_product_that_cannot_be_computed_is_reported_at_its_instruction():
    """A program no tracer writes (its third matmul's stationary region cut to 127 rows): the
    error names that matmul with any thread count, though later instructions had started."""
    rng = np.random.default_rng(35)
    args = (rng.standard_normal((ROUNDS * 128, 128), dtype=np.float32),
            rng.standard_normal((ROUNDS * 128, N), dtype=np.float32))
    messages = []
    for threads in (1, 2):
        program, _ = trace_kernel(two_groups_interleaved, args, {})
        broken = [rec for rec in program.records if rec.kind == "matmul"][2]
        s = broken.reads[0]
        broken.reads[0] = type(s)(s.alloc_id, s.buffer, s.start, (127,) + s.shape[1:], s.strides, s.itemsize,
                                  s.dtype, 127)
        with pytest.raises(ProgramError) as info, threadpool_limits(limits=1, user_api="blas"):
            execute(program, list(args), threads=threads)
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert messages[0].startswith(f"instruction {broken.index} (") and "cannot execute" in messages[0]


def test_a_thread_count_that_is_not_a_whole_positive_number_is_refused():
    program, _ = trace_kernel(two_groups_interleaved, (np.zeros((128, 128), np.float32),
                                                       np.zeros((128, N), np.float32)), {})
    for threads in (0, -1, 1.5, "2"):
        with pytest.raises(ValueError, match="threads"):
            execute(program, [np.zeros((128, 128), np.float32), np.zeros((128, N), np.float32)], threads=threads)


def test_when_no_worker_thread_can_start_the_products_are_computed_here_with_the_same_bits():
    """As when a job's process cap is reached: thread creation fails (here, a stack no machine
    can give), and execution goes on without workers instead of failing an honest kernel."""
    import threading
    rng = np.random.default_rng(36)
    args = (rng.standard_normal((4 * 128, 128), dtype=np.float32),
            rng.standard_normal((4 * 128, N), dtype=np.float32))
    one = run(two_groups_interleaved, args, 1)
    threading.stack_size(1 << 44)
    try:
        with pytest.raises(RuntimeError):
            threading.Thread(target=int).start()      # the condition is real
        starved = run(two_groups_interleaved, args, 2)
    finally:
        threading.stack_size(0)
    assert np.array_equal(bits(starved), bits(one))
