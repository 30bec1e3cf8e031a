"""A simulator worker runs one grade per usable CPU core by default, fewer when memory is short."""
from __future__ import annotations

from workers import capacity


def test_one_grade_per_core_when_memory_allows(monkeypatch):
    monkeypatch.setattr(capacity, "memory_bytes", lambda: 1 << 40)
    assert capacity.sim_grades_at_once() == capacity.usable_cores() >= 1


def test_memory_caps_the_grades_at_once(monkeypatch):
    monkeypatch.setattr(capacity, "usable_cores", lambda: 64)
    monkeypatch.setattr(capacity, "memory_bytes", lambda: 5 * capacity.GRADE_MEMORY_BYTES + 1)
    assert capacity.sim_grades_at_once() == 5
    monkeypatch.setattr(capacity, "memory_bytes", lambda: capacity.GRADE_MEMORY_BYTES // 2)
    assert capacity.sim_grades_at_once() == 1            # always at least one
