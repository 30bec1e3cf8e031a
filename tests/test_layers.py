"""Which package may import which (docs/architecture.md draws the same picture). Every import
statement of every module, at any depth (a function's lazy import too), is read with ast and
checked against the table; a new import against the direction fails here with its file and line.

    service ──> web ──> workers ──> store ──> grader ──> reference_kernels ──> nkisim
    (each may also import anything to its right; nothing imports service)
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# package -> the project's packages it may import (besides itself)
ALLOWED: dict[str, set[str]] = {
    "nkisim": set(),                                  # the simulator knows no kernels, no grader
    "student_template": set(),                        # what students start from: NKI and NumPy only
    "reference_kernels": {"nkisim"},                  # reference_kernels.demo composes the `nkisim` command
    "grader": {"nkisim", "reference_kernels"},        # the grading core: never the service around it
    "store": {"grader"},
    "workers": {"store", "grader", "reference_kernels", "nkisim"},
    "web": {"workers", "store", "grader", "nkisim"},
    "service": {"web", "workers", "store", "grader", "reference_kernels", "nkisim"},   # the composition root
}
OURS = set(ALLOWED)


def imports_of(path: Path, package: str) -> list[tuple[str, int]]:
    """(top-level package of ours, line) for every import in the module, relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [package if node.level else (node.module or "")]      # relative: within the package
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top in OURS:
                found.append((top, node.lineno))
    return found


def modules():
    for package in sorted(ALLOWED):
        for path in sorted((ROOT / package).rglob("*.py")):
            yield package, path


def violations() -> list[str]:
    bad = []
    for package, path in modules():
        for top, line in imports_of(path, package):
            if top != package and top not in ALLOWED[package]:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {top} ({package} may import: "
                           f"{', '.join(sorted(ALLOWED[package])) or 'nothing of ours'})")
    return bad


def test_every_package_of_ours_is_in_the_table():
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests", "bench", "docs"}
    assert packages == OURS, "add the new package to ALLOWED (and to docs/architecture.md)"


def test_imports_follow_the_layers():
    assert violations() == []


def test_the_table_has_no_cycle():
    def reaches(start: str, seen: frozenset = frozenset()) -> set[str]:
        out = set()
        for nxt in ALLOWED[start]:
            if nxt in seen:
                raise AssertionError(f"cycle through {nxt}")
            out |= {nxt} | reaches(nxt, seen | {start})
        return out
    for package in ALLOWED:
        assert package not in reaches(package)


@pytest.mark.parametrize("source, package, expected", [
    ("import web.auth\n", "workers", ["web"]),
    ("def f():\n    from store.models import User\n", "grader", ["store"]),     # a lazy import counts too
    ("from . import x\nfrom .y import z\n", "nkisim", ["nkisim", "nkisim"]),
    ("import numpy\nfrom sqlalchemy import text\n", "store", []),
])
def test_the_checker_sees_every_import_form(tmp_path, source, package, expected):
    module = tmp_path / "m.py"
    module.write_text(source)
    assert [top for top, _ in imports_of(module, package)] == expected


def test_no_package_discovers_its_own_parts_through_entry_points():
    """Commands are composed by name in service/cli.py (and reference_kernels/demo.py)."""
    found = []
    for package, path in modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "entry_points":
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []
