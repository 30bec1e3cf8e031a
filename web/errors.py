"""One user-safe error type and one place that turns errors into responses: JSON
{"error", "remedy"} under /api/, a page elsewhere. Internal exceptions never leak details."""
from __future__ import annotations

import logging

from flask import Flask, abort, current_app, jsonify, make_response, render_template, request
from flask_wtf.csrf import CSRFError
from werkzeug.exceptions import HTTPException

import grader

log = logging.getLogger(__name__)

REMEDIES = {
    400: "Check the request and try again.",
    401: "Sign in (or send a valid API token as 'Authorization: Bearer <token>').",
    403: "Ask course staff if you think you should have access.",
    404: "Check the address; the page may have been removed.",
    405: "Use the form or API method documented for this address.",
    413: "Upload at most 16 MiB: submit only the assignment's kernel files (or an archive of them).",
    429: "Wait a little and try again.",
    500: "Try again in a minute; if it keeps happening, tell course staff.",
}


class UserError(Exception):
    """Something the user can fix: what is wrong, how to fix it, and the HTTP status."""

    def __init__(self, message: str, remedy: str = "", status: int = 400):
        super().__init__(message)
        self.message = message
        self.remedy = remedy or REMEDIES.get(status, "")
        self.status = status


def respond(message: str, remedy: str, status: int):
    if request.path.startswith("/api/") or request.accept_mimetypes.best == "application/json":
        return jsonify(error=message, remedy=remedy), status
    return render_template("error.html", message=message, remedy=remedy, status=status), status


DRAIN_LIMIT = 64 * 1024 * 1024     # bodies up to this are read and dropped before a 413; beyond, the connection closes


def _refuse_oversized_bodies() -> None:
    """An upload over MAX_CONTENT_LENGTH gets the 413 page, whoever sends it: the body is read
    and dropped first, because a server that answers while the client is still sending resets
    the connection and the browser shows a network error instead of the page."""
    limit = current_app.config.get("MAX_CONTENT_LENGTH")
    length = request.content_length
    if limit is None or length is None or length <= limit:
        return
    if length <= DRAIN_LIMIT:
        stream = request.environ["wsgi.input"]
        left = length
        while left > 0:
            chunk = stream.read(min(1 << 16, left))
            if not chunk:
                break
            left -= len(chunk)
    abort(413)


def init_app(app: Flask) -> None:
    app.before_request(_refuse_oversized_bodies)
    @app.errorhandler(UserError)
    def _user_error(err: UserError):
        return respond(err.message, err.remedy, err.status)

    @app.errorhandler(grader.GraderInputError)
    def _grader_input(err):
        return respond(err.reason, err.remedy, 400)        # str(err) already holds the remedy

    @app.errorhandler(CSRFError)
    def _csrf(err: CSRFError):
        return respond(f"The form could not be accepted: {err.description}",
                       "Reload the page and submit the form again (forms expire when you sign out).", 400)

    @app.errorhandler(429)
    def _too_many(err: HTTPException):
        from .throttle import retry_after_seconds
        wait = retry_after_seconds()
        when = f"in {wait} s" if wait is not None and wait < 120 else \
            f"in {-(-wait // 60)} min" if wait is not None else "in a few minutes"
        response = make_response(respond(f"{err.description}", f"Try again {when}. Each attempt while "
                                         "you wait is refused too.", 429))
        if wait is not None:
            response.headers["Retry-After"] = str(wait)
        return response

    @app.errorhandler(HTTPException)
    def _http(err: HTTPException):
        status = err.code or 500
        message = {413: "The upload is larger than the 16 MiB the grader accepts."}.get(status, err.description)
        return respond(message, REMEDIES.get(status, ""), status)

    @app.errorhandler(Exception)
    def _internal(err: Exception):
        log.exception("unhandled error on %s %s", request.method, request.path)
        return respond("Something went wrong on our side.", REMEDIES[500], 500)
