"""grader.render: the terminal table, the report as JSON, Gradescope's results.json and atomic
writes. Reports are built by hand here; nothing is graded."""
from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import pytest

from grader import render, scoring
from grader import report as report_types   # not TestResult by name: pytest would try to collect it
from grader.report import Report
from grader.report_view import view_of

SHA = "0123456789abcdef" * 4
CONV_OPT_FP16 = {"optimized": 1002.0, "relaxed": 1365.0}
CONV_OPT_FP32 = {"optimized": 4596.0, "relaxed": 4964.0}
EC_FP32 = {"optimized": 110.0, "relaxed": 110.0}


def correctness(name, title, status="passed", points=2.5, max_points=2.5, **kw):
    return report_types.TestResult(name, "correctness", status, points, max_points, title=title, **kw)


def timed(name, title, kind, status, points, max_points, p99, thresholds, **kw):
    return report_types.TestResult(name, kind, status, points, max_points, title=title, p99_us=p99,
                      thresholds_us=dict(thresholds), **kw)


def make_report(tests, maxima, flags=(), **kw):
    """A report whose Score is tallied from `tests` under the assignment's `maxima` (per kind)."""
    score = scoring.tally(tests, maxima)
    fields = dict(assignment="asst4-trainium2", spec_version="1", thresholds_version="2025-11-13",
                  backend="sim", submission_sha256=SHA, score=score, flags=list(flags), tests=tests,
                  spec_hash="f" * 64)
    fields.update(kw)
    return Report(**fields)


@pytest.fixture
def full_report():
    """Everything passed, extra credit included: total 66.25 over a maximum of 60."""
    tests = [
        correctness("conv_small", "Correctness: small images (32x16)"),
        correctness("conv_large", "Correctness: large images (224x224)"),
        timed("perf_224_pool1_float32", "Performance: 224x224, no maxpool, float32", "performance",
              "passed", 17.5, 17.5, 4500.25, CONV_OPT_FP32),
        timed("perf_224_pool1_float16", "Performance: 224x224, no maxpool, float16", "performance",
              "passed", 17.5, 17.5, 990.0, CONV_OPT_FP16),
        timed("ec_32x16_pool1_float32", "Extra credit: 32x16, no maxpool, float32", "extra_credit",
              "passed", 1.25, 1.25, 101.5, EC_FP32),
        correctness("transpose", "Correctness: matrix_transpose", points=10, max_points=10),
    ]
    maxima = {"correctness": 15, "performance": 35, "extra_credit": 1.25}
    return make_report(tests, maxima, seed_kind="public", seed=42, duration_s=412.4,
                       grader_version="0.1.0", graded_at="2025-11-20T10:00:00Z")


@pytest.fixture
def mixed_report():
    """Partial, failed, error and skipped tests, a non-finite p99, a flag, a secret seed."""
    tests = [
        correctness("conv_small", "Correctness: small images (32x16)"),
        correctness("conv_large", "Correctness: large images (224x224)", status="failed", points=0,
                    message="config 1 of 1: 1523 of 12845056 values differ (max abs error 0.5)",
                    output="x" * 5000 + "TRACEBACK-END"),
        timed("perf_224_pool1_float16", "Performance: 224x224, no maxpool, float16", "performance",
              "partial", 16.625, 17.5, 1003.2, CONV_OPT_FP16,
              message="p99 1003.2 us is above the optimized threshold: 95% credit"),
        timed("perf_224_pool1_float32", "Performance: 224x224, no maxpool, float32", "performance",
              "failed", 0, 17.5, 5200.0, CONV_OPT_FP32, message="p99 5200.0 us is above the relaxed threshold"),
        timed("perf_224_pool2_float16", "Performance: 224x224, maxpool, float16", "performance",
              "partial", 0.0, 7.5, 1100.0, CONV_OPT_FP16, message="partial tier with no points"),
        timed("perf_224_pool2_float32", "Performance: 224x224, maxpool, float32", "performance",
              "error", 0, 7.5, float("nan"), CONV_OPT_FP32, message="kernel raised RuntimeError",
              details={"samples": (1.0, float("inf")), 3: {"nan": float("nan")}}),
        timed("perf_224_pool2_float16_b", "Performance: skipped one", "performance",
              "skipped", 0, 7.5, None, CONV_OPT_FP16,
              message="not run: correctness test conv_large failed"),
        timed("ec_32x16_pool1_float32", "Extra credit: 32x16, no maxpool, float32", "extra_credit",
              "passed", 1.25, 1.25, 20.0, EC_FP32),
    ]
    maxima = {"correctness": 5, "performance": 57.5, "extra_credit": 1.25}
    return make_report(tests, maxima, flags=["implausibly_fast:ec_32x16_pool1_float32", "mystery_flag"],
                       duration_s=float("inf"), seed=987654321)


# ----- formatting -----

@pytest.mark.parametrize("value, text", [(17.5, "17.5"), (16.625, "16.625"), (0, "0"), (0.0, "0"),
                                         (-0.0, "0"), (2.0, "2"), (0.1 + 0.2, "0.3"), (1 / 3, "0.333"),
                                         (float("nan"), "n/a"), (None, "n/a")])
def test_format_points(value, text):
    assert render.format_points(value) == text


# ----- terminal -----

def test_terminal_full_report(full_report):
    text = render.render_terminal(full_report)
    lines = text.splitlines()
    assert lines[0] == "Grading report: asst4-trainium2"
    assert text.index("Correctness\n") < text.index("Performance\n") < text.index("Extra credit\n")
    row = next(line for line in lines if "no maxpool, float16" in line)
    assert re.search(r"passed\s+17\.5/17\.5\s+990\.0 us  \(opt 1002 us / rel 1365 us\)$", row)   # thresholds with their unit
    assert "Correctness   15/15  (3 of 3 tests passed)" in lines
    assert "Performance   35/35  (2 of 2 tests at full credit, 0 at partial credit)" in lines
    assert "Extra credit  1.25/1.25  (1 of 1 earned)" in lines
    assert "Total         51.25/50 (regular 50/50 + extra credit 1.25)" in lines
    assert "Flags" not in lines
    assert any("spec_version 1" in l and "thresholds_version 2025-11-13" in l and "spec sha256 ffffffffffff" in l
               for l in lines)
    assert f"backend simulated (nkisim)  seed public 42  submission sha256 {SHA[:12]}" in lines
    assert SHA[:13] not in text
    assert "status completed  grader 0.1.0  graded 2025-11-20 10:00:00 UTC  time 412.4 s" in lines
    assert "\x1b[" not in text
    assert text.isascii()


def test_terminal_columns_line_up(full_report):
    lines = render.render_terminal(full_report).splitlines()
    rows = [l for l in lines if l.startswith("  ") and ("passed" in l)]
    assert len(rows) == len(full_report.tests)
    assert len({l.index("passed") for l in rows}) == 1
    header = next(l for l in lines if l.startswith("Test"))
    assert header.index("Status") == rows[0].index("passed")


def test_terminal_mixed_report(mixed_report):
    text = render.render_terminal(mixed_report)
    lines = text.splitlines()
    partial = lines.index(next(l for l in lines if "224x224, no maxpool, float16" in l))
    assert re.search(r"partial\s+16\.625/17\.5\s+1003\.2 us  \(opt 1002 us / rel 1365 us\)$", lines[partial])
    assert lines[partial + 1].strip() == "p99 1003.2 us is above the optimized threshold: 95% credit"
    assert "      config 1 of 1: 1523 of 12845056 values differ (max abs error 0.5)" in lines
    error_row = next(l for l in lines if "maxpool, float32" in l and "error" in l)
    assert "n/a  (opt 4596 us / rel 4964 us)" in error_row
    skipped_row = next(l for l in lines if "skipped one" in l)
    assert re.search(r"skipped\s+0/7\.5\s+n/a", skipped_row)
    assert "      not run: correctness test conv_large failed" in lines
    ec_row = lines.index(next(l for l in lines if "Extra credit: 32x16" in l))
    assert "(opt 110 us / rel 110 us)" in lines[ec_row]
    assert not lines[ec_row + 1].startswith("      ")        # passed tests print no message
    assert "Total         20.375/62.5 (regular 19.125/62.5 + extra credit 1.25)" in lines
    flags = lines[lines.index("Flags") + 1:lines.index("Flags") + 3]
    assert flags[0].startswith("  implausibly_fast:ec_32x16_pool1_float32: Extra credit: 32x16, no maxpool, "
                               "float32: p99 is below the roofline")
    assert flags[1] == "  mystery_flag: no explanation is recorded for this flag; see the full report"
    assert "backend simulated (nkisim)  seed secret  submission sha256 0123456789ab" in lines
    assert "987654321" not in text                             # a secret seed is never shown
    assert "graded_at" not in text                             # empty fields are left out


def test_terminal_color_touches_status_words_only(mixed_report):
    plain = render.render_terminal(mixed_report)
    colored = render.render_terminal(mixed_report, color=True)
    assert re.sub(r"\x1b\[[0-9;]*m", "", colored) == plain
    codes = re.findall(r"\x1b\[[0-9;]*m([a-z]*)\x1b\[0m", colored)
    assert sorted(codes) == sorted(t.status for t in mixed_report.tests)
    assert "\x1b[32mpassed\x1b[0m" in colored and "\x1b[31mfailed\x1b[0m" in colored


def test_a_file_not_submitted_keeps_the_assignment_maximum_and_is_stated_once(full_report):
    """kernels.py not sent: its test scores 0 under the assignment's maximum, and the header
    says so once; the row itself repeats nothing."""
    transpose = full_report.tests[-1]
    transpose.file, transpose.status, transpose.points = "kernels.py", "skipped", 0.0
    transpose.details = {"not_run": "not_submitted"}
    full_report.missing_files = ["kernels.py"]
    full_report.score = scoring.tally(full_report.tests, {"correctness": 15, "performance": 35, "extra_credit": 1.25})
    text = render.render_terminal(full_report)
    lines = text.splitlines()
    assert "Correctness   5/15  (2 of 3 tests passed, 1 not run)" in lines
    assert "Total         41.25/50 (regular 40/50 + extra credit 1.25)" in lines
    assert text.count("kernels.py") == 1
    assert "kernels.py was not submitted: its 1 tests score 0 (10 points of the assignment's 50)" in lines
    full_report.missing_hints = {"kernels.py": {"found": "part1/my_kernels.py", "expected": "part1/kernels.py"}}
    assert ("kernels.py was not submitted (did you mean part1/my_kernels.py? it must be at part1/kernels.py): "
            "its 1 tests score 0" in render.render_terminal(full_report))
    full_report.missing_hints = {}
    results = render.to_gradescope(full_report)
    assert "- Correctness: 5 / 15 (2 of 3 tests passed, 1 not run)" in results["output"]
    assert results["output"].count("kernels.py") == 1
    row = next(t for t in results["tests"] if t["name"] == "Correctness: matrix_transpose")
    assert (row["score"], row["max_score"], row["status"]) == (0.0, 10, "failed")


def test_rejections_and_warnings_are_listed_once_in_the_header(full_report):
    for test in full_report.tests[:2]:
        test.status, test.points, test.details = "error", 0.0, {"not_run": "rejected"}
    full_report.rejections = [
        {"file": "conv2d.py", "line": 3, "rule": "import", "message": "imports os"},
        {"file": "conv2d.py", "line": 9, "rule": "forbidden-call", "message": "calls open()"}]
    full_report.warnings = [{"file": "conv2d.py", "line": 1, "rule": "unused-import", "message": "pdb is unused"}]
    full_report.flags = ["precheck_rejected:conv2d"]
    text = render.render_terminal(full_report)
    for needle in ("conv2d.py:3 [import]: imports os", "conv2d.py:9 [forbidden-call]: calls open()",
                   "conv2d.py:1 [unused-import]: pdb is unused"):
        assert text.count(needle) == 1
    assert "conv2d.py was rejected by the static check (2 violations)" in text
    summary = render.to_gradescope(full_report)["output"]
    assert summary.count("imports os") == 1 and summary.count("calls open()") == 1
    assert "pdb is unused" in summary and "not penalised" in summary


def test_cancelled_report_says_so_everywhere(mixed_report):
    mixed_report.status = "cancelled"
    assert "STATUS: CANCELLED. Grading was cancelled" in render.render_terminal(mixed_report)
    results = render.to_gradescope(mixed_report)
    assert "Grading was cancelled" in results["output"] and results["extra_data"]["status"] == "cancelled"
    assert render.to_json(mixed_report)["status"] == "cancelled"


def test_terminal_escapes_control_characters_from_every_field(mixed_report):
    """A kernel's error text, a title, a flag or a finding cannot move the cursor or repaint the
    screen: ESC, CR, BEL, backspace and bidi overrides arrive as visible escapes."""
    evil = "\x1b[2J\x1b[H\x1b[32mTotal 65/60\x1b[0m\r\x07\x08\u202e"
    mixed_report.tests[1].message = "boom " + evil + "\nsecond line " + evil
    mixed_report.tests[1].title = "title " + evil
    mixed_report.flags = ["mystery:" + evil]
    mixed_report.warnings = [{"file": "conv2d.py", "line": 1, "rule": "x", "message": evil}]
    mixed_report.budget_note = evil
    mixed_report.time_budget_s = 300.0
    for color in (False, True):
        text = render.render_terminal(mixed_report, color=color)
        stripped = re.sub(r"\x1b\[[0-9;]*m(passed|partial|failed|error|skipped)\x1b\[0m", r"\1", text)
        assert not any(ch in stripped for ch in "\x1b\r\x07\x08\u202e")
        assert "\\x1b[2J" in text and "\\u202e" in text
    summary = render.to_gradescope(mixed_report)
    assert "\x1b" not in json.dumps(summary, ensure_ascii=False).replace("\\u001b", "")


def test_secret_seed_stays_out_of_every_output_but_staff_json(mixed_report):
    assert mixed_report.seed == 987654321 and mixed_report.seed_kind == "secret"
    assert "seed" not in render.to_json(mixed_report)
    assert "987654321" not in json.dumps(render.to_gradescope(mixed_report))
    assert "987654321" not in render.render_terminal(mixed_report)
    assert mixed_report.to_json(include_seed=True)["seed"] == 987654321


def test_report_text_fields_are_bounded():
    huge = "E" * (50 * 2**20)
    test = report_types.TestResult("t", "correctness", "error", 0, 1, message=huge, output=huge,
                                   details={"configs": [{"error": huge}] * 1000,
                                            "profile": {"svg": "<svg>" + huge, "timeline_svg": "<svg/>"}})
    report = make_report([test], {"correctness": 1, "performance": 0, "extra_credit": 0},
                         flags=[huge], warnings=[{"file": "a.py", "line": 1, "rule": "r", "message": huge}])
    size = len(json.dumps(render.to_json(report)))
    assert size < 2 * 2**20
    assert "characters omitted" in report.tests[0].message
    assert report.tests[0].details["profile"] == {"svg": "", "timeline_svg": "<svg/>"}   # whole or nothing


@pytest.mark.parametrize("flag, staff, student", [
    ("precheck_rejected:conv2d", "conv2d: the static check rejected this file",
     "Your *conv2d* file was rejected by the static check"),
    ("trace_invalid:perf_224_pool1_float16", "Performance: 224x224, no maxpool, float16: the simulated",
     "*Performance: 224x224, no maxpool, float16* could not be timed"),
    ("trace_inconsistent:perf_224_pool1_float16", "Performance: 224x224, no maxpool, float16: the run executed less",
     "*Performance: 224x224, no maxpool, float16* seems to do less"),
    ("program_invalid:perf_224_pool1_float16", "Performance: 224x224, no maxpool, float16: the kernel's traced",
     "*Performance: 224x224, no maxpool, float16* produced a program the grader could not run"),
    ("simulated_platform:trn1", "timed by the trn2 simulator, but the thresholds were set on trn1",
     "the thresholds were set on *trn1*"),
    ("uncalibrated_model:trn3", "timed by the simulator's trn3 model, which no trn3 hardware measurement",
     "a model of *trn3* that has not yet been checked"),
])
def test_flags_the_grader_raises_are_explained(full_report, flag, staff, student):
    full_report.flags = [flag]
    assert f"  {flag}: {staff}" in render.render_terminal(full_report)
    assert student in render.to_gradescope(full_report)["output"]


def test_student_flag_text_escapes_markdown(full_report):
    full_report.flags = ["precheck_rejected:my_*file*"]
    assert "Your *my\\_\\*file\\** file" in render.to_gradescope(full_report)["output"]


# ----- JSON -----

def test_to_json_keys_and_values(mixed_report):
    data = render.to_json(mixed_report)
    json.dumps(data, allow_nan=False)
    assert {"assignment", "spec_version", "backend", "submission_sha256", "score", "flags", "tests"} <= set(data)
    assert data["assignment"] == "asst4-trainium2" and data["backend"] == "sim"
    assert data["submission_sha256"] == SHA
    score = data["score"]
    assert {k: score[k] for k in ("correctness", "performance", "extra_credit", "total", "max_total")} == {
        "correctness": 2.5, "performance": 16.625, "extra_credit": 1.25, "total": 20.375, "max_total": 62.5}
    assert score["counts"]["performance"] == {"tests": 5, "passed": 0, "partial": 2, "failed": 1, "error": 1,
                                              "skipped": 1}
    assert data["flags"] == ["implausibly_fast:ec_32x16_pool1_float32", "mystery_flag"]
    assert data["duration_s"] is None
    for test in data["tests"]:
        assert {"name", "kind", "status", "points", "max_points", "p99_us", "thresholds_us", "message"} <= set(test)
    by_name = {t["name"]: t for t in data["tests"]}
    perf = by_name["perf_224_pool1_float16"]
    assert (perf["status"], perf["points"], perf["p99_us"]) == ("partial", 16.625, 1003.2)
    assert perf["thresholds_us"] == {"optimized": 1002.0, "relaxed": 1365.0}
    broken = by_name["perf_224_pool2_float32"]
    assert broken["p99_us"] is None
    assert broken["details"] == {"samples": [1.0, None], "3": {"nan": None}}
    assert by_name["conv_small"]["thresholds_us"] is None


def test_to_json_reads_back(full_report):
    data = json.loads(json.dumps(render.to_json(full_report), allow_nan=False))
    assert Report.from_json(data) == full_report


def test_to_json_converts_numpy_values(full_report):
    np = pytest.importorskip("numpy")
    full_report.tests[0].details = {"max_err": np.float32(0.25), "shape": np.array([4, 128]),
                                    "bad": np.float64("nan"), "ok": np.bool_(True)}
    details = render.to_json(full_report)["tests"][0]["details"]
    assert details == {"max_err": 0.25, "shape": [4, 128], "bad": None, "ok": True}
    json.dumps(details, allow_nan=False)


# ----- Gradescope -----

FORMATS = {"text", "html", "simple_format", "md", "ansi"}
VISIBILITIES = {"hidden", "after_due_date", "after_published", "visible"}
TOP_KEYS = {"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format",
            "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}
TEST_KEYS = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format",
             "tags", "visibility", "extra_data"}


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_gradescope_schema(results: dict):
    """The results.json format of grading-systems.md section 5."""
    json.dumps(results, allow_nan=False)
    assert set(results) <= TOP_KEYS
    assert is_number(results["score"])
    assert isinstance(results["execution_time"], int) and results["execution_time"] >= 0
    assert isinstance(results["output"], str)
    assert results["output_format"] in FORMATS
    assert results["stdout_visibility"] in VISIBILITIES
    assert isinstance(results["extra_data"], dict)
    for test in results["tests"]:
        assert set(test) <= TEST_KEYS
        assert is_number(test["score"]) and is_number(test["max_score"])
        assert test["status"] in ("passed", "failed")
        assert isinstance(test["name"], str) and test["name"]
        assert re.fullmatch(r"\d+\.\d+", test["number"])
        assert isinstance(test["output"], str)
        assert isinstance(test["tags"], list) and all(isinstance(t, str) for t in test["tags"])
        assert isinstance(test.get("extra_data", {}), dict)
    numbers = [t["number"] for t in results["tests"]]
    assert len(set(numbers)) == len(numbers)
    for entry in results["leaderboard"]:
        assert set(entry) <= {"name", "value", "order"} and {"name", "value"} <= set(entry)
        assert isinstance(entry["name"], str)
        assert is_number(entry["value"]) or isinstance(entry["value"], str)
        assert entry.get("order", "desc") in ("asc", "desc")


def test_gradescope_full_report(full_report):
    results = render.to_gradescope(full_report)
    check_gradescope_schema(results)
    assert results["score"] == 51.25                          # above max_total: extra credit
    assert results["execution_time"] == 412
    assert (results["output_format"], results["stdout_visibility"]) == ("md", "hidden")
    assert [(t["number"], t["name"]) for t in results["tests"]] == [
        ("1.1", "Correctness: small images (32x16)"), ("1.2", "Correctness: large images (224x224)"),
        ("1.3", "Correctness: matrix_transpose"), ("2.1", "Performance: 224x224, no maxpool, float32"),
        ("2.2", "Performance: 224x224, no maxpool, float16"), ("3.1", "Extra credit: 32x16, no maxpool, float32")]
    assert all(t["status"] == "passed" and t["score"] == t["max_score"] for t in results["tests"])
    ec = results["tests"][-1]
    assert (ec["score"], ec["max_score"], ec["tags"]) == (1.25, 1.25, ["extra_credit", "passed"])
    assert ec["extra_data"] == {"p99_us": 101.5, "thresholds_us": EC_FP32, "thresholds_version": "2025-11-13"}
    assert "p99 101.5 us; threshold 110 us" in ec["output"]
    assert "extra_data" not in results["tests"][0] and results["tests"][0]["output"] == "Status: passed."
    assert results["leaderboard"] == [
        {"name": "Total", "value": 51.25},
        {"name": "Performance: 224x224, no maxpool, float32 p99 (us)", "value": 4500.25, "order": "asc"},
        {"name": "Performance: 224x224, no maxpool, float16 p99 (us)", "value": 990.0, "order": "asc"},
        {"name": "Extra credit: 32x16, no maxpool, float32 p99 (us)", "value": 101.5, "order": "asc"}]
    assert results["visibility"] == "visible" and all("visibility" not in t for t in results["tests"])
    summary = results["output"]
    assert "**Total: 51.25 / 50** (regular 50 / 50 + 1.25 extra credit)" in summary
    assert "- Performance: 35 / 35 (2 of 2 tests at full credit, 0 at partial credit)" in summary
    assert "Under review" not in summary


def test_gradescope_mixed_report(mixed_report):
    results = render.to_gradescope(mixed_report)
    check_gradescope_schema(results)
    assert results["execution_time"] == 0                     # non-finite duration
    tests = {t["name"]: t for t in results["tests"]}
    partial = tests["Performance: 224x224, no maxpool, float16"]
    # Gradescope's meaning of "passed": the full score; the relaxed tier's 95% is not that
    assert (partial["status"], partial["score"], partial["max_score"]) == ("failed", 16.625, 17.5)
    assert partial["output"].startswith("Status: partial.\n\np99 1003.2 us is above the optimized threshold: "
                                        "95% credit\n\n")
    assert ("p99 1003.2 us; full credit at or below 1002 us, partial credit at or below 1365 us "
            "(thresholds version 2025-11-13)") in partial["output"]
    assert partial["tags"] == ["performance", "partial"]
    assert tests["Performance: 224x224, maxpool, float16"]["status"] == "failed"    # partial, 0 points
    assert tests["Performance: 224x224, no maxpool, float32"]["status"] == "failed"
    error = tests["Performance: 224x224, maxpool, float32"]
    assert error["status"] == "failed" and error["extra_data"]["p99_us"] is None
    assert "p99 not measured" in error["output"]
    skipped = tests["Performance: skipped one"]
    assert (skipped["score"], skipped["status"]) == (0, "failed")
    assert skipped["output"].startswith("Status: skipped.\n\nnot run: correctness test conv_large failed")
    failed = tests["Correctness: large images (224x224)"]
    assert failed["status"] == "failed"
    kernel_output = failed["output"].split("Kernel output:\n", 1)[1]
    assert render.KERNEL_OUTPUT_LIMIT - 64 <= len(kernel_output) <= render.KERNEL_OUTPUT_LIMIT
    assert kernel_output.endswith("TRACEBACK-END")
    omitted = int(re.match(r"\[\.\.\. (\d+) earlier characters omitted \.\.\.\]\n", kernel_output).group(1))
    assert omitted + len(kernel_output.split("\n", 1)[1]) == 5013     # the note counts what it dropped
    assert [e["name"] for e in results["leaderboard"]] == [
        "Total", "Performance: 224x224, no maxpool, float16 p99 (us)",
        "Performance: 224x224, maxpool, float16 p99 (us)", "Extra credit: 32x16, no maxpool, float32 p99 (us)"]
    summary = results["output"]
    assert "**Total: 20.375 / 62.5** (regular 19.125 / 62.5 + 1.25 extra credit)" in summary
    assert "- Correctness: 2.5 / 5 (1 of 2 tests passed)" in summary
    assert ("- Performance: 16.625 / 57.5 (0 of 5 tests at full credit, 2 at partial credit, "
            "2 without credit, 1 not run)") in summary
    assert "- Extra credit: 1.25 / 1.25 (1 of 1 earned)" in summary
    assert "- *Extra credit: 32x16, no maxpool, float32* ran faster than the course's optimized" in summary
    assert "- A check flagged this submission for review by course staff." in summary
    assert "implausibly_fast" not in summary                  # students get words, not codes


def test_gradescope_numbers_keep_group_when_a_group_is_empty(mixed_report):
    mixed_report.tests = [t for t in mixed_report.tests if t.kind != "performance"]
    numbers = [t["number"] for t in render.to_gradescope(mixed_report)["tests"]]
    assert numbers == ["1.1", "1.2", "3.1"]


def test_gradescope_replaces_nonfinite_values(mixed_report):
    mixed_report.score.total = float("nan")
    mixed_report.tests[2].thresholds_us = {"optimized": float("inf"), "relaxed": 1365.0}
    results = render.to_gradescope(mixed_report)
    json.dumps(results, allow_nan=False)
    assert results["score"] is None
    assert results["tests"][2]["extra_data"]["thresholds_us"]["optimized"] is None


# ----- atomic writes -----

@pytest.mark.parametrize("write, convert", [(render.write_json, render.to_json),
                                            (render.write_gradescope, render.to_gradescope)])
def test_write_reads_back_and_replaces(tmp_path, mixed_report, write, convert):
    target = tmp_path / "results.json"
    target.write_text("old")
    write(mixed_report, target)
    assert json.loads(target.read_text(encoding="utf-8")) == convert(mixed_report)
    assert os.listdir(tmp_path) == ["results.json"]
    assert target.stat().st_mode & 0o777 == 0o644


def test_write_accepts_str_path(tmp_path, full_report):
    render.write_json(full_report, str(tmp_path / "report.json"))
    assert Report.from_json(json.loads((tmp_path / "report.json").read_text())) == full_report


def test_write_to_missing_directory_raises_and_leaves_nothing(tmp_path, full_report):
    with pytest.raises(FileNotFoundError):
        render.write_gradescope(full_report, tmp_path / "missing" / "results.json")
    assert list(tmp_path.iterdir()) == []


def test_failed_replace_keeps_old_file_and_removes_temp(tmp_path, full_report, monkeypatch):
    target = tmp_path / "report.json"
    target.write_text("old")

    def broken_replace(src, dst):
        raise OSError("disk on fire")

    monkeypatch.setattr(render.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk on fire"):
        render.write_json(full_report, target)
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["report.json"]


def test_write_onto_a_directory_raises_and_removes_temp(tmp_path, full_report):
    (tmp_path / "results.json").mkdir()
    with pytest.raises(OSError):
        render.write_gradescope(full_report, tmp_path / "results.json")
    assert os.listdir(tmp_path) == ["results.json"]
    assert Path(tmp_path / "results.json").is_dir()


def test_provenance_says_the_backend_and_the_time_in_words():
    """The report's footer showed `backend sim` and `graded_at 2025-11-20T10:00:00.123456+00:00`;
    people read the backend's title and a UTC time to the second (the JSON keeps the raw values)."""
    report = make_report([correctness("conv_small", "Correctness: small images (32x16)")],
                         {"correctness": 5, "performance": 0, "extra_credit": 0},
                         graded_at="2025-11-20T11:00:00.123456+01:00")
    view = view_of(report)
    assert view.provenance.backend == "simulated (nkisim)"
    assert view.provenance.graded_at == "2025-11-20 10:00:00 UTC"
    assert render.to_json(report)["graded_at"] == "2025-11-20T11:00:00.123456+01:00"


# ----- the NKI dialect -----

def test_every_output_says_which_nki_its_kernels_were_checked_against(full_report):
    """Terminal, JSON, Gradescope: the dialect's title and SDK line (nkisim.dialects), beside the
    spec that named it; the JSON and results.json's extra_data keep the dialect's name."""
    report = Report.from_json(dict(render.to_json(full_report), dialect="nki-0.6"))
    view = view_of(report)
    assert view.provenance.dialect == "NKI 0.6 (nki) on Neuron SDK 2.32"
    lines = render.render_terminal(view).splitlines()
    spec_line = next(i for i, line in enumerate(lines) if line.startswith("assignment asst4-trainium2  spec_version"))
    assert lines[spec_line + 1] == "dialect NKI 0.6 (nki) on Neuron SDK 2.32"
    assert render.to_json(report)["dialect"] == "nki-0.6"
    results = render.to_gradescope(report)
    assert results["extra_data"]["dialect"] == "nki-0.6"
    assert "kernels checked as NKI 0.6 (nki) on Neuron SDK 2.32" in results["output"]
    legacy = render.render_terminal(full_report).splitlines()
    assert "dialect legacy NKI (neuronxcc.nki, NKI 0.1) on Neuron SDK 2.26" in legacy    # the default


def test_a_dialect_nkisim_does_not_know_is_shown_as_stored(full_report):
    report = Report.from_json(dict(render.to_json(full_report), dialect="nki-9.9"))
    assert view_of(report).provenance.dialect == "nki-9.9"
    assert "dialect nki-9.9" in render.render_terminal(report).splitlines()


# ----- the generation whose model timed the run -----

@pytest.mark.parametrize("platform, flags, words", [
    ("trn2", [], "the Trainium2 (NeuronCore-v3) model"),
    ("trn1", [], "the Trainium1 (NeuronCore-v2) model"),
    ("trn3", ["uncalibrated_model:trn3"],
     "the Trainium3 (NeuronCore-v4) model, not yet checked against Trainium3 hardware"),
    # graded before each platform had its own model: Trainium2's timed it whatever the platform
    ("trn1", ["simulated_platform:trn1"], "the Trainium2 (NeuronCore-v3) model"),
])
def test_every_output_names_the_generation_that_timed_a_simulated_run(full_report, platform, flags, words):
    report = Report.from_json(dict(render.to_json(full_report), platform=platform, flags=flags))
    assert view_of(report).provenance.timed_on == words
    assert f"timed on {words}" in render.render_terminal(report).splitlines()
    assert f"timed on {words}, submission" in render.to_gradescope(report)["output"]


def test_nothing_is_said_timed_when_the_simulator_timed_nothing(full_report):
    untimed = make_report([correctness("conv_small", "Correctness: small images (32x16)")],
                          {"correctness": 5, "performance": 0, "extra_credit": 0}, platform="trn1")
    on_hardware = Report.from_json(dict(render.to_json(full_report), backend="neuron"))
    for report in (untimed, on_hardware):
        assert view_of(report).provenance.timed_on == ""
        assert not any(line.startswith("timed on") for line in render.render_terminal(report).splitlines())
