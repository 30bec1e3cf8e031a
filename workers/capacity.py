"""How many simulator grades a worker runs at once by default: one per CPU core this process
may use, and no more than the memory holds at GRADE_MEMORY_BYTES a grade. Each grade's BLAS and
its sandboxed children are held to one thread; with answers made ahead (NKI_ANSWER_POOL_SIZE) a
grade keeps about one core busy, so grades on separate cores barely slow each other. A grade
that works its answers out runs them beside its kernel and keeps 1.3-1.6 cores busy: one per
core then grows each one's latency by 40-65%, for more grades an hour than fewer at once would
give (bench/queue_load.py measures both; docs/operators.md)."""
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
