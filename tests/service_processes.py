"""Child processes of a test never outlive it, even when pytest itself is killed."""
from __future__ import annotations

import ctypes
import signal

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM):
    """preexec_fn: the child receives `sig` when the test process dies."""
    def arm() -> None:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig))
    return arm
