"""How many simulator grades a worker runs at once by default: one per CPU core this process
may use (each grade's BLAS and its sandboxed child are held to one thread, so grades on separate
cores do not slow each other; bench/queue_load.py measures the latency growth), and no more
than the memory holds at GRADE_MEMORY_BYTES a grade."""
from __future__ import annotations

import os

# A full asst4 grade peaks at about 1.2 GB in the worker's process (bench/grade_speed.py) plus
# its child's tensors: 2 GiB a grade leaves room for both.
GRADE_MEMORY_BYTES = 2 << 30


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:            # not Linux
        return os.cpu_count() or 1


def memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def sim_grades_at_once() -> int:
    memory = memory_bytes()
    by_memory = memory // GRADE_MEMORY_BYTES if memory else usable_cores()
    return max(1, min(usable_cores(), by_memory))
