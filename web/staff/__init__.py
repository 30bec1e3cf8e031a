"""The TA console: every submission and report (with logs and the private seed), reruns,
flags, thresholds and rescoring, extensions, exports, the roster, the nightly regression and
the queue. Every view here is for staff (TA or admin) only."""
from __future__ import annotations

from flask import Blueprint
from flask_login import current_user, login_required

from ..errors import UserError

bp = Blueprint("staff", __name__, url_prefix="/staff")


@bp.before_request
@login_required
def _staff_only():
    if not current_user.is_staff:
        raise UserError("The staff console is for course staff.", "Sign in with a TA or admin account.", 403)


from . import assignments, console, nightly, problem_uploads, roster_views, submissions, tasks  # noqa: E402,F401  (register routes)
