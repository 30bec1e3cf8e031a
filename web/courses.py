"""Assignments as the site sees them: who may open one, its spec in force, a student's
deadline, and how many graded runs the student has left this hour."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from grader.vocabulary import IN_FLIGHT_RUN_STATUSES, RunStatus
from store import specs
from store.models import Assignment, DeadlineExtension, GradingRun, Submission

from .accounts import Account, now
from .errors import UserError

IN_FLIGHT = IN_FLIGHT_RUN_STATUSES
NOT_COUNTED = (RunStatus.INFRA_ERROR, RunStatus.CANCELLED)    # our failures, or withdrawn: never against a student


def get_assignment(session: Session, name: str) -> Assignment:
    assignment = session.scalar(select(Assignment).where(Assignment.name == name))
    if assignment is None:
        raise UserError(f"There is no assignment called {name!r}.", "Pick one from the assignments page.", 404)
    return assignment


def can_open(session: Session, user: Account, assignment: Assignment) -> bool:
    """Staff of the assignment's course always; its students while it is active."""
    if user.is_staff_of(assignment.course_id):
        return True
    return assignment.active and assignment.course_id in user.course_roles


def assignment_for(session: Session, user: Account, name: str) -> Assignment:
    assignment = get_assignment(session, name)
    if not can_open(session, user, assignment):
        raise UserError(f"You are not enrolled in the course of {name!r}.",
                        "Ask course staff to add you to the roster.", 403)
    return assignment


def visible_assignments(session: Session, user: Account) -> list[Assignment]:
    query = select(Assignment).order_by(Assignment.deadline.desc().nulls_last(), Assignment.name)
    if not user.is_admin:
        query = query.where(or_(Assignment.course_id.in_(user.staff_course_ids),
                                and_(Assignment.active, Assignment.course_id.in_(list(user.course_roles)))))
    return list(session.scalars(query))


def staff_assignment(session: Session, user: Account, name: str) -> Assignment:
    """The assignment for a staff view: only staff of its course (or an admin) get it."""
    assignment = get_assignment(session, name)
    if not user.is_staff_of(assignment.course_id):
        raise UserError(f"You are not staff of the course of {name!r}.",
                        "Ask its instructor or a site admin to add you as a TA.", 403)
    return assignment


# ----- the spec in force -----

def spec_of(assignment: Assignment):
    """The spec in force: the assignment's stored spec row, not today's bundled file."""
    return specs.spec_of(assignment)


def timed_tests(assignment: Assignment) -> list:
    return [t for t in spec_of(assignment).tests if t.timed]


# ----- deadlines and the rate limit -----

def deadline_for(session: Session, user_id: int, assignment: Assignment) -> dt.datetime | None:
    extension = session.scalar(select(DeadlineExtension.deadline).where(
        DeadlineExtension.user_id == user_id, DeadlineExtension.assignment_id == assignment.id))
    return extension or assignment.deadline


@dataclass(frozen=True)
class Allowance:
    per_hour: int
    used: int                       # runs queued in the last hour that count
    in_flight: int
    next_free_at: dt.datetime | None

    @property
    def left(self) -> int:
        return max(0, self.per_hour - self.used)

    @property
    def can_submit(self) -> bool:
        return self.left > 0 and self.in_flight == 0


def allowance(session: Session, user_id: int, assignment: Assignment) -> Allowance:
    since = now() - dt.timedelta(hours=1)
    mine = (select(GradingRun).join(Submission)        # uploads on the site: Gradescope's are the course token's
            .where(Submission.user_id == user_id, Submission.assignment_id == assignment.id,
                   Submission.gradescope_submission_id.is_(None)))
    recent = session.scalars(mine.where(GradingRun.queued_at > since, GradingRun.status.not_in(NOT_COUNTED))
                             .order_by(GradingRun.queued_at)).all()
    in_flight = session.scalar(select(func.count()).select_from(
        mine.where(GradingRun.status.in_(IN_FLIGHT)).subquery()))
    next_free = None
    if len(recent) >= assignment.runs_per_hour:
        next_free = recent[len(recent) - assignment.runs_per_hour].queued_at + dt.timedelta(hours=1)
    return Allowance(assignment.runs_per_hour, len(recent), in_flight or 0, next_free)


def check_may_submit(session: Session, user: Account, assignment: Assignment) -> None:
    """Raises UserError (403/429) saying why this upload may not be graded now."""
    if user.is_staff_of(assignment.course_id):
        return
    if not assignment.active:
        raise UserError(f"{assignment.name} is closed.", "Ask course staff if you need to submit.", 403)
    deadline = deadline_for(session, user.id, assignment)
    if deadline is not None and now() > deadline and assignment.late_rule == "none":   # other rules grade late work
        raise UserError(f"The deadline for {assignment.name} passed at {deadline:%Y-%m-%d %H:%M} UTC.",
                        "Ask course staff for an extension if you have a reason.", 403)
    left = allowance(session, user.id, assignment)
    if left.in_flight:
        raise UserError("You already have a run queued or grading for this assignment.",
                        "Wait for it to finish (its status page updates by itself), then upload again.", 429)
    if left.left == 0:
        when = f" at {left.next_free_at:%H:%M} UTC" if left.next_free_at else ""
        raise UserError(f"You have used all {left.per_hour} graded runs of the last hour.",
                        f"The next one frees up{when}; test locally with `grader grade` meanwhile.", 429)
