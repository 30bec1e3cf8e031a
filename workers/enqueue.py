"""What the web site and `grader submit` call: store an upload and queue its grade, rerun,
cancel, and read the queue. Nothing is enqueued before its row is committed, so a worker never
looks for a run that is not there; bad uploads raise grader.GraderInputError with nothing stored."""
from __future__ import annotations

import datetime as dt
import hashlib

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session, object_session

from grader.vocabulary import QUEUE_FOR_BACKEND, Backend, Queue, RunStatus
from store import lifecycle, specs
from store.lifecycle import now
from store.models import Assignment, GradingRun, Submission, User, WorkerHeartbeat

from . import settings
from .publish import new_task_id, send


def submit(session: Session, user: User, assignment: Assignment, filename: str, data: bytes, *,
           gradescope_submission_id: str | None = None,
           gradescope_created_at: dt.datetime | None = None) -> GradingRun:
    """A new submission and its first run. From Gradescope (web/course_api.py), with Gradescope's
    submission id and time: the deadline is held to that time (store/runs.py)."""
    import grader
    spec = specs.spec_of(assignment)
    grader.submission_from_bytes(filename, data, spec)          # raises GraderInputError: nothing stored
    submission = Submission(user=user, assignment=assignment, filename=filename, data=data,
                            sha256=hashlib.sha256(data).hexdigest(), size=len(data),
                            gradescope_submission_id=gradescope_submission_id)
    if gradescope_created_at is not None:       # the upload's time from the same clock, never before Gradescope's
        submission.uploaded_at = now()
        submission.gradescope_created_at = min(gradescope_created_at, submission.uploaded_at)
    run = _new_run(submission, assignment.backend)
    session.add(run)
    session.commit()
    send(run.id, run.queue, run.celery_task_id)
    return run


def gradescope_submission(session: Session, assignment: Assignment, gradescope_submission_id: str) -> Submission | None:
    """The submission an earlier upload of this Gradescope submission made, locked, or None."""
    return session.scalar(select(Submission).where(Submission.assignment_id == assignment.id,
                                                   Submission.gradescope_submission_id == gradescope_submission_id)
                          .with_for_update())


def gradescope_runs_last_hour(session: Session, course_id: int) -> int:
    """Runs of the course's Gradescope submissions queued in the last hour (a course token's rate)."""
    since_ = now() - dt.timedelta(hours=1)
    return int(session.scalar(
        select(func.count()).select_from(GradingRun)
        .join(Submission, Submission.id == GradingRun.submission_id)
        .join(Assignment, Assignment.id == Submission.assignment_id)
        .where(Assignment.course_id == course_id, Submission.gradescope_submission_id.is_not(None),
               GradingRun.queued_at > since_)) or 0)


def rerun(run: GradingRun) -> GradingRun:
    """Grade the same submission again, as a new run (the old one stays in the history)."""
    session = object_session(run)
    fresh = _new_run(run.submission, run.backend)
    session.add(fresh)
    session.commit()
    send(fresh.id, fresh.queue, fresh.celery_task_id)
    return fresh


def regrade(session: Session, submission: Submission, backend: str) -> GradingRun:
    """Grade a stored submission again as a new run on `backend` (a staff task's regrade)."""
    fresh = _new_run(submission, backend)
    session.add(fresh)
    session.commit()
    send(fresh.id, fresh.queue, fresh.celery_task_id)
    return fresh


def cancel(run: GradingRun) -> str:
    """A queued run is cancelled at once; a running one is asked to stop (its worker sees the
    request at its next heartbeat and stores the partial report as cancelled). Returns the status."""
    session = object_session(run)
    lifecycle.cancel(session, run.id)
    session.refresh(run)
    return run.status


def queue_position(session: Session, run: GradingRun) -> int | None:
    """1 for the next run to start in its queue; None when the run is not waiting."""
    if run.status != RunStatus.QUEUED:
        return None
    ahead = session.scalar(select(func.count()).select_from(GradingRun).where(
        GradingRun.queue == run.queue, GradingRun.status == RunStatus.QUEUED,
        or_(GradingRun.queued_at < run.queued_at, and_(GradingRun.queued_at == run.queued_at, GradingRun.id < run.id))))
    return int(ahead) + 1


ESTIMATE_SAMPLE = 20        # recent finished grades of the same assignment and backend


def typical_grade_s(session: Session, run: GradingRun) -> float | None:
    """Median wall time of the last ESTIMATE_SAMPLE finished grades of this run's assignment on its
    backend; None before there are any."""
    durations = session.scalars(
        select(func.extract("epoch", GradingRun.finished_at - GradingRun.started_at))
        .join(Submission, Submission.id == GradingRun.submission_id)
        .where(Submission.assignment_id == run.submission.assignment_id, GradingRun.backend == run.backend,
               GradingRun.status == RunStatus.DONE, GradingRun.started_at.is_not(None),
               GradingRun.finished_at.is_not(None), GradingRun.id != run.id)
        .order_by(GradingRun.finished_at.desc()).limit(ESTIMATE_SAMPLE)).all()
    durations = sorted(float(d) for d in durations if d is not None and d > 0)
    if not durations:
        return None
    mid = len(durations) // 2
    return durations[mid] if len(durations) % 2 else (durations[mid - 1] + durations[mid]) / 2


def estimate_remaining_s(session: Session, run: GradingRun) -> float | None:
    """Seconds until this run's report is likely there, from recent grades of the same assignment:
    what is left of a typical grade when running; when queued, the grades ahead of it shared by
    the grades running now in its queue (at least one at a time), after those finish, plus its own.
    None when there is no history, or a running grade has outlasted the typical one (its time
    left is then unknown: "about 0 s" would be wrong)."""
    typical = typical_grade_s(session, run)
    if typical is None or run.status not in (RunStatus.QUEUED, RunStatus.RUNNING):
        return None
    if run.status == RunStatus.RUNNING:
        elapsed = (now() - run.started_at).total_seconds() if run.started_at else 0.0
        return typical - elapsed if elapsed < typical else None
    position = queue_position(session, run) or 1
    running = session.scalar(select(func.count()).select_from(GradingRun).where(
        GradingRun.queue == run.queue, GradingRun.status == RunStatus.RUNNING)) or 0
    slots = max(1, int(running))
    rounds = -(-position // slots)                 # this run's round among those waiting
    return typical * (rounds + (1 if running else 0))   # busy slots first finish what they run


def worker_alive_on(session: Session, queue: str) -> bool:
    """Whether some worker serving `queue` has sent a heartbeat within NKI_WORKER_ALIVE_S."""
    fresh = now() - dt.timedelta(seconds=settings.load().worker_alive_s)
    return session.scalar(select(WorkerHeartbeat.id).where(
        WorkerHeartbeat.seen_at >= fresh, WorkerHeartbeat.queues.contains(queue)).limit(1)) is not None


def waiting_reason(session: Session, run: GradingRun) -> str | None:
    """Why a queued run has not started, in a student's words; None when it is not waiting."""
    if run.status != RunStatus.QUEUED:
        return None
    if not worker_alive_on(session, run.queue):
        return (f"No {Backend(run.backend).title} grading worker is running right now; your run starts as soon as one is "
                f"(course staff are told on their console).")
    running = session.scalar(select(func.count()).select_from(GradingRun).where(
        GradingRun.queue == run.queue, GradingRun.status == RunStatus.RUNNING)) or 0
    ahead = (queue_position(session, run) or 1) - 1
    parts = [f"{running} grade{'' if running == 1 else 's'} running"] if running else []
    if ahead:
        parts.append(f"{ahead} waiting ahead of yours")
    return ("The workers are busy: " + " and ".join(parts) + ".") if parts else "Starting shortly."


def queue_stats(session: Session) -> dict:
    """{"queues": {name: {"queued": n, "running": n}}, "workers": [...], "workers_alive": n}."""
    counts = {q: {RunStatus.QUEUED: 0, RunStatus.RUNNING: 0} for q in QUEUE_FOR_BACKEND.values()}
    for queue, status, n in session.execute(
            select(GradingRun.queue, GradingRun.status, func.count())
            .where(GradingRun.status.in_((RunStatus.QUEUED, RunStatus.RUNNING))).group_by(GradingRun.queue, GradingRun.status)):
        counts.setdefault(queue, {RunStatus.QUEUED: 0, RunStatus.RUNNING: 0})[status] = n
    fresh = now() - dt.timedelta(seconds=settings.load().worker_alive_s)
    workers = [{"name": w.name, "queues": w.queues, "pid": w.pid, "seen_at": w.seen_at.isoformat()}
               for w in session.scalars(select(WorkerHeartbeat).where(WorkerHeartbeat.seen_at >= fresh)
                                        .order_by(WorkerHeartbeat.name))]
    return {"queues": counts, "workers": workers, "workers_alive": len(workers), "running": running_now(session)}


def running_now(session: Session) -> list[dict]:
    """What the workers are doing, oldest first: student grades and nightly regressions, each with
    what it is and since when ({"what", "queue", "since", "detail"})."""
    from store.models import NightlyRun
    doing = []
    for run, filename, assignment in session.execute(
            select(GradingRun, Submission.filename, Assignment.name)
            .join(Submission, Submission.id == GradingRun.submission_id)
            .join(Assignment, Assignment.id == Submission.assignment_id)
            .where(GradingRun.status == RunStatus.RUNNING).order_by(GradingRun.started_at)):
        doing.append({"what": "student grade", "queue": run.queue, "since": run.started_at.isoformat(),
                      "assignment": assignment,
                      "detail": f"run {run.id} of {assignment} ({filename}), {run.progress_done}/"
                                f"{run.progress_total or '?'} tests, worker {run.worker or '?'}"})
    for night in session.scalars(select(NightlyRun).where(NightlyRun.status == RunStatus.RUNNING)
                                 .order_by(NightlyRun.started_at)):
        doing.append({"what": "nightly regression", "queue": Queue.NIGHTLY, "since": night.started_at.isoformat(),
                      "detail": f"nightly run {night.id} ({night.trigger}), {len(night.results)} reference "
                                f"grades stored so far"})
    doing.sort(key=lambda d: d["since"])
    return doing


def _new_run(submission: Submission, backend: str) -> GradingRun:
    return lifecycle.new_run(submission, backend, new_task_id())


def run_by_id(session: Session, run_id: int) -> GradingRun | None:
    return session.get(GradingRun, run_id)


def since(iso: str) -> str:
    """'14:02:07 UTC (3 min 5 s ago)' from a stored ISO timestamp (queue views, CLI and console)."""
    when = dt.datetime.fromisoformat(iso)
    ago = max(0, int((now() - when).total_seconds()))
    span = f"{ago // 60} min {ago % 60} s" if ago >= 60 else f"{ago} s"
    return f"{when.astimezone(dt.timezone.utc):%H:%M:%S} UTC ({span} ago)"
