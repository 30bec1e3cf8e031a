"""Course submit tokens: `grader course-token create|list|revoke`, and finding a token's course.

A course submit token lets an outside system (a Gradescope autograder in service mode) submit
for the students of one course through web/course_api.py: those on its roster, or, for a token
created with --create-students, anyone not yet on the service as well (made a student of the
course); never for a site admin or any course's staff. It starts at most `runs_per_hour` grades
an hour for the course. It is 256 random bits shown once;
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


def new_token(session, course, label: str = "", *, creates_students: bool = False,
              runs_per_hour: int | None = None) -> str:
    from store.models import GRADESCOPE_RUNS_PER_HOUR, CourseSubmitToken
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    session.add(CourseSubmitToken(course_id=course.id, token_hash=_hash(token), label=label[:100],
                                  creates_students=creates_students,
                                  runs_per_hour=GRADESCOPE_RUNS_PER_HOUR if runs_per_hour is None else runs_per_hour))
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
                       description="Create, list, change or revoke a course's submit tokens in this service's "
                                   "database (DATABASE_URL, else the embedded one). A token lets its holder submit "
                                   "for the students on the course's roster (never for staff or site admins); it "
                                   "is printed once.")
    commands = p.add_subparsers(dest="token_command", required=True)
    c = commands.add_parser("create", help="a new token for a course (printed once)")
    c.add_argument("--course", required=True, help="the course's name")
    c.add_argument("--label", default="gradescope", help="what it is for (default: gradescope)")
    _policy_arguments(c)
    c.set_defaults(func=_create)
    st = commands.add_parser("set", help="change a token's student policy or hourly limit")
    st.add_argument("id", type=int, help="the token's id, as `grader course-token list` shows it")
    _policy_arguments(st)
    st.set_defaults(func=_set)
    ls = commands.add_parser("list", help="a course's tokens (never the tokens themselves)")
    ls.add_argument("--course", required=True, help="the course's name")
    ls.set_defaults(func=_list)
    r = commands.add_parser("revoke", help="revoke a token by its id (from list)")
    r.add_argument("id", type=int, help="the token's id, as `grader course-token list` shows it")
    r.set_defaults(func=_revoke)


def _policy_arguments(parser) -> None:
    from store.models import GRADESCOPE_RUNS_PER_HOUR
    who = parser.add_mutually_exclusive_group()
    who.add_argument("--create-students", dest="creates_students", action="store_const", const=True,
                     help="an email the service does not know becomes a new student of the course "
                          "(default: only students already on the course's roster are graded)")
    who.add_argument("--roster-only", dest="creates_students", action="store_const", const=False,
                     help="only students already on the course's roster are graded (the default)")
    parser.add_argument("--runs-per-hour", type=_positive, default=None, metavar="N",
                        help=f"grades this token may start an hour for the course, all its students together "
                             f"(default {GRADESCOPE_RUNS_PER_HOUR})")


def _positive(raw: str) -> int:
    import argparse
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a whole number of runs >= 1")
    return value


def _policy(row) -> str:
    who = "creates students" if row.creates_students else "roster only"
    return f"{who}, {row.runs_per_hour} runs/hour"


def _found_instance() -> bool:
    """The running service's instance (as `grader admin-link` finds it), never a new empty one
    made where the command happens to run."""
    from .cli import talk_to_existing_instance
    return talk_to_existing_instance() is not None


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
    if not _found_instance():
        return 2
    from store import session_scope, upgrade
    upgrade()
    with session_scope() as s:
        course = _course(s, args.course)
        if course is None:
            return 2
        token = new_token(s, course, args.label, creates_students=bool(args.creates_students),
                          runs_per_hour=args.runs_per_hour)
    print(token)
    print(f"course {args.course}: keep this token secret; build the autograder with "
          "`grader gradescope build --mode service --server URL` and NKI_GRADER_COURSE_TOKEN set to it",
          file=sys.stderr)
    return 0


def _list(args) -> int:
    if not _found_instance():
        return 2
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
            print(f"{row.id}\t{row.label}\tcreated {row.created_at:%Y-%m-%d}\t{used}\t{_policy(row)}\t{state}")
    return 0


def _token(session, token_id: int):
    """The token of that id, or None after saying there is none and where the ids are."""
    from store.models import CourseSubmitToken
    row = session.get(CourseSubmitToken, token_id)
    if row is None:
        print(f"grader: no course token {token_id}; `grader course-token list --course NAME` shows the ids",
              file=sys.stderr)
    return row


def _set(args) -> int:
    if not _found_instance():
        return 2
    from store import session_scope, upgrade
    upgrade()
    with session_scope() as s:
        row = _token(s, args.id)
        if row is None:
            return 2
        if args.creates_students is not None:
            row.creates_students = args.creates_students
        if args.runs_per_hour is not None:
            row.runs_per_hour = args.runs_per_hour
        policy = _policy(row)
    print(f"course token {args.id}: {policy}")
    return 0


def _revoke(args) -> int:
    if not _found_instance():
        return 2
    from store import session_scope, upgrade
    upgrade()
    with session_scope() as s:
        row = _token(s, args.id)
        if row is None:
            return 2
        row.revoked_at = row.revoked_at or dt.datetime.now(dt.timezone.utc)
    print(f"course token {args.id} revoked")
    return 0
