"""A problem folder as an archive: the zip a site admin's upload is stored as (pack), the
unpacking of an upload or a stored archive (regular files only, none outside its folder,
bounded), and the cache where a worker keeps stored folders unpacked, each checked against the
sha256 it is stored under before use (store/problem_folders.py keeps the archives)."""
from __future__ import annotations

import contextlib
import io
import os
import shutil
import stat
import tarfile
import tempfile
import threading
import zipfile
from pathlib import Path, PurePosixPath
from typing import Iterator

from . import folder as folders

MAX_ARCHIVE_BYTES = 8 * 1024 * 1024        # an upload, packed or not
MAX_FILES = 200
MAX_FILE_BYTES = 2 * 1024 * 1024
_lock = threading.Lock()


class ProblemArchiveError(folders.ProblemFolderError):
    """An uploaded archive that is not a problem folder we may unpack."""


def _refuse(what: str, remedy: str = "Upload a .zip or .tar.gz of the problem folder (problem.toml at its top, "
                                          "or in one folder at the top).") -> ProblemArchiveError:
    return ProblemArchiveError(what, remedy)


def unpack_upload(data: bytes, filename: str, into: Path) -> Path:
    """An admin's upload unpacked into `into` (regular files only, no path outside it, bounded);
    the folder holding problem.toml (the top, or the one folder at the top)."""
    if len(data) > MAX_ARCHIVE_BYTES:
        raise _refuse(f"{filename} is over {MAX_ARCHIVE_BYTES // 2 ** 20} MiB",
                      "Leave large files out: a problem folder is problem.toml, reference.py, template/ and "
                      "solutions/.")
    members = _members(data, filename)
    into.mkdir(parents=True, exist_ok=True)
    if len(members) > MAX_FILES:
        raise _refuse(f"{filename} holds {len(members)} files, more than {MAX_FILES}")
    for name, content in members:
        target = into.joinpath(*name.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    tops = {p.parent for p in into.rglob(folders.PROBLEM_FILE)}
    for top in (into, *sorted(d for d in into.iterdir() if d.is_dir())):
        if top in tops:
            return top
    raise _refuse(f"{filename} has no {folders.PROBLEM_FILE} at its top or in one folder at its top")


def _members(data: bytes, filename: str) -> list[tuple[PurePosixPath, bytes]]:
    """(safe relative path, bytes) of each regular file; a link, a device or a path leaving the
    archive refuses the whole upload."""
    out = []
    lower = filename.lower()
    try:
        if lower.endswith(".zip"):
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                for info in zf.infolist():
                    if info.is_dir():
                        continue
                    mode = info.external_attr >> 16
                    if stat.S_IFMT(mode) and not stat.S_ISREG(mode):       # no type bits: a plain file
                        raise _refuse(f"{info.filename} in {filename} is not a regular file (a link, say)")
                    _bounded_size(info.file_size, info.filename)      # before inflating it (a zip bomb)
                    out.append((_safe(info.filename, filename), _bounded(zf.read(info), info.filename)))
        elif lower.endswith((".tar.gz", ".tgz", ".tar")):
            with tarfile.open(fileobj=io.BytesIO(data)) as tf:
                for info in tf.getmembers():
                    if info.isdir():
                        continue
                    if not info.isreg():
                        raise _refuse(f"{info.name} in {filename} is not a regular file (a link, say)")
                    _bounded_size(info.size, info.name)
                    out.append((_safe(info.name, filename), _bounded(tf.extractfile(info).read(), info.name)))
        else:
            raise _refuse(f"{filename} is not a .zip, .tar.gz, .tgz or .tar archive")
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as err:
        raise _refuse(f"{filename} cannot be read as an archive: {err}") from None
    return out


def _safe(name: str, archive: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts or "\\" in name:
        raise _refuse(f"{name!r} in {archive} would be written outside the folder")
    return path


def _bounded(content: bytes, name: str) -> bytes:
    _bounded_size(len(content), name)
    return content


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
        for file in files:
            zf.writestr(file.relative_to(path).as_posix(), file.read_bytes())
    return buf.getvalue()


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
    sha256 (a folder whose files no longer hash to it is refused, and nothing of it is kept)."""
    root = cache_root()
    target = root / sha / name
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
