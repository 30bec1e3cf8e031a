"""Big buffers go back to the system when freed.

glibc serves an allocation above its mmap threshold with a mapping of its own, returned to the
system on free; but freeing one raises the threshold to its size (up to 32 MiB), so later buffers
of tens of MB come from a heap arena and stay resident after they are freed, one arena per
thread. A grade's reference answer on two threads then held ~90 MB more at its peak than on one
(1135 against 1043 MB for the optimized kernel's grade; 942 MB with the threshold fixed). Fixing
the threshold keeps it where it is."""
from __future__ import annotations

import ctypes
import ctypes.util

M_MMAP_THRESHOLD = -3               # mallopt's parameter number (malloc.h)
MMAP_THRESHOLD_BYTES = 4 << 20      # NumPy temporaries below this stay in the arenas, as before
_done: list[bool] = []


def return_big_buffers() -> bool:
    """Fix glibc's mmap threshold for this process (once); False where there is no glibc."""
    if _done:
        return _done[0]
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        ok = bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
    except (OSError, AttributeError):    # not glibc
        ok = False
    _done.append(ok)
    return ok
