"""borderline = "hardware" through the service: a simulator worker grades a run whose p99 lies within
the simulator's error of the optimized threshold; it is stored provisional (today's points, flagged
and so held) and, with a Trainium worker alive, a run of the same submission on the neuron backend
is queued on the trn2 queue at once (its score is what counts). With none alive, nothing is queued
and the provisional run waits for staff."""
from __future__ import annotations

import datetime as dt

from sqlalchemy import select
from service_waits import wait_for, wait_for_run
from worker_helpers import OPTIMIZED, TINY_SPEC

import grader
from grader.vocabulary import Backend, Queue, RunStatus
from store import specs
from store.models import Course, GradingRun, WorkerHeartbeat
from workers import enqueue
from workers.hardware_check import confirm_on_hardware, provisional_tests


def _borderline_spec(tmp_path):
    """The tiny spec under borderline = "hardware", its optimized threshold inside the optimized
    kernel's own error band (half a band under its p99, as graded here)."""
    spec = grader.load_spec(str(TINY_SPEC))
    sub = grader.submission_from_bytes("conv2d.py", OPTIMIZED, spec)
    perf = next(t for t in grader.grade(sub, spec, grader.GradeOptions(backend="sim")).tests if t.name == "perf_tiny")
    threshold = round(perf.p99_us * (1 - perf.details["band"] / 2), 3)
    text = TINY_SPEC.read_text().replace("thresholds_us = { optimized = 40, relaxed = 60 }",
                                         f"thresholds_us = {{ optimized = {threshold}, relaxed = {threshold * 3} }}")
    path = tmp_path / "tiny_hardware.toml"
    path.write_text('borderline = "hardware"\n' + text.replace('assignment = "tiny-conv"', 'assignment = "tiny-hw"'))
    return path


def test_a_provisional_run_is_timed_again_on_trainium_when_a_worker_is_alive(db, student, celery_worker, tmp_path):
    assignment = specs.new_assignment(db, str(_borderline_spec(tmp_path)), course=Course(name="CS149"), name="hw",
                                      backend="sim")
    # a Trainium worker's heartbeat (none runs here: the hardware run stays queued for it)
    db.add(WorkerHeartbeat(name="grader-trn2-1@trn2-host", queues=Queue.TRN2.value, pid=4242,
                           seen_at=dt.datetime.now(dt.timezone.utc)))
    db.commit()
    celery_worker("sim")
    run = wait_for_run(db, enqueue.submit(db, student, assignment, "conv2d.py", OPTIMIZED).id, ("done",))
    assert provisional_tests(run.report["flags"]) == ["perf_tiny"] and run.flagged
    perf = next(t for t in run.report["tests"] if t["name"] == "perf_tiny")
    assert perf["status"] == "partial" and "provisional" in perf["message"]

    def hardware_runs():           # the worker queues it just after storing the simulated run's grade
        db.expire_all()
        return db.scalars(select(GradingRun).where(GradingRun.submission_id == run.submission_id,
                                                   GradingRun.id != run.id)).all()
    again = wait_for(hardware_runs, 60, "the hardware run to be queued")
    assert [(r.backend, r.queue, r.status) for r in again] == [(Backend.NEURON, Queue.TRN2.value, RunStatus.QUEUED)]
    # once is enough: the same run's flags again queue nothing more
    assert confirm_on_hardware(run.id, run.report["flags"]) is None


def test_without_a_trainium_worker_a_provisional_run_waits_for_staff(db, student, broker):
    assignment = specs.new_assignment(db, str(TINY_SPEC), course=Course(name="CS149"), name="hw", backend="sim")
    db.commit()
    run = enqueue.submit(db, student, assignment, "conv2d.py", OPTIMIZED)
    run.status = RunStatus.DONE
    db.commit()
    assert confirm_on_hardware(run.id, ["borderline_hardware:perf_tiny"]) is None
    stale = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)          # a Trainium worker gone an hour
    db.add(WorkerHeartbeat(name="grader-trn2-1@trn2-host", queues=Queue.TRN2.value, pid=4242, seen_at=stale))
    db.commit()
    assert confirm_on_hardware(run.id, ["borderline_hardware:perf_tiny"]) is None
    assert confirm_on_hardware(run.id, ["borderline_credit:perf_tiny"]) is None           # not provisional
    db.expire_all()
    assert len(db.scalars(select(GradingRun).where(GradingRun.submission_id == run.submission_id)).all()) == 1
