"""Who is signed in: passwords, one-time login links and API tokens.

Passwords are hashed with werkzeug's scrypt. Login links and API tokens are 256-bit random
strings shown once; only their SHA-256 is stored (a fast hash is right for secrets that long:
nothing to brute-force), so a copy of the database signs nobody in."""
from __future__ import annotations

import datetime as dt
import hashlib
import secrets

from flask_login import UserMixin
from sqlalchemy import select, update
from sqlalchemy.orm import Session
from werkzeug.security import check_password_hash, generate_password_hash

from store.models import ApiToken, LoginToken, User

STAFF_ROLES = ("ta", "admin")
MIN_PASSWORD_LENGTH = 10


class Account(UserMixin):
    """The signed-in user as Flask-Login sees it: a detached snapshot of the users row."""

    def __init__(self, user: User):
        self.id = user.id
        self.email = user.email
        self.name = user.name
        self.role = user.role
        self.nickname = user.nickname

    @property
    def is_staff(self) -> bool:
        return self.role in STAFF_ROLES

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    @property
    def display_name(self) -> str:
        return self.name or self.email


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
    """A fresh one-time token for user (the caller commits); returns the token itself."""
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
               LoginToken.expires_at > now())
        .values(used_at=now())
        .returning(LoginToken.user_id)).first()
    if used is None:
        return None
    user = session.get(User, used.user_id)
    return user if user is not None and user.active else None


# ----- API tokens -----

def new_api_token(session: Session, user: User, label: str) -> str:
    token = "nkig_" + secrets.token_urlsafe(32)
    session.add(ApiToken(user_id=user.id, token_hash=token_hash(token), label=label[:100]))
    return token


def user_for_api_token(session: Session, token: str) -> User | None:
    row = session.scalar(select(ApiToken).where(ApiToken.token_hash == token_hash(token),
                                                ApiToken.revoked_at.is_(None)))
    if row is None or not row.user.active:
        return None
    if row.last_used_at is None or now() - row.last_used_at > dt.timedelta(minutes=5):
        row.last_used_at = now()      # coarse, so polling the status API does not write each time
    return row.user
