"""Problem folders a site admin uploads (issue 45 item 3): the folder's reference.py is course
code that runs on the grader's trusted side, so only a site admin may upload one, never a TA, an
instructor or a student. The upload is checked as `grader problem check` checks a folder (its
schema, its reference, its tolerances and every solution and starter graded on the simulator),
and only a folder without a surprise is stored, in the database under its sha256
(store/problem_folders.py), where every worker on any machine finds it when a spec pins it."""
from __future__ import annotations

from flask import flash, redirect, render_template, request, url_for
from flask_login import current_user
from sqlalchemy import select

from grader.errors import GraderInputError
from grader.problems import archive
from grader.problems import check as checks
from store import problem_folders
from store.models import ProblemFolder

from .. import db
from ..errors import UserError
from ..forms import SimpleActionForm
from . import bp


def _admin_only() -> None:
    if not current_user.is_admin:
        raise UserError("Only a site admin uploads problem folders: their reference.py runs on the grader's "
                        "trusted side.", "Ask a site admin to upload the folder, or an operator to install it "
                        "(NKI_GRADER_PROBLEM_DIRS).", 403)


def _page(status: int = 200, table: str | None = None, error: UserError | None = None, surprises=()):
    rows = db.session().scalars(select(ProblemFolder).order_by(ProblemFolder.uploaded_at.desc())).all()
    return render_template("staff/problems.html", folders=rows, form=SimpleActionForm(), table=table,
                           error=error, surprises=surprises, stored=request.args.get("stored"),
                           check_rows=_check_rows), status


def _check_rows(text: str) -> dict | None:
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
    with archive.scratch() as scratch:
        try:
            path = archive.unpack_upload(data, upload.filename.rsplit("/", 1)[-1], scratch)
            loaded, rows = checks.check(path)
        except GraderInputError as err:
            return _page(400, error=UserError(f"The folder was not stored: {err.reason}", err.remedy))
        # the table names the upload, not the scratch folder it was checked in (gone once stored)
        table = checks.table(loaded, rows).replace(str(path), f"from {upload.filename.rsplit('/', 1)[-1]}", 1)
        surprises = [r for r in rows if not r.ok]
        if surprises:
            return _page(400, table=table, surprises=surprises, error=UserError(
                f"The folder was not stored: `grader problem check` found {len(surprises)} "
                f"surprise{'s' if len(surprises) != 1 else ''} (listed here; SURPRISE in the full table below).",
                "Fix the folder until `grader problem check` passes on it, then upload it again."))
        session = db.session()
        row, saved = problem_folders.save(session, path, table, current_user.id)
        session.commit()
    flash({problem_folders.Saved.NEW: f"Problem folder {row.name} stored, sha256 {row.sha256}: a spec names it as "
                                      f"problem = \"{row.name}\" and pins it with problem_sha256 = "
                                      f"{{ {row.name} = \"{row.sha256}\" }}.",
           problem_folders.Saved.SAME: f"Problem folder {row.name} with this content is stored already "
                                       f"(sha256 {row.sha256}).",
           problem_folders.Saved.STARTERS: f"Problem folder {row.name}'s graded files are stored already (sha256 "
                                           f"{row.sha256}, which leaves the starters out): its starters are now "
                                           "this upload's, and students download them from now on. Specs pinning "
                                           "it are unchanged, and so are their grades."}[saved], "success")
    return redirect(url_for("staff.problems_page", stored=row.sha256), 303)      # its check table shown open


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
