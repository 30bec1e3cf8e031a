"""Roster import: a CSV of students (and staff) enrolled into a course, each given a one-time
login link. The whole file is checked first; one bad line imports nothing."""
from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from store.models import ROLES, Course, Enrollment, User

from .accounts import new_login_token
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
    token: str


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
        if role not in ROLES:
            problems.append(f"line {number}: role {role!r} is not one of {', '.join(ROLES)}")
        seen.add(email)
        lines.append(RosterLine(email, (row.get("name") or "").strip()[:200], role))
    if problems:
        raise UserError("The roster was not imported: " + "; ".join(problems[:20]) +
                        (f" (and {len(problems) - 20} more)" if len(problems) > 20 else "") + ".",
                        "Fix those lines and upload the whole file again; nothing was changed.")
    if not lines:
        raise UserError("The roster has a header but no people.", "Add one line per person below the header.")
    return lines


def import_roster(session: Session, course_name: str, lines: list[RosterLine], link_hours: float) -> list[Imported]:
    """Creates missing users, enrolls everyone, makes a login link each (the caller commits).
    Existing users keep their password and global role, unless the roster raises it."""
    course = session.scalar(select(Course).where(Course.name == course_name))
    if course is None:
        course = Course(name=course_name, leaderboard_visibility="signed_in")
        session.add(course)
        session.flush()
    done = []
    for line in lines:
        user = session.scalar(select(User).where(User.email == line.email))
        created = user is None
        if created:
            user = User(email=line.email, name=line.name, role=line.role, active=True)
            session.add(user)
            session.flush()
        elif ROLES.index(line.role) > ROLES.index(user.role):
            user.role = line.role
        enrollment = session.scalar(select(Enrollment).where(Enrollment.user_id == user.id,
                                                             Enrollment.course_id == course.id))
        if enrollment is None:
            session.add(Enrollment(user_id=user.id, course_id=course.id, role=line.role))
        else:
            enrollment.role = line.role
        done.append(Imported(line.email, user.name, line.role, created,
                             new_login_token(session, user, link_hours)))
    return done
