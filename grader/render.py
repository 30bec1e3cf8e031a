"""Drawing a report: a plain-text table for terminals, the report as JSON, and Gradescope's
results.json (the web's pages are the fourth drawing, web/runs.py and its templates). Every
renderer draws from the report's view (grader/report_view.py), built once: nothing here works
out a row, a maximum, a unit or a flag's words. Every string from a report reaches a terminal
with its control characters escaped (a kernel's error text may carry ANSI escapes)."""
from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
import unicodedata
from pathlib import Path

from grader import report_view
from grader.report import Report, TestResult
from grader.report_view import ReportView, TestView, finite as _finite, format_points, view_of
from grader.vocabulary import KIND_TITLES, TestStatus, Tier

GROUP_TITLES = KIND_TITLES
KERNEL_OUTPUT_LIMIT = 2000      # characters of captured kernel output per Gradescope test
FLAG_EXPLANATIONS, UNKNOWN_FLAG, STATUS_SENTENCES = (report_view.FLAG_EXPLANATIONS, report_view.UNKNOWN_FLAG,
                                                     report_view.STATUS_SENTENCES)

ANSI = {TestStatus.PASSED: "\x1b[32m", TestStatus.PARTIAL: "\x1b[33m", TestStatus.FAILED: "\x1b[31m",
        TestStatus.ERROR: "\x1b[1;31m", TestStatus.SKIPPED: "\x1b[2m"}
ANSI_RESET = "\x1b[0m"


def _view(report: Report | ReportView) -> ReportView:
    return report if isinstance(report, ReportView) else view_of(report)


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


count_phrase = report_view.count_phrase      # '4 of 5 tests passed': the same words in every output


def file_statements(report: Report | ReportView) -> list[str]:
    """Once per file that did not run: why, and what its tests score."""
    return [escape_control(s) for s in _view(report).header.files]


# ----- terminal -----

def render_terminal(report: Report | ReportView, *, color: bool = False) -> str:
    """The header (status, files not graded, every static-check finding, the time budget), a
    per-test table grouped by kind, then totals, flags and where the grade came from."""
    view = _view(report)
    p = view.provenance
    lines = [escape_control(f"Grading report: {p.assignment}{f' ({p.title})' if p.title else ''}"), ""]
    header = header_lines(view)
    if header:
        lines += [*header, ""]
    lines += _table_lines(view, color)
    lines += ["", *_totals_lines(view)]
    if view.flags:
        lines += ["", "Flags", *(escape_control(f"  {f.flag}: {f.for_staff}") for f in view.flags)]
    if view.slow_hint:
        lines += ["", view.slow_hint]
    lines += ["", *_footer_lines(view)]
    return "\n".join(lines) + "\n"


def header_lines(report: Report | ReportView) -> list[str]:
    """The report's header as escaped lines: the terminal's, and the web report's."""
    return [escape_control(line) for line in _view(report).header.lines()]


def _table_row(test: TestView) -> tuple[str, str, str, str]:
    return ("  " + escape_control(test.title), escape_control(test.status), test.points_text,
            escape_control(test.timing_cell))


def _table_lines(view: ReportView, color: bool) -> list[str]:
    header = ("Test", "Status", "Points", "p99")
    widths = [max(len(row[i]) for row in [header, *map(_table_row, view.tests)]) for i in range(4)]

    def line(cells, status_color=""):
        status = cells[1].ljust(widths[1])
        if status_color:                # pad outside the escape codes so columns stay aligned
            status = f"{status_color}{cells[1]}{ANSI_RESET}" + " " * (widths[1] - len(cells[1]))
        return f"{cells[0].ljust(widths[0])}  {status}  {cells[2].ljust(widths[2])}  {cells[3]}".rstrip()

    out = [line(header), line(["-" * w for w in widths])]
    for group in view.groups:
        out.append(escape_control(group.title))
        for test in group.tests:
            out.append(line(_table_row(test), ANSI.get(test.status, "") if color else ""))
            out += ["      " + part for part in _lines(test.error)]
    return out


def _totals_lines(view: ReportView) -> list[str]:
    lines = [f"{g.title:<14}{g.points_text}" + (f"  ({g.counts})" if g.counts else "")
             for g in view.points.groups if g.maximum is not None]
    lines.append(f"{'Total':<14}{view.points.total_text}")
    return [escape_control(line) for line in lines]


def _footer_lines(view: ReportView) -> list[str]:
    p = view.provenance
    lines = [f"assignment {p.assignment}  spec_version {p.spec_version}  "
             f"thresholds_version {p.thresholds_version}  spec sha256 {p.spec_hash[:12] or '-'}",
             f"dialect {p.dialect}",
             f"backend {p.backend}  seed {p.seed}  submission sha256 {p.submission_sha256[:12] or '-'}"]
    if p.timed_on:
        lines.append(f"timed on {p.timed_on}")
    extra = [f"{label} {value}" for label, value in
             (("status", p.status), ("grader", p.grader_version), ("graded", p.graded_at),
              ("time", f"{p.duration_s:.1f} s" if p.duration_s is not None else ""),
              ("budget", f"{format_points(p.time_budget_s)} s" if p.time_budget_s else "")) if value]
    if p.rescored_from:
        extra.append(f"rescored from thresholds_version {p.rescored_from}")
    lines.append("  ".join(extra))
    if p.blas:
        lines.append(f"blas {p.blas}")
    if p.hardware:
        lines.append(f"hardware {p.hardware}")
    if p.problems:
        lines.append(f"problems {p.problems}")
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


def to_json(report: Report | ReportView) -> dict:
    """The whole report (Report.to_json's shape, so Report.from_json reads it back), JSON-safe:
    the view's source, written whole. A secret seed is not in it: staff storage calls
    report.to_json(include_seed=True)."""
    return _jsonable(_view(report).source.to_json())


def write_json(report: Report | ReportView, path: str | os.PathLike) -> None:
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


def to_gradescope(report: Report | ReportView, *, visibility: dict | None = None, notes: tuple[str, ...] = (),
                  extra_data: dict | None = None) -> dict:
    """Gradescope's results.json (grading-systems.md section 5). The top-level score overrides
    the sum of test scores, so extra credit can take it above the assignment's maximum. A
    test's status follows Gradescope's own rule (passed when it earned its full score).
    `visibility` ({"default", "tests": {test name: value}, "stdout"}, Gradescope's values)
    says when students see each test; `notes` are lines added under the summary (how the run
    was graded), `extra_data` more stored data (the Gradescope autograder's isolation level)."""
    view = _view(report)
    visibility = visibility or {}
    default = visibility.get("default", "visible")
    per_test = visibility.get("tests") or {}
    for value in (default, visibility.get("stdout", "hidden"), *per_test.values()):
        if value not in GRADESCOPE_VISIBILITIES:
            raise ValueError(f"unknown Gradescope visibility {value!r}; use one of {GRADESCOPE_VISIBILITIES}")
    p, source = view.provenance, view.source
    tests = []
    for number, group in enumerate(view.points.groups, start=1):      # a group's number is fixed
        for i, test in enumerate(group.tests, start=1):
            entry = _gradescope_test(view, test, f"{number}.{i}")
            if per_test.get(test.name, default) != default:
                entry["visibility"] = per_test[test.name]
            tests.append(entry)
    output = _student_summary(view)
    if notes:
        output += "\n\n" + "\n".join(f"_{_md_escape(note)}_" for note in notes)
    return _jsonable({
        "score": view.points.total,
        "execution_time": max(0, int(round(p.duration_s or 0.0))),
        "output": output,
        "output_format": "md",
        "visibility": default,
        "stdout_visibility": visibility.get("stdout", "hidden"),
        "extra_data": {"assignment": p.assignment, "spec_version": p.spec_version,
                       "thresholds_version": p.thresholds_version, "spec_hash": p.spec_hash,
                       "dialect": source.dialect, "backend": source.backend, "status": p.status,
                       "submission_sha256": p.submission_sha256, "seed_kind": source.seed_kind,
                       "grader_version": p.grader_version, "flags": [f.flag for f in view.flags],
                       "max_total": view.points.max_total, "missing_files": list(source.missing_files),
                       "rejections": list(source.rejections), "warnings": list(source.warnings),
                       **(extra_data or {})},
        "tests": tests,
        "leaderboard": _leaderboard(view),
    })


def write_gradescope(report: Report | ReportView, path: str | os.PathLike, **options) -> None:
    """results.json at `path`, whole or not at all; `options` as to_gradescope's."""
    _write_atomic(path, _dumps(to_gradescope(report, **options)))


def gradescope_status(test: TestResult | TestView) -> str:
    """Gradescope's meaning: a test passes when it earns its full score."""
    full = _finite(test.points) and _finite(test.max_points) and test.max_points > 0 and test.points >= test.max_points
    return TestStatus.PASSED if test.status == TestStatus.PASSED and full else TestStatus.FAILED


def _gradescope_test(view: ReportView, test: TestView, number: str) -> dict:
    entry = {
        "name": _plain(test.title),
        "number": number,
        "score": test.points if _finite(test.points) else 0.0,
        "max_score": test.max_points,
        "status": gradescope_status(test),
        "output": _test_output(view, test),
        "tags": [test.kind, test.status],
    }
    if test.timed:
        entry["extra_data"] = {"p99_us": test.p99_us, "thresholds_us": {t.tier: t.us for t in test.thresholds} or None,
                               "thresholds_version": view.provenance.thresholds_version}
    return entry


def _plain(text: str) -> str:
    """Text for Gradescope: control characters escaped, line breaks kept."""
    return "\n".join(_lines(text))


def _test_output(view: ReportView, test: TestView) -> str:
    parts = [f"Status: {test.status}."]
    if test.message:
        parts.append(_plain(test.message))
    if test.timed:
        parts.append(_timing_sentence(test, view.provenance.thresholds_version))
    if test.output:
        parts.append("Kernel output:\n" + _plain(_truncate(test.output, KERNEL_OUTPUT_LIMIT)))
    return "\n\n".join(parts)


def _timing_sentence(test: TestView, thresholds_version: str) -> str:
    p99 = f"p99 {test.p99_text}" if test.p99_us is not None else "p99 not measured"
    optimized, relaxed = test.threshold(Tier.OPTIMIZED), test.threshold(Tier.RELAXED)
    if optimized is None and relaxed is None:
        return p99
    if optimized is not None and relaxed is not None and optimized.us == relaxed.us:
        limit = f"threshold {optimized.text}"
    else:
        limit = (f"full credit at or below {optimized.text if optimized else 'n/a'}, "
                 f"partial credit at or below {relaxed.text if relaxed else 'n/a'}")
    return f"{p99}; {limit} (thresholds version {thresholds_version})"


def _truncate(text: str, limit: int) -> str:
    """At most `limit` characters, keeping the end: a failing run's error and traceback come last."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - 64)           # 64 characters hold the note below
    return f"[... {len(text) - keep} earlier characters omitted ...]\n" + text[len(text) - keep:]


def _leaderboard(view: ReportView) -> list[dict]:
    """Gradescope's leaderboard columns: the total first (its default sort, higher first), then
    the p99 of every timed test that earned a valid time (lower first). A run whose time does
    not count (wrong output, not run) leaves that column empty rather than ranking a bogus time."""
    board = [{"name": "Total", "value": view.points.total}]
    return board + [{"name": f"{t.title} p99 (us)", "value": t.p99_us, "order": "asc"}
                    for t in view.tests
                    if t.timed and t.status in (TestStatus.PASSED, TestStatus.PARTIAL) and t.p99_us is not None]


def _student_summary(view: ReportView) -> str:
    points = view.points
    total = f"**Total: {format_points(points.total)} / {format_points(points.max_total)}**"
    if points.extra_credit > 0:
        total += (f" (regular {format_points(points.regular)} / {format_points(points.max_total)} "
                  f"+ {format_points(points.extra_credit)} extra credit)")
    lines = [total, ""]
    header = view.header
    if header.status_sentence:
        lines += [f"**{_md_escape(header.status_sentence)}**", ""]
    if header.files:
        lines += [f"- {_md_escape(s)}" for s in header.files] + [""]
    if header.rejections:
        lines += ["**Static check errors** (the file is rejected):", ""]
        lines += [f"- {_md_escape(f.text)}" for f in header.rejections] + [""]
    if header.warnings:
        lines += ["**Static check warnings** (not penalised):", ""]
        lines += [f"- {_md_escape(f.text)}" for f in header.warnings] + [""]
    if header.budget:
        lines += [_md_escape(header.budget), ""]
    for group in points.groups:
        if group.maximum is not None:
            lines.append(f"- {group.title}: {format_points(group.earned)} / {format_points(group.maximum)}"
                         + (f" ({group.counts})" if group.counts else ""))
    if view.flags:
        lines += ["", "**Under review**", ""]
        lines += [f"- {FLAG_EXPLANATIONS.get(f.code, UNKNOWN_FLAG)[1].format(subject=_md_escape(f.subject))}"
                  for f in view.flags]
    if view.slow_hint:
        lines += ["", view.slow_hint]          # our words, with its command as markdown code
    p = view.provenance
    lines += ["", f"_Graded with {_md_escape(p.assignment)} spec {_md_escape(p.spec_version)}, "
                  f"thresholds {_md_escape(p.thresholds_version)}, kernels checked as {_md_escape(p.dialect)}, "
                  + (f"timed on {_md_escape(p.timed_on)}, " if p.timed_on else "")
                  + f"submission {_md_escape(p.submission_sha256[:12]) or 'unknown'}._"]
    return "\n".join(lines)


def _md_escape(text: str) -> str:
    return "".join("\\" + ch if ch in "\\`*_[]<>#|" else ch for ch in escape_control(text))
