"""The cycle collector paused while a kernel is traced, with cyclic garbage still bounded.

Tracing keeps ~80 container objects alive per instruction (the trace itself) and makes almost
no cyclic garbage, so a running collector only rescans the growing trace: ~2 us of a small
instruction's ~10. Paused, it cannot change a verdict (MemoryTracker.check collects before it
reports an overflow). What a kernel's own reference cycles hold stays bounded: every
`_EVERY` instructions the process's peak resident size is read, and once it has grown by
`_STEP` bytes since the last collection, one collection runs. A loop that makes garbage without
instructions is stopped by the sandbox's memory limit (a MemoryError), as it would otherwise
run until the wall-clock limit.
"""
from __future__ import annotations

import contextlib
import gc
import resource

_EVERY = 1 << 14            # instructions between looks at the resident size (one getrusage call)
_STEP = 512 * 2 ** 20       # growth of the peak resident size that triggers a collection
_next_collect = [0]         # peak resident bytes at which the next collection runs


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024     # Linux reports KiB


@contextlib.contextmanager
def paused():
    """Pause automatic collection for one trace; the previous state is restored after it."""
    enabled = gc.isenabled()
    gc.disable()
    _next_collect[0] = _peak_rss() + _STEP
    try:
        yield
    finally:
        if enabled:
            # One full collection now, not a young one at the next allocation: the trace is
            # scanned once either way, but this way it lands in the oldest generation as
            # long-lived, and execution does not pay a second full pass over it.
            gc.collect()
            gc.enable()


def tick(instructions: int) -> None:
    """Called with the trace's length after each instruction: cheap unless it is time to look."""
    if instructions % _EVERY == 0 and not gc.isenabled():
        peak = _peak_rss()
        if peak >= _next_collect[0]:
            gc.collect()
            _next_collect[0] = peak + _STEP
