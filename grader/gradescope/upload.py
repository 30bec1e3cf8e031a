"""The student's upload as Gradescope leaves it in /autograder/submission: an archive
(asst4.tar.gz, .zip, ...), or the .py files themselves, at the top or in folders (a GitHub
submission keeps the repository's tree). Read as root, so nothing is followed: a symbolic link
or a special file is refused (a link to the autograder's config would otherwise be read as the
student's source and echoed back in an error message)."""
from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

from ..submission import ARCHIVE_SUFFIXES, MAX_UPLOAD_BYTES, Submission, SubmissionError, submission_from_bytes


def _read(path: Path, shown: str) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as err:
        raise SubmissionError(f"cannot read {shown}: {err.strerror or err}",
                              "Upload the file itself (not a link to it) and submit again.") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise SubmissionError(f"{shown} is not a regular file", "Upload the file itself and submit again.")
        return fh.read(MAX_UPLOAD_BYTES + 1)


def _entries(folder: Path) -> tuple[list[str], list[str]]:
    """Regular files and everything else (links, devices), as paths relative to folder."""
    files, others = [], []
    for here, dirs, names in os.walk(folder, followlinks=False):
        for name in dirs:
            if os.path.islink(os.path.join(here, name)):
                others.append(os.path.relpath(os.path.join(here, name), folder))
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(here, d)) and d not in (".git", "__MACOSX")]
        for name in names:
            full = os.path.join(here, name)
            rel = os.path.relpath(full, folder)
            (files if stat.S_ISREG(os.lstat(full).st_mode) else others).append(rel)
    return sorted(files), sorted(others)


def read_upload(folder: Path, spec) -> Submission:
    """The submission in `folder`, checked as `grader grade` checks a file (GraderInputError
    when it cannot be graded)."""
    return submission_from_bytes(*collect(folder, spec), spec)


def collect(folder: Path, spec) -> tuple[str, bytes]:
    """(file name, bytes) of the upload to grade: one .py file alone as that file, several as
    an archive of them at their paths, else the one archive uploaded."""
    if not folder.is_dir():
        raise SubmissionError("the submission folder is missing", "Submit again; if it persists, tell course staff.")
    wanted = {fs.filename for fs in spec.files.values()}
    files, others = _entries(folder)
    for rel in others:
        if os.path.basename(rel) in wanted or rel.lower().endswith(ARCHIVE_SUFFIXES):
            raise SubmissionError(f"{rel} is a symbolic link or special file, not the file itself",
                                  "Upload the file itself (not a link to it) and submit again.")
    sources = [rel for rel in files if os.path.basename(rel) in wanted]
    archives = [rel for rel in files if rel.lower().endswith(ARCHIVE_SUFFIXES)]
    names = " or ".join(sorted(wanted))
    if len(sources) == 1:
        return os.path.basename(sources[0]), _read(folder / sources[0], sources[0])
    if sources:
        return "submission.tar", _pack(folder, sources)
    if len(archives) == 1:
        return os.path.basename(archives[0]), _read(folder / archives[0], archives[0])
    if archives:
        raise SubmissionError(f"the submission holds {len(archives)} archives ({', '.join(archives)})",
                              "Submit one archive (or the .py files themselves).")
    shown = ", ".join(files[:10]) or "nothing"
    raise SubmissionError(f"the submission holds no {names} and no archive (it holds: {shown})",
                          f"Submit {names} itself, or the archive your handout's script makes (asst4.tar.gz).")


def _pack(folder: Path, members: list[str]) -> bytes:
    """The .py files as one tar at their paths (fixed metadata: the same files, the same bytes)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel in members:
            data = _read(folder / rel, rel)
            info = tarfile.TarInfo(rel)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()
