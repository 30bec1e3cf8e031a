"""The web site: students upload and read their reports, everyone sees the leaderboard, staff
run the course, scripts use the JSON API. `create_app(config)` builds one app; nothing is
created at import time. Views talk to store/ (models) and workers/ (enqueue), and to the
grader only through its public names."""
from __future__ import annotations

from flask import Flask
from werkzeug.middleware.proxy_fix import ProxyFix

from grader import render, vocabulary
from workers import enqueue

from . import db, errors, headers, settings, throttle
from .cookies import LoopbackAwareSessionInterface
from .extensions import csrf, login_manager


def create_app(config: dict | None = None) -> Flask:
    """config keys besides Flask's: DATABASE_URL (else store's default), ENGINE (an SQLAlchemy
    engine to use as is), TRUST_PROXY_HEADERS (behind a TLS-terminating proxy),
    LEADERBOARD_CACHE_SECONDS, LOGIN_LINK_HOURS; see web/settings.py for defaults."""
    app = Flask(__name__, instance_path=str(settings.instance_dir()))
    app.config.update(settings.build(config))
    if app.config.get("TRUST_PROXY_HEADERS"):
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=1, x_proto=1, x_host=1)
    app.session_interface = LoopbackAwareSessionInterface()
    db.init_app(app)
    if not app.config.get("RATELIMIT_STORAGE_URI"):
        from workers.broker import broker_url
        app.config["RATELIMIT_STORAGE_URI"] = throttle.storage_uri(broker_url())
    throttle.limiter.init_app(app)
    login_manager.init_app(app)
    csrf.init_app(app)
    errors.init_app(app)
    headers.init_app(app)
    app.jinja_env.filters["pts"] = render.format_points
    app.jinja_env.filters["duration"] = format_duration
    app.jinja_env.filters["since"] = enqueue.since
    app.jinja_env.globals.update(vocabulary.TEMPLATE_NAMES)     # pages name statuses, kinds, tiers by type
    _register_blueprints(app)
    return app


def format_duration(seconds) -> str:
    """'about 2 min 05 s' / 'about 40 s' (status.js writes the same)."""
    seconds = max(0, int(round(seconds)))
    return f"about {seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"about {seconds} s"


def _register_blueprints(app: Flask) -> None:
    from .api import bp as api_bp
    from .auth import bp as auth_bp
    from .leaderboard import bp as leaderboard_bp
    from .staff import bp as staff_bp
    from .student import bp as student_bp

    csrf.exempt(api_bp)               # bearer tokens, never cookies: no cross-site forgery to stop
    for bp in (auth_bp, student_bp, leaderboard_bp, staff_bp, api_bp):
        app.register_blueprint(bp)
