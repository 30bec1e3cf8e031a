"""Celery tasks. `grade_submission(run_id)` is thin: claim the row, grade with the grader's
public face, store. A duplicate delivery finds the row claimed or finished and does nothing."""
from __future__ import annotations

import faulthandler
import logging
import os
import signal
import sys
import threading
import time
import traceback

import psutil
from celery import signals

import grader
from grader import render
from grader.vocabulary import GRADING_QUEUES, ReportStatus, RunStatus
from store import lifecycle, problem_folders, specs
from store.db import forget_engines_after_fork, session_scope

from . import answers, settings
from .app import app
from .heartbeats import WorkerAnnouncer

log = logging.getLogger(__name__)
problem_folders.install()      # a spec pinning a site admin's uploaded problem folder: read from the database
# what a grade task returns (Celery keeps it) besides a run status: the delivery was a duplicate
# (another claim holds the run or it is finished), the claim was lost while grading, or the run
# went back to the queue because its worker is stopping
DUPLICATE, LOST, HANDED_BACK = "duplicate", "lost", "handed back"
_pool_core: int | None = None          # the NeuronCore this pool process owns (trn2 workers)


class _Stop:
    """A clean stop reaching a pool process (SIGTERM: `grader serve` stopping its worker's group,
    or the worker's main process passing on its warm shutdown): the grade under way is stopped at
    once and its run handed back to the queue, so the next worker takes it up at once instead of
    the reaper finding it silent minutes later. An idle pool process ends, as before."""

    def __init__(self) -> None:
        self.requested = False
        self.in_task = False
        self.token: grader.CancelToken | None = None
        self._wake = -1
        self._previous = None
        self._pid = None

    def install(self) -> None:
        """From the first grade task of a pool process (billiard sets its own SIGTERM handler
        after the process's initializers), in the main thread that runs the tasks."""
        if self._pid == os.getpid() or threading.current_thread() is not threading.main_thread():
            return
        self._pid = os.getpid()
        read, self._wake = os.pipe2(os.O_CLOEXEC)
        threading.Thread(target=self._watch, args=(read,), daemon=True, name="clean-stop").start()
        self._previous = signal.signal(signal.SIGTERM, self._on_signal)

    def _on_signal(self, signum, frame) -> None:
        self.requested = True
        if not self.in_task:                # nothing to hand back: end as billiard's handler would
            if callable(self._previous):
                self._previous(signum, frame)
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        # the token's event takes a lock the interrupted code may hold: a thread of ours sets it
        os.write(self._wake, b"x")

    def _watch(self, read: int) -> None:
        while os.read(read, 64):
            token = self.token
            if token is not None:
                token.cancel(ReportStatus.INTERRUPTED)      # the grade stops and kills its children at once


_stop = _Stop()


@signals.worker_process_init.connect
def _pool_process_init(**_):
    """Each pool process: one BLAS thread for good (its answers then have a grade's bits, on
    whichever thread they are made), fresh database connections, and on a Trn2 worker one NeuronCore."""
    global _pool_core
    grader.use_one_blas_thread()
    # `kill -USR2 <pool process>` prints each of its threads' stacks to the worker's log: where a
    # grade that will not stop is (billiard keeps SIGUSR1 for soft time limits)
    # (to the process's own stderr: Celery's sys.stderr is a logging proxy without a descriptor)
    faulthandler.register(signal.SIGUSR2, file=sys.__stderr__, all_threads=True)
    forget_engines_after_fork()
    cores = [int(c) for c in os.environ.get("NKI_NEURON_CORES", "").split(",") if c.strip()]
    if cores:
        from billiard.process import current_process
        _pool_core = cores[(getattr(current_process(), "index", 0) or 0) % len(cores)]
        os.environ["NEURON_RT_VISIBLE_CORES"] = str(_pool_core)


_announcer: WorkerAnnouncer | None = None


class _PassOnStop:
    """The main process's warm (or cold) shutdown, passed on to its pool processes, so each hands
    its run back to the queue at once (_Stop) instead of grading on until the grace period ends
    in a SIGKILL (Docker's init signals only the main process). Celery begins its shutdown in
    its signal handler, where the pool's bookkeeping may be half-updated by the code it
    interrupted: the handler only wakes a thread of ours, which reads the pool's processes and
    signals them, and again every PASS_ON_EVERY_S while one still runs, so a pool process that
    was between two bytecodes of its own setup when the first signal came still hears it."""

    PASS_ON_EVERY_S = 2.0
    PASS_ON_TIMES = 15

    def __init__(self) -> None:
        self.pool = None
        self._wake = -1

    def start(self, pool) -> None:
        self.pool = pool
        if self._wake < 0:
            read, self._wake = os.pipe2(os.O_CLOEXEC)
            threading.Thread(target=self._watch, args=(read,), daemon=True, name="pass-on-stop").start()

    def request(self) -> None:
        """From the signal handler: a write to a pipe takes no lock."""
        if self._wake >= 0:
            os.write(self._wake, b"x")

    def pool_processes(self) -> list[int]:
        try:
            return list((self.pool.info or {}).get("processes", ())) if self.pool is not None else []
        except Exception:              # a pool already torn down: nothing to pass on
            return []

    def _watch(self, read: int) -> None:
        os.read(read, 64)
        for _ in range(self.PASS_ON_TIMES):
            pids = [pid for pid in self.pool_processes() if _running(pid)]
            if not pids:                   # every pool process ended (a zombie until the pool reaps it)
                return
            log.info("worker stopping: passing the stop on to pool process(es) %s", ", ".join(map(str, pids)))
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            time.sleep(self.PASS_ON_EVERY_S)


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


_pass_on = _PassOnStop()


@signals.worker_ready.connect
def _worker_ready(sender=None, **_):
    global _announcer
    name = os.environ.get("NKI_WORKER_NAME") or getattr(sender, "hostname", "worker")
    queues = os.environ.get("NKI_WORKER_QUEUES", "")
    pool = getattr(sender, "pool", None)
    _pass_on.start(pool)
    _announcer = WorkerAnnouncer(name, queues, settings.load().heartbeat_s)
    _announcer.start()
    log.info("worker %s started: queue %s, %s at once", name, queues, getattr(pool, "limit", "?"))
    if any(q.strip() in GRADING_QUEUES for q in queues.split(",")):
        grader.use_one_blas_thread()        # before the pool is filled on a thread of its own
        # answers made ahead for the active assignments, while the first grades come in
        threading.Thread(target=answers.fill_active, daemon=True, name="answer-pool-start").start()


@signals.worker_shutting_down.connect
def _worker_shutting_down(**_):
    """Celery sends this from its signal handler: no logging, no locks here (_PassOnStop)."""
    _pass_on.request()


@signals.worker_shutdown.connect
def _worker_shutdown(**_):
    if _announcer is not None:
        _announcer.stop()
        log.info("worker %s stopped", _announcer.worker_name)


class RunHeartbeat(threading.Thread):
    """Touches the claimed row while the grade runs; cancels the grade when a TA asked for it
    or when the row is no longer ours (reaped after a long stall)."""

    def __init__(self, claim: lifecycle.Claim, token: "grader.CancelToken", every_s: float) -> None:
        super().__init__(name=f"heartbeat-run-{claim.run_id}", daemon=True)
        self.claim, self.token, self.every_s = claim, token, every_s
        self.stopped = threading.Event()
        self.lost = False

    def run(self) -> None:
        while not self.stopped.wait(self.every_s):
            try:
                with session_scope() as s:
                    ours, cancel = lifecycle.heartbeat(s, self.claim)
            except Exception:                     # database blip: try again next beat
                log.warning("heartbeat for run %s failed", self.claim.run_id, exc_info=True)
                continue
            if not ours:
                self.lost = True
                self.token.cancel()
                return
            if cancel:
                self.token.cancel()

    def stop(self) -> None:
        self.stopped.set()


def _progress_writer(claim: lifecycle.Claim):
    finished: list[dict] = []          # this claim's finished tests, in order (one grade, one thread)

    def on_progress(event) -> None:
        if _stop.requested:
            # this worker is stopping: the tests the grader now skips are not the student's, and
            # the run goes back to the queue; stored, they would show as skipped until then
            return
        finished.append(render.test_summary(event.result))
        try:
            with session_scope() as s:
                lifecycle.progress(s, claim, event.done, event.total, finished)
        except Exception:                          # progress is a courtesy; the grade goes on
            log.warning("progress for run %s not stored", claim.run_id, exc_info=True)
    return on_progress


@app.task(bind=True, name="workers.grade_submission", max_retries=None)
def grade_submission(self, run_id: int) -> str:
    _stop.install()
    _stop.in_task = True
    try:
        return _grade(self, run_id)
    finally:
        # handed back or not, this process serves on until its pool closes: a SIGTERM to this
        # pool process alone must not make it hand back every grade after
        _stop.in_task, _stop.token, _stop.requested = False, None, False


def _grade(task, run_id: int) -> str:
    conf = settings.load()
    worker = f"{task.request.hostname or 'worker'}:{os.getpid()}"
    if _pool_core is not None:
        worker += f":core{_pool_core}"          # staff (and tests) see which NeuronCore graded it
    with session_scope() as s:
        claim = lifecycle.claim(s, run_id, worker, task.request.id, conf.stale_after_s)
        if claim is None:
            log.info("run %s: a duplicate delivery (another claim holds it, or it is finished); nothing to do", run_id)
            return DUPLICATE
        row = lifecycle.run_row(s, run_id)
        filename, data = row.submission.filename, row.submission.data
        spec_hash, backend = row.submission.assignment.spec_hash, row.backend
    started = time.monotonic()
    log.info("run %s: grading started on %s (attempt %s, backend %s, %s)", run_id, worker, claim.attempt, backend,
             filename)
    try:
        with session_scope() as s:              # reads the spec's row only the first time (then cached)
            spec = specs.spec_by_hash(s, spec_hash)
    except grader.GraderInputError as err:
        # the stored spec cannot be read on this machine (a course problem folder missing here, or
        # not the one it pins): this worker's fault, never the student's; another may grade it
        return _infrastructure_fault(task, claim, conf, err)
    try:
        submission = grader.submission_from_bytes(filename, data, spec)
    except grader.GraderInputError as err:
        with session_scope() as s:
            lifecycle.fail(s, claim, RunStatus.FAILED, f"cannot grade this submission: {err}")
        log.info("run %s: grading ended after %.1f s: failed (cannot grade this submission)", run_id,
                 time.monotonic() - started)
        return RunStatus.FAILED
    token = grader.CancelToken()
    _stop.token = token
    if _stop.requested:                 # the stop came before the grade began
        token.cancel(ReportStatus.INTERRUPTED)
    beat = RunHeartbeat(claim, token, conf.heartbeat_s)
    beat.start()
    try:
        options = grader.GradeOptions(
            backend=backend, cancel=token, on_progress=_progress_writer(claim), time_budget_s=conf.grade_budget_s,
            neuron_cores=(_pool_core,) if _pool_core is not None else (0,), answers=answers.draw(spec),
            threads=conf.grade_threads or None)
        report = grader.grade(submission, spec, options)
    except Exception as err:  # the grader never raises for student faults: this is ours
        if _stop.requested:
            return _hand_back(claim, started)
        return _infrastructure_fault(task, claim, conf, err)
    finally:
        beat.stop()
    if beat.lost:
        log.warning("run %s: no longer this worker's after %.1f s (reaped or cancelled meanwhile); the new claim "
                    "grades it", run_id, time.monotonic() - started)
        return LOST                   # reaped while we were stalled: the new claim grades it
    if report.status == ReportStatus.INTERRUPTED:  # our process was told to stop, not the student's doing
        if _stop.requested:
            return _hand_back(claim, started)
        return _infrastructure_fault(task, claim, conf, RuntimeError("grade interrupted by a signal"))
    with session_scope() as s:
        status = lifecycle.finish(s, claim, report.to_json(include_seed=False), report.seed)
    if status is None:
        log.warning("run %s: graded in %.1f s, but no longer this worker's; not stored", run_id,
                    time.monotonic() - started)
        return LOST
    view = grader.view_of(report)
    points = view.points
    log.info("run %s: grading ended after %.1f s: %s, score %g of %g", run_id, time.monotonic() - started,
             status.value, points.total, points.max_total)
    if status == RunStatus.DONE:
        from .hardware_check import confirm_on_hardware     # borderline = "hardware": a provisional run
        try:
            confirm_on_hardware(run_id, [f.flag for f in view.flags])
        except Exception:        # the grade is stored: a staff regrade on hardware does the same later
            log.error("run %s: could not queue its run on Trainium", run_id, exc_info=True)
    return report.status


def _hand_back(claim: lifecycle.Claim, started: float) -> str:
    """This worker is stopping cleanly: the run goes back to the queue with a fresh message now,
    not after the reaper's wait, and the attempt does not count."""
    from .publish import resend
    with session_scope() as s:
        if not lifecycle.hand_back(s, claim, f"worker {claim.worker} stopped during the grade; re-queued"):
            return LOST
        sent = resend(s, [claim.run_id])
    log.info("run %s: handed back to the queue after %.1f s: this worker is stopping%s", claim.run_id,
             time.monotonic() - started, "" if sent else " (not sent: the reaper sends it when the broker answers)")
    return HANDED_BACK


def _infrastructure_fault(task, claim: lifecycle.Claim, conf: settings.Settings, err: BaseException) -> str:
    detail = "".join(traceback.format_exception(err, limit=8)).strip()
    log.error("run %s attempt %s: infrastructure fault: %s", claim.run_id, claim.attempt, detail)
    with session_scope() as s:
        if claim.attempt >= conf.max_attempts:
            lifecycle.fail(s, claim, RunStatus.INFRA_ERROR, f"gave up after {claim.attempt} attempts: {detail}")
            return RunStatus.INFRA_ERROR
        released = lifecycle.release(s, claim, detail)
    if released:
        raise task.retry(countdown=min(60, 5 * claim.attempt), exc=None)
    return "lost"


@app.task(name="workers.nightly_regression")
def nightly_regression() -> int:
    from .nightly import run_nightly
    return run_nightly(trigger="beat")


@app.task(name="workers.nightly_reference", acks_late=True)
def nightly_reference(night_id: int, spec_hash: str, reference: str, backend: str) -> None:
    from .nightly import grade_reference
    grade_reference(night_id, spec_hash, reference, backend)


@app.task(name="workers.staff_task", acks_late=True)
def staff_task(task_id: int) -> None:
    """A rescore, regrade or export a TA started (workers/staff_tasks.py), on the staff queue."""
    from .staff_tasks import run
    run(task_id)
