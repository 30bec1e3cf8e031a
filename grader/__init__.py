"""The grader's public face: workers/ and web/ import only these names (and grader.render, and
grader.vocabulary: the words every package shares).

    spec = grader.load_spec("asst4-trainium2")          # or a spec file path
    sub = grader.load_submission("asst4.tar.gz", spec)  # or grader.submission_from_bytes(name, data, spec)
    report = grader.grade(sub, spec, grader.GradeOptions(backend="sim", on_progress=print))
    report = grader.rescore(report, grader.load_spec("new-thresholds.toml"))
    view = grader.view_of(report)                       # what every front-end shows, built once
    rows = grader.agreement(view, grader.measured_p99s(hardware_view))   # simulated against measured
    spec = grader.spec_from_toml(text)                  # the one builder from TOML text (the service's rows)
    newer = grader.spec_with_thresholds(spec, {"perf_224_pool1_float32": {"optimized": 4800, "relaxed": 5000}},
                                        "2025-12-01")  # a new spec, new hash; the old one is unchanged

Names resolve on first use: the sandboxed child runs `python -m grader.child`, which imports
this package, and must not import the grading core (or its reference answers) with it."""
from __future__ import annotations

import importlib

_EXPORTS = {
    "available_specs": ("grader.spec", "available"),
    "load_spec": ("grader.spec", "load"),
    "spec_from_toml": ("grader.spec", "from_toml"),
    "spec_with_thresholds": ("grader.spec", "with_thresholds"),
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
    "usable_cores": ("grader.grade", "usable_cores"),
    "rescore": ("grader.scoring", "rescore"),
    "Report": ("grader.report", "Report"),
    "TestResult": ("grader.report", "TestResult"),
    "Score": ("grader.report", "Score"),
    "view_of": ("grader.report_view", "view_of"),
    "ReportView": ("grader.report_view", "ReportView"),
    "agreement": ("grader.agreements", "agreement"),                  # the simulator against hardware
    "Agreement": ("grader.agreements", "Agreement"),
    "agreement_summary": ("grader.agreements", "summary"),
    "measured_p99s": ("grader.agreements", "measured_p99s"),
    "ProgressEvent": ("grader.events", "ProgressEvent"),
    "CancelToken": ("grader.events", "CancelToken"),
    "AnswerPool": ("grader.answer_pool", "AnswerPool"),
    "AnswerSet": ("grader.answer_pool", "AnswerSet"),
    "answer_pool_is_private": ("grader.answer_pool", "hidden_from_children"),
    "use_one_blas_thread": ("grader.blas", "use_one_blas_thread"),
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
