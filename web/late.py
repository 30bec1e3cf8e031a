"""An assignment's late rule as staff set it and everyone reads it (store/runs.py counts by it;
docs/staff.md "Deadlines and late work"): reading the staff's form, and the words every page
shows for a run's lateness."""
from __future__ import annotations

import datetime as dt
import math

from flask_wtf import FlaskForm
from sqlalchemy import select
from wtforms import SubmitField
from wtforms.validators import Optional

from store.models import LATE_RULES, Assignment
from store.runs import CountedRun, best_run, late_days_spent

from . import courses
from .errors import UserError
from .forms import UTCDateTimeField

RULE_TITLES = {
    "none": "no late uploads (refused after the deadline)",
    "graded-not-counted": "late runs graded, never counted",
    "credit-steps": "late runs count for part of their points, by days late",
    "late-days": "late runs count with the student's late days",
}
MAX_LATE_DAYS = 60          # a course-wide budget beyond two months is a typo


class DeadlineForm(FlaskForm):
    """The deadline after creation (the late rule's fields are read by read_rule, shared with
    the create form, whose fields are plain inputs)."""
    deadline = UTCDateTimeField("Deadline (UTC; empty: none)", validators=[Optional()])
    submit = SubmitField("Save deadline and late rule")


def days_late(submitted_at: dt.datetime | None, deadline: dt.datetime | None) -> int:
    """Started days after the deadline (1 second late is 1 day); 0 on time or without one.
    The same count as store/runs.py's query."""
    if deadline is None or submitted_at is None or submitted_at <= deadline:
        return 0
    return math.ceil((submitted_at - deadline).total_seconds() / 86400.0)


def parse_factors(typed: str) -> list[float]:
    """'0.9, 0.8, 0.5' -> [0.9, 0.8, 0.5]: each between 0 and 1."""
    factors = []
    for part in (typed or "").replace(";", ",").split(","):
        if not part.strip():
            continue
        try:
            value = float(part.strip().rstrip("%")) / (100 if part.strip().endswith("%") else 1)
        except ValueError:
            raise UserError(f"The late credit step {part.strip()!r} is not a number.",
                            "Write one factor per day late, separated by commas, e.g. 0.9, 0.8, 0.5.") from None
        if not 0 <= value <= 1:
            raise UserError(f"The late credit step {part.strip()} is not between 0 and 1.",
                            "Write each day's share of the points as a number from 0 to 1, e.g. 0.9 for 90%.")
        factors.append(value)
    return factors


def read_rule(form, course_late_days: int, current: str = "graded-not-counted") -> tuple[str, list[float], int]:
    """(rule, factors, course late days) from a form's late_rule, late_factors and late_days fields;
    a form without late_rule keeps `current`, without late_days the course's budget."""
    rule = (form.get("late_rule") or current).strip()
    if rule not in LATE_RULES:
        raise UserError(f"There is no late rule {rule!r}.", f"Choose one of: {', '.join(LATE_RULES)}.")
    factors = parse_factors(form.get("late_factors", "")) if rule == "credit-steps" else []
    if rule == "credit-steps" and not factors:
        raise UserError("The credit-steps rule needs at least one factor.",
                        "Write one factor per day late, e.g. 0.9, 0.8, 0.5 (90% a day late, 80% two, 50% three, "
                        "nothing after).")
    typed_days = (form.get("late_days") or "").strip()
    days = course_late_days
    if typed_days:
        try:
            days = int(typed_days)
        except ValueError:
            raise UserError(f"The course's late days {typed_days!r} is not a whole number.",
                            "Give the number of late days each student has for the whole course, e.g. 3.") from None
        if not 0 <= days <= MAX_LATE_DAYS:
            raise UserError(f"{days} late days is outside 0 to {MAX_LATE_DAYS}.",
                            "Give the number of late days each student has for the whole course, e.g. 3.")
    if rule == "late-days" and days == 0:
        raise UserError("The late-days rule needs a course budget of at least one late day.",
                        "Give the number of late days each student has for the whole course, e.g. 3.")
    return rule, factors, days


def describe(assignment: Assignment) -> str:
    """The rule in a sentence, as students and staff read it."""
    rule = assignment.late_rule
    if rule == "none":
        return "Uploads are refused after the deadline."
    if rule == "credit-steps":
        steps = ", ".join(f"{f:.0%} {d} day{'' if d == 1 else 's'} late" for d, f in
                          enumerate(assignment.late_factors, 1))
        return (f"Late runs are graded and count for part of their points: {steps}; nothing after "
                f"{len(assignment.late_factors)} day{'' if len(assignment.late_factors) == 1 else 's'}. "
                "Days are started days: a minute late is one day.")
    if rule == "late-days":
        budget = assignment.course.late_days
        return (f"Late runs are graded and count when your late days cover them: {budget} for the whole course, "
                "one per started day late, spent by the site where they raise your grade most "
                "(recomputed as you submit; a day is spent only where a late run counts higher than what "
                "counts without it).")
    return "Late runs are graded and shown to you, but never count: your grade comes from runs uploaded by the deadline."


def note(assignment: Assignment, late: int, counted: CountedRun | None = None, run_id: int | None = None) -> str:
    """What a run `late` days late earns under the rule, for its row or page ('' when on time)."""
    if late <= 0:
        return ""
    said = f"late by {late} day{'' if late == 1 else 's'}"
    rule = assignment.late_rule
    if rule == "credit-steps":
        factors = assignment.late_factors
        share = factors[late - 1] if late <= len(factors) else 0.0
        return f"{said}: earns {share:.0%} of its points" if share else f"{said}: past the late steps, earns nothing"
    if rule == "late-days":
        if counted is not None and counted.run_id == run_id:
            return f"{said}: counts, with {counted.days_late} late day{'' if counted.days_late == 1 else 's'}"
        return f"{said}: counts only with {late} late day{'' if late == 1 else 's'}"
    if rule == "none":
        return f"{said}: uploaded by staff or Gradescope after the deadline, not counted"
    return f"{said}: graded, not counted"


def late_days_status(session, assignment: Assignment, user_id: int) -> dict | None:
    """For a late-days assignment: the student's days spent on it, in the whole course, and the
    course's budget (None under other rules)."""
    if assignment.late_rule != "late-days":
        return None
    spent = late_days_spent(session, assignment.course_id, assignment.course.late_days, [user_id])
    return {"here": spent.get((user_id, assignment.id), 0), "total": sum(spent.values()),
            "budget": assignment.course.late_days}


def lateness_json(session, run) -> dict:
    """A run's lateness for the JSON APIs (docs/students.md): against its student's own deadline,
    by the submission's time (Gradescope's for its submissions), and what the assignment's rule
    lets it count for as of now: `factor`, the share of its points (1 on time; under late-days 1
    while the days spent on this assignment cover it, else 0), and `counts`, whether that is more
    than nothing. Which run does count is the best-run rule's (store/runs.py)."""
    submission = run.submission
    assignment = submission.assignment
    deadline = courses.deadline_for(session, submission.user_id, assignment)
    late = days_late(submission.submitted_at, deadline)
    rule = assignment.late_rule
    spent = late_days_spent(session, assignment.course_id, assignment.course.late_days, [submission.user_id]).get(
        (submission.user_id, assignment.id), 0) if rule == "late-days" else None
    if not late:
        factor = 1.0
    elif rule == "credit-steps":
        factor = assignment.late_factors[late - 1] if late <= len(assignment.late_factors) else 0.0
    elif rule == "late-days":
        factor = 1.0 if late <= spent else 0.0
    else:
        factor = 0.0                       # graded-not-counted; none (a staff or Gradescope upload)
    counted = best_run(session, assignment.id, run.backend, submission.user_id) if late and spent is not None else None
    body = {"late": late > 0, "days_late": late, "submitted_at": _iso(submission.submitted_at),
            "deadline": _iso(deadline), "extended": deadline is not None and deadline != assignment.deadline,
            "rule": rule, "counts": factor > 0, "factor": factor, "note": note(assignment, late, counted, run.id)}
    if spent is not None:
        body["late_days"] = {"spent_here": spent, "budget": assignment.course.late_days}
    return body


def _iso(when: dt.datetime | None) -> str | None:
    return when.isoformat() if when is not None else None


def standings_stamp(session, assignment: Assignment):
    """What an assignment's kept standings (web/standings.py) are valid for: its own standings
    stamp, but under late-days the stamps of every assignment of its course, since the budget is
    spent across them: a run finishing on another one, its deadline, rule or an extension there
    moves days to or from this one's runs with nothing of this one's written. All the stamps,
    not their latest: writers' clocks may differ, so a moved stamp need not be the newest."""
    if assignment.late_rule != "late-days":
        return assignment.standings_changed_at
    return tuple(session.execute(select(Assignment.id, Assignment.standings_changed_at)
                                 .where(Assignment.course_id == assignment.course_id).order_by(Assignment.id)))


def run_lateness(session, run) -> str:
    """A run's lateness note for its page ('' on time), against its student's own deadline."""

    assignment = run.submission.assignment
    late = days_late(run.submission.submitted_at, courses.deadline_for(session, run.submission.user_id, assignment))
    if not late:
        return ""
    counted = None
    if assignment.late_rule == "late-days":
        counted = best_run(session, assignment.id, run.backend, run.submission.user_id)
    return note(assignment, late, counted, run.id)
