"""Course problem folders a site admin uploaded (web/staff/problem_uploads.py), kept in the
database so that every worker, on any machine, grades with them without a shared folder
(issue 46): a row holds a zip of what grades (problem.toml and its top-level .py files) and the
template/ starters, named by the folder's sha256, which a spec pins.

A worker (or the site) that meets a spec pinning such a folder asks `find(name, sha256)`
(registered with grader.problems.add_finder by `install`): the row is unpacked into a cache
folder of this user's own, and its sha256 computed again from the files; a row whose content no
longer has its name's hash (changed in the database) is refused, so the pin holds whoever wrote
the row. reference.py is course code and runs on the grader's trusted side: only a site admin's
upload puts it here, never a TA's or a student's."""
from __future__ import annotations

import threading
from enum import Enum
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from grader import problems
from grader.problems import archive
from grader.problems import folder as folders
from grader.spec import SpecError

from .db import session_scope
from .models import Assignment, ProblemFolder, StoredSpec

_engines: list = []          # where find() looks: the site's engine, or None (the environment's)
_lock = threading.Lock()


class Saved(str, Enum):
    NEW = "new"                    # a row of its own
    SAME = "same"                  # this content was stored already
    STARTERS = "starters"          # its graded files were stored already, its starters replace theirs


def save(session: Session, path: Path, check_table: str, uploaded_by: int | None) -> tuple[ProblemFolder, Saved]:
    """The row of the (checked) folder at `path`, and what became of it. The sha256 covers what
    grades, not the starters (template/), so an upload whose graded files are stored already
    replaces that row's starters when its own differ: a pin still holds (its grades cannot
    change), and students download the new starters. The caller commits."""
    loaded = folders.load(path)
    sha = loaded.problem.sha256
    row = session.scalar(select(ProblemFolder).where(ProblemFolder.sha256 == sha).with_for_update())
    if row is None:
        row = ProblemFolder(sha256=sha, name=loaded.data["name"], title=loaded.data["title"],
                            archive=archive.pack(path), check_table=check_table, uploaded_by_id=uploaded_by)
        session.add(row)
        return row, Saved.NEW
    if archive.packed_starters(row.name, row.archive) == archive.starters(path):
        return row, Saved.SAME
    row.archive, row.check_table, row.uploaded_by_id = archive.pack(path), check_table, uploaded_by
    return row, Saved.STARTERS


def saved_text(row: ProblemFolder, saved: Saved) -> str:
    """What an upload's storing did, in a sentence for the admin who uploaded it."""
    return {Saved.NEW: f"Problem folder {row.name} stored, sha256 {row.sha256}: a spec names it as "
                       f"problem = \"{row.name}\" and pins it with problem_sha256 = {{ {row.name} = \"{row.sha256}\" }}.",
            Saved.SAME: f"Problem folder {row.name} with this content is stored already (sha256 {row.sha256}).",
            Saved.STARTERS: f"Problem folder {row.name}'s graded files are stored already (sha256 {row.sha256}, "
                            "which leaves the starters out): its starters are now this upload's, and students "
                            "download them from now on. Specs pinning it are unchanged, and so are their grades."}[saved]


def pinned_by(session: Session, sha: str) -> list[str]:
    """What pins the folder `sha`: "the spec of <course>/<assignment>" for each assignment whose
    spec in force pins it, and "a stored spec no assignment uses now" for each other spec that
    does (an earlier version: a run may still be graded under it). A spec pins a folder by
    naming its sha256 (problem_sha256), so its text holds it."""
    hashes = set(session.scalars(select(StoredSpec.hash).where(StoredSpec.toml.contains(sha))))
    if not hashes:
        return []
    assignments = session.scalars(select(Assignment).where(Assignment.spec_hash.in_(hashes))
                                  .order_by(Assignment.name)).all()
    used = {a.spec_hash for a in assignments}
    return ([f"the spec of {a.course.name}/{a.name}" for a in assignments]
            + ["a stored spec no assignment uses now"] * len(hashes - used))


class FolderPinned(Exception):
    """A stored folder a spec pins cannot be removed: its runs are regraded and rescored with it."""

    def __init__(self, pins: list[str]):
        super().__init__(", ".join(pins))
        self.pins = pins


def delete(session: Session, sha: str) -> ProblemFolder | None:
    """Remove the stored folder `sha` unless a stored spec pins it (FolderPinned, naming what
    does); the removed row, or None when there is none. The caller commits.

    The row is locked first: a spec pinning it that is being stored holds it (`hold_pinned`)
    until that spec commits, and the pins are read only after, so they include that spec."""
    row = session.scalar(select(ProblemFolder).where(ProblemFolder.sha256 == sha).with_for_update())
    if row is None:
        return None
    pins = pinned_by(session, sha)
    if pins:
        raise FolderPinned(pins)
    session.delete(row)
    return row


def hold_pinned(session: Session, spec) -> None:
    """Keep every stored folder `spec` pins (a grader.AssignmentSpec) until `session` commits:
    `delete` waits for it, then sees the spec. A pinned folder neither stored nor held with the
    grader was removed after the spec was read: SpecError, as the spec could not grade."""
    wanted = {sha: name for name, sha in spec.problem_hashes.items() if not problems.held_with_the_grader(name, sha)}
    if not wanted:
        return
    held = set(session.scalars(select(ProblemFolder.sha256).where(ProblemFolder.sha256.in_(wanted))
                               .with_for_update(key_share=True)))
    gone = [f"{name} ({sha[:12]})" for sha, name in wanted.items() if sha not in held]
    if gone:
        raise SpecError(f"{spec.assignment} pins the problem folder {', '.join(gone)}, which a site admin removed "
                        "while the spec was being stored", "Upload the folder again on the Problem folders page "
                        "(the same content has the same sha256), then try again.")


def find(name: str, sha: str) -> Path | None:
    """The stored folder `name` of this sha256, unpacked and checked against it, or None when no
    row holds it."""
    for engine in list(_engines):
        with session_scope(engine) as s:
            row = s.get(ProblemFolder, sha)
            if row is None or row.name != name:
                continue
            stored = row.archive
        return archive.unpacked_in_cache(name, sha, stored)
    return None


def install(engine=None) -> None:
    """Let grader.problems find stored folders in `engine`'s database (None: DATABASE_URL's)."""
    with _lock:
        if engine not in _engines:
            _engines.append(engine)
    problems.add_finder(find)
