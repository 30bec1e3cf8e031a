"""The grading run's life in the database: every change of a run's status is written here, and
only along TRANSITIONS (tests/store/test_lifecycle.py checks that no other module writes one).

    queued -> running -> done | failed | infra_error | cancelled
       |        |-> queued (released after our fault, or reaped from a silent worker)
       '-> cancelled

Every write after the claim is conditional on the claim (status running and the attempt number
the worker got), so a worker that lost its run (reaped, cancelled, or a duplicate delivery) can
never overwrite a result."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import and_, delete, or_, select, update
from sqlalchemy.orm import Session

import grader
from grader.vocabulary import QUEUE_FOR_BACKEND, ReportStatus, RunStatus
from store.models import Assignment, GradingRun, Submission, TestResultRow

TRANSITIONS: dict[RunStatus, tuple[RunStatus, ...]] = {
    RunStatus.QUEUED: (RunStatus.RUNNING, RunStatus.CANCELLED),
    RunStatus.RUNNING: (RunStatus.DONE, RunStatus.FAILED, RunStatus.INFRA_ERROR, RunStatus.CANCELLED,
                        RunStatus.QUEUED),
    RunStatus.DONE: (), RunStatus.FAILED: (), RunStatus.INFRA_ERROR: (), RunStatus.CANCELLED: (),
}


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


@dataclass(frozen=True)
class Claim:
    run_id: int
    attempt: int
    worker: str

    def mine(self):
        return and_(GradingRun.id == self.run_id, GradingRun.status == RunStatus.RUNNING,
                    GradingRun.attempts == self.attempt)


def claim(session: Session, run_id: int, worker: str, task_id: str | None, stale_after_s: float) -> Claim | None:
    """Take a queued run (or a running one whose worker went silent). None: someone else has
    it, or it is finished: the delivery is a duplicate and must do nothing."""
    stale = now() - dt.timedelta(seconds=stale_after_s)
    attempt = session.execute(
        update(GradingRun)
        .where(GradingRun.id == run_id,
               or_(GradingRun.status == RunStatus.QUEUED,
                   and_(GradingRun.status == RunStatus.RUNNING, GradingRun.heartbeat_at < stale)),
               GradingRun.cancel_requested.is_(False))
        .values(status=RunStatus.RUNNING, worker=worker, attempts=GradingRun.attempts + 1, started_at=now(),
                heartbeat_at=now(), celery_task_id=task_id, progress_done=0, progress_tests=[], error=None)
        .returning(GradingRun.attempts)).scalar()
    session.commit()
    return Claim(run_id, attempt, worker) if attempt is not None else None


def heartbeat(session: Session, c: Claim) -> tuple[bool, bool]:
    """Touch the row. Returns (still ours, cancel requested)."""
    row = session.execute(update(GradingRun).where(c.mine()).values(heartbeat_at=now())
                          .returning(GradingRun.cancel_requested)).first()
    session.commit()
    return (row is not None, bool(row and row[0]))


def progress(session: Session, c: Claim, done: int, total: int, finished: list[dict] | None = None) -> None:
    """`finished`: every test this claim has finished so far (render.test_summary of each)."""
    values = dict(progress_done=done, progress_total=total, heartbeat_at=now())
    if finished is not None:
        values["progress_tests"] = list(finished)
    session.execute(update(GradingRun).where(c.mine()).values(**values))
    session.commit()


def _view(report: dict) -> grader.ReportView:
    return grader.view_of(grader.Report.from_json(report))


def report_columns(report: dict) -> dict:
    """A run's columns that its stored report (Report.to_json without the seed) decides: the one
    mapping from a report to a row, for a finished grade, a rescore and test fixtures alike,
    read from the report's view as every page reads it."""
    view = _view(report)
    return {"report": report, "score_total": view.points.total, "max_total": view.points.max_total,
            "thresholds_version": view.provenance.thresholds_version}


def result_rows(report: dict, run_id: int | None = None) -> list[TestResultRow]:
    """One row per test of the report's view (denormalised for the leaderboard and exports)."""
    return [TestResultRow(run_id=run_id, test_name=t.name, kind=t.kind, status=t.status,
                          points=t.points, max_points=t.max_points, p99_us=t.p99_us)
            for t in _view(report).tests]


def replace_results(session: Session, run_id: int, report: dict) -> None:
    session.execute(delete(TestResultRow).where(TestResultRow.run_id == run_id))
    session.add_all(result_rows(report, run_id))


def finish(session: Session, c: Claim, report: dict, seed: int | None) -> RunStatus | None:
    """Store a finished grade in one transaction: the status stored (done, or cancelled when the
    report says so); None when the run was no longer ours."""
    view = _view(report)
    flags = [f.flag for f in view.flags]
    status = RunStatus.CANCELLED if view.provenance.status == ReportStatus.CANCELLED else RunStatus.DONE
    tests = view.tests
    updated = session.execute(
        update(GradingRun).where(c.mine()).values(
            status=status, finished_at=now(), heartbeat_at=now(), seed=seed, **report_columns(report),
            flagged=bool(flags), flag_reason=", ".join(flags) or None,
            progress_done=len(tests) if status == RunStatus.DONE else GradingRun.progress_done,
            progress_total=len(tests) if status == RunStatus.DONE else GradingRun.progress_total,
        ).returning(GradingRun.id)).first()
    if updated is None:
        session.rollback()
        return None
    replace_results(session, c.run_id, report)
    mark_standings_changed(session, run_ids=[c.run_id])
    session.commit()
    return status


def mark_standings_changed(session: Session, *, assignment_ids=None, run_ids=None, user_id=None) -> None:
    """Move the standings stamp of the assignments a write touched (by id, by their runs, or every
    assignment a user has runs in), in the writer's transaction: the next leaderboard view in any
    process sees the stamp moved and recomputes."""
    if assignment_ids is not None:
        which = Assignment.id.in_(list(assignment_ids))
    elif run_ids is not None:
        which = Assignment.id.in_(select(Submission.assignment_id).join(GradingRun, GradingRun.submission_id
                                                                        == Submission.id)
                                  .where(GradingRun.id.in_(list(run_ids))))
    elif user_id is not None:                      # where they have runs: the boards they can be on
        which = Assignment.id.in_(select(Submission.assignment_id).where(Submission.user_id == user_id))
    else:
        raise ValueError("mark_standings_changed needs assignment_ids, run_ids or user_id")
    session.execute(update(Assignment).where(which).values(standings_changed_at=now()))


def fail(session: Session, c: Claim, status: str, error: str) -> bool:
    """End a claimed run as failed (the submission cannot be graded) or infra_error."""
    row = session.execute(update(GradingRun).where(c.mine())
                          .values(status=status, error=error[:4000], finished_at=now())
                          .returning(GradingRun.id)).first()
    session.commit()
    return row is not None


def release(session: Session, c: Claim, error: str) -> bool:
    """Hand a claimed run back to the queue after an infrastructure fault (not the student's)."""
    row = session.execute(update(GradingRun).where(c.mine())
                          .values(status=RunStatus.QUEUED, worker=None, heartbeat_at=None, error=error[:4000])
                          .returning(GradingRun.id)).first()
    session.commit()
    return row is not None


def hand_back(session: Session, c: Claim, note: str) -> bool:
    """A claimed run back to the queue because its worker is stopping cleanly (not the run's
    fault, nor the grader's): the attempt it had does not count against NKI_MAX_ATTEMPTS."""
    row = session.execute(update(GradingRun).where(c.mine())
                          .values(status=RunStatus.QUEUED, worker=None, heartbeat_at=None, error=note[:4000],
                                  attempts=GradingRun.attempts - 1, progress_done=0, progress_tests=[])
                          .returning(GradingRun.id)).first()
    session.commit()
    return row is not None


def requeue_running(session: Session, note: str) -> list[int]:
    """Every running run back to the queue, at once: for a database restored from a backup, whose
    running runs' workers belong to the instance it was taken from. The caller commits."""
    return list(session.scalars(update(GradingRun).where(GradingRun.status == RunStatus.RUNNING)
                                .values(status=RunStatus.QUEUED, worker=None, heartbeat_at=None, error=note[:4000],
                                        progress_done=0, progress_tests=[])
                                .returning(GradingRun.id)))


def new_run(submission: Submission, backend: str, task_id: str) -> GradingRun:
    """A run born queued on its backend's queue (the caller adds, commits, then publishes it)."""
    return GradingRun(submission=submission, backend=backend, queue=QUEUE_FOR_BACKEND[backend],
                      status=RunStatus.QUEUED, celery_task_id=task_id)


def cancel(session: Session, run_id: int) -> None:
    """A queued run is cancelled at once; a running one is asked to stop (its worker sees the
    request at its next heartbeat and stores the partial report as cancelled). Commits."""
    session.execute(update(GradingRun).where(GradingRun.id == run_id, GradingRun.status == RunStatus.QUEUED)
                    .values(status=RunStatus.CANCELLED, finished_at=now(), cancel_requested=True))
    session.execute(update(GradingRun).where(GradingRun.id == run_id, GradingRun.status == RunStatus.RUNNING)
                    .values(cancel_requested=True))
    session.commit()


def reap(session: Session, run_id: int, attempts: int, worker: str | None, stale: dt.datetime,
         give_up: bool) -> bool:
    """A running run whose worker went silent (heartbeat older than `stale`, the attempt the
    reaper saw): back to the queue, or infra_error once `give_up`. False: it moved meanwhile.
    The caller commits."""
    values = ({"status": RunStatus.INFRA_ERROR, "finished_at": now(),
               "error": f"worker {worker} stopped answering on attempt {attempts}; gave up after "
                        f"{attempts} attempts"} if give_up else
              {"status": RunStatus.QUEUED, "worker": None, "heartbeat_at": None,
               "error": f"worker {worker} stopped answering; re-queued"})
    hit = session.execute(update(GradingRun).where(GradingRun.id == run_id, GradingRun.status == RunStatus.RUNNING,
                                                   GradingRun.attempts == attempts, GradingRun.heartbeat_at < stale)
                          .values(**values).returning(GradingRun.id)).first()
    return hit is not None


def run_row(session: Session, run_id: int) -> GradingRun | None:
    return session.scalar(select(GradingRun).where(GradingRun.id == run_id))
