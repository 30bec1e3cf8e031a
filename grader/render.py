"""Showing a Report: a plain-text table for terminals, the report as JSON, and Gradescope's
results.json. Nothing here computes a score: every total, maximum and count comes from the
Report's Score, so the three outputs agree. Every string from a report reaches a terminal
with its control characters escaped (a kernel's error text may carry ANSI escapes)."""
from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
import unicodedata
from pathlib import Path

from grader.report import KINDS, Report, TestResult
from grader.vocabulary import KIND_TITLES, TIMED_KINDS, ReportStatus, TestKind, TestStatus, Tier

GROUP_TITLES = KIND_TITLES
KERNEL_OUTPUT_LIMIT = 2000      # characters of captured kernel output per Gradescope test

# Why a flag was raised, for staff at a terminal and for the student on Gradescope. {subject} is
# the flagged test's title, or whatever follows the colon in the flag (a file key, a platform).
FLAG_EXPLANATIONS = {
    "implausibly_fast": (
        "{subject}: p99 is below the roofline or far below the optimized reference; review before it counts",
        "*{subject}* ran faster than the course's optimized reference kernel by a wide margin. That is "
        "unusual, so course staff will review this run before the score is final."),
    "precheck_rejected": (
        "{subject}: the static check rejected this file, so its tests did not run",
        "Your *{subject}* file was rejected by the static check, so its tests did not run; the "
        "violations are listed above."),
    "trace_invalid": (
        "{subject}: the simulated instruction trace could not be decoded; the test errored",
        "*{subject}* could not be timed because its run left an invalid trace; course staff will look into it."),
    "trace_inconsistent": (
        "{subject}: the run executed less matmul work than the problem needs; check for skipped work",
        "*{subject}* seems to do less matrix-multiply work than the problem needs, so course staff will "
        "review this run before the score is final."),
    "program_invalid": (
        "{subject}: the kernel's traced program broke the hardware rules the grader checks; the test errored",
        "*{subject}* produced a program the grader could not run (the test's message says why); course "
        "staff will look into it."),
    "simulated_platform": (
        "timed by the trn2 simulator, but the thresholds were set on {subject}",
        "This run was timed by a trn2 simulator while the thresholds were set on *{subject}*, so its times "
        "are estimates."),
}
UNKNOWN_FLAG = ("no explanation is recorded for this flag; see the full report",
                "A check flagged this submission for review by course staff.")
STATUS_SENTENCES = {
    ReportStatus.CANCELLED: "Grading was cancelled before it finished: tests not run score 0 and the totals are partial.",
    ReportStatus.INTERRUPTED: "Grading was interrupted before it finished: tests not run score 0 and the totals are partial.",
}

ANSI = {TestStatus.PASSED: "\x1b[32m", TestStatus.PARTIAL: "\x1b[33m", TestStatus.FAILED: "\x1b[31m", TestStatus.ERROR: "\x1b[1;31m",
        TestStatus.SKIPPED: "\x1b[2m"}
ANSI_RESET = "\x1b[0m"


# ----- small formatters -----

def escape_control(text) -> str:
    """`text` with every control or format character (ESC, CR, BEL, bidi overrides, newlines
    too) written as a visible backslash escape, so it cannot move the cursor or recolour a
    terminal. Split multi-line text into lines first."""
    text = text if isinstance(text, str) else str(text)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch == " " else _escape_char(ch) for ch in text)


def _escape_char(ch: str) -> str:
    if unicodedata.category(ch) == "Zs":      # unusual spaces print as spaces
        return " "
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else (f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")


def _lines(text: str) -> list[str]:
    """Multi-line text as escaped lines."""
    return [escape_control(line) for line in str(text).splitlines()]


def format_points(value: float | None) -> str:
    """Up to 3 decimals without trailing zeros: 17.5, 16.625, 0."""
    if value is None or not _finite(value):
        return "n/a"
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def test_summary(test: TestResult) -> dict:
    """What a finished test shows while the rest of the grade runs (stored by workers as tests
    finish, sent by the status API, printed by `grader grade` and `grader submit` alike)."""
    return {"name": test.name, "title": test.title or test.name, "status": test.status,
            "points": test.points, "max_points": test.max_points,
            "p99_us": test.p99_us if _finite(test.p99_us) else None, "duration_s": test.duration_s}


def format_test_line(done: int, total: int, summary: dict) -> str:
    """One line per finished test: '[3/13] Correctness: large images (224x224): passed 2.5/2.5 (41.2 s)'."""
    p99 = summary.get("p99_us")
    extra = f", p99 {p99:.1f} us" if isinstance(p99, (int, float)) else ""
    duration = summary.get("duration_s") or 0.0
    return escape_control(f"[{done}/{total}] {summary.get('title') or summary.get('name')}: {summary.get('status')} "
                          f"{format_points(summary.get('points'))}/{format_points(summary.get('max_points'))}{extra} "
                          f"({duration:.1f} s)")


def _format_us(value: float | None) -> str:
    return f"{value:.1f} us" if _finite(value) else "n/a"


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_timed(test: TestResult) -> bool:
    return test.kind in TIMED_KINDS


def _title(test: TestResult) -> str:
    return test.title or test.name


def _timing_cell(test: TestResult) -> str:
    """'1003.2 us  (opt 1002 / rel 1365)' for timed tests, '' otherwise."""
    if not _is_timed(test):
        return ""
    cell = _format_us(test.p99_us)
    limits = test.thresholds_us or {}
    if Tier.OPTIMIZED in limits or Tier.RELAXED in limits:
        cell += (f"  (opt {format_points(limits.get(Tier.OPTIMIZED))}"
                 f" / rel {format_points(limits.get(Tier.RELAXED))})")
    return cell


def _grouped(report: Report, keep_empty: bool = False) -> list[tuple[str, list[TestResult]]]:
    """Tests by kind, in KINDS order and report order within a kind; unknown kinds go last.
    keep_empty keeps empty known groups, so a group's position (Gradescope's "2.x") is fixed."""
    kinds = dict.fromkeys([*KINDS, *(t.kind for t in report.tests)])
    groups = [(kind, [t for t in report.tests if t.kind == kind]) for kind in kinds]
    return [(kind, tests) for kind, tests in groups if tests or (keep_empty and kind in KINDS)]


def _maximum(report: Report, kind: str) -> float:
    """The assignment's maximum for a kind, as the Score records it."""
    return {TestKind.CORRECTNESS: report.score.max_correctness, TestKind.PERFORMANCE: report.score.max_performance,
            TestKind.EXTRA_CREDIT: report.score.max_extra_credit}[kind]


def _earned(report: Report, kind: str) -> float:
    return {TestKind.CORRECTNESS: report.score.correctness, TestKind.PERFORMANCE: report.score.performance,
            TestKind.EXTRA_CREDIT: report.score.extra_credit}[kind]


def count_phrase(report: Report, kind: str) -> str:
    """'4 of 5 tests passed' and the like, from the Score's counts: the same words in every output."""
    c = report.score.counts.get(kind) or {}
    n = c.get("tests", 0)
    if not n:
        return ""
    passed, partial, skipped = c.get(TestStatus.PASSED, 0), c.get(TestStatus.PARTIAL, 0), c.get(TestStatus.SKIPPED, 0)
    if kind == TestKind.CORRECTNESS:
        parts = [f"{passed} of {n} tests passed"]
    elif kind == TestKind.EXTRA_CREDIT:
        parts = [f"{passed + partial} of {n} earned"]
    else:
        parts = [f"{passed} of {n} tests at full credit", f"{partial} at partial credit"]
    unearned = n - passed - partial - skipped
    if kind != TestKind.CORRECTNESS and unearned:
        parts.append(f"{unearned} without credit")
    if skipped:
        parts.append(f"{skipped} not run")
    return ", ".join(parts)


def _flag_parts(report: Report, flag: str) -> tuple[str, str]:
    """'implausibly_fast:perf_x' -> ('implausibly_fast', title of perf_x)."""
    code, _, subject = flag.partition(":")
    titles = {t.name: _title(t) for t in report.tests}
    files = {t.file.rsplit(".", 1)[0]: t.file for t in report.tests if t.file}
    return code, titles.get(subject, files.get(subject, subject))


def _file_tests(report: Report, filename: str) -> list[TestResult]:
    return [t for t in report.tests if t.file == filename or t.file.endswith("/" + filename)]


def file_statements(report: Report) -> list[str]:
    """Once per file that did not run: why, and what its tests score."""
    lines = []
    for name in report.missing_files:
        tests = _file_tests(report, name)
        worth = sum(t.max_points for t in tests if t.kind != TestKind.EXTRA_CREDIT)
        hint = report.missing_hints.get(name) if isinstance(report.missing_hints, dict) else None
        maybe = (f" (did you mean {hint.get('found')}? it must be at {hint.get('expected')})"
                 if isinstance(hint, dict) else "")
        lines.append(escape_control(f"{name} was not submitted{maybe}: its {len(tests)} tests score 0 "
                                    f"({format_points(worth)} points of the assignment's "
                                    f"{format_points(report.score.max_total)})"))
    rejected = list(dict.fromkeys(v.get("file", "") for v in report.rejections))
    for name in rejected:
        found = [v for v in report.rejections if v.get("file") == name]
        base = name.rsplit("/", 1)[-1]
        tests = _file_tests(report, base) or _file_tests(report, name)
        lines.append(f"{name} was rejected by the static check ({len(found)} "
                     f"{'violation' if len(found) == 1 else 'violations'}): its {len(tests)} tests score 0")
    return lines


def finding_line(finding: dict) -> str:
    line = finding.get("line")
    where = f"{finding.get('file', '')}:{line}" if line else finding.get("file", "")
    rule = f" [{finding['rule']}]" if finding.get("rule") else ""
    return f"{where}{rule}: {finding.get('message', '')}"


# ----- terminal -----

def render_terminal(report: Report, *, color: bool = False) -> str:
    """The header (status, files not graded, every static-check finding, the time budget), a
    per-test table grouped by kind, then totals, flags and where the grade came from."""
    title = f" ({report.title})" if report.title else ""
    lines = [escape_control(f"Grading report: {report.assignment}{title}"), ""]
    header = header_lines(report)
    if header:
        lines += [*header, ""]
    lines += _table_lines(report, color)
    lines += ["", *_totals_lines(report)]
    if report.flags:
        lines += ["", "Flags", *_flag_lines(report)]
    lines += ["", *_footer_lines(report)]
    return "\n".join(lines) + "\n"


def header_lines(report: Report) -> list[str]:
    """What stopped a file or a test before it ran, once each (status, files not sent or rejected,
    static-check findings, the time budget): the terminal's header, and the web report's."""
    lines = []
    if report.status in STATUS_SENTENCES:
        lines.append(f"STATUS: {report.status.upper()}. {STATUS_SENTENCES[report.status]}")
    lines += [escape_control(s) for s in file_statements(report)]
    if report.rejections:
        lines.append("Static check (errors; the file is rejected):")
        lines += ["  " + escape_control(finding_line(v)) for v in report.rejections]
    if report.warnings:
        lines.append("Static check (warnings; not penalised):")
        lines += ["  " + escape_control(finding_line(v)) for v in report.warnings]
    if report.budget_note:
        lines.append(escape_control(f"Time budget ({format_points(report.time_budget_s)} s): {report.budget_note}"))
    return lines


def _table_lines(report: Report, color: bool) -> list[str]:
    header = ("Test", "Status", "Points", "p99")
    widths = [max(len(row[i]) for row in [header, *map(_table_row, report.tests)]) for i in range(4)]

    def line(cells, status_color=""):
        status = cells[1].ljust(widths[1])
        if status_color:                # pad outside the escape codes so columns stay aligned
            status = f"{status_color}{cells[1]}{ANSI_RESET}" + " " * (widths[1] - len(cells[1]))
        return f"{cells[0].ljust(widths[0])}  {status}  {cells[2].ljust(widths[2])}  {cells[3]}".rstrip()

    out = [line(header), line(["-" * w for w in widths])]
    for kind, tests in _grouped(report):
        out.append(escape_control(GROUP_TITLES.get(kind, kind)))
        for test in tests:
            out.append(line(_table_row(test), ANSI.get(test.status, "") if color else ""))
            if test.status != TestStatus.PASSED and test.message:
                out += ["      " + part for part in _lines(test.message)]
    return out


def _table_row(test: TestResult) -> tuple[str, str, str, str]:
    return ("  " + escape_control(_title(test)), escape_control(test.status),
            f"{format_points(test.points)}/{format_points(test.max_points)}", _timing_cell(test))


def _totals_lines(report: Report) -> list[str]:
    lines = []
    for kind in KINDS:
        counts = count_phrase(report, kind)
        lines.append(f"{GROUP_TITLES[kind]:<14}{format_points(_earned(report, kind))}/"
                     f"{format_points(_maximum(report, kind))}" + (f"  ({counts})" if counts else ""))
    score = report.score
    regular = score.total - score.extra_credit       # says what was lost even when extra credit hides it
    lines.append(f"{'Total':<14}{format_points(score.total)}/{format_points(score.max_total)}"
                 + (f" (regular {format_points(regular)}/{format_points(score.max_total)} + extra credit "
                    f"{format_points(score.extra_credit)})" if score.extra_credit else ""))
    return lines


def _flag_lines(report: Report) -> list[str]:
    lines = []
    for flag in report.flags:
        code, subject = _flag_parts(report, flag)
        lines.append(escape_control(f"  {flag}: {FLAG_EXPLANATIONS.get(code, UNKNOWN_FLAG)[0].format(subject=subject)}"))
    return lines


def _footer_lines(report: Report) -> list[str]:
    # a secret seed is never shown; a public one was given by whoever ran the grade
    seed = f"public {report.seed}" if report.seed_kind == "public" and report.seed is not None else "secret"
    lines = [f"assignment {report.assignment}  spec_version {report.spec_version}  "
             f"thresholds_version {report.thresholds_version}  spec sha256 {report.spec_hash[:12] or '-'}",
             f"backend {report.backend}  seed {seed}  submission sha256 {report.submission_sha256[:12] or '-'}"]
    extra = [f"{label} {value}" for label, value in
             (("status", report.status), ("grader", report.grader_version), ("graded_at", report.graded_at),
              ("time", f"{report.duration_s:.1f} s" if _finite(report.duration_s) else ""),
              ("budget", f"{format_points(report.time_budget_s)} s" if report.time_budget_s else "")) if value]
    if report.rescored_from:
        extra.append(f"rescored from thresholds_version {report.rescored_from.get('thresholds_version')}")
    lines.append("  ".join(extra))
    return [escape_control(line) for line in lines]


# ----- JSON -----

def _jsonable(value):
    """A copy of value that json.dumps(allow_nan=False) accepts: non-finite floats become None,
    tuples and sets become lists, NumPy scalars and arrays become Python numbers and lists."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return [_jsonable(v) for v in sorted(value, key=str)]
    if hasattr(value, "tolist"):            # NumPy scalar or array, without importing NumPy
        return _jsonable(value.tolist())
    return str(value)


def to_json(report: Report) -> dict:
    """The whole report (Report.to_json's shape, so Report.from_json reads it back), JSON-safe.
    A secret seed is not in it: staff storage calls report.to_json(include_seed=True)."""
    return _jsonable(report.to_json())


def write_json(report: Report, path: str | os.PathLike) -> None:
    _write_atomic(path, _dumps(to_json(report)))


def _dumps(data: dict) -> str:
    return json.dumps(data, indent=2, allow_nan=False, ensure_ascii=False) + "\n"


def _write_atomic(path: str | os.PathLike, text: str) -> None:
    """Write text to path so that a reader sees the old file or the complete new one, never a
    part: write a temporary file in the same directory (same filesystem), then os.replace."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)            # mkstemp makes 0600; reports are read by other processes
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


# ----- Gradescope results.json -----

GRADESCOPE_VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")


def to_gradescope(report: Report, *, visibility: dict | None = None, notes: tuple[str, ...] = (),
                  extra_data: dict | None = None) -> dict:
    """Gradescope's results.json (grading-systems.md section 5). The top-level score overrides
    the sum of test scores, so extra credit can take it above the assignment's maximum. A
    test's status follows Gradescope's own rule (passed when it earned its full score).
    `visibility` ({"default", "tests": {test name: value}, "stdout"}, Gradescope's values)
    says when students see each test; `notes` are lines added under the summary (how the run
    was graded), `extra_data` more stored data (the Gradescope autograder's isolation level)."""
    visibility = visibility or {}
    default = visibility.get("default", "visible")
    per_test = visibility.get("tests") or {}
    for value in (default, visibility.get("stdout", "hidden"), *per_test.values()):
        if value not in GRADESCOPE_VISIBILITIES:
            raise ValueError(f"unknown Gradescope visibility {value!r}; use one of {GRADESCOPE_VISIBILITIES}")
    duration = report.duration_s if _finite(report.duration_s) else 0.0
    tests = [_gradescope_test(report, test, f"{group}.{i}")
             for group, (_, members) in enumerate(_grouped(report, keep_empty=True), start=1)
             for i, test in enumerate(members, start=1)]
    for test, entry in zip([t for _, members in _grouped(report, keep_empty=True) for t in members], tests):
        if per_test.get(test.name, default) != default:
            entry["visibility"] = per_test[test.name]
    output = _student_summary(report)
    if notes:
        output += "\n\n" + "\n".join(f"_{_md_escape(note)}_" for note in notes)
    return _jsonable({
        "score": report.score.total,
        "execution_time": max(0, int(round(duration))),
        "output": output,
        "output_format": "md",
        "visibility": default,
        "stdout_visibility": visibility.get("stdout", "hidden"),
        "extra_data": {"assignment": report.assignment, "spec_version": report.spec_version,
                       "thresholds_version": report.thresholds_version, "spec_hash": report.spec_hash,
                       "backend": report.backend, "status": report.status,
                       "submission_sha256": report.submission_sha256, "seed_kind": report.seed_kind,
                       "grader_version": report.grader_version, "flags": list(report.flags),
                       "max_total": report.score.max_total, "missing_files": list(report.missing_files),
                       "rejections": list(report.rejections), "warnings": list(report.warnings),
                       **(extra_data or {})},
        "tests": tests,
        "leaderboard": _leaderboard(report),
    })


def write_gradescope(report: Report, path: str | os.PathLike, **options) -> None:
    """results.json at `path`, whole or not at all; `options` as to_gradescope's."""
    _write_atomic(path, _dumps(to_gradescope(report, **options)))


def gradescope_status(test: TestResult) -> str:
    """Gradescope's meaning: a test passes when it earns its full score."""
    full = _finite(test.points) and _finite(test.max_points) and test.max_points > 0 and test.points >= test.max_points
    return TestStatus.PASSED if test.status == TestStatus.PASSED and full else TestStatus.FAILED


def _gradescope_test(report: Report, test: TestResult, number: str) -> dict:
    entry = {
        "name": _plain(_title(test)),
        "number": number,
        "score": test.points if _finite(test.points) else 0.0,
        "max_score": test.max_points,
        "status": gradescope_status(test),
        "output": _test_output(report, test),
        "tags": [test.kind, test.status],
    }
    if _is_timed(test):
        entry["extra_data"] = {"p99_us": test.p99_us, "thresholds_us": test.thresholds_us,
                               "thresholds_version": report.thresholds_version}
    return entry


def _plain(text: str) -> str:
    """Text for Gradescope: control characters escaped, line breaks kept."""
    return "\n".join(_lines(text))


def _test_output(report: Report, test: TestResult) -> str:
    parts = [f"Status: {test.status}."]
    if test.message:
        parts.append(_plain(test.message))
    if _is_timed(test):
        parts.append(_timing_sentence(test, report.thresholds_version))
    if test.output:
        parts.append("Kernel output:\n" + _plain(_truncate(test.output, KERNEL_OUTPUT_LIMIT)))
    return "\n\n".join(parts)


def _timing_sentence(test: TestResult, thresholds_version: str) -> str:
    p99 = f"p99 {_format_us(test.p99_us)}" if _finite(test.p99_us) else "p99 not measured"
    limits = test.thresholds_us or {}
    optimized, relaxed = limits.get(Tier.OPTIMIZED), limits.get(Tier.RELAXED)
    if optimized is None and relaxed is None:
        return p99
    if optimized == relaxed:
        limit = f"threshold {format_points(optimized)} us"
    else:
        limit = (f"full credit at or below {format_points(optimized)} us, "
                 f"partial credit at or below {format_points(relaxed)} us")
    return f"{p99}; {limit} (thresholds version {thresholds_version})"


def _truncate(text: str, limit: int) -> str:
    """At most `limit` characters, keeping the end: a failing run's error and traceback come last."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - 64)           # 64 characters hold the note below
    return f"[... {len(text) - keep} earlier characters omitted ...]\n" + text[len(text) - keep:]


def _leaderboard(report: Report) -> list[dict]:
    """Gradescope's leaderboard columns: the total first (its default sort, higher first), then
    the p99 of every timed test that earned a valid time (lower first). A run whose time does
    not count (wrong output, not run) leaves that column empty rather than ranking a bogus time."""
    board = [{"name": "Total", "value": report.score.total}]
    return board + [{"name": f"{_title(t)} p99 (us)", "value": t.p99_us, "order": "asc"}
                    for t in report.tests
                    if _is_timed(t) and t.status in (TestStatus.PASSED, TestStatus.PARTIAL) and _finite(t.p99_us)]


def _student_summary(report: Report) -> str:
    score = report.score
    total = f"**Total: {format_points(score.total)} / {format_points(score.max_total)}**"
    if _finite(score.extra_credit) and score.extra_credit > 0:
        total += f" (includes {format_points(score.extra_credit)} extra credit)"
    lines = [total, ""]
    if report.status in STATUS_SENTENCES:
        lines += [f"**{STATUS_SENTENCES[report.status]}**", ""]
    statements = file_statements(report)
    if statements:
        lines += [f"- {_md_escape(s)}" for s in statements] + [""]
    if report.rejections:
        lines += ["**Static check errors** (the file is rejected):", ""]
        lines += [f"- {_md_escape(finding_line(v))}" for v in report.rejections] + [""]
    if report.warnings:
        lines += ["**Static check warnings** (not penalised):", ""]
        lines += [f"- {_md_escape(finding_line(v))}" for v in report.warnings] + [""]
    if report.budget_note:
        lines += [_md_escape(f"Time budget ({format_points(report.time_budget_s)} s): {report.budget_note}"), ""]
    for kind in KINDS:
        counts = count_phrase(report, kind)
        lines.append(f"- {GROUP_TITLES[kind]}: {format_points(_earned(report, kind))} / "
                     f"{format_points(_maximum(report, kind))}" + (f" ({counts})" if counts else ""))
    if report.flags:
        lines += ["", "**Under review**", ""]
        lines += [f"- {_student_flag(report, flag)}" for flag in report.flags]
    lines += ["", f"_Graded with {_md_escape(report.assignment)} spec {_md_escape(report.spec_version)}, "
                  f"thresholds {_md_escape(report.thresholds_version)}, submission "
                  f"{_md_escape(report.submission_sha256[:12]) or 'unknown'}._"]
    return "\n".join(lines)


def _student_flag(report: Report, flag: str) -> str:
    code, subject = _flag_parts(report, flag)
    return FLAG_EXPLANATIONS.get(code, UNKNOWN_FLAG)[1].format(subject=_md_escape(subject))


def _md_escape(text: str) -> str:
    return "".join("\\" + ch if ch in "\\`*_[]<>#|" else ch for ch in escape_control(text))
