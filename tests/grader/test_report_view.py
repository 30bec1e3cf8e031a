"""grader.view_of: the one view every front-end draws a report from. Reports are built by hand
(as in test_render.py); the findings it fixes each have a test here."""
from __future__ import annotations

import dataclasses

import pytest

import grader
from grader import render, scoring
from grader import report as report_types

SHA = "ab" * 32


def _report(tests, maxima, **kw):
    fields = dict(assignment="tiny-conv", spec_version="1", thresholds_version="t1", backend="sim",
                  submission_sha256=SHA, score=scoring.tally(tests, maxima), flags=[], tests=tests)
    fields.update(kw)
    return report_types.Report(**fields)


def _timed(name, p99, status="passed", points=5.0, details=None):
    return report_types.TestResult(name, "performance", status, points, 5.0, title=f"Performance: {name}",
                                   file="conv2d.py", p99_us=p99, thresholds_us={"optimized": 40, "relaxed": 60},
                                   details=details or {})


def test_the_view_is_frozen_and_exported_from_the_public_face():
    view = grader.view_of(_report([_timed("perf_tiny", 30.0)], {"correctness": 0, "performance": 5,
                                                                  "extra_credit": 0}))
    assert isinstance(view, grader.ReportView)
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.tests[0].status = "failed"


def test_threshold_cells_carry_their_unit():
    """Finding: threshold cells had no unit ("opt 40 / rel 60")."""
    view = grader.view_of(_report([_timed("perf_tiny", 45.5, "partial", 4.75)],
                                  {"correctness": 0, "performance": 5, "extra_credit": 0}))
    test = view.tests[0]
    assert [t.text for t in test.thresholds] == ["40 us", "60 us"]
    assert test.thresholds_text == "opt 40 us / rel 60 us" and test.p99_text == "45.5 us"
    assert test.tier == "relaxed" and test.points_text == "4.75/5"
    assert "45.5 us  (opt 40 us / rel 60 us)" in render.render_terminal(view)


def test_a_rejected_files_tests_say_why_they_did_not_run():
    """Finding: a rejected file's tests showed an empty error while a flag said the violations
    were "listed above" (on the web nothing is above the table but the header)."""
    tests = [report_types.TestResult("conv_tiny", "correctness", "error", 0.0, 2.5, title="Correctness: tiny",
                                     file="conv2d.py", details={"not_run": "rejected"}),
             report_types.TestResult("perf_tiny", "performance", "error", 0.0, 5.0, title="Performance: tiny",
                                     file="conv2d.py", thresholds_us={"optimized": 40, "relaxed": 60},
                                     details={"not_run": "rejected"})]
    report = _report(tests, {"correctness": 2.5, "performance": 5, "extra_credit": 0},
                     flags=["precheck_rejected:conv2d"],
                     rejections=[{"file": "conv2d.py", "line": 3, "rule": "import", "message": "import of subprocess"}])
    view = grader.view_of(report)
    assert all(t.error.startswith("not run: its file was rejected by the static check") for t in view.tests)
    assert view.header.lines()[0] == "conv2d.py was rejected by the static check (1 violation): its 2 tests score 0"
    assert "  conv2d.py:3 [import]: import of subprocess" in view.header.lines()
    (flag,) = view.flags
    assert flag.subject == "conv2d.py" and "listed above" not in flag.for_student
    assert "at the top of this report" in flag.student_plain
    terminal = render.render_terminal(view)
    assert terminal.count("not run: its file was rejected") == 2


def test_points_show_every_maximum_and_what_extra_credit_hides():
    tests = [report_types.TestResult("conv", "correctness", "passed", 2.5, 2.5, title="Correctness"),
             _timed("perf_a", 70.0, "failed", 0.0),
             report_types.TestResult("ec", "extra_credit", "passed", 1.25, 1.25, title="EC", p99_us=9.0,
                                     thresholds_us={"optimized": 10, "relaxed": 10})]
    view = grader.view_of(_report(tests, {"correctness": 2.5, "performance": 5, "extra_credit": 1.25}))
    assert [(g.title, g.points_text) for g in view.points.groups] == [
        ("Correctness", "2.5/2.5"), ("Performance", "0/5"), ("Extra credit", "1.25/1.25")]
    assert view.points.total_text == "3.75/7.5 (regular 2.5/7.5 + extra credit 1.25)"
    assert view.slow_hint.startswith("Why is a kernel slow? Run `nkisim profile")
    assert view.slow_hint in render.render_terminal(view)


def test_a_profile_has_one_shape_whichever_shape_was_stored():
    """The grader stores {engine: utilisation}; nkisim's Profile has {engine: {busy_us, ...}}.
    Both become the same ProfileView, with the roofline's limit and the achieved TFLOP/s."""
    grader_shape = {"mfu": 0.5, "total_us": 20.0, "engine_utilisation": {"PE": 0.5, "ACT": 0.25},
                    "engine_instructions": {"PE": 10, "ACT": 4}, "verdict": "PE bound",
                    "achieved_tflops": 41.5, "roofline_us": 8.0, "roofline_limit": "compute",
                    "busiest_lines": [{"line": "x.py:3", "busy_us": 5.0, "instructions": 3, "queue": "PE"}]}
    nkisim_shape = {"mfu": 0.5, "total_us": 20.0, "verdict": "PE bound", "achieved_tflops": 41.5,
                    "roofline_us": 8.0, "roofline_limit": "compute",
                    "engines": {"PE": {"busy_us": 10.0, "utilisation": 0.5, "instructions": 10},
                                "ACT": {"busy_us": 5.0, "utilisation": 0.25, "instructions": 4}},
                    "hotspots": [{"line": "x.py:3", "busy_us": 5.0, "instructions": 3, "queue": "PE"}]}
    maxima = {"correctness": 0, "performance": 10, "extra_credit": 0}
    views = [grader.view_of(_report([_timed("perf", 20.0, details={"profile": shape})], maxima)).tests[0].profile
             for shape in (grader_shape, nkisim_shape)]
    assert views[0] == views[1]
    assert views[0].engines == (("PE", 10.0, 0.5, 10), ("ACT", 5.0, 0.25, 4))
    assert views[0].summary == "MFU 50.0%, 41.50 TFLOP/s achieved; roofline 8.0 us (compute-bound)"


def test_gradescope_and_terminal_draw_the_same_rows(tmp_path):
    tests = [report_types.TestResult("conv", "correctness", "failed", 0.0, 2.5, title="Correctness: tiny",
                                     message="config 1 of 1: 3 of 64 values differ"),
             _timed("perf_tiny", None, "skipped", 0.0)]
    view = grader.view_of(_report(tests, {"correctness": 2.5, "performance": 5, "extra_credit": 0}))
    results = render.to_gradescope(view)
    terminal = render.render_terminal(view)
    for test, entry in zip(view.tests, results["tests"]):
        assert entry["name"] == test.title and entry["max_score"] == test.max_points
        assert f"{test.title}" in terminal and test.points_text in terminal
        if test.error:
            assert test.error in entry["output"] and test.error in terminal
    assert render.to_json(view) == render.to_json(view.source)     # the JSON is the report, whole


def test_a_file_not_sent_is_stated_once_with_its_did_you_mean():
    tests = [report_types.TestResult("conv_tiny", "correctness", "skipped", 0.0, 2.5, title="Correctness: tiny",
                                     file="conv2d.py", details={"not_run": "not_submitted"})]
    report = _report(tests, {"correctness": 2.5, "performance": 0, "extra_credit": 0}, missing_files=["conv2d.py"],
                     missing_hints={"conv2d.py": {"found": "part2/my_conv2d.py", "expected": "part2/conv2d.py"}})
    view = grader.view_of(report)
    assert view.header.files == ("conv2d.py was not submitted (did you mean part2/my_conv2d.py? it must be at "
                                 "part2/conv2d.py): its 1 tests score 0 (2.5 points of the assignment's 2.5)",)
    assert view.tests[0].message == "not run: its file was not submitted (see the top of the report)"
    assert render.render_terminal(view).count("did you mean") == 1
