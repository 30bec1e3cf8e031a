"""A problem folder as an archive: the zip a site admin's upload is stored as (pack), the
unpacking of an upload or a stored archive (regular files only, none outside its folder,
bounded), and the cache where a worker keeps stored folders unpacked, each checked against the
sha256 it is stored under before use (store/problem_folders.py keeps the archives)."""
from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import stat
import tempfile
import threading
import zipfile
from pathlib import Path
from typing import Iterator

from .. import archive_reader
from . import folder as folders

MAX_ARCHIVE_BYTES = 8 * 1024 * 1024        # an upload, packed or not
MAX_FILES = 200                             # files and folders together
MAX_FILE_BYTES = 2 * 1024 * 1024
MAX_UNPACKED_BYTES = 64 * 1024 * 1024      # all files together, unpacked
_lock = threading.Lock()


class ProblemArchiveError(folders.ProblemFolderError):
    """An uploaded archive that is not a problem folder we may unpack."""


def _refuse(what: str, remedy: str = "Upload a .zip or .tar.gz of the problem folder (problem.toml at its top, "
                                          "or in one folder at the top).") -> ProblemArchiveError:
    return ProblemArchiveError(what, remedy)


class _Refusals:
    """grader.archive_reader's refusals in an upload's words."""

    def __init__(self, filename: str) -> None:
        self.filename = filename

    def corrupt(self, detail: str) -> ProblemArchiveError:
        return _refuse(f"{self.filename} cannot be read as an archive: {detail}")

    def too_many_members(self) -> ProblemArchiveError:
        return _refuse(f"{self.filename} holds more than {MAX_FILES} files and folders")

    def too_large_unpacked(self, detail: str) -> ProblemArchiveError:
        return _refuse(f"{self.filename} is over {MAX_UNPACKED_BYTES // 2 ** 20} MiB unpacked ({detail})",
                       "Leave large files out: a problem folder is problem.toml, reference.py, template/ and "
                       "solutions/.")

    def bad_member_type(self, name: str, kind: str) -> ProblemArchiveError:
        return _refuse(f"{name} in {self.filename} is not a regular file ({kind})")

    def absolute_path(self, name: str) -> ProblemArchiveError:
        return _refuse(f"{name!r} in {self.filename} would be written outside the folder")

    parent_path = absolute_path

    def encrypted(self, name: str) -> ProblemArchiveError:
        return _refuse(f"{name} in {self.filename} is encrypted", "Pack the folder without a password.")


def unpack_upload(data: bytes, filename: str, into: Path) -> Path:
    """An admin's upload unpacked into `into` (regular files only, no path outside it, bounded);
    the folder holding problem.toml (the top, or the one folder at the top)."""
    if len(data) > MAX_ARCHIVE_BYTES:
        raise _refuse(f"{filename} is over {MAX_ARCHIVE_BYTES // 2 ** 20} MiB",
                      "Leave large files out: a problem folder is problem.toml, reference.py, template/ and "
                      "solutions/.")
    if not filename.lower().endswith((".zip", ".tar.gz", ".tgz", ".tar")):
        raise _refuse(f"{filename} is not a .zip, .tar.gz, .tgz or .tar archive")
    members = _members(data, filename)
    into.mkdir(parents=True, exist_ok=True)
    for parts, content in members:
        target = into.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    tops = {p.parent for p in into.rglob(folders.PROBLEM_FILE)}
    for top in (into, *sorted(d for d in into.iterdir() if d.is_dir())):
        if top in tops:
            return top
    raise _refuse(f"{filename} has no {folders.PROBLEM_FILE} at its top or in one folder at its top")


def _members(data: bytes, filename: str) -> list[tuple[tuple, bytes]]:
    """(safe path parts, bytes) of each regular file, every one read before anything is written;
    grader.archive_reader refuses links, devices, paths leaving the archive, bombs and corrupt data."""
    out = []
    limits = archive_reader.Limits(MAX_FILES, MAX_UNPACKED_BYTES)
    for member in archive_reader.read_members(data, limits, _Refusals(filename)):
        if member.read is None or not member.parts:
            continue
        _bounded_size(member.size, member.name)           # before inflating it (a zip bomb)
        content = member.read(MAX_FILE_BYTES + 1)
        _bounded_size(len(content), member.name)
        out.append((member.parts, content))
    return out


def _bounded_size(size: int, name: str) -> None:
    if size > MAX_FILE_BYTES:
        raise _refuse(f"{name} is over {MAX_FILE_BYTES // 2 ** 20} MiB")


def pack(path: Path) -> bytes:
    """What a worker and the site need of a folder: problem.toml, its top-level .py files (what
    its sha256 covers) and template/ (the starters); not its solutions."""
    buf = io.BytesIO()
    files = [path / folders.PROBLEM_FILE, *sorted(p for p in path.glob("*.py") if p.is_file()),
             *folders.starter_files(path)]
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for file in files:     # no time stamps: the same files always pack to the same bytes
            entry = zipfile.ZipInfo(file.relative_to(path).as_posix(), date_time=(1980, 1, 1, 0, 0, 0))
            zf.writestr(entry, file.read_bytes(), compress_type=zipfile.ZIP_DEFLATED)
    return buf.getvalue()


def starters(path: Path) -> dict[str, bytes]:
    """{path in the folder: content} of a folder's starters (template/)."""
    return {f.relative_to(path).as_posix(): f.read_bytes() for f in folders.starter_files(path)}


def packed_starters(name: str, archive: bytes) -> dict[str, bytes]:
    """The starters a stored archive holds, read through the same checked unpacking as an upload."""
    with scratch("nki-problem-stored-") as work:
        return starters(unpack_upload(archive, f"{name}.zip", work / name))


def cache_root() -> Path:
    """This user's own folder for unpacked rows: made owner-only, and refused when someone else
    made it first (a shared /tmp)."""
    root = Path(os.environ.get("NKI_GRADER_PROBLEM_CACHE") or
                Path(tempfile.gettempdir()) / f"nki-grader-problems-{os.getuid()}")
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(root)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise folders.ProblemFolderError(
            f"the problem cache {root} is not a folder of this user's own (owner-only)",
            "Remove it, or set NKI_GRADER_PROBLEM_CACHE to a folder only this user can write.")
    return root


def unpacked_in_cache(name: str, sha: str, archive: bytes) -> Path:
    """The stored archive of folder `name` unpacked into this user's cache, checked against its
    sha256 (a folder whose files no longer hash to it is refused, and nothing of it is kept).
    Cached by the archive's own digest too: the sha256 leaves the starters out, and a new upload
    of the same graded files replaces them (store.problem_folders.save)."""
    root = cache_root()
    target = root / f"{sha}-{hashlib.sha256(archive).hexdigest()[:16]}" / name
    with _lock:
        if (target / folders.PROBLEM_FILE).is_file():
            if folders.folder_hash(target) == sha:
                return target
            shutil.rmtree(target, ignore_errors=True)       # a broken earlier copy (an interrupted write)
        work = Path(tempfile.mkdtemp(dir=root))
        try:
            top = unpack_upload(archive, f"{name}.zip", work / name)
            got = folders.folder_hash(top)
            if got != sha:
                raise folders.ProblemFolderError(
                    f"the stored problem folder {name!r} does not have the sha256 it is stored under ({sha}): "
                    f"its files hash to {got}, so it was changed after its upload",
                    "A site admin uploads the folder again (Problem folders, on the staff console); the spec's "
                    "pin then finds it.")
            target.parent.mkdir(exist_ok=True)
            try:
                top.rename(target)          # atomic: another process's finished copy is never replaced
            except OSError:
                if not (target / folders.PROBLEM_FILE).is_file() or folders.folder_hash(target) != sha:
                    raise
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return target


@contextlib.contextmanager
def scratch(prefix: str = "nki-problem-upload-") -> Iterator[Path]:
    """A private folder removed afterwards (an upload is unpacked and checked there)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as path:
        yield Path(path)
