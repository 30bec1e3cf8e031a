"""BLAS on one thread in the grader's process while any answer is being worked out.

Some BLAS round a product split over several threads differently from the same product on one
(OpenBLAS 0.3.31's sgemm on AMD EPYC: the last bit of many float32 answers), so an answer's bits
would depend on the threads of the process that made it: a worker's answer pool filled at its
start, before any grade, would not be what a grade works out for the same seed. The limit is
process-wide (threadpoolctl sets the library's own count), so it is counted: the first thread in
sets it, the last one out gives the caller's count back, and one thread leaving never hands
another a BLAS of several threads."""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

from .jobs import single_threaded_blas

_lock = threading.Lock()
_inside = 0                 # threads in one_blas_thread() now
_limiter = None             # what gives the caller's count back


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """A context (or, as `@one_blas_thread()`, a decorator) in which this process's BLAS runs one thread."""
    global _inside, _limiter
    with _lock:
        if _inside == 0:
            _limiter = single_threaded_blas()
        _inside += 1
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            if _inside == 0:
                _limiter.restore_original_limits()
                _limiter = None


def use_one_blas_thread() -> None:
    """One BLAS thread in this process for good: call it on the main thread before anything
    else, in a process that grades or makes answers (a worker's processes). OpenBLAS 0.3.31
    does not always take a count set on another thread once the main thread has set one (as
    one_blas_thread() does when a grade ends there), so an answer pool topped up on a thread of
    its own after a grade could be made with several."""
    single_threaded_blas()              # never given back
