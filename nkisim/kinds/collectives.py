"""The values of the cores' meeting points: a barrier computes nothing (sendrecv is a copy)."""
from __future__ import annotations

from .values import value_kind


@value_kind("sync", reads=0, writes=0)
def sync(rec, values):
    """core_barrier: the order it imposes is the program's; no value changes."""
    return []
