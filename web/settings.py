"""The app's configuration: defaults, then the caller's dict. Secrets never have a default
that is the same on every installation: without one given, a random key is made once and
kept in the instance folder (shared by every gunicorn worker of this installation)."""
from __future__ import annotations

import os
import secrets
from datetime import timedelta
from pathlib import Path

DEFAULTS = {
    "MAX_CONTENT_LENGTH": 17 * 1024 * 1024,   # the grader refuses uploads over 16 MiB with its own message
    "SESSION_COOKIE_HTTPONLY": True,
    "SESSION_COOKIE_SECURE_OVERRIDE": None,   # None: Secure unless plain http on loopback (web/cookies.py)
    "SESSION_COOKIE_SAMESITE": "Lax",
    "REMEMBER_COOKIE_HTTPONLY": True,
    "REMEMBER_COOKIE_SAMESITE": "Lax",
    "PERMANENT_SESSION_LIFETIME": timedelta(hours=12),
    "WTF_CSRF_TIME_LIMIT": None,              # the token lives as long as the session
    "LOGIN_LINK_HOURS": 72,                   # one-time login links from a roster import
    "LEADERBOARD_CACHE_SECONDS": 10.0,        # safety-net recompute; every write that changes standings moves its stamp
    "LEADERBOARD_PAGE_SIZE": 100,
    "STATUS_POLL_MS": 1000,
    # rate limits (web/throttle.py); counts live in the service's Redis unless RATELIMIT_STORAGE_URI says
    "RATELIMIT_ENABLED": True,                # per app: the limiter is one object shared by every app in a process
    "RATELIMIT_STRATEGY": "moving-window",
    "RATELIMIT_HEADERS_ENABLED": True,
    "RATELIMIT_SIGN_IN_PER_ACCOUNT": "5 per minute; 20 per hour",    # failed sign-ins naming one account
    "RATELIMIT_SIGN_IN_PER_ADDRESS": "20 per minute; 100 per hour",  # failed sign-ins from one address
    "RATELIMIT_LOGIN_LINKS": "10 per minute; 50 per hour",           # one-time links tried from one address
    "RATELIMIT_UPLOADS": "10 per minute; 60 per hour",               # uploads per person, accepted or refused
}


def instance_dir() -> Path:
    return Path(os.environ.get("NKI_GRADER_HOME", "instance")).resolve()


def secret_key() -> str:
    """NKI_GRADER_SECRET_KEY, else a key generated once into the instance folder."""
    if os.environ.get("NKI_GRADER_SECRET_KEY"):
        return os.environ["NKI_GRADER_SECRET_KEY"]
    folder = instance_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "secret_key"
    if not path.exists():
        # written whole under a temporary name, then linked into place: a worker starting at
        # the same time either wins the link or reads the winner's complete key
        tmp = folder / f".secret_key.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    return path.read_text().strip()


def _env_flag(name: str) -> bool:
    """A yes/no setting from the environment (docker-compose.yml passes TRUST_PROXY_HEADERS so)."""
    raw = os.environ.get(name, "").strip().lower()
    if raw in ("", "0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    raise ValueError(f"{name}={os.environ[name]!r} is neither yes nor no: give 1 (the site is behind a proxy "
                     f"that sets X-Forwarded-For and -Proto) or 0")


def build(config: dict | None) -> dict:
    merged = dict(DEFAULTS)
    # gunicorn's `web:create_app()` passes no config: behind a TLS proxy (Compose's web) the
    # environment says to trust its headers, else every client would share the proxy's address
    merged["TRUST_PROXY_HEADERS"] = _env_flag("TRUST_PROXY_HEADERS")
    merged.update(config or {})
    if not merged.get("SECRET_KEY"):
        merged["SECRET_KEY"] = secret_key()
    return merged
