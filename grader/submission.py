"""Turn an uploaded submission (one .py file or an archive) into checked source text.

Nothing here imports, executes or extracts student code: archives are read into memory under
size caps (grader.archive_reader, with this module's caps and words), and sources are checked with compile() and ast only. Every
problem becomes a SubmissionError that says what is wrong and how to fix it, so the student
sees it at upload time instead of as a crash in a grading job.
"""
from __future__ import annotations

import ast
import hashlib
import os
import re
import stat
import warnings
import difflib
from dataclasses import dataclass, field
from pathlib import Path

from . import archive_reader
from .errors import GraderInputError

MAX_UPLOAD_BYTES = 16 * 1024 * 1024        # the uploaded file as received
MAX_SOURCE_BYTES = 1 * 1024 * 1024         # one .py file, in the upload or in an archive
MAX_ARCHIVE_MEMBERS = 64                   # every entry counts, directories included
MAX_UNCOMPRESSED_BYTES = 32 * 1024 * 1024  # all archive members together, uncompressed

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip")
_MIB = 1024 * 1024


class SubmissionError(GraderInputError):
    """An upload that cannot be graded. `reason` says what is wrong, `remedy` how to fix it."""

    def __init__(self, reason: str, remedy: str):
        super().__init__(reason, remedy)


@dataclass(frozen=True)
class Submission:
    files: dict[str, str]        # FileSpec key ("conv2d") -> decoded source text
    filenames: dict[str, str]    # FileSpec key -> its name or member path in the upload
    sha256: str                  # hex digest of the uploaded bytes exactly as received
    origin: str                  # the upload's file name (base name only)
    near_misses: dict[str, str] = field(default_factory=dict)   # FileSpec key not found -> a member that looks like it


# ----------------------------------------------------------------------------- entry points

def load_submission(path: str | os.PathLike, spec) -> Submission:
    """Read and check a submission file from disk (size checked before reading it all)."""
    path = Path(path)
    try:
        st = path.stat()
    except OSError as err:
        raise SubmissionError(f"Cannot read {path}: {err.strerror or err}",
                              "Check the path and try again.") from None
    if not stat.S_ISREG(st.st_mode):
        raise SubmissionError(f"{path} is not a regular file",
                              "Pass the path of the .py file or archive to grade.")
    if st.st_size > MAX_UPLOAD_BYTES:
        raise _too_large_upload(path.name, st.st_size)
    with path.open("rb") as f:
        data = f.read(MAX_UPLOAD_BYTES + 1)    # the file may have grown since stat()
    return submission_from_bytes(path.name, data, spec)


def submission_from_bytes(name: str, data: bytes, spec) -> Submission:
    """Check an upload held in memory (web uploads). `name` is the client's file name."""
    origin = _basename(name)
    if len(data) > MAX_UPLOAD_BYTES:
        raise _too_large_upload(origin, len(data))
    lower = origin.lower()
    if lower.endswith(".py"):
        files, filenames = _single_source(origin, data, spec)
    elif lower.endswith(ARCHIVE_SUFFIXES):
        if not data:
            raise SubmissionError(f"The archive {origin} is empty (0 bytes)",
                                  f"Re-create it ({_pack_hint(spec)}) and upload it again.")
        files, filenames, near = _archive_sources(origin, data, spec)
        return Submission(files=files, filenames=filenames, sha256=hashlib.sha256(data).hexdigest(),
                          origin=origin, near_misses=near)
    else:
        raise SubmissionError(
            f"{origin!r} is not a file type the grader accepts",
            f"Upload {_names_hint(spec)} on its own, or an archive ({', '.join(ARCHIVE_SUFFIXES)}) "
            f"holding {_paths_hint(spec)}.")
    return Submission(files=files, filenames=filenames, sha256=hashlib.sha256(data).hexdigest(), origin=origin)


# ----------------------------------------------------------------------------- single .py

def _single_source(origin: str, data: bytes, spec):
    by_name = {fs.filename: fs for fs in spec.files.values()}
    fs = by_name.get(origin)
    if fs is None:
        raise SubmissionError(
            f"{origin!r} is not a file this assignment grades: expected {_names_hint(spec)}",
            f"Rename the file to {_names_hint(spec)} (the name in the starter code), "
            f"or upload an archive holding {_paths_hint(spec)}.")
    missing = [f for f in spec.files.values() if not f.optional and f.key != fs.key]
    if missing:
        need = _join_or([f.filename for f in missing], "and")
        raise SubmissionError(
            f"{origin} alone is not a complete submission: {need} is required",
            f"Upload an archive holding {_paths_hint(spec)}, or upload {need} on its own.")
    return {fs.key: _check_source(origin, data, fs)}, {fs.key: origin}


# ----------------------------------------------------------------------------- archives

class _Refusals:
    """archive_reader's refusals in a submission's words: the upload's name and how to pack it."""

    def __init__(self, origin: str, spec) -> None:
        self.origin, self.spec = origin, spec

    def corrupt(self, detail: str) -> SubmissionError:
        return _corrupt(self.origin, self.spec, detail)

    def too_many_members(self) -> SubmissionError:
        return SubmissionError(
            f"The archive {self.origin} has more than {MAX_ARCHIVE_MEMBERS} members",
            "Pack only the files to grade, not a whole folder tree, and upload again.")

    def too_large_unpacked(self, detail: str) -> SubmissionError:
        return SubmissionError(
            f"The archive {self.origin} is over the {MAX_UNCOMPRESSED_BYTES // _MIB} MiB limit when unpacked "
            f"({detail})", "Pack only the source files and upload again.")

    def bad_member_type(self, name: str, kind: str) -> SubmissionError:
        return SubmissionError(
            f"The archive {self.origin} has a member {name!r} that is {kind}; only regular files and folders "
            f"are allowed", "Pack the real files (tar -h follows links) and upload again.")

    def absolute_path(self, name: str) -> SubmissionError:
        return SubmissionError(
            f"The archive {self.origin} has a member with an absolute path ({name!r})",
            f"Pack the files with relative paths ({_pack_hint(self.spec)}) and upload again.")

    def parent_path(self, name: str) -> SubmissionError:
        return SubmissionError(
            f"The archive {self.origin} has a member whose path contains '..' ({name!r})",
            f"Pack the files with plain relative paths ({_pack_hint(self.spec)}) and upload again.")

    def encrypted(self, name: str) -> SubmissionError:
        return SubmissionError(f"{name} in {self.origin} is encrypted",
                               "Create the archive without a password and upload it again.")


def _archive_sources(origin: str, data: bytes, spec):
    members = archive_reader.read_members(data, archive_reader.Limits(MAX_ARCHIVE_MEMBERS, MAX_UNCOMPRESSED_BYTES),
                                          _Refusals(origin, spec))
    located = {}
    for fs in spec.files.values():
        member = _locate(origin, members, fs, spec)
        if member is not None:
            located[fs.key] = member
    if not located:
        found = sorted(archive_reader.show("/".join(m.parts)) for m in members if m.parts and m.parts[-1].endswith(".py"))
        seen = f"; it holds {', '.join(found[:8])}{' ...' if len(found) > 8 else ''}" if found \
            else "; it holds no .py files"
        raise SubmissionError(
            f"The archive {origin} contains none of the expected files ({_paths_hint(spec)}){seen}",
            f"Pack the files at those paths ({_pack_hint(spec)}) and upload the archive again.")
    missing = [fs for fs in spec.files.values() if not fs.optional and fs.key not in located]
    near = _near_misses(members, located, spec)
    if missing:
        need = _join_or([fs.archive_path for fs in missing], "and")
        seen = "".join(f"; did you mean {near[fs.key]}?" for fs in missing if fs.key in near)
        raise SubmissionError(
            f"The archive {origin} is missing the required file {need}{seen}",
            f"Add it to the archive ({_pack_hint(spec)}) and upload again.")
    files, filenames = {}, {}
    for key, member in located.items():
        if member.size > MAX_SOURCE_BYTES:
            raise _too_large_source(member.name, member.size)
        content = member.read(MAX_SOURCE_BYTES + 1)
        if len(content) > MAX_SOURCE_BYTES:
            raise _too_large_source(member.name, len(content))
        files[key] = _check_source(member.name, content, spec.files[key])
        filenames[key] = member.name
    return files, filenames, near


def _near_misses(members: list[archive_reader.Member], located: dict, spec) -> dict[str, str]:
    """For each expected file the archive lacks, a .py member that looks like it (part2/my_conv2d.py
    for part2/conv2d.py), so the report can say "did you mean"."""
    taken = {id(m) for m in located.values()}
    spare = [m for m in members if id(m) not in taken and m.read is not None and m.parts
             and m.parts[-1].endswith(".py") and not m.parts[-1].startswith("._") and m.parts[0] != "__MACOSX"]
    near = {}
    for fs in spec.files.values():
        if fs.key in located or not spare:
            continue
        stem = fs.filename.removesuffix(".py").lower()
        folder = fs.archive_path.rsplit("/", 1)[0] if "/" in fs.archive_path else ""

        def likeness(m: archive_reader.Member) -> float:
            name = m.parts[-1].lower()
            score = difflib.SequenceMatcher(None, stem, name.removesuffix(".py")).ratio()
            if stem in name:
                score += 1.0
            if folder and "/".join(m.parts[:-1]).endswith(folder):
                score += 0.5
            return score
        best = max(spare, key=likeness)
        if likeness(best) >= 0.6:
            near[fs.key] = best.name
    return near


def _locate(origin: str, members: list[archive_reader.Member], fs, spec) -> archive_reader.Member | None:
    """Find fs in the archive: at its archive_path, at the root, or under one top-level folder."""
    want = tuple(p for p in fs.archive_path.split("/") if p not in ("", "."))
    tiers = ([], [], [], [])
    for m in members:
        if m.read is None or not m.parts or m.parts[0] == "__MACOSX" or m.parts[-1].startswith("._"):
            continue
        if m.parts == want:
            tiers[0].append(m)
        elif m.parts == (fs.filename,):
            tiers[1].append(m)
        elif m.parts[1:] == want:
            tiers[2].append(m)
        elif len(m.parts) == 2 and m.parts[1] == fs.filename:
            tiers[3].append(m)
    for tier in tiers:
        if len(tier) == 1:
            return tier[0]
        if len(tier) > 1:
            names = ", ".join(m.name for m in tier)
            raise SubmissionError(
                f"The archive {origin} holds more than one candidate {fs.filename} ({names})",
                f"Keep exactly one, at {fs.archive_path}, and upload the archive again.")
    return None


# ----------------------------------------------------------------------------- one source file

def _check_source(name: str, data: bytes, fs) -> str:
    """Size, encoding, emptiness, syntax and required functions of one file. Returns its text."""
    if len(data) > MAX_SOURCE_BYTES:
        raise _too_large_source(name, len(data))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise SubmissionError(
            f"{name} is not valid UTF-8: byte offset {err.start} (line {line}) holds 0x{data[err.start]:02x}",
            "Save the file with UTF-8 encoding (in most editors: Save As, encoding UTF-8) and upload it again.") \
            from None
    if text.startswith("\ufeff"):           # a byte-order mark from some Windows editors
        text = text[1:]
    if not text.strip():
        raise SubmissionError(f"{name} is empty",
                              "Upload the file with your kernel in it (check that it was saved before packing).")
    if "\x00" in text:
        offset = data.find(b"\x00")
        raise SubmissionError(f"{name} contains a null byte at byte offset {offset}",
                              "Remove it (the file may have been saved in a binary format) and upload again.")
    tree = _compile(name, text)
    for function, params in fs.functions.items():
        _check_function(name, tree, function, tuple(params))
    return text


def _compile(name: str, text: str) -> ast.Module:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")       # e.g. invalid escape sequences: not our business
            compile(text, name, "exec", dont_inherit=True)
            return ast.parse(text, name)
    except SyntaxError as err:
        where = f"line {err.lineno}" if err.lineno else "an unknown line"
        raise SubmissionError(
            f"{name} has a syntax error on {where}: {err.msg}",
            f"Fix it and upload again; `python -m py_compile {Path(name).name}` shows it locally.") from None
    except (RecursionError, MemoryError):
        raise SubmissionError(f"{name} is nested too deeply for Python to compile it",
                              "Simplify the deeply nested expression and upload again.") from None


def _check_function(name: str, tree: ast.Module, function: str, params: tuple) -> None:
    wanted = f"def {function}({', '.join(params)}, ...)" if params else f"def {function}(...)"
    binding = None
    for stmt in tree.body:                  # the last top-level binding is what an import sees
        if _binds(stmt, function):
            binding = stmt
    if binding is None:
        nested = next((n for n in ast.walk(tree)
                       if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == function), None)
        where = (f" (there is one on line {nested.lineno}, but inside another block)" if nested else "")
        raise SubmissionError(
            f"{name} does not define {function} at module level{where}",
            f"Define `{wanted}:` at the top level of {Path(name).name}, as in the starter code.")
    if isinstance(binding, ast.AsyncFunctionDef):
        raise SubmissionError(f"In {name}, {function} (line {binding.lineno}) is an async def",
                              f"Make it a plain `{wanted}:`.")
    if not isinstance(binding, ast.FunctionDef):
        raise SubmissionError(
            f"In {name}, {function} is last bound on line {binding.lineno} by a statement that is not a def",
            f"Define it with `{wanted}:` at the top level (decorators are fine) and do not rebind it.")
    args = binding.args
    positional = [*args.posonlyargs, *args.args]
    names = [a.arg for a in positional]
    shown = f"{function}({ast.unparse(args)})"
    if tuple(names[:len(params)]) != params:
        raise SubmissionError(
            f"In {name}, {shown} (line {binding.lineno}) does not start with the parameters "
            f"({', '.join(params)}) the grader passes",
            f"Restore the starter signature `{wanted}`: keep these names in this order; "
            f"parameters you add after them need default values.")
    posonly = [a.arg for a in args.posonlyargs[:len(params)]]
    if posonly:
        raise SubmissionError(
            f"In {name}, {shown} makes {', '.join(posonly)} positional-only, but the grader may pass them by name",
            f"Remove the '/' from the parameter list of {function}.")
    first_default = len(positional) - len(args.defaults)
    extra = [a.arg for i, a in enumerate(positional) if i >= len(params) and i < first_default]
    extra += [a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is None]
    if extra:
        raise SubmissionError(
            f"In {name}, {shown} adds parameter {extra[0]!r} without a default value; "
            f"the grader passes only ({', '.join(params)})",
            f"Give {extra[0]!r} a default value or remove it.")


def _binds(stmt: ast.stmt, name: str) -> bool:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return stmt.name == name
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return any((a.asname or a.name.split(".")[0]) == name for a in stmt.names)
    targets = []
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        targets = [stmt.target]
    elif isinstance(stmt, ast.Delete):
        targets = stmt.targets
    return any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t))


# ----------------------------------------------------------------------------- messages

def _basename(name: str) -> str:
    return archive_reader.show(re.split(r"[\\/]", name)[-1] or name)


def _join_or(items, word="or") -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} {word} {items[-1]}"


def _names_hint(spec) -> str:
    return _join_or([fs.filename for fs in spec.files.values()])


def _alone_hint(spec) -> str:
    required = [fs.filename for fs in spec.files.values() if not fs.optional]
    return _join_or(required if len(required) == 1 else [fs.filename for fs in spec.files.values()])


def _paths_hint(spec) -> str:
    return _join_or([fs.archive_path for fs in spec.files.values()], "and")


def _pack_hint(spec) -> str:
    return "for example `tar czf submission.tar.gz " + " ".join(fs.archive_path for fs in spec.files.values()) + "`"


def _too_large_upload(origin: str, size: int) -> SubmissionError:
    return SubmissionError(
        f"The upload {origin} is {size / _MIB:.1f} MiB, over the {MAX_UPLOAD_BYTES // _MIB} MiB limit",
        "Upload only the source files (leave out profiles, data and build outputs).")


def _too_large_source(name: str, size: int) -> SubmissionError:
    return SubmissionError(
        f"{name} is {size / _MIB:.1f} MiB, over the {MAX_SOURCE_BYTES // _MIB} MiB limit for a source file",
        "Remove generated or embedded data from it; kernel source is a few hundred lines.")


def _corrupt(origin: str, spec, detail: str) -> SubmissionError:
    return SubmissionError(
        f"The archive {origin} is corrupt or not a tar/zip archive ({detail})",
        f"Re-create it ({_pack_hint(spec)}) and upload it again, or upload {_alone_hint(spec)} on its own.")
