"""A simulator worker runs as many grades at once as its cores allow without one grade's latency
growing by more than 20%: one per usable core when answers are made ahead, one per
COLD_GRADE_CORES when each grade works its answers out; fewer when memory is short. Each grade
gets its share of the cores for its own threads."""
from __future__ import annotations

import pytest

from workers import capacity


@pytest.fixture
def plenty_of_memory(monkeypatch):
    monkeypatch.setattr(capacity, "memory_bytes", lambda: 1 << 40)


def test_one_grade_per_core_when_answers_are_made_ahead(plenty_of_memory):
    assert capacity.sim_grades_at_once(answers_made_ahead=True) == capacity.usable_cores() >= 1


@pytest.mark.parametrize("cores, grades", [(1, 1), (2, 1), (4, 2), (8, 5), (64, 40)])
def test_grades_that_work_their_answers_out_get_more_than_a_core_each(plenty_of_memory, monkeypatch, cores, grades):
    monkeypatch.setattr(capacity, "usable_cores", lambda: cores)
    assert capacity.sim_grades_at_once(answers_made_ahead=False) == grades
    assert grades * capacity.COLD_GRADE_CORES <= max(cores, capacity.COLD_GRADE_CORES)


def test_memory_caps_the_grades_at_once(monkeypatch):
    monkeypatch.setattr(capacity, "usable_cores", lambda: 64)
    monkeypatch.setattr(capacity, "memory_bytes", lambda: 5 * capacity.GRADE_MEMORY_BYTES + 1)
    assert capacity.sim_grades_at_once(answers_made_ahead=True) == 5
    monkeypatch.setattr(capacity, "memory_bytes", lambda: capacity.GRADE_MEMORY_BYTES // 2)
    assert capacity.sim_grades_at_once(answers_made_ahead=True) == 1            # always at least one


@pytest.mark.parametrize("cores, at_once, threads", [(2, 1, 2), (2, 2, 1), (8, 5, 1), (8, 2, 4), (1, 3, 1)])
def test_each_grade_gets_its_share_of_the_cores(monkeypatch, cores, at_once, threads):
    monkeypatch.setattr(capacity, "usable_cores", lambda: cores)
    assert capacity.threads_per_grade(at_once) == threads


def test_the_grade_threads_setting_is_read_and_a_bad_one_refused_by_name(monkeypatch):
    from workers import settings
    monkeypatch.setenv("NKI_GRADE_THREADS", "3")
    assert settings.load().grade_threads == 3
    monkeypatch.setenv("NKI_GRADE_THREADS", "all")
    with pytest.raises(ValueError, match="NKI_GRADE_THREADS='all' is not a whole number"):
        settings.load()
