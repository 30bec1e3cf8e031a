"""A site admin removing a stored problem folder while a spec pinning it is being stored (an
assignment created, thresholds adopted) on another connection of the real PostgreSQL. Before,
both could commit: the spec then pinned a folder no longer stored, and every run under it ended
as a grader error. Now whichever comes second waits for the first, then sees it: the removal is
refused naming the spec, or the spec is refused naming the removed folder. Each wait is checked
in the database (the waiting backend shows a lock wait), never timed."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlalchemy import func, select, text

import grader
from grader.problems import folder as folders
from store import problem_folders, specs
from store.db import session_factory
from store.models import ProblemFolder, StoredSpec

OUTSIDE = Path(__file__).resolve().parents[1] / "outside_problems"
SHA = folders.folder_hash(OUTSIDE / "softmax")


def pinned_spec_text() -> str:
    """The course spec naming the softmax folder by name, pinned: as a stored spec row reads it."""
    text_ = (OUTSIDE / "softmax-fall.toml").read_text().replace('problem = "./softmax"', 'problem = "softmax"')
    return text_.replace("config_timeout_s = 300", f'config_timeout_s = 300\nproblem_sha256 = {{ softmax = "{SHA}" }}')


@pytest.fixture
def stored_folder(db, tmp_path, monkeypatch):
    """The softmax folder stored as an admin's upload stores it, found through the database only."""
    monkeypatch.setenv("NKI_GRADER_PROBLEM_CACHE", str(tmp_path / "problem-cache"))
    monkeypatch.delenv("NKI_GRADER_PROBLEM_DIRS", raising=False)
    problem_folders.install(db.get_bind())
    problem_folders.save(db, OUTSIDE / "softmax", "checked", None)
    db.commit()
    return db.get_bind()


class Blocked:
    """`fn(session)` on a session of its own in a thread, which the test sees wait on a lock."""

    def __init__(self, engine, fn):
        self.session = session_factory(engine)()
        self.pid = self.session.scalar(select(func.pg_backend_pid()))
        self.result, self.error = None, None
        self.thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.thread.start()

    def _run(self, fn):
        try:
            self.result = fn(self.session)
            self.session.commit()
        except Exception as exc:           # the test reads it
            self.error = exc
            self.session.rollback()

    def wait_until_waiting_on_a_lock(self, engine, timeout: float = 60):
        """Poll the database until this session's backend waits for a lock (bounded: a session
        that never waits finishes its thread, which fails the test at once)."""
        with engine.connect() as watcher:
            for _ in range(int(timeout / 0.05)):
                state = watcher.execute(text("SELECT wait_event_type FROM pg_stat_activity WHERE pid = :pid"),
                                        {"pid": self.pid}).scalar()
                if state == "Lock":
                    return
                assert self.thread.is_alive(), f"it never waited: result {self.result!r}, error {self.error!r}"
                self.thread.join(0.05)
        raise AssertionError(f"backend {self.pid} did not wait on a lock within {timeout} s")

    def finish(self):
        self.thread.join(60)
        assert not self.thread.is_alive()
        self.session.close()


def test_a_removal_waits_for_a_spec_being_stored_then_is_refused_naming_it(stored_folder):
    engine = stored_folder
    spec = grader.spec_from_toml(pinned_spec_text(), "softmax-fall")
    storing = session_factory(engine)()
    specs.stored(storing, spec)                               # not committed yet: the folder is held
    removal = Blocked(engine, lambda s: problem_folders.delete(s, SHA))
    removal.wait_until_waiting_on_a_lock(engine)
    storing.commit()
    storing.close()
    removal.finish()
    assert isinstance(removal.error, problem_folders.FolderPinned), (removal.result, removal.error)
    assert removal.error.pins == ["a stored spec no assignment uses now"]
    with session_factory(engine)() as s:
        assert s.get(ProblemFolder, SHA) is not None and s.get(StoredSpec, spec.spec_hash) is not None


def test_a_spec_stored_while_its_folder_is_removed_waits_then_is_refused_naming_the_folder(stored_folder):
    engine = stored_folder
    spec = grader.spec_from_toml(pinned_spec_text(), "softmax-fall")    # read while the folder was there
    removing = session_factory(engine)()
    assert problem_folders.delete(removing, SHA) is not None              # not committed yet
    storing = Blocked(engine, lambda s: specs.stored(s, spec))
    storing.wait_until_waiting_on_a_lock(engine)
    removing.commit()
    removing.close()
    storing.finish()
    assert isinstance(storing.error, grader.SpecError), (storing.result, storing.error)
    assert f"pins the problem folder softmax ({SHA[:12]}), which a site admin removed" in str(storing.error)
    assert "Upload the folder again" in storing.error.remedy
    with session_factory(engine)() as s:
        assert s.get(StoredSpec, spec.spec_hash) is None and s.get(ProblemFolder, SHA) is None


def test_a_spec_pinning_only_bundled_problems_takes_no_folder_lock(db):
    """The bundled specs' problems ship with the grader: storing one reads no folder row."""
    spec = grader.load_spec("asst4-trainium2")
    assert all(grader.problems.held_with_the_grader(n, s) for n, s in spec.problem_hashes.items())
    specs.stored(db, spec)
    locks = db.execute(text("SELECT count(*) FROM pg_locks l JOIN pg_class c ON l.relation = c.oid "
                            "WHERE l.pid = pg_backend_pid() AND c.relname = 'problem_folders'")).scalar()
    assert locks == 0
    db.commit()
