"""The grader's public face: workers/ and web/ import only these names (and grader.render, and
grader.vocabulary: the words every package shares).

    spec = grader.load_spec("asst4-trainium2")          # or a spec file path
    sub = grader.load_submission("asst4.tar.gz", spec)  # or grader.submission_from_bytes(name, data, spec)
    report = grader.grade(sub, spec, grader.GradeOptions(backend="sim", on_progress=print))
    report = grader.rescore(report, grader.load_spec("new-thresholds.toml"))

Names resolve on first use: the sandboxed child runs `python -m grader.child`, which imports
this package, and must not import the grading core (or its reference answers) with it."""
from __future__ import annotations

import importlib

_EXPORTS = {
    "available_specs": ("grader.spec", "available"),
    "load_spec": ("grader.spec", "load"),
    "AssignmentSpec": ("grader.spec", "AssignmentSpec"),
    "TestSpec": ("grader.spec", "TestSpec"),
    "FileSpec": ("grader.spec", "FileSpec"),
    "SpecError": ("grader.spec", "SpecError"),
    "load_submission": ("grader.submission", "load_submission"),
    "submission_from_bytes": ("grader.submission", "submission_from_bytes"),
    "Submission": ("grader.submission", "Submission"),
    "SubmissionError": ("grader.submission", "SubmissionError"),
    "static_findings": ("grader.static", "static_findings"),
    "GraderInputError": ("grader.errors", "GraderInputError"),
    "BackendUnavailable": ("grader.grade", "BackendUnavailable"),
    "GradeOptions": ("grader.grade", "GradeOptions"),
    "grade": ("grader.grade", "grade"),
    "rescore": ("grader.scoring", "rescore"),
    "Report": ("grader.report", "Report"),
    "TestResult": ("grader.report", "TestResult"),
    "Score": ("grader.report", "Score"),
    "ProgressEvent": ("grader.events", "ProgressEvent"),
    "CancelToken": ("grader.events", "CancelToken"),
    "AnswerPool": ("grader.answer_pool", "AnswerPool"),
    "AnswerSet": ("grader.answer_pool", "AnswerSet"),
    "answer_pool_is_private": ("grader.answer_pool", "hidden_from_children"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    try:
        module, attr = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'grader' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value           # resolved once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
