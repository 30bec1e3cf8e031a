"""The executor's views of allocations, made once per region and kept while the memory they show
is the allocation's: a loop reading one region again gets the same view, never one of memory the
allocation no longer has (its result adopted in place of it, or the tile released), and a program
with many distinct reads of one tile cannot make it keep an unbounded number of them."""
from __future__ import annotations

import numpy as np

import nkisim
from nkisim import execute as ex

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

from nkisim.runtime import trace_kernel  # noqa: E402


@nki.jit
def doubled_in_place(a, times):
    """t = t + t, `times` times: each result is all of t's memory (adopted), read next time."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    left = nl.ndarray((a.shape[0], 8), dtype=a.dtype, buffer=nl.hbm)
    for _ in nl.sequential_range(times):
        part = nisa.tensor_tensor(t[:, 0:8], t[:, 0:8], op=nl.add)    # a region of t read only here
        t[...] = nisa.tensor_tensor(t, t, op=nl.add)
    nisa.dma_copy(dst=left, src=part)
    nisa.dma_copy(dst=out, src=t)
    return out, left


@nki.jit
def halves_rewritten(a, times):
    """Each pass reads both halves of t and writes its left half: partial writes, no adoption."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    half = a.shape[1] // 2
    for _ in nl.sequential_range(times):
        t[:, 0:half] = nisa.tensor_tensor(t[:, 0:half], t[:, half:2 * half], op=nl.add)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def read_back_column_by_column(a):
    """Writes an output, then reads it back one column at a time: a distinct region per read."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)
    total = nl.ndarray((a.shape[0], 1), dtype=a.dtype, buffer=nl.hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.dma_copy(dst=out, src=t)
    acc = nisa.memset((a.shape[0], 1), 0.0, dtype=a.dtype)
    for j in nl.sequential_range(a.shape[1]):
        col = nl.ndarray((a.shape[0], 1), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=col, src=out[:, j:j + 1])
        acc = nisa.tensor_tensor(acc, col, op=nl.add)
    nisa.dma_copy(dst=total, src=acc)
    return out, total


def _executed(kernel, args, kwargs=None):
    """(the memory after running the traced program, its outputs, the program)."""
    program, _ = trace_kernel(kernel, tuple(args), kwargs or {})
    plan = ex._plan(program)
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    mem = ex._Memory(program, arrays, True, None, plan)
    done = ex._run(program, mem, False, None, plan.last_uses)
    return mem, done.outputs, program


def _every_kept_view_shows_current_memory(mem) -> None:
    for alloc_id, views in mem.views.items():
        assert alloc_id in mem.arrays, "views kept of an allocation whose memory was released"
        for flat, view in views.values():      # none of memory the allocation no longer has
            assert flat is mem.arrays[alloc_id] and np.shares_memory(view, flat)


def test_a_region_read_again_after_its_memory_was_replaced_shows_the_new_values():
    a = np.random.default_rng(5).random((128, 16), dtype=np.float32)
    out, left = nkisim.run_kernel(doubled_in_place, (a, 10), {}).outputs
    np.testing.assert_array_equal(out, a * np.float32(1024))
    np.testing.assert_array_equal(left, a[:, 0:8] * np.float32(1024))
    mem, _, _ = _executed(doubled_in_place, (a, 10))
    _every_kept_view_shows_current_memory(mem)


def test_partial_writes_are_seen_through_the_same_view():
    a = np.random.default_rng(6).random((128, 32), dtype=np.float32)
    expected = a.copy()
    for _ in range(5):
        expected[:, :16] = expected[:, :16] + expected[:, 16:]
    out = nkisim.run_kernel(halves_rewritten, (a, 5), {}).outputs
    np.testing.assert_array_equal(out, expected)


def test_released_tiles_leave_no_views_behind_and_one_tile_keeps_a_bounded_number():
    a = np.random.default_rng(7).random((128, 3 * ex._VIEWS_PER_ALLOCATION), dtype=np.float32)
    mem, (out, total), program = _executed(read_back_column_by_column, (a,))
    np.testing.assert_array_equal(out, a)
    np.testing.assert_allclose(total[:, 0], a.sum(axis=1, dtype=np.float64), rtol=1e-5)
    _every_kept_view_shows_current_memory(mem)
    out_id = program.outputs[0].alloc_id
    reads_of_out = {id(r) for rec in program.records for r in rec.reads if r.alloc_id == out_id}
    assert len(reads_of_out) > ex._VIEWS_PER_ALLOCATION             # the program read more than we keep
    assert 0 < len(mem.views.get(out_id, {})) <= ex._VIEWS_PER_ALLOCATION
