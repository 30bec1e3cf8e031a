"""Putting grade tasks on the broker, always after the run's row is committed."""
from __future__ import annotations

import logging
import uuid

from sqlalchemy import update
from sqlalchemy.orm import Session

from grader.vocabulary import RunStatus
from store.models import GradingRun

log = logging.getLogger(__name__)



def new_task_id() -> str:
    return str(uuid.uuid4())


def send(run_id: int, queue: str, task_id: str) -> bool:
    """Publish; False when the broker cannot be reached (the reaper re-sends the run later)."""
    from .tasks import grade_submission
    try:
        grade_submission.apply_async(args=[run_id], queue=queue, task_id=task_id, retry=True,
                                     retry_policy={"max_retries": 3, "interval_start": 0.5, "interval_step": 1})
        return True
    except Exception:
        log.error("run %s committed but not sent to the %s queue; the reaper will re-send it", run_id, queue,
                  exc_info=True)
        return False


def resend(session: Session, run_ids: list[int]) -> int:
    """Give each (already queued, committed) run a fresh task id and publish it."""
    sent = 0
    for run_id in run_ids:
        task_id = new_task_id()
        queue = session.execute(update(GradingRun).where(GradingRun.id == run_id, GradingRun.status == RunStatus.QUEUED)
                                .values(celery_task_id=task_id).returning(GradingRun.queue)).scalar()
        session.commit()
        if queue is not None and send(run_id, queue, task_id):
            sent += 1
    return sent
