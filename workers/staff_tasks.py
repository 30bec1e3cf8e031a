"""Staff tasks: the work a TA starts that grows with the course (rescore or regrade every run of
an assignment, export its grades), and a site admin's check of an uploaded problem folder. A web
request only records the task and queues it; a worker on the `staff` queue does it, writing its
progress to the row, which the task's page polls.

Rescoring replays every stored report's p99s through grader.rescore under the spec in force: no
kernel runs. Regrading queues each student's latest submission again as a new run. A problem
check runs the folder's reference.py (course code, trusted side: never in the site's process)
and grades its solutions and starters in sandboxed children, as `grader problem check` does,
and stores the folder only when nothing surprised it."""
from __future__ import annotations

import contextlib
import datetime as dt
import logging
import signal
import threading
from typing import Callable

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.orm import Session

import grader
from grader.errors import GraderInputError
from grader.problems import archive
from grader.problems import check as checks
from grader.vocabulary import Queue, RunStatus, StaffTaskStatus
from store import lifecycle, problem_folders, specs
from store.db import session_scope
from store.models import Assignment, GradingRun, StaffTask, Submission

from . import enqueue, exports, settings

log = logging.getLogger(__name__)

QUEUE = Queue.STAFF.value
BATCH = 200           # runs per transaction: a huge course never holds one long transaction
PROGRESS_EVERY = 10   # runs (or submissions) between two progress writes
TITLES = {"rescore": "Rescore every graded run", "regrade": "Regrade every student's latest submission",
          "grades_csv": "Grades as CSV", "gradescope_zip": "Gradescope results.json files (zip)",
          "agreement_csv": "The simulator against hardware (CSV)", "problem_check": "Check and store a problem folder"}
# what a task's progress counts, for its page: "12 of 40 runs rescored"
COUNTED = {"rescore": "runs rescored", "regrade": "submissions queued again", "grades_csv": "students exported",
           "gradescope_zip": "students exported", "agreement_csv": "submissions compared",
           "problem_check": "solutions and starters graded"}


def progress_text(kind: str, done: int, total: int) -> str:
    return f"{done} of {total} {COUNTED[kind]}" if total else ""

Progress = Callable[[int, int], None]


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def start(session: Session, kind: str, assignment: Assignment, requested_by: int | None) -> StaffTask:
    """Records the task and queues it (commits); the worker picks it up by id."""
    task = StaffTask(kind=kind, assignment_id=assignment.id, requested_by_id=requested_by)
    session.add(task)
    session.commit()
    resend([task.id])
    return task


def start_problem_check(session: Session, upload: bytes, filename: str, requested_by: int | None) -> StaffTask:
    """Records the check of an uploaded problem folder, with its archive, and queues it (commits)."""
    task = StaffTask(kind="problem_check", upload=upload, upload_name=filename, requested_by_id=requested_by)
    session.add(task)
    session.commit()
    resend([task.id])
    return task


class Refused(Exception):
    """A task that ends failed for a reason its page states (`message`), with what it found
    (`values`: columns of the row, such as a check's table as its file)."""

    def __init__(self, message: str, **values) -> None:
        super().__init__(message)
        self.message, self.values = message, values


def run(task_id: int) -> None:
    """Does the task once: a second delivery finds it claimed or finished and does nothing. While
    it runs, its row's heartbeat is touched; a task whose worker died is the reaper's
    (reap_stalled)."""
    with session_scope() as s:
        claimed = s.execute(update(StaffTask).where(StaffTask.id == task_id, StaffTask.status == StaffTaskStatus.QUEUED)
                            .values(status=StaffTaskStatus.RUNNING, started_at=now(), heartbeat_at=now())
                            .returning(StaffTask.kind)).first()
        s.commit()
    if claimed is None:
        return
    beating = _Heartbeat(task_id, settings.load().heartbeat_s)
    beating.start()
    try:
        _do(task_id)
    finally:
        beating.stop()


class _Heartbeat(threading.Thread):
    def __init__(self, task_id: int, every_s: float) -> None:
        super().__init__(name=f"heartbeat-staff-task-{task_id}", daemon=True)
        self.task_id, self.every_s, self.stopped = task_id, every_s, threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.every_s):
            try:
                with session_scope() as s:
                    s.execute(update(StaffTask).where(StaffTask.id == self.task_id,
                                                      StaffTask.status == StaffTaskStatus.RUNNING)
                              .values(heartbeat_at=now()))
                    s.commit()
            except Exception:                 # database blip: next beat
                log.warning("heartbeat for staff task %s failed", self.task_id, exc_info=True)

    def stop(self) -> None:
        self.stopped.set()
        self.join()


def _do(task_id: int) -> None:
    def progress(done: int, total: int) -> None:
        with session_scope() as s:
            s.execute(update(StaffTask).where(StaffTask.id == task_id)
                      .values(progress_done=done, progress_total=total))
            s.commit()

    # a finished task no longer holds its upload (a problem folder's archive: stored, if it
    # passed, in problem_folders)
    def finish(status: StaffTaskStatus, values: dict) -> None:
        with session_scope() as s:
            s.execute(update(StaffTask).where(StaffTask.id == task_id, StaffTask.status == StaffTaskStatus.RUNNING)
                      .values(status=status, finished_at=now(), upload=None, **values))
            s.commit()

    try:
        with session_scope() as s:
            task = s.get(StaffTask, task_id)
            values = DO[task.kind](s, task, progress)
            s.commit()
    except Refused as refused:
        log.info("staff task %s refused: %s", task_id, refused.message)
        finish(StaffTaskStatus.FAILED, {"error": refused.message, **refused.values})
    except Exception as err:          # the page says what went wrong; the log has the trace
        log.exception("staff task %s failed", task_id)
        finish(StaffTaskStatus.FAILED, {"error": f"{type(err).__name__}: {err}"[:2000]})
    else:
        finish(StaffTaskStatus.DONE, values)


# Doing these again from the start gives the same result; a regrade done twice queues runs twice.
REPEATABLE = ("rescore", "grades_csv", "gradescope_zip", "agreement_csv", "problem_check")


def reap_stalled(session: Session, stale: dt.datetime) -> tuple[list[int], list[int]]:
    """Tasks whose worker stopped heart-beating (killed halfway): a repeatable one goes back to
    the queue for another worker; a regrade fails, saying so, since doing it again would queue
    some students' runs twice. Returns (requeued, failed) task ids; the caller commits."""
    stalled = session.execute(select(StaffTask.id, StaffTask.kind, StaffTask.heartbeat_at).where(
        StaffTask.status == StaffTaskStatus.RUNNING, StaffTask.heartbeat_at < stale)).all()
    requeued, failed = [], []
    for task_id, kind, last in stalled:
        still = (StaffTask.id == task_id, StaffTask.status == StaffTaskStatus.RUNNING, StaffTask.heartbeat_at == last)
        if kind in REPEATABLE:
            if session.execute(update(StaffTask).where(*still).values(status=StaffTaskStatus.QUEUED, started_at=None,
                                                                      progress_done=0)).rowcount:
                requeued.append(task_id)
        elif session.execute(update(StaffTask).where(*still).values(
                status=StaffTaskStatus.FAILED, finished_at=now(),
                error=f"The worker doing this task stopped (last seen {last:%Y-%m-%d %H:%M:%S} UTC) after "
                      f"queuing some of the runs. See the submissions list for what was queued, then start "
                      f"the regrade again if students are missing.")).rowcount:
            failed.append(task_id)
    return requeued, failed


def message_id(task_id: int) -> str:
    """The broker message of a task carries an id derived from the task's row, so the reaper can
    tell whether the broker still holds it (a second message of the same task does nothing)."""
    return f"staff-task-{task_id}"


def lost(session: Session, held: set[str], queued_before: dt.datetime) -> list[int]:
    """Queued tasks, older than `queued_before`, whose message the broker no longer holds."""
    waiting = session.execute(select(StaffTask.id).where(StaffTask.status == StaffTaskStatus.QUEUED,
                                                         StaffTask.created_at < queued_before)).scalars()
    return [task_id for task_id in waiting if message_id(task_id) not in held]


def resend(task_ids: list[int]) -> None:
    from .tasks import staff_task
    for task_id in task_ids:
        staff_task.apply_async((task_id,), queue=QUEUE, task_id=message_id(task_id))


# ----- the kinds ---------------------------------------------------------------------------------

def rescore_all(session: Session, assignment: Assignment, progress: Progress | None = None) -> int:
    """Re-scores every finished run of the assignment under the spec in force; returns how many."""
    spec = specs.spec_of(assignment)
    query = (select(GradingRun).join(Submission)
             .where(Submission.assignment_id == assignment.id, GradingRun.status == RunStatus.DONE,
                    GradingRun.report.is_not(None)))
    total = session.scalar(select(func.count()).select_from(query.subquery()))
    progress = progress or (lambda done, total: None)
    progress(0, total)
    count, last_id = 0, 0
    while True:
        chunk = session.scalars(query.where(GradingRun.id > last_id).order_by(GradingRun.id).limit(BATCH)).all()
        if not chunk:
            break
        for graded in chunk:
            _rescore_run(session, graded, spec)
            count += 1
            if count % PROGRESS_EVERY == 0:
                progress(count, total)
        last_id = chunk[-1].id
        session.commit()
        progress(count, total)
    lifecycle.mark_standings_changed(session, assignment_ids=[assignment.id])
    session.commit()
    return count


def _rescore_run(session: Session, graded: GradingRun, spec) -> None:
    old = grader.Report.from_json(graded.report)
    new = grader.rescore(old, spec)
    flags = [f.flag for f in grader.view_of(new).flags]
    if set(flags) - {f.flag for f in grader.view_of(old).flags}:   # e.g. implausibly fast under the new thresholds
        graded.flagged, graded.flag_reason = True, ", ".join(flags)           # hold for review
    stored = new.to_json(include_seed=False)
    for column, value in lifecycle.report_columns(stored).items():
        setattr(graded, column, value)
    lifecycle.replace_results(session, graded.id, stored)


def _rescore(session: Session, task: StaffTask, progress: Progress) -> dict:
    assignment = task.assignment
    count = rescore_all(session, assignment, progress)
    return {"summary": f"Rescored {count} graded run{'' if count == 1 else 's'} under thresholds "
                       f"{assignment.thresholds_version} (no kernel was run again)."}


def _regrade(session: Session, task: StaffTask, progress: Progress) -> dict:
    assignment = task.assignment
    latest = session.scalars(select(Submission).where(Submission.assignment_id == assignment.id)
                             .ext(distinct_on(Submission.user_id))
                             .order_by(Submission.user_id, Submission.uploaded_at.desc(), Submission.id.desc())).all()
    progress(0, len(latest))
    for done, submission in enumerate(latest, start=1):
        enqueue.regrade(session, submission, assignment.backend)
        if done % PROGRESS_EVERY == 0 or done == len(latest):
            progress(done, len(latest))
    return {"summary": f"Queued {len(latest)} submission{'' if len(latest) == 1 else 's'} (each student's "
                       "latest) for grading again; each shows as a new run."}


def _grades_csv(session: Session, task: StaffTask, progress: Progress) -> dict:
    assignment = task.assignment
    lines = exports.grade_lines(session, assignment)
    progress(len(lines), len(lines))
    body = exports.grades_csv(lines, specs.spec_of(assignment).tests)
    return {"result": body.encode(), "result_name": f"{assignment.name}-grades.csv", "result_type": "text/csv",
            "summary": f"Grades of {len(lines)} student{'' if len(lines) == 1 else 's'}."}


def _gradescope_zip(session: Session, task: StaffTask, progress: Progress) -> dict:
    assignment = task.assignment
    lines = exports.grade_lines(session, assignment)
    progress(len(lines), len(lines))
    return {"result": exports.gradescope_zip(lines), "result_name": f"{assignment.name}-gradescope.zip",
            "result_type": "application/zip",
            "summary": f"results.json of {sum(1 for line in lines if line.best)} graded student(s)."}


def _agreement_csv(session: Session, task: StaffTask, progress: Progress) -> dict:
    assignment = task.assignment
    rows = exports.agreement_rows(session, assignment, progress)
    compared = len({row.simulated_run_id for row in rows})
    summary = grader.agreement_summary([row.agreement for row in rows])
    return {"result": exports.agreement_csv(rows).encode(), "result_name": f"{assignment.name}-sim-vs-hardware.csv",
            "result_type": "text/csv",
            "summary": f"{len(rows)} timed test{'' if len(rows) == 1 else 's'} of {compared} submission"
                       f"{'' if compared == 1 else 's'} graded on both the simulator and Trainium hardware "
                       f"({summary.within if summary else 0} within the simulator's band)."}


class CheckOverTime(BaseException):
    """A problem check past NKI_PROBLEM_CHECK_LIMIT_S. A BaseException: the check reports a
    folder's own errors as rows (`except Exception`), and this one is not the folder's."""


@contextlib.contextmanager
def _time_limit(seconds: float):
    """CheckOverTime in this thread after `seconds` (SIGALRM: a pool process runs its task in its
    main thread; elsewhere no limit but the worker's task time limit). The sandboxed children of
    a grade under way end with it (grader.grade cleans up on any exception)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def over(signum, frame):
        raise CheckOverTime()
    previous = signal.signal(signal.SIGALRM, over)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _problem_check(session: Session, task: StaffTask, progress: Progress) -> dict:
    """Checks the uploaded folder as `grader problem check` does; stores it only when nothing
    surprised the check (Refused otherwise, with the check's table as the task's file)."""
    filename = task.upload_name or "the upload"
    graded = [0, 0]                        # how far the check got, for a check over its time limit

    def noted(done: int, total: int) -> None:
        graded[:] = [done, total]
        progress(done, total)
    limit = settings.load().problem_check_limit_s
    with archive.scratch() as scratch:
        try:
            path = archive.unpack_upload(task.upload or b"", filename, scratch)
            with _time_limit(limit):
                loaded, rows = checks.check(path, noted)
        except GraderInputError as err:
            raise Refused(f"The folder was not stored: {err.reason} {err.remedy}") from None
        except CheckOverTime:
            reached = progress_text("problem_check", *graded) or "before any kernel was graded"
            raise Refused(f"The folder was not stored: its check ran over its {limit:g} s "
                          f"limit (NKI_PROBLEM_CHECK_LIMIT_S), {reached}. Run `grader problem check` on the folder to "
                          "see which step takes that long (its reference on a large configuration, or a solution), "
                          "fix it, then upload it again.") from None
        # the table names the upload, not the scratch folder it was checked in (gone once stored)
        table = checks.table(loaded, rows).replace(str(path), f"from {filename}", 1)
        as_file = {"result": table.encode(), "result_name": f"{loaded.data['name']}-check.txt",
                   "result_type": "text/plain; charset=utf-8"}
        surprises = sum(not r.ok for r in rows)
        if surprises:
            raise Refused(f"The folder was not stored: `grader problem check` found {surprises} "
                          f"surprise{'s' if surprises != 1 else ''} (SURPRISE in the table). Fix the folder "
                          "until `grader problem check` passes on it, then upload it again.", **as_file)
        row, saved = problem_folders.save(session, path, table, task.requested_by_id)
    return {"summary": problem_folders.saved_text(row, saved), **as_file}


DO = {"rescore": _rescore, "regrade": _regrade, "grades_csv": _grades_csv, "gradescope_zip": _gradescope_zip,
      "agreement_csv": _agreement_csv, "problem_check": _problem_check}
