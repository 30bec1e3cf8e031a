"""One user-safe error type and one place that turns errors into responses: JSON
{"error", "remedy"} under /api/, a page elsewhere. Internal exceptions never leak details."""
from __future__ import annotations

import logging

from flask import Flask, jsonify, render_template, request
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
    413: "Upload at most 16 MiB: submit only conv2d.py, kernels.py or the asst4 archive.",
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


def init_app(app: Flask) -> None:
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

    @app.errorhandler(HTTPException)
    def _http(err: HTTPException):
        status = err.code or 500
        message = {413: "The upload is larger than the 16 MiB the grader accepts."}.get(status, err.description)
        return respond(message, REMEDIES.get(status, ""), status)

    @app.errorhandler(Exception)
    def _internal(err: Exception):
        log.exception("unhandled error on %s %s", request.method, request.path)
        return respond("Something went wrong on our side.", REMEDIES[500], 500)
