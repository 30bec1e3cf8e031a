"""results.json beyond a graded report: the documented format as a JSON Schema, the results of
a run that could not grade (an autograder error, never the student's fault, or a submission
that could not be read, which is), and writing the file whole or not at all."""
from __future__ import annotations

import os
from pathlib import Path

from .. import render
from ..vocabulary import TestKind

FORMATS = ["text", "html", "simple_format", "md", "ansi"]
VISIBILITIES = list(render.GRADESCOPE_VISIBILITIES)

# grading-systems.md section 5 (Gradescope's spec): every documented field, nothing else.
_TEST = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "score": {"type": "number"}, "max_score": {"type": "number"},
        "status": {"enum": ["passed", "failed"]}, "name": {"type": "string"},
        "name_format": {"enum": FORMATS}, "number": {"type": "string"}, "output": {"type": "string"},
        "output_format": {"enum": FORMATS}, "tags": {"type": "array", "items": {"type": "string"}},
        "visibility": {"enum": VISIBILITIES}, "extra_data": {"type": "object"},
    },
}
SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Gradescope autograder results.json",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "score": {"type": "number"},
        "execution_time": {"type": "number", "minimum": 0},
        "output": {"type": "string"},
        "output_format": {"enum": FORMATS},
        "test_output_format": {"enum": FORMATS},
        "test_name_format": {"enum": FORMATS},
        "visibility": {"enum": VISIBILITIES},
        "stdout_visibility": {"enum": VISIBILITIES},
        "extra_data": {"type": "object"},
        "tests": {"type": "array", "items": _TEST},
        "leaderboard": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["name", "value"],
            "properties": {"name": {"type": "string"}, "value": {"type": ["number", "string"]},
                           "order": {"enum": ["asc", "desc"]}}}},
    },
    # a top-level score, or a score on every test
    "anyOf": [{"required": ["score"]},
              {"required": ["tests"], "properties": {"tests": {"items": {"required": ["score"]}}}}],
}

ERROR_HEADING = "**Autograder error: this was not caused by your submission.**"


def problems(results: dict) -> list[str]:
    """What makes `results` not a valid results.json ([] when it is): the schema (with the
    jsonschema library), Unix line endings, and JSON numbers only (no NaN or infinity)."""
    import json

    import jsonschema
    found = [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: "
             + ("needs a top-level score, or a score on every test" if e.validator == "anyOf" else e.message)
             for e in jsonschema.Draft202012Validator(SCHEMA).iter_errors(results)]
    try:
        json.dumps(results, allow_nan=False)
    except ValueError as err:
        found.append(f"not strict JSON: {err}")

    def walk(value, where):
        if isinstance(value, str) and "\r" in value:
            found.append(f"{where}: carriage return (Gradescope wants Unix line endings)")
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{where}/{k}")
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{where}/{i}")
    walk(results, "")
    return found


def autograder_error(reason: str, what_to_do: str, *, extra: dict | None = None) -> dict:
    """Score 0 because the autograder could not grade, with why and what to do. Gradescope
    has no field for this, so the output says it first and extra_data marks it for staff."""
    text = (f"{ERROR_HEADING}\n\n{_md(reason)}\n\n**What to do:** {_md(what_to_do)}\n\n"
            "Your score shows 0 until the submission is graded; course staff can regrade it.")
    return {"score": 0.0, "output": text, "output_format": "md", "stdout_visibility": "hidden",
            "extra_data": {"autograder_error": True, "reason": reason, **(extra or {})}, "tests": []}


def unreadable_submission(spec, message: str, remedy: str, *, extra: dict | None = None) -> dict:
    """The student's upload could not be read as a submission (a broken archive, a syntax
    error, a missing function): every test 0, and what to fix."""
    tests = [{"name": t.title or t.name, "number": f"{i}", "score": 0.0, "max_score": t.points,
              "status": "failed", "output": "Not run: the submission could not be read (see the top of this page).",
              "tags": [t.kind, "not_run"]} for i, t in enumerate(spec.tests, start=1)]
    maximum = spec.max_points(TestKind.CORRECTNESS) + spec.max_points(TestKind.PERFORMANCE)
    text = (f"**Your submission could not be graded: {_md(message)}**\n\n**How to fix it:** {_md(remedy)}\n\n"
            f"**Total: 0 / {render.format_points(maximum)}**")
    return {"score": 0.0, "output": text, "output_format": "md", "stdout_visibility": "hidden",
            "extra_data": {"assignment": spec.assignment, "spec_version": spec.spec_version,
                           "thresholds_version": spec.thresholds_version, "unreadable": message, **(extra or {})},
            "tests": tests, "leaderboard": [{"name": "Total", "value": 0.0}]}


def write(results: dict, path: Path) -> None:
    """The file whole or not at all (Gradescope may read it the moment run_autograder ends)."""
    os.makedirs(path.parent, exist_ok=True)
    render._write_atomic(path, render._dumps(render._jsonable(results)))


def _md(text: str) -> str:
    """Markdown-safe text, its line breaks kept."""
    return "\n".join(render._md_escape(line) for line in str(text).splitlines())
