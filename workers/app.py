"""The Celery app. Reliability settings follow what grading services learned the hard way
(shared/docs/grading-systems.md): late acks, a lost worker's task back on the queue, one task
prefetched per process, and a Redis visibility timeout longer than any grade."""
from __future__ import annotations

from celery import Celery
from celery.schedules import crontab
from kombu import Queue

from grader.vocabulary import Queue as QueueName
from grader.vocabulary import values

from . import settings
from .broker import broker_url

QUEUES = values(QueueName)       # nightly: the reference regression, never ahead of a student's grade

app = Celery("nki_grader", include=["workers.tasks"])


@app.on_configure.connect
def _configure(sender, **_):
    conf = settings.load()
    if conf.visibility_timeout_s <= conf.task_time_limit_s:
        raise ValueError(f"NKI_VISIBILITY_TIMEOUT_S ({conf.visibility_timeout_s:g}) must exceed NKI_TASK_TIME_LIMIT_S "
                         f"({conf.task_time_limit_s:g}), or Redis hands a running grade to a second worker")
    if conf.problem_check_limit_s >= conf.task_time_limit_s:
        raise ValueError(f"NKI_PROBLEM_CHECK_LIMIT_S ({conf.problem_check_limit_s:g}) must be under "
                         f"NKI_TASK_TIME_LIMIT_S ({conf.task_time_limit_s:g}): a check over its limit fails, "
                         "saying so, where the task limit kills the worker's process")
    sender.conf.update(
        broker_url=broker_url(),                 # resolved on first use, not at import
        broker_transport_options={"visibility_timeout": conf.visibility_timeout_s},
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,      # a restarting Redis is waited for, not fatal
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        # a grade the grader failed to stop: the pool process is killed, the run's heartbeat
        # stops and the reaper re-queues it (infra_error after NKI_MAX_ATTEMPTS)
        task_time_limit=conf.task_time_limit_s,
        task_ignore_result=True,                 # results live in PostgreSQL
        task_queues=[Queue(q) for q in QUEUES],
        task_default_queue=QueueName.SIM.value,
        task_serializer="json", accept_content=["json"],
        worker_hijack_root_logger=False,
        worker_cancel_long_running_tasks_on_connection_loss=False,  # the task is redelivered anyway
        enable_utc=True, timezone="UTC",
        beat_schedule={
            "nightly-regression": {"task": "workers.nightly_regression",
                                   "schedule": crontab(hour=conf.nightly_hour_utc, minute=0),
                                   "options": {"queue": QueueName.NIGHTLY.value}},
        },
    )
