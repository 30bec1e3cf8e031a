"""The models keep what the service needs and refuse what it must never hold."""
import datetime as dt

import pytest
from sqlalchemy.exc import IntegrityError

from store import specs
from store.models import Assignment, Course, GradingRun, Submission, TestResultRow, User


def _assignment(db) -> Assignment:
    course = Course(name="CS149", leaderboard_visibility="public")
    a = specs.new_assignment(db, "asst4-trainium2", course=course, name="asst4",
                             deadline=dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc))
    db.flush()
    return a


def test_run_keeps_a_63_bit_seed_and_its_report(db):
    user = User(email="s@x.edu", name="S")
    a = _assignment(db)
    sub = Submission(user=user, assignment=a, filename="conv2d.py", data=b"def f(): pass\n", sha256="a" * 64, size=14)
    run = GradingRun(submission=sub, seed=2**63 - 1, report={"score": {"total": 1.0}})
    run.test_results.append(TestResultRow(test_name="conv_small", kind="correctness", status="passed",
                                          points=2.5, max_points=2.5))
    db.add(run)
    db.commit()
    db.expire_all()
    again = db.get(GradingRun, run.id)
    assert again.seed == 2**63 - 1
    assert again.status == "queued" and again.attempts == 0 and again.queued_at is not None
    assert again.report["score"]["total"] == 1.0
    assert [t.test_name for t in again.test_results] == ["conv_small"]
    assert again.submission.data == b"def f(): pass\n"


@pytest.mark.parametrize("field, value", [("status", "lost"), ("backend", "gpu"), ("queue", "default")])
def test_run_refuses_unknown_states(db, field, value):
    user = User(email="s@x.edu")
    sub = Submission(user=user, assignment=_assignment(db), filename="conv2d.py", data=b"", sha256="a" * 64, size=0)
    db.add(GradingRun(submission=sub, **{field: value}))
    with pytest.raises(IntegrityError):
        db.commit()


def test_one_result_row_per_test_of_a_run(db):
    user = User(email="s@x.edu")
    sub = Submission(user=user, assignment=_assignment(db), filename="conv2d.py", data=b"", sha256="a" * 64, size=0)
    run = GradingRun(submission=sub)
    db.add(run)
    db.flush()
    for _ in range(2):
        db.add(TestResultRow(run_id=run.id, test_name="t", kind="correctness", status="passed", points=1, max_points=1))
    with pytest.raises(IntegrityError):
        db.commit()
