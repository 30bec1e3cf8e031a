"""Signed-in sessions kept on the server (store/models.py UserSession).

The session cookie holds a random token; only its SHA-256 is stored. Every request looks the
token up, so a session ends for good when its row is revoked: at logout, when the password
changes (every other session of the user), when the user or an admin signs the user out
everywhere, when the account is disabled, and 12 hours after sign-in at the latest."""
from __future__ import annotations

import datetime as dt
import secrets

from flask import request
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from store.models import ApiToken, User, UserSession

from .accounts import Account, account_for, now, token_hash

SEEN_EVERY = dt.timedelta(minutes=5)     # last_seen_at is coarse: polling a run's status does not write each time


def start(session: Session, user: User, lifetime: dt.timedelta) -> Account:
    """A new session for user (the caller commits); the Account to hand to login_user."""
    token = secrets.token_urlsafe(32)
    client = f"{request.remote_addr or '?'} {request.user_agent.string}"[:200]
    session.add(UserSession(user_id=user.id, token_hash=token_hash(token), expires_at=now() + lifetime,
                            client=client))
    return account_for(session, user, token)


def load(session: Session, token: str) -> Account | None:
    """The account of a live session token, or None (unknown, revoked, expired, user disabled)."""
    row = session.scalar(select(UserSession).where(UserSession.token_hash == token_hash(token)))
    if row is None or row.revoked_at is not None or row.expires_at <= now() or not row.user.active:
        return None
    if now() - row.last_seen_at > SEEN_EVERY:
        row.last_seen_at = now()
        session.commit()
    return account_for(session, row.user, token)


def end(session: Session, token: str, why: str) -> None:
    session.execute(update(UserSession).where(UserSession.token_hash == token_hash(token),
                                              UserSession.revoked_at.is_(None))
                    .values(revoked_at=now(), revoked_why=why))


def end_all(session: Session, user_id: int, why: str, keep: str | None = None,
            api_tokens: bool = False) -> int:
    """Ends every live session of the user but `keep` (a token), and with api_tokens their API
    tokens too; returns how many sessions ended. The caller commits."""
    query = update(UserSession).where(UserSession.user_id == user_id, UserSession.revoked_at.is_(None))
    if keep:
        query = query.where(UserSession.token_hash != token_hash(keep))
    ended = session.execute(query.values(revoked_at=now(), revoked_why=why)).rowcount
    if api_tokens:
        session.execute(update(ApiToken).where(ApiToken.user_id == user_id, ApiToken.revoked_at.is_(None))
                        .values(revoked_at=now()))
    return ended


def live(session: Session, user_id: int) -> list[UserSession]:
    return list(session.scalars(select(UserSession).where(UserSession.user_id == user_id,
                                                          UserSession.revoked_at.is_(None),
                                                          UserSession.expires_at > now())
                                .order_by(UserSession.created_at.desc())))
