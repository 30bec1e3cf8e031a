"""Specs stored once by content hash, loaded one way, and adopted thresholds as a new row."""
from __future__ import annotations

import pytest
from sqlalchemy import func, select

import grader
from store import specs
from store.models import Course, StoredSpec, ThresholdsVersion


def test_two_assignments_on_one_spec_keep_its_text_once(db):
    course = Course(name="CS149")
    a = specs.new_assignment(db, "asst4-trainium2", course=course, name="a")
    b = specs.new_assignment(db, "asst4-trainium2", course=course, name="b")
    db.commit()
    assert db.scalar(select(func.count()).select_from(StoredSpec)) == 1
    bundled = grader.load_spec("asst4-trainium2")
    assert a.spec_hash == b.spec_hash == bundled.spec_hash
    assert specs.spec_of(a) == bundled and a.spec_version == bundled.spec_version
    assert db.scalar(select(ThresholdsVersion.thresholds).where(ThresholdsVersion.assignment_id == a.id)) == \
        bundled.thresholds()


def test_a_row_whose_text_was_edited_in_place_is_refused(db):
    """Grading under a spec whose text no longer matches its name would record a false spec_hash."""
    spec = grader.load_spec("asst4-trainium2")
    forged = "x" * 64
    db.add(StoredSpec(hash=forged, spec_version="3", thresholds_version="t", toml=spec.toml))
    db.commit()
    with pytest.raises(grader.SpecError, match="does not match its hash"):
        specs.spec_by_hash(db, forged)
    with pytest.raises(grader.SpecError, match="no stored spec"):
        specs.spec_by_hash(db, "0" * 64)


def test_adopting_thresholds_adds_a_spec_row_and_keeps_the_old(db):
    assignment = specs.new_assignment(db, "asst4-trainium2", course=Course(name="CS149"), name="a")
    db.commit()
    old = specs.spec_of(assignment)
    new = specs.adopt_thresholds(db, assignment, {"perf_224_pool1_float32": {"optimized": 4800, "relaxed": 5000}},
                                 "2025-12-01")
    db.commit()
    db.expire_all()
    assert assignment.spec_hash == new.spec_hash != old.spec_hash
    assert specs.spec_of(assignment).test("perf_224_pool1_float32").thresholds_us == {"optimized": 4800,
                                                                                         "relaxed": 5000}
    assert assignment.thresholds_version == "2025-12-01" and assignment.spec_row.derived_from == old.spec_hash
    assert db.get(StoredSpec, old.spec_hash).toml == old.toml            # runs graded before keep their spec


def test_two_writers_storing_one_spec_at_once_both_succeed(db, db_engine):
    """A TA creating an assignment while the nightly stores the bundled specs: the second writer
    waits for the first's row and uses it, instead of failing on the duplicate hash."""
    import threading
    import time
    from store.db import session_factory
    spec = grader.load_spec("asst4-trainium2")
    first, second = session_factory(db_engine)(), session_factory(db_engine)()
    try:
        specs.stored(first, spec)
        first.flush()                                   # inserted, not committed yet
        done = {}
        writer = threading.Thread(target=lambda: done.setdefault("row", specs.stored(second, spec)))
        writer.start()
        time.sleep(0.5)                                 # the second writer is waiting on the first's row
        first.commit()
        writer.join(30)
        second.commit()
        assert done["row"].hash == spec.spec_hash
        assert db.scalar(select(func.count()).select_from(StoredSpec)) == 1
    finally:
        first.close()
        second.close()
