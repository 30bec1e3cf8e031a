"""The cycle collector kept off the trace, with cyclic garbage still bounded.

Tracing keeps ~6 container objects alive per instruction (the trace itself) and makes almost
no cyclic garbage (an optimized conv2d's trace of 4.5k instructions leaves 25 unreachable
objects). A running collector would only rescan the growing trace; a full collection after it
still cost ~4 us of a small instruction's ~10 (bench/sim_speed.py --instructions-only). So the
collector is paused while a kernel is traced, and the finished trace is frozen (gc.freeze): it
lives in the permanent generation, which no later collection scans, and is freed by reference
counting when the program is dropped, as any acyclic object is.

Paused, the collector cannot change a verdict (MemoryTracker.check collects before it reports
an overflow). What cycles a kernel leaves stays bounded: before each trace and every `_EVERY`
instructions of one, the process's peak resident size is read, and once it has grown by `_STEP`
bytes since the last collection, everything is unfrozen and collected once. A loop that makes
garbage without instructions is stopped by the sandbox's memory limit (a MemoryError), as it
would otherwise run until the wall-clock limit.
"""
from __future__ import annotations

import contextlib
import gc
import resource

_EVERY = 1 << 14            # instructions between looks at the resident size (one getrusage call)
_STEP = 512 * 2 ** 20       # growth of the peak resident size that triggers a collection
_last_collect = [-1]        # peak resident bytes at the last collection (-1: none yet)


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024     # Linux reports KiB


def _collect_if_grown() -> None:
    peak = _peak_rss()
    if _last_collect[0] < 0:
        _last_collect[0] = peak
    elif peak >= _last_collect[0] + _STEP:
        gc.unfreeze()       # earlier traces' cycles too: they have been frozen with their trace
        gc.collect()
        _last_collect[0] = peak


@contextlib.contextmanager
def paused():
    """Pause automatic collection while a long-lived program is made (a kernel traced, or a
    program decoded and checked), then freeze it; the previous state is restored after."""
    enabled = gc.isenabled()
    gc.disable()
    _collect_if_grown()
    try:
        yield
    finally:
        if enabled:
            # Not one full collection, which would scan the whole trace once (and a young one
            # at the next allocation, then the middle one, would scan it again and again):
            # parked in the permanent generation, no collection ever scans it.
            gc.freeze()
            gc.enable()


@contextlib.contextmanager
def off():
    """The collector off for a stretch that makes many small containers and no cycles
    (encoding, decoding, scheduling a trace): left on, it would rescan the whole heap every few
    hundred of them. Its previous state is restored after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def tick(instructions: int) -> None:
    """Called with the trace's length after each instruction: cheap unless it is time to look."""
    if instructions % _EVERY == 0 and not gc.isenabled():
        _collect_if_grown()
