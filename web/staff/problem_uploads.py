"""Problem folders a site admin uploads (issue 45 item 3): the folder's reference.py is course
code that runs on the grader's trusted side, so only a site admin may upload one, never a TA, an
instructor or a student. The upload is checked as `grader problem check` checks a folder (its
schema, its reference, its tolerances and every solution and starter graded on the simulator),
and only a folder without a surprise is stored, in the database under its sha256
(store/problem_folders.py), where every worker on any machine finds it when a spec pins it.

The site only unpacks the archive (a wrong file is said at once) and queues the check as a
staff task (workers/staff_tasks.py): the check runs course code and grades kernels, which takes
as long as the folder's tests do and belongs on a worker, never in a web request."""
from __future__ import annotations

from flask import flash, redirect, render_template, request, url_for
from flask_login import current_user
from sqlalchemy import select

from grader.errors import GraderInputError
from grader.problems import archive
from store import problem_folders
from store.models import ProblemFolder, StaffTask
from workers import staff_tasks

from .. import db
from ..errors import UserError
from ..forms import SimpleActionForm
from . import bp


def _admin_only() -> None:
    if not current_user.is_admin:
        raise UserError("Only a site admin uploads problem folders: their reference.py runs on the grader's "
                        "trusted side.", "Ask a site admin to upload the folder, or an operator to install it "
                        "(NKI_GRADER_PROBLEM_DIRS).", 403)


RECENT_CHECKS = 10        # the page lists this many of the latest uploads' checks


def _page(status: int = 200, error: UserError | None = None):
    session = db.session()
    rows = session.scalars(select(ProblemFolder).order_by(ProblemFolder.uploaded_at.desc())).all()
    recent = session.scalars(select(StaffTask).where(StaffTask.kind == "problem_check")
                             .order_by(StaffTask.id.desc()).limit(RECENT_CHECKS)).all()
    return render_template("staff/problems.html", folders=rows, checks=recent, form=SimpleActionForm(),
                           error=error, stored=request.args.get("stored"), check_rows=check_rows), status


def check_rows(text: str) -> dict | None:
    """A check table's text (grader.problems.check.table) cut into its rows' cells at the header's
    column starts, for a page table whose cells wrap (the text's "got" column runs past a laptop
    window); None when the text is not such a table (the page shows it as it is)."""
    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if line.split() == ["check", "expected", "got"]), None)
    if at is None:
        return None
    starts = [lines[at].index(word) for word in ("check", "expected", "got")]
    rows = []
    for line in lines[at + 1:]:
        if not line.strip():
            break
        rows.append([line[a:b].strip() for a, b in zip([0, *starts], [*starts, None])])
    return {"intro": [line for line in lines[:at] if line.strip()], "rows": rows, "summary": lines[-1]}


@bp.route("/problems", methods=["GET"])
def problems_page():
    _admin_only()
    return _page()


@bp.route("/problems", methods=["POST"])
def upload_problem():
    _admin_only()
    form = SimpleActionForm()
    if not form.validate_on_submit():
        raise UserError("The upload was not accepted (its form token is missing or stale).", "Reload the page and "
                        "upload again.")
    upload = request.files.get("folder")
    if upload is None or not upload.filename:
        raise UserError("No file was received.", "Choose a .zip or .tar.gz of the problem folder, then press Upload.")
    data = upload.read(archive.MAX_ARCHIVE_BYTES + 1)
    filename = upload.filename.rsplit("/", 1)[-1]
    with archive.scratch() as scratch:     # a file that is no problem folder's archive is said now, not later
        try:
            archive.unpack_upload(data, filename, scratch)
        except GraderInputError as err:
            return _page(400, error=UserError(f"The folder was not stored: {err.reason}", err.remedy))
    task = staff_tasks.start_problem_check(db.session(), data, filename, current_user.id)
    return redirect(url_for("staff.task_page", task_id=task.id), 303)


@bp.route("/problems/<sha>/delete", methods=["POST"])
def delete_problem(sha: str):
    """Remove a stored folder no spec pins (an upload nobody uses, a version replaced before any
    assignment named it); a pinned one stays, and the page says which assignments pin it."""
    _admin_only()
    if not SimpleActionForm().validate_on_submit():
        raise UserError("The removal was not accepted (its form token is missing or stale).",
                        "Reload the page and press Remove again.")
    session = db.session()
    try:
        row = problem_folders.delete(session, sha)
    except problem_folders.FolderPinned as pinned:
        return _page(409, error=UserError(
            f"The folder {sha[:12]} was not removed: {', '.join(pinned.pins)} pin{'s' if len(pinned.pins) == 1 else ''} "
            f"it, and runs graded under a spec are regraded and rescored with its folder.", "A folder stays while any stored spec pins it; a new version of the "
            "folder is a new upload, which a new spec pins."))
    if row is None:
        raise UserError(f"There is no stored folder {sha[:12]}.", "Pick one from the list of stored folders.", 404)
    session.commit()
    flash(f"Problem folder {row.name} ({sha[:12]}) removed: no spec pinned it.", "success")
    return redirect(url_for("staff.problems_page"), 303)
