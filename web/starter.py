"""The starter files a student downloads from an assignment's page: for each file the spec asks
for, the course problem folder's template/ file in the spec's dialect (template/nki06/ holds NKI
0.6's when the folder takes both) when its problem has one, else the bundled
student_template/ file of the spec's NKI dialect (student_template/nki06/ for NKI 0.6, the same
folders as reference_kernels/), offered only when it defines the functions the spec requires."""
from __future__ import annotations

import ast
import importlib.util
import io
import zipfile
from dataclasses import dataclass
from pathlib import Path

from grader import problems
from grader.problems import folder as problem_folders
from grader.references import FOLDER_OF_DIALECT
from grader.spec import AssignmentSpec, read_toml


@dataclass(frozen=True)
class Starter:
    filename: str          # as the student saves and uploads it: conv2d.py
    archive_path: str      # where an archive of the parts holds it: part2/conv2d.py
    data: bytes


def _template_dir(dialect: str) -> Path | None:
    found = importlib.util.find_spec("student_template")      # found without importing NKI
    if found is None or not found.submodule_search_locations:
        return None
    return (Path(list(found.submodule_search_locations)[0]) / FOLDER_OF_DIALECT[dialect]).resolve()


def _defines(data: bytes, functions) -> bool:
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return False
    defined = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return set(functions) <= defined


def _course_folder(spec: AssignmentSpec, test, refs: dict) -> Path | None:
    """The course problem folder a test names. By path, the spec's own: the registry keeps one
    folder per content (problem.toml and the top-level .py files), and template/ is not part of
    it, so another folder of the same content may stand there with another template."""
    ref = refs.get(test.name)
    if isinstance(ref, str) and problems.is_path(ref) and spec.base:
        return Path(spec.base) / ref
    stored = problems.found_by_finders(ref, spec.problem_hashes.get(ref)) if isinstance(ref, str) else None
    if stored is not None:        # as stored now: an upload of the same graded files may have new starters
        return stored
    problem = problems.get(test.problem)
    return Path(problem.folder) if problem.folder and not problem.bundled else None


def starters(spec: AssignmentSpec) -> list[Starter]:
    """The spec's files that have a starter, in the spec's order."""
    bundled = _template_dir(spec.dialect)
    tables = read_toml(spec.toml, spec.assignment).get("tests", []) if spec.toml else []
    refs = {t.get("name"): t.get("problem") for t in tables if isinstance(t, dict)}
    found = []
    for fs in spec.files.values():
        candidates = []
        for test in spec.tests:          # a course folder's own template first: it is that problem's
            if test.file == fs.key:
                folder = _course_folder(spec, test, refs)
                found_starter = folder and problem_folders.starter(folder, fs.filename, spec.dialect)
                if found_starter is not None:       # never a starter in the other dialect
                    candidates.append(found_starter)
        if bundled is not None:
            candidates.append(bundled / fs.filename)
        for path in candidates:
            if path.is_file() and _defines(data := path.read_bytes(), fs.functions):
                found.append(Starter(fs.filename, fs.archive_path, data))
                break
    return found


def archive_name(assignment_name: str) -> str:
    return f"{assignment_name}-starter.zip"


def archive(files: list[Starter]) -> bytes:
    """Every starter at its archive path (the layout an upload of the archive is read in)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for s in files:
            zf.writestr(s.archive_path, s.data)
    return buf.getvalue()
