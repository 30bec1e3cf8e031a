"""Who is signed in: passwords, one-time login links and API tokens.

Passwords are hashed with werkzeug's scrypt. Login links and API tokens are 256-bit random
strings shown once; only their SHA-256 is stored (a fast hash is right for secrets that long:
nothing to brute-force), so a copy of the database signs nobody in."""
from __future__ import annotations

import datetime as dt
import hashlib
import secrets

from flask import g, request
from flask_login import UserMixin
from sqlalchemy import select, update
from sqlalchemy.orm import Session
from werkzeug.security import check_password_hash, generate_password_hash

from store.models import ApiToken, Enrollment, LoginToken, User

MIN_PASSWORD_LENGTH = 12          # OWASP ASVS 4 V2.1.1
# what each course role may do is ranked: staff of a course act on people below them in it
COURSE_RANK = {"student": 0, "ta": 1, "instructor": 2}
STAFF_ROLES = ("ta", "instructor")


class Account(UserMixin):
    """The signed-in user as Flask-Login sees it: a detached snapshot of the users row and of
    the user's role in each course. `session_token` is the server-side session it came from
    (web/sessions.py); Flask-Login keeps that, never the user id, in the cookie."""

    def __init__(self, user: User, course_roles: dict[int, str], session_token: str | None = None):
        self.id = user.id
        self.email = user.email
        self.name = user.name
        self.nickname = user.nickname
        self.is_admin = user.role == "admin"
        self.course_roles = dict(course_roles)
        self.session_token = session_token

    def get_id(self) -> str:
        return self.session_token or ""

    @property
    def staff_course_ids(self) -> frozenset[int]:
        return frozenset(c for c, role in self.course_roles.items() if role in STAFF_ROLES)

    @property
    def is_staff(self) -> bool:
        """Staff of some course (or a site admin): may open the staff console, which then shows
        only the courses where they are staff."""
        return self.is_admin or bool(self.staff_course_ids)

    def is_staff_of(self, course_id: int) -> bool:
        return self.is_admin or self.course_roles.get(course_id) in STAFF_ROLES

    def is_instructor_of(self, course_id: int) -> bool:
        return self.is_admin or self.course_roles.get(course_id) == "instructor"

    def may_give(self, course_id: int | None, role: str) -> bool:
        """May this user enroll someone as `role` in the course (None: a course not made yet)?
        Admins: any role anywhere; an instructor: students and TAs of their course; a TA:
        students of theirs."""
        if self.is_admin:
            return True
        mine = self.course_roles.get(course_id) if course_id is not None else None
        return mine in STAFF_ROLES and COURSE_RANK[role] < COURSE_RANK[mine]

    @property
    def display_name(self) -> str:
        return self.name or self.email


def course_roles(session: Session, user_id: int) -> dict[int, str]:
    return dict(session.execute(select(Enrollment.course_id, Enrollment.role).where(Enrollment.user_id == user_id)).all())


def account_for(session: Session, user: User, session_token: str | None = None) -> Account:
    return Account(user, course_roles(session, user.id), session_token)


def may_act_for(session: Session, actor: Account, target: User, theirs: dict[int, str] | None = None) -> bool:
    """May `actor` get a sign-in link for `target` (which is acting as them)? Admins may for
    anyone. Anyone else only for a non-admin enrolled somewhere, who in every course they are
    in holds a role the actor could give there: a TA of one course must not become, through a
    student who is a TA elsewhere, staff of another course. `theirs`: the target's course roles,
    when the caller has them already."""
    if actor.is_admin:
        return True
    if target.role == "admin" or target.id == actor.id:
        return False
    theirs = course_roles(session, target.id) if theirs is None else theirs
    return bool(theirs) and all(actor.may_give(course, role) for course, role in theirs.items())


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def set_password(user: User, password: str) -> None:
    user.password_hash = generate_password_hash(password)


def password_problem(password: str, confirm: str) -> str | None:
    if len(password) < MIN_PASSWORD_LENGTH:
        return f"The password must have at least {MIN_PASSWORD_LENGTH} characters."
    if password != confirm:
        return "The two passwords differ; type the same password twice."
    return None


def check_password(session: Session, email: str, password: str) -> User | None:
    user = session.scalar(select(User).where(User.email == email.strip().lower()))
    if user is None or not user.active or not user.password_hash:
        # still spend the hashing time, so a wrong address answers as slowly as a wrong password
        check_password_hash(_DUMMY_HASH, password)
        return None
    return user if check_password_hash(user.password_hash, password) else None


_DUMMY_HASH = generate_password_hash("not a real password")


# ----- one-time login links -----

def new_login_token(session: Session, user: User, hours: float) -> str:
    """A fresh one-time token for user (the caller commits); returns the token itself. The
    user's older unused links stop working: only the newest link handed out signs in."""
    revoke_login_tokens(session, user.id)
    token = secrets.token_urlsafe(32)
    session.add(LoginToken(user_id=user.id, token_hash=token_hash(token),
                           expires_at=now() + dt.timedelta(hours=hours)))
    return token


def use_login_token(session: Session, token: str) -> User | None:
    """The token's user if the token is known, unexpired and unused; marks it used. The
    UPDATE ... WHERE used_at IS NULL makes two simultaneous clicks sign in only once."""
    used = session.execute(
        update(LoginToken)
        .where(LoginToken.token_hash == token_hash(token), LoginToken.used_at.is_(None),
               LoginToken.revoked_at.is_(None), LoginToken.expires_at > now())
        .values(used_at=now())
        .returning(LoginToken.user_id)).first()
    if used is None:
        return None
    revoke_login_tokens(session, used.user_id)       # any other link of theirs still out there
    user = session.get(User, used.user_id)
    return user if user is not None and user.active else None


def revoke_login_tokens(session: Session, user_id: int) -> None:
    session.execute(update(LoginToken).where(LoginToken.user_id == user_id, LoginToken.used_at.is_(None),
                                             LoginToken.revoked_at.is_(None)).values(revoked_at=now()))


# ----- API tokens -----

def new_api_token(session: Session, user: User, label: str) -> str:
    token = "nkig_" + secrets.token_urlsafe(32)
    session.add(ApiToken(user_id=user.id, token_hash=token_hash(token), label=label[:100]))
    return token


def bearer_user(session: Session) -> User | None:
    """The user of the request's `Authorization: Bearer` token, looked up once per request (the
    upload limit keys on it before the view authenticates with it); None without a valid one."""
    if "bearer_user" not in g:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        found = scheme.lower() == "bearer" and token.strip()
        g.bearer_user = user_for_api_token(session, token.strip()) if found else None
    return g.bearer_user


def user_for_api_token(session: Session, token: str) -> User | None:
    row = session.scalar(select(ApiToken).where(ApiToken.token_hash == token_hash(token),
                                                ApiToken.revoked_at.is_(None)))
    if row is None or not row.user.active:
        return None
    if row.last_used_at is None or now() - row.last_used_at > dt.timedelta(minutes=5):
        row.last_used_at = now()      # coarse, so polling the status API does not write each time
    return row.user
