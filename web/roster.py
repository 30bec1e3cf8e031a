"""Roster import: a CSV of students (and staff) enrolled into a course, each given a one-time
login link. The whole file is checked first; one bad line imports nothing."""
from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from store.models import COURSE_ROLES, Course, Enrollment, User

from .accounts import Account, may_act_for, new_login_token
from .errors import UserError

EMAIL = re.compile(r"^[^@\s,;]+@[^@\s,;]+\.[^@\s,;]+$")
MAX_ROSTER_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True)
class RosterLine:
    email: str
    name: str
    role: str


@dataclass(frozen=True)
class Imported:
    email: str
    name: str
    role: str
    created: bool
    token: str | None         # None: an existing account the importer may not sign in as


def parse(data: bytes) -> list[RosterLine]:
    if len(data) > MAX_ROSTER_BYTES:
        raise UserError("The roster file is over 2 MiB.", "Upload a CSV with one line per person.")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UserError("The roster is not UTF-8 text.", "Export it from your spreadsheet as 'CSV UTF-8'.")
    reader = csv.DictReader(io.StringIO(text))
    columns = [c.strip().lower() for c in reader.fieldnames or []]
    if "email" not in columns:
        raise UserError("The roster has no 'email' column.",
                        "Make the first line a header: email,name,role (name and role optional).")
    reader.fieldnames = columns
    lines, problems, seen = [], [], set()
    for number, row in enumerate(reader, start=2):
        email = (row.get("email") or "").strip().lower()
        role = (row.get("role") or "student").strip().lower() or "student"
        if not EMAIL.match(email):
            problems.append(f"line {number}: {email or '(empty)'!r} is not an email address")
        elif email in seen:
            problems.append(f"line {number}: {email} appears twice")
        if role not in COURSE_ROLES:
            problems.append(f"line {number}: role {role!r} is not one of {', '.join(COURSE_ROLES)}"
                            + (" (site admins are made by a site admin on the roster page)" if role == "admin" else ""))
        seen.add(email)
        lines.append(RosterLine(email, (row.get("name") or "").strip()[:200], role))
    if problems:
        raise UserError("The roster was not imported: " + "; ".join(problems[:20]) +
                        (f" (and {len(problems) - 20} more)" if len(problems) > 20 else "") + ".",
                        "Fix those lines and upload the whole file again; nothing was changed.")
    if not lines:
        raise UserError("The roster has a header but no people.", "Add one line per person below the header.")
    return lines


def import_roster(session: Session, actor: Account, course_name: str, lines: list[RosterLine],
                  link_hours: float) -> list[Imported]:
    """Creates missing users and enrolls everyone with the line's course role (the caller
    commits). The importer gives only roles below their own in the course (a site admin: any)
    and changes no one whose present role there is not below theirs; only a site admin starts
    a course (a site admin creates one apart, on the staff console). A one-time link is made for each new person and for each existing one the
    importer may act for (web/accounts.py may_act_for); others sign in as they do already."""
    course = session.scalar(select(Course).where(Course.name == course_name))
    if course is None:            # never made on the fly: a typo would start a course of its own
        raise UserError(f"There is no course called {course_name!r}.",
                        "Pick one of your courses; a site admin creates new courses on the staff console.",
                        400 if actor.is_admin else 403)
    course_id = course.id
    present = dict(session.execute(select(User.email, Enrollment.role).join(Enrollment, Enrollment.user_id == User.id)
                                   .where(Enrollment.course_id == course_id)).all())
    refused = [f"{line.email} as {line.role}" for line in lines if not actor.may_give(course_id, line.role)]
    refused += [f"{line.email} (now {present[line.email]})" for line in lines
                if line.email in present and not actor.may_give(course_id, present[line.email])]
    if refused:
        raise UserError("The roster was not imported: you may not enroll or change " + "; ".join(refused[:20]) + ".",
                        "A TA enrolls students, an instructor students and TAs; ask a site admin for the rest. "
                        "Nothing was changed.", 403)
    done = []
    for line in lines:
        user = session.scalar(select(User).where(User.email == line.email))
        created = user is None
        if created:
            user = User(email=line.email, name=line.name, role="user", active=True)
            session.add(user)
            session.flush()
        enrollment = session.scalar(select(Enrollment).where(Enrollment.user_id == user.id,
                                                             Enrollment.course_id == course.id))
        if enrollment is None:
            session.add(Enrollment(user_id=user.id, course_id=course.id, role=line.role))
        else:
            enrollment.role = line.role
        session.flush()
        token = new_login_token(session, user, link_hours) if created or may_act_for(session, actor, user) else None
        done.append(Imported(line.email, user.name, line.role, created, token))
    return done
