"""Course submit tokens: `grader course-token create|list|revoke`, and finding a token's course.

A course submit token lets an outside system (a Gradescope autograder in service mode) submit
for any student of one course through web/course_api.py. It is 256 random bits shown once;
only its SHA-256 is stored (a fast hash is right for a secret that long), so a copy of the
database submits for nobody."""
from __future__ import annotations

import datetime as dt
import hashlib
import secrets
import sys

TOKEN_PREFIX = "nkic_"


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token(session, course, label: str = "") -> str:
    from store.models import CourseSubmitToken
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    session.add(CourseSubmitToken(course_id=course.id, token_hash=_hash(token), label=label[:100]))
    return token


def course_for_token(session, token: str):
    """The token's row if it is known and not revoked (its last use noted), else None."""
    from sqlalchemy import select
    from store.models import CourseSubmitToken
    row = session.scalar(select(CourseSubmitToken).where(CourseSubmitToken.token_hash == _hash(token),
                                                         CourseSubmitToken.revoked_at.is_(None)))
    if row is not None:
        row.last_used_at = dt.datetime.now(dt.timezone.utc)
    return row


def register(sub) -> None:
    p = sub.add_parser("course-token", help="course submit tokens (a Gradescope autograder in service mode)",
                       description="Create, list or revoke a course's submit tokens in this service's database "
                                   "(DATABASE_URL, else the embedded one). A token lets its holder submit for any "
                                   "student of the course; it is printed once.")
    commands = p.add_subparsers(dest="token_command", required=True)
    c = commands.add_parser("create", help="a new token for a course (printed once)")
    c.add_argument("--course", required=True, help="the course's name")
    c.add_argument("--label", default="gradescope", help="what it is for (default: gradescope)")
    c.set_defaults(func=_create)
    ls = commands.add_parser("list", help="a course's tokens (never the tokens themselves)")
    ls.add_argument("--course", required=True, help="the course's name")
    ls.set_defaults(func=_list)
    r = commands.add_parser("revoke", help="revoke a token by its id (from list)")
    r.add_argument("id", type=int, help="the token's id, as `grader course-token list` shows it")
    r.set_defaults(func=_revoke)


def _course(session, name: str):
    from sqlalchemy import select
    from store.models import Course
    course = session.scalar(select(Course).where(Course.name == name))
    if course is None:
        names = ", ".join(session.scalars(select(Course.name).order_by(Course.name))) or "none yet"
        print(f"grader: no course named {name!r} (have: {names}); create it on the site's staff console first",
              file=sys.stderr)
    return course


def _create(args) -> int:
    from store import session_scope, upgrade
    upgrade()
    with session_scope() as s:
        course = _course(s, args.course)
        if course is None:
            return 2
        token = new_token(s, course, args.label)
    print(token)
    print(f"course {args.course}: keep this token secret; build the autograder with "
          "`grader gradescope build --mode service --server URL` and NKI_GRADER_COURSE_TOKEN set to it",
          file=sys.stderr)
    return 0


def _list(args) -> int:
    from sqlalchemy import select
    from store import session_scope, upgrade
    from store.models import CourseSubmitToken
    upgrade()
    with session_scope() as s:
        course = _course(s, args.course)
        if course is None:
            return 2
        for row in s.scalars(select(CourseSubmitToken).where(CourseSubmitToken.course_id == course.id)
                             .order_by(CourseSubmitToken.id)):
            state = f"revoked {row.revoked_at:%Y-%m-%d}" if row.revoked_at else "active"
            used = f"last used {row.last_used_at:%Y-%m-%d %H:%M}" if row.last_used_at else "never used"
            print(f"{row.id}\t{row.label}\tcreated {row.created_at:%Y-%m-%d}\t{used}\t{state}")
    return 0


def _revoke(args) -> int:
    from store import session_scope, upgrade
    from store.models import CourseSubmitToken
    upgrade()
    with session_scope() as s:
        row = s.get(CourseSubmitToken, args.id)
        if row is None:
            print(f"grader: no course token {args.id}", file=sys.stderr)
            return 2
        row.revoked_at = row.revoked_at or dt.datetime.now(dt.timezone.utc)
    print(f"course token {args.id} revoked")
    return 0
