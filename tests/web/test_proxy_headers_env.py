"""docker-compose.yml's web runs `web:create_app()` with no config and passes TRUST_PROXY_HEADERS
in the environment: behind a TLS proxy the site must then see each client's own address and
scheme (the per-address sign-in throttle would otherwise count every user as the proxy), and
without it must not believe a client's forged headers."""
from __future__ import annotations

import pytest
from flask import request

FORWARDED = {"X-Forwarded-For": "203.0.113.9", "X-Forwarded-Proto": "https"}


def _seen(app) -> str:
    @app.route("/test-whoami")
    def whoami():
        return f"{request.remote_addr} {request.scheme}"
    return app.test_client().get("/test-whoami", headers=FORWARDED, environ_base={"REMOTE_ADDR": "10.0.0.2"}).text


def _app(db, tmp_path):
    import web
    return web.create_app({"TESTING": True, "SECRET_KEY": "test-secret", "DATABASE_URL": db.get_bind().url
                           .render_as_string(hide_password=False)})


def test_the_environment_says_to_trust_the_proxy(db, broker, tmp_path, monkeypatch):
    monkeypatch.setenv("NKI_GRADER_HOME", str(tmp_path / "instance"))
    monkeypatch.setenv("TRUST_PROXY_HEADERS", "1")
    assert _seen(_app(db, tmp_path)) == "203.0.113.9 https"
    monkeypatch.setenv("TRUST_PROXY_HEADERS", "0")                   # compose's default
    assert _seen(_app(db, tmp_path)) == "10.0.0.2 http"


def test_a_value_that_is_neither_yes_nor_no_is_refused(db, broker, tmp_path, monkeypatch):
    monkeypatch.setenv("NKI_GRADER_HOME", str(tmp_path / "instance"))
    monkeypatch.setenv("TRUST_PROXY_HEADERS", "maybe")
    with pytest.raises(ValueError, match="TRUST_PROXY_HEADERS='maybe' is neither yes nor no"):
        _app(db, tmp_path)
