"""The reaper (run by `grader beat`): a running row whose worker stopped heart-beating goes back
to the queue (or to infra_error after too many attempts, never counted against the student),
and a queued row whose task the broker no longer holds is sent again."""
from __future__ import annotations

import datetime as dt
import json
import logging
import threading

from sqlalchemy import select

from grader.vocabulary import RunStatus
from store import lifecycle
from store.db import session_scope
from store.lifecycle import now
from store.models import GradingRun

from . import settings, staff_tasks
from .app import QUEUES, app
from .broker import client_for
from .publish import resend

log = logging.getLogger(__name__)


def broker_task_ids() -> set[str]:
    """Task ids the broker holds: waiting in a queue, or delivered and not yet acknowledged."""
    client = client_for(app.conf.broker_url)
    ids: set[str] = set()
    keys = set()
    for queue in QUEUES:
        keys.add(queue.encode())
        keys.update(client.scan_iter(match=f"{queue}\x06\x16*"))     # kombu's priority sub-queues
    for key in keys:
        for raw in client.lrange(key, 0, -1):
            ids.add(_task_id(json.loads(raw)))
    for raw in client.hvals("unacked"):
        ids.add(_task_id(json.loads(raw)[0]))
    return ids


def _task_id(message: dict) -> str:
    return (message.get("headers") or {}).get("id") or (message.get("properties") or {}).get("correlation_id", "")


def reap_once() -> dict:
    conf = settings.load()
    stale = now() - dt.timedelta(seconds=conf.stale_after_s)
    with session_scope() as s:
        dead = s.execute(select(GradingRun.id, GradingRun.attempts, GradingRun.worker)
                         .where(GradingRun.status == RunStatus.RUNNING, GradingRun.heartbeat_at < stale)).all()
        requeue, given_up = [], []
        for run_id, attempts, worker in dead:
            done = attempts >= conf.max_attempts
            if lifecycle.reap(s, run_id, attempts, worker, stale, give_up=done):
                (given_up if done else requeue).append(run_id)
        s.commit()
        lost_before = now() - dt.timedelta(seconds=conf.lost_after_s)
        waiting = s.execute(select(GradingRun.id, GradingRun.celery_task_id).where(
            GradingRun.status == RunStatus.QUEUED, GradingRun.queued_at < lost_before)).all()
        held = broker_task_ids()
        lost = [run_id for run_id, task_id in waiting if task_id not in held]
        sent = resend(s, requeue + lost)
        tasks_requeued, tasks_failed = staff_tasks.reap_stalled(s, stale)
        tasks_lost = staff_tasks.lost(s, held, lost_before)
        s.commit()
    staff_tasks.resend(tasks_requeued + tasks_lost)
    if requeue or lost or given_up or tasks_requeued or tasks_failed or tasks_lost:
        log.warning("reaper: re-queued %s (dead worker), re-sent %s (lost message), gave up on %s; staff tasks "
                    "re-queued %s, failed %s, re-sent %s (lost message)", requeue, lost, given_up, tasks_requeued,
                    tasks_failed, tasks_lost)
    return {"requeued": requeue, "resent_lost": lost, RunStatus.INFRA_ERROR: given_up, "sent": sent,
            "staff_tasks_requeued": tasks_requeued, "staff_tasks_failed": tasks_failed,
            "staff_tasks_resent": tasks_lost}


class Reaper(threading.Thread):
    def __init__(self, every_s: float | None = None) -> None:
        super().__init__(name="reaper", daemon=True)
        self.every_s = every_s or settings.load().reaper_interval_s
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.every_s):
            try:
                reap_once()
            except Exception:                 # database or broker away: next round
                log.warning("reaper round failed", exc_info=True)

    def stop(self) -> None:
        self.stopped.set()
