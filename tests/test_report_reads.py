"""One report view (grader.view_of): outside the grading core, a grader Report is read through
its view, never field by field. A module that builds rows, reasons or flags from `report.tests`
or `report.flags` is a second reading of the report, and the copies drift apart (the nightly
named tests by id while every page named them by title). This reads each service module with
ast: a name bound to a Report (`grader.grade(...)`, `grader.rescore(...)`, `Report.from_json(...)`)
may be handed on, written out (`to_json`) or viewed, but its fields are not read."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVICE_PACKAGES = ("store", "workers", "web", "service")
MAKES_A_REPORT = {"grade", "rescore", "from_json"}          # grader.grade, grader.rescore, Report.from_json
# what the view shows in its own shape (a report's `status` and `seed` steer a worker; they are not shown)
VIEW_FIELDS = {"tests", "flags", "score", "rejections", "warnings", "missing_files", "missing_hints", "budget_note"}


def _called(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        func = node.func
        return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return ""


def raw_reads(source: str, filename: str) -> list[str]:
    found = []
    for scope in ast.walk(ast.parse(source, filename)):
        if not isinstance(scope, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        reports = {target.id for node in ast.walk(scope) if isinstance(node, ast.Assign) and
                   _called(node.value) in MAKES_A_REPORT for target in node.targets if isinstance(target, ast.Name)}
        for node in ast.walk(scope):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in reports
                    and node.attr in VIEW_FIELDS):
                found.append(f"{filename}:{node.lineno} reads {node.value.id}.{node.attr}")
    return sorted(set(found))


def test_service_modules_read_a_report_through_its_view():
    found = []
    for package in SERVICE_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "/migrations/" not in path.as_posix():
                found += raw_reads(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())
    assert found == [], "read it through grader.view_of(report)"


def test_the_checker_sees_a_raw_read():
    nightly_before = """
def grade_reference(spec, submission):
    report = grader.grade(submission, spec)
    timed = {t.name: t for t in report.tests if t.p99_us is not None}
    old = grader.Report.from_json(row)
    return old.flags, grader.view_of(report).tests, report.to_json()
"""
    assert raw_reads(nightly_before, "x.py") == ["x.py:4 reads report.tests", "x.py:6 reads old.flags"]
