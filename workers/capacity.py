"""How many simulator grades a worker runs at once by default, and how many threads each grade
may use for its own work: as many grades as the cores allow without one grade's latency growing
by more than 20% against being graded alone (issue 24), and no more than the memory holds at
GRADE_MEMORY_BYTES a grade.

A grade with answers made ahead (NKI_ANSWER_POOL_SIZE) keeps about one core busy, so a worker
runs one per core. A grade that works its reference answers out runs them beside its kernel and
keeps 1.4-1.6 cores busy alone (bench/queue_load.py: good 1.60, slow 1.48, failing 1.01): one
per core then grew latency by 40-65%, so such a worker runs one grade per COLD_GRADE_CORES.
Each grade's share of the cores is what its reference answer (and the executor) may spread over."""
from __future__ import annotations

import os

from grader import usable_cores

# A full asst4 grade peaks at about 1.2 GB in the worker's process (bench/grade_speed.py) plus
# its child's tensors: 2 GiB a grade leaves room for both.
GRADE_MEMORY_BYTES = 2 << 30
# Cores one grade that works its answers out keeps busy alone, at most (bench/queue_load.py).
COLD_GRADE_CORES = 1.6


def memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def sim_grades_at_once(answers_made_ahead: bool) -> int:
    memory = memory_bytes()
    cores = usable_cores()
    by_cores = cores if answers_made_ahead else int(cores / COLD_GRADE_CORES)
    by_memory = memory // GRADE_MEMORY_BYTES if memory else cores
    return max(1, min(by_cores, by_memory))


def threads_per_grade(grades_at_once: int) -> int:
    """Each grade's even share of the usable cores, at least one."""
    return max(1, usable_cores() // max(1, grades_at_once))
