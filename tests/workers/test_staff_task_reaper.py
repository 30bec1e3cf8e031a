"""A staff task whose worker is killed halfway (what `kill -9` leaves: the row running, its
heartbeat going stale) is not stuck "running" for ever: the reaper puts a rescore or an export
back on the staff queue for another worker, and fails a regrade with what to do (doing it again
from the start would queue some students' runs twice)."""
from __future__ import annotations

import datetime as dt

from service_waits import wait_for

from store.models import StaffTask

LONG_AGO = dt.timedelta(minutes=30)


def _left_by_a_killed_worker(db, assignment, kind: str) -> StaffTask:
    then = dt.datetime.now(dt.timezone.utc) - LONG_AGO
    task = StaffTask(kind=kind, assignment_id=assignment.id, status="running", started_at=then, heartbeat_at=then,
                     progress_done=3, progress_total=9)
    db.add(task)
    db.commit()
    return task


def test_a_rescore_whose_worker_died_is_done_by_another(db, assignment, celery_worker):
    from workers.reaper import reap_once
    task = _left_by_a_killed_worker(db, assignment, "rescore")
    celery_worker("staff")
    reaped = reap_once()
    assert reaped["staff_tasks_requeued"] == [task.id] and reaped["staff_tasks_failed"] == []

    def finished():
        db.expire_all()
        row = db.get(StaffTask, task.id)
        return row if row.status in ("done", "failed") else None
    row = wait_for(finished, 300, "another staff worker to do the re-queued rescore")
    assert row.status == "done" and row.summary.startswith("Rescored 0 graded runs"), (row.status, row.error)
    assert reap_once()["staff_tasks_requeued"] == []          # done is done


def test_a_regrade_whose_worker_died_fails_saying_what_to_do(db, assignment):
    from workers.reaper import reap_once
    task = _left_by_a_killed_worker(db, assignment, "regrade")
    assert reap_once()["staff_tasks_failed"] == [task.id]
    db.expire_all()
    row = db.get(StaffTask, task.id)
    assert row.status == "failed" and "worker doing this task stopped" in row.error
    assert "start the regrade again" in row.error


def test_a_live_task_is_left_alone(db, assignment):
    from workers.reaper import reap_once
    now = dt.datetime.now(dt.timezone.utc)
    task = StaffTask(kind="rescore", assignment_id=assignment.id, status="running", started_at=now, heartbeat_at=now)
    db.add(task)
    db.commit()
    reaped = reap_once()
    assert task.id not in reaped["staff_tasks_requeued"] + reaped["staff_tasks_failed"]
    db.expire_all()
    assert db.get(StaffTask, task.id).status == "running"


def test_a_task_whose_message_the_broker_lost_is_sent_again(db, assignment, broker, celery_worker, monkeypatch):
    from workers import staff_tasks
    from workers.broker import client_for
    from workers.reaper import reap_once
    task = staff_tasks.start(db, "rescore", assignment, None)
    client_for(broker.url).flushall()             # the broker forgot it (say, Redis lost its disk)
    monkeypatch.setenv("NKI_LOST_AFTER_S", "0")
    assert reap_once()["staff_tasks_resent"] == [task.id]
    assert reap_once()["staff_tasks_resent"] == []            # the broker holds it now: not sent twice
    celery_worker("staff")

    def finished():
        db.expire_all()
        row = db.get(StaffTask, task.id)
        return row if row.status in ("done", "failed") else None
    row = wait_for(finished, 300, "the staff worker to do the re-sent rescore")
    assert row.status == "done", row.error
