"""A grading worker with an answer pool (NKI_ANSWER_POOL_SIZE): it makes sets for the active
assignments when it starts, a grade draws one (the stored report names it, the private seed
column holds its seed), and a used-up set is replaced in the background."""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from service_waits import wait_for, wait_for_run
from worker_helpers import OPTIMIZED

from workers import enqueue, settings


def sets_in(pool_dir: Path, spec_hash: str) -> dict[str, dict]:
    spec_dir = pool_dir / spec_hash
    if not spec_dir.is_dir():
        return {}
    found = {}
    for entry in spec_dir.iterdir():
        if not entry.name.startswith("."):
            try:
                found[entry.name] = json.loads((entry / "set.json").read_text())
            except (OSError, ValueError):
                continue             # removed while we looked
    return found


@pytest.fixture
def pool_dir():
    where = Path(tempfile.mkdtemp(prefix="answer-pool-", dir="/var/tmp"))
    yield where / "answers"
    shutil.rmtree(where)


def test_a_worker_grades_with_sets_made_ahead_and_replaces_a_used_up_one(db, assignment, student, celery_worker,
                                                                         pool_dir):
    celery_worker("sim", NKI_ANSWER_POOL_SIZE=1, NKI_ANSWER_POOL_USES=1, NKI_ANSWER_POOL_DIR=pool_dir)
    first = wait_for(lambda: sets_in(pool_dir, assignment.spec_hash), 120, "the worker to make a set at start")
    (set_id, meta), = first.items()
    run = enqueue.submit(db, student, assignment, "conv2d.py", OPTIMIZED)
    run = wait_for_run(db, run.id, ("done",))
    assert run.score_total == run.max_total == 7.5
    assert run.report["answer_set"] == set_id and run.seed == meta["seed"] and "seed" not in run.report
    # its one use spent, the set is gone, and another one is made in the background
    second = wait_for(lambda: set(sets_in(pool_dir, assignment.spec_hash)) - {set_id}, 120, "a new set")
    assert set_id not in sets_in(pool_dir, assignment.spec_hash) and len(second) == 1


def test_without_a_pool_size_a_worker_works_its_answers_out(db, assignment, student, celery_worker, pool_dir):
    celery_worker("sim", NKI_ANSWER_POOL_DIR=pool_dir)
    run = wait_for_run(db, enqueue.submit(db, student, assignment, "conv2d.py", OPTIMIZED).id, ("done",))
    assert run.score_total == 7.5 and run.report["answer_set"] is None and run.seed is not None
    assert not pool_dir.exists()


@pytest.mark.parametrize("name, value", [("NKI_ANSWER_POOL_SIZE", "-1"), ("NKI_ANSWER_POOL_SIZE", "two"),
                                         ("NKI_ANSWER_POOL_USES", "0"), ("NKI_ANSWER_POOL_USES", "1.5")])
def test_a_bad_pool_setting_is_refused_by_name(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=f"{name}={value!r} is not a whole number"):
        settings.load()


def test_the_pool_lives_in_the_graders_home_unless_told(monkeypatch, tmp_path):
    monkeypatch.delenv("NKI_ANSWER_POOL_DIR", raising=False)
    monkeypatch.setenv("NKI_GRADER_HOME", str(tmp_path))
    conf = settings.load()
    assert conf.answer_pool_dir == str(tmp_path / "answer-pool") and conf.answer_pool_size == 0
