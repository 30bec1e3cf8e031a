"""A course's own spec, uploaded on the create form by its instructors (or a site admin).

A spec is data: it names its problems, which run course code on the grader's trusted side, only
by name, each a bundled problem, a folder a site admin uploaded (Problem folders) or one an
operator installed (NKI_GRADER_PROBLEM_DIRS on every machine that grades), pinned by its sha256;
a spec naming a folder by path is refused (the site has no file to find it from). So uploading
a spec never brings code onto the site."""
from __future__ import annotations

import re

from sqlalchemy import select

from grader.errors import GraderInputError
from grader.spec import AssignmentSpec, from_toml
from store.models import ProblemFolder

from .. import db
from ..errors import UserError

MAX_SPEC_BYTES = 256 * 1024


def uploaded_spec(upload) -> AssignmentSpec | None:
    """The checked spec of an uploaded .toml file, or None when no file was sent."""
    if upload is None or not upload.filename:
        return None
    name = upload.filename.rsplit("/", 1)[-1]
    if not name.endswith(".toml"):
        raise UserError(f"{name!r} is not a spec file.", "Upload the spec as a .toml file (docs/staff.md, "
                        "'Assignments and their specs'), or choose a bundled spec and send no file.")
    raw = upload.read(MAX_SPEC_BYTES + 1)
    if len(raw) > MAX_SPEC_BYTES:
        raise UserError(f"{name} is over {MAX_SPEC_BYTES // 1024} KiB.", "A spec is a short TOML file; upload that.",
                        413)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UserError(f"{name} is not UTF-8 text ({err.reason} at byte {err.start}).", "Save it as UTF-8 TOML.")
    try:
        return from_toml(text, name)         # no base: problems by name (bundled or installed) and pinned
    except GraderInputError as err:
        raise UserError(f"The spec was not accepted: {err.reason}",
                        _uploaded_folder_remedy(err) or err.remedy) from None


def _uploaded_folder_remedy(err: GraderInputError) -> str | None:
    """When the refusal names a problem a site admin uploaded (by path, or by name unpinned), the
    remedy the site can give: its name and the pin of its newest upload. The grader's own remedy
    speaks of files and NKI_GRADER_PROBLEM_DIRS, which an instructor on the site has neither of."""
    if "problem_sha256 =" in err.remedy:         # the grader's remedy names the pin already
        return None
    for row in db.session().scalars(select(ProblemFolder).order_by(ProblemFolder.uploaded_at.desc())):
        named = re.escape(row.name)
        if re.search(rf"(?:problem|got) '(?:[^']*/)?{named}'", err.reason):
            return (f"A site admin uploaded the problem folder {row.name!r} (their Problem folders page lists "
                    f'it): name it problem = "{row.name}" in each test and pin it with problem_sha256 = '
                    f'{{ {row.name} = "{row.sha256}" }} at the top of the spec, before its first [section] (or '
                    "the sha256 of the version the course means, which `grader problem check` prints).")
    return None
