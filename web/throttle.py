"""Rate limits on what an attacker would repeat: sign-in (per account and per client address),
one-time links, uploads (counted whether the upload is accepted or refused). Flask-Limiter
keeps the counts in the service's Redis, so every gunicorn worker sees the same ones.

The limits are configuration (RATELIMIT_* in web/settings.py); the 429 page says when to try
again (web/errors.py reads the breached limit's reset time)."""
from __future__ import annotations

import datetime as dt

from flask import current_app, request
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from flask_login import current_user

limiter = Limiter(key_func=get_remote_address, default_limits=[], headers_enabled=True)


def storage_uri(redis_url: str) -> str:
    """The limits library's spelling of a broker URL (kombu's unix-socket form differs)."""
    if redis_url.startswith("redis+socket://"):
        return "redis+unix://" + redis_url[len("redis+socket://"):]
    return redis_url


def _account_key() -> str:
    """The account a sign-in names (lower-cased, as stored), whatever address it comes from."""
    return "account:" + (request.form.get("email") or "").strip().lower()[:320]


def _uploader_key() -> str:
    """Uploads count per person: the signed-in user, or the API token's user (looked up here:
    limits are checked before the view authenticates), else the client address."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        from . import accounts, db
        user = accounts.bearer_user(db.session())
        if user is not None:
            return f"user:{user.id}"
    elif current_user.is_authenticated:
        return f"user:{current_user.id}"
    return "address:" + (get_remote_address() or "")


def _failed_sign_in(response) -> bool:
    return response.status_code == 401


def _limit(name: str):
    return lambda: current_app.config[name]


# Decorators for the views. Sign-in counts only failures, so a person who types the password
# right is never slowed; once an account or an address is over, even the right password waits.
sign_in_per_account = limiter.limit(_limit("RATELIMIT_SIGN_IN_PER_ACCOUNT"), key_func=_account_key,
                                    methods=["POST"], deduct_when=_failed_sign_in,
                                    error_message="Too many failed sign-ins for this account.")
sign_in_per_address = limiter.limit(_limit("RATELIMIT_SIGN_IN_PER_ADDRESS"), methods=["POST"],
                                    deduct_when=_failed_sign_in,
                                    error_message="Too many failed sign-ins from your address.")
login_links = limiter.limit(_limit("RATELIMIT_LOGIN_LINKS"), methods=["POST"],
                            error_message="Too many sign-in link attempts from your address.")
uploads = limiter.limit(_limit("RATELIMIT_UPLOADS"), key_func=_uploader_key, methods=["POST"],
                        error_message="Too many uploads.")


def retry_after_seconds() -> int | None:
    """Seconds until the limit this request broke lets requests through again."""
    breached = limiter.current_limit
    if breached is None:
        return None
    return max(1, int(breached.reset_at - dt.datetime.now(dt.timezone.utc).timestamp()) + 1)
