"""A staff task whose worker is killed halfway (what `kill -9` leaves: the row running, its
heartbeat going stale) is not stuck "running" for ever: the reaper puts a rescore, an export or
a problem check back on the staff queue for another worker, and fails a regrade with what to do
(doing it again from the start would queue some students' runs twice)."""
from __future__ import annotations

import datetime as dt

from problem_archives import zipped_folder
from worker_helpers import finished_task

from store.models import StaffTask

LONG_AGO = dt.timedelta(minutes=30)


def _left_by_a_killed_worker(db, assignment, kind: str, **columns) -> StaffTask:
    then = dt.datetime.now(dt.timezone.utc) - LONG_AGO
    task = StaffTask(kind=kind, assignment_id=assignment and assignment.id, status="running", started_at=then,
                     heartbeat_at=then, progress_done=3, progress_total=9, **columns)
    db.add(task)
    db.commit()
    return task


def test_a_rescore_whose_worker_died_is_done_by_another(db, assignment, celery_worker):
    from workers.reaper import reap_once
    task = _left_by_a_killed_worker(db, assignment, "rescore")
    celery_worker("staff")
    reaped = reap_once()
    assert reaped["staff_tasks_requeued"] == [task.id] and reaped["staff_tasks_failed"] == []

    row = finished_task(db, task.id, 300, "another staff worker to do the re-queued rescore")
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

    row = finished_task(db, task.id, 300, "the staff worker to do the re-sent rescore")
    assert row.status == "done", row.error


def test_a_problem_check_whose_worker_died_is_done_by_another_and_stores_the_folder(db, celery_worker, tmp_path,
                                                                                    monkeypatch):
    """A check is done again from the start (storing is by sha256: twice stores once); the upload
    it holds is what the next worker checks, and it is let go once the folder is stored."""
    from pathlib import Path
    from grader.problems import folder as folders
    from store.models import ProblemFolder
    from workers.reaper import reap_once
    softmax = Path(__file__).resolve().parents[1] / "outside_problems" / "softmax"
    task = _left_by_a_killed_worker(db, None, "problem_check", upload=zipped_folder(softmax), upload_name="softmax.zip")
    monkeypatch.setenv("NKI_GRADER_PROBLEM_CACHE", str(tmp_path / "problem-cache"))
    celery_worker("staff")
    reaped = reap_once()
    assert reaped["staff_tasks_requeued"] == [task.id] and reaped["staff_tasks_failed"] == []

    row = finished_task(db, task.id, 600, "another staff worker to do the re-queued problem check")
    assert row.status == "done" and "Problem folder softmax stored" in row.summary, (row.status, row.error)
    assert row.upload is None and b"0 surprises in" in row.result
    assert db.get(ProblemFolder, folders.folder_hash(softmax)) is not None
