"""On-chip capacity verdicts must not depend on when Python's cycle collector runs.

A tile's live range ends when the kernel can no longer reach it. Reference counting sees that
at once, except for a tile caught in a reference cycle, which only the cycle collector frees,
at moments that depend on everything else the process allocated. These kernels put each
iteration's 120 KiB tile in a cycle: two such tiles do not fit, so the verdict hinges on
whether the previous one counts as live. It must be the same with the collector off, and with
a collection forced in every iteration.
"""
from __future__ import annotations

import contextlib
import gc
import weakref

import numpy as np
import pytest

import nkisim
from nkisim import errors

nkisim.install()

import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402


def k_dropped_cycles(x, collect):
    """Each tile is dropped with its cycle: unreachable, so never two live at once."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    for i in nl.affine_range(8):
        big = nl.ndarray((128, 30720), nl.float32)
        holder = [big]
        holder.append(holder)          # the tile is now held by a cycle
        nisa.dma_copy(dst=big[:, 0:512], src=x)
        t = nisa.tensor_scalar(big[:, 0:512], np.add, float(i))
        del big, holder
        if collect:
            gc.collect()
    nisa.dma_copy(dst=out, src=t)
    return out


def k_kept_cycles(x, collect):
    """Every tile stays reachable through a cyclic list: the second one overflows."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    kept = []
    kept.append(kept)
    for i in nl.affine_range(8):
        big = nl.ndarray((128, 30720), nl.float32)
        kept.append(big)
        nisa.dma_copy(dst=big[:, 0:512], src=x)
        t = nisa.tensor_scalar(big[:, 0:512], np.add, float(i))
        if collect:
            gc.collect()
    nisa.dma_copy(dst=out, src=t)
    return out


@contextlib.contextmanager
def collector(on: bool):
    was = gc.isenabled()
    (gc.enable if on else gc.disable)()
    try:
        yield
    finally:
        (gc.enable if was else gc.disable)()


def verdict(kernel, collect: bool):
    x = np.random.default_rng(0).standard_normal((128, 512)).astype(np.float32)
    with collector(collect):
        try:
            run = nkisim.run_kernel(kernel, (x, collect), {})
        except errors.AllocationError as err:
            return ("overflow", err.code)
    np.testing.assert_allclose(run.outputs, x + 7.0)
    return ("ran",)


def test_a_tile_dropped_in_a_cycle_is_free_whether_or_not_the_collector_runs():
    assert verdict(k_dropped_cycles, collect=True) == ("ran",)
    assert verdict(k_dropped_cycles, collect=False) == ("ran",)


def test_tiles_kept_through_a_cycle_overflow_whether_or_not_the_collector_runs():
    assert verdict(k_kept_cycles, collect=True) == ("overflow", "err_stack_overflow_sbuf")
    assert verdict(k_kept_cycles, collect=False) == ("overflow", "err_stack_overflow_sbuf")


class Marker:
    """Something a weak reference can watch, caught in the kernel's cycles."""


def k_garbage_every_instruction(x, count, markers):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    t = nl.ndarray(x.shape, x.dtype)
    nisa.dma_copy(dst=t, src=x)
    for i in range(count):
        t = nisa.tensor_scalar(t, np.add, 1.0)
        junk = [Marker()]
        junk.append(junk)
        if i == 0:
            markers.append(weakref.ref(junk[0]))
        del junk
    nisa.dma_copy(dst=out, src=t)
    return out


def traced_garbage_survives(step: int) -> bool:
    """Trace a kernel that drops a cycle per instruction, with the collector paused around
    the trace as well (so nothing collects after it); is the first cycle still alive?"""
    from nkisim import collector
    from nkisim.runtime import ArgSpec, trace_kernel
    markers = []
    saved, collector._STEP = collector._STEP, step
    try:
        with collector.paused():
            trace_kernel(k_garbage_every_instruction, [ArgSpec((128, 4), np.float32)],
                         {"count": collector._EVERY + 8, "markers": markers})
            return markers[0]() is not None
    finally:
        collector._STEP = saved


def test_cyclic_garbage_is_collected_during_a_trace_once_memory_has_grown():
    """The collector is paused while tracing; a look at the peak resident size every
    collector._EVERY instructions collects once it has grown by collector._STEP (here 0)."""
    assert not traced_garbage_survives(step=0)
    assert traced_garbage_survives(step=2 ** 40)     # and without that look, nothing collects


def test_garbage_frozen_with_a_finished_trace_is_collected_once_memory_has_grown():
    """A finished trace is frozen (gc.freeze) with whatever cycles it left: the next trace
    unfreezes and collects them once the peak resident size has grown by collector._STEP."""
    from nkisim import collector
    from nkisim.runtime import ArgSpec, trace_kernel
    markers = []
    saved = collector._STEP
    try:
        collector._STEP = 2 ** 40
        trace_kernel(k_garbage_every_instruction, [ArgSpec((128, 4), np.float32)],
                     {"count": 4, "markers": markers})
        gc.collect()
        assert markers[0]() is not None          # frozen: a full collection does not see it
        collector._STEP = 0
        trace_kernel(k_garbage_every_instruction, [ArgSpec((128, 4), np.float32)],
                     {"count": 4, "markers": []})
        assert markers[0]() is None
    finally:
        collector._STEP = saved
