"""What deadline night does to a queue: a worker killed mid-grade, Redis restarted with jobs
queued, a task delivered twice, a kernel that never returns. Real worker processes on the
embedded PostgreSQL and Redis; every wait is on database or broker state, with generous limits."""
from __future__ import annotations

from worker_helpers import OPTIMIZED, spinning_kernel
from service_waits import wait_for, wait_for_run

from workers import enqueue, publish
from workers.broker import client_for

# stale after 12 s: well past any stall of a live worker on a busy machine, and still quick to reap
FAST_REAPER = {"NKI_HEARTBEAT_S": 0.5, "NKI_HEARTBEAT_STALE_S": 12, "NKI_REAPER_INTERVAL_S": 1}


def _broker_empty(redis_server) -> bool:
    client = client_for(redis_server.url)
    return client.llen("sim") == 0 and client.hlen("unacked") == 0


def test_killed_worker_run_is_graded_once_by_another(db, assignment, student, celery_worker):
    # A never finishes by itself (huge budget), so the kill surely lands mid-grade.
    first = celery_worker("sim", NKI_GRADE_BUDGET_S=3600, **FAST_REAPER)
    run = enqueue.submit(db, student, assignment, "conv2d.py", spinning_kernel())
    running = wait_for_run(db, run.id, ("running",))
    assert running.worker.startswith(first.name)
    first.kill()                                  # kill -9 of the whole worker, pool and all
    celery_worker.beat(**FAST_REAPER)             # its reaper sees the silent heartbeat
    second = celery_worker("sim", NKI_GRADE_BUDGET_S=5, **FAST_REAPER)
    run = wait_for_run(db, run.id, ("done",), timeout=300)
    assert run.worker.startswith(second.name)
    assert run.attempts == 2                      # one claim each; the killed one left no result
    assert len(run.test_results) == 2
    assert run.report["tests"][0]["status"] in ("failed", "error")


def test_redis_restart_with_jobs_queued_loses_none(db, assignment, student, celery_worker, broker):
    runs = [enqueue.submit(db, student, assignment, "conv2d.py", OPTIMIZED) for _ in range(4)]
    assert client_for(broker.url).llen("sim") == 4
    broker.restart()                              # SIGTERM and start again on the same files
    assert client_for(broker.url).llen("sim") == 4
    celery_worker("sim")
    for run in runs:
        done = wait_for_run(db, run.id, ("done",))
        assert done.attempts == 1


def test_duplicate_delivery_stores_one_result(db, assignment, student, celery_worker, broker):
    run = enqueue.submit(db, student, assignment, "conv2d.py", OPTIMIZED)
    publish.send(run.id, "sim", run.celery_task_id)           # the same task, redelivered
    publish.send(run.id, "sim", publish.new_task_id())        # and sent again by someone else
    celery_worker("sim", concurrency=2)
    run = wait_for_run(db, run.id, ("done",))
    wait_for(lambda: _broker_empty(broker), 120, "every copy of the task to be consumed")
    db.expire_all()
    assert run.attempts == 1
    assert sorted(t.test_name for t in run.test_results) == ["conv_tiny", "perf_tiny"]


def test_spinning_kernel_frees_the_worker_within_its_budget(db, assignment, student, celery_worker):
    budget = 5
    celery_worker("sim", NKI_GRADE_BUDGET_S=budget)
    spin = enqueue.submit(db, student, assignment, "conv2d.py", spinning_kernel())
    after = enqueue.submit(db, student, assignment, "conv2d.py", OPTIMIZED)
    spin = wait_for_run(db, spin.id, ("done",))
    assert spin.report["tests"][0]["status"] in ("failed", "error")
    assert (spin.finished_at - spin.started_at).total_seconds() < budget + 60
    after = wait_for_run(db, after.id, ("done",))
    assert after.started_at >= spin.finished_at               # the same single worker took it next


def test_reaper_resends_a_run_whose_message_the_broker_lost(db, assignment, student, celery_worker, broker,
                                                            monkeypatch):
    from workers.reaper import reap_once
    run = enqueue.submit(db, student, assignment, "conv2d.py", OPTIMIZED)
    client_for(broker.url).flushall()             # the broker forgot it (say, Redis lost its disk)
    monkeypatch.setenv("NKI_LOST_AFTER_S", "0")
    swept = reap_once()
    assert swept["resent_lost"] == [run.id] and swept["sent"] == 1
    assert reap_once()["resent_lost"] == []       # now the broker holds it: not sent twice
    celery_worker("sim")
    assert wait_for_run(db, run.id, ("done",)).attempts == 1


def test_infrastructure_fault_retries_then_ends_infra_error_not_a_score(db, assignment, student, celery_worker):
    # A neuron run reaching a machine without Neuron devices: our fault, not the student's.
    assignment.backend = "neuron"
    db.commit()
    run = enqueue.submit(db, student, assignment, "conv2d.py", OPTIMIZED)
    publish.send(run.id, "sim", publish.new_task_id())            # misrouted to a simulator worker
    celery_worker("sim", NKI_MAX_ATTEMPTS=2)
    run = wait_for_run(db, run.id, ("infra_error",))
    assert run.attempts == 2                                      # retried once, then gave up
    assert "neuron" in run.error.lower()
    assert run.score_total is None and run.report is None and run.test_results == []
