"""Session cookies marked Secure unless the site is reached over plain HTTP on loopback.

Browsers drop Secure cookies sent over http://, so a fixed Secure flag would break
`grader serve` on 127.0.0.1, and a fixed non-Secure one would leak sessions on a real network.
An explicit SESSION_COOKIE_SECURE (True/False) in the config overrides the choice."""
from __future__ import annotations

from flask import Flask, has_request_context, request
from flask.sessions import SecureCookieSessionInterface

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]", "::1")


def is_plain_loopback() -> bool:
    host = request.host.rsplit(":", 1)[0] if not request.host.startswith("[") else request.host.split("]")[0] + "]"
    return not request.is_secure and host in LOOPBACK_HOSTS


class LoopbackAwareSessionInterface(SecureCookieSessionInterface):
    def get_cookie_secure(self, app: Flask) -> bool:
        explicit = app.config.get("SESSION_COOKIE_SECURE_OVERRIDE")
        if explicit is not None:
            return bool(explicit)
        if not has_request_context():
            return True
        return not is_plain_loopback()
