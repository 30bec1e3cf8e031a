"""What a report shows, built once: a frozen tree of the texts and numbers every front-end
(terminal, JSON, Gradescope, web) draws. A renderer lays the view out; it never goes back to the
raw Report to work out a row, a maximum, a unit or a flag's words, so the four outputs say the
same things. Texts here are plain (not escaped): each renderer escapes for its medium.

    view = grader.view_of(report)
    for test in view.tests: print(test.title, test.status, test.points_text, test.p99_text)"""
from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

from .report import KINDS, Report, TestResult
from .vocabulary import KIND_TITLES, TIMED_KINDS, Backend, ReportStatus, TestKind, TestStatus, Tier, TimedFlag

# Why a flag was raised: (for staff, for the student). {subject} is the flagged test's title, or
# the file or platform after the flag's colon. Student texts use *emphasis* (Gradescope's markdown).
FLAG_EXPLANATIONS = {
    TimedFlag.IMPLAUSIBLY_FAST: (
        "{subject}: p99 is below the roofline or far below the optimized reference; review before it counts",
        "*{subject}* ran faster than the course's optimized reference kernel by a wide margin. That is "
        "unusual, so course staff will review this run before the score is final."),
    "precheck_rejected": (
        "{subject}: the static check rejected this file, so its tests did not run",
        "Your *{subject}* file was rejected by the static check, so its tests did not run; the "
        "violations are listed at the top of this report."),
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
    TimedFlag.BORDERLINE_CREDIT: (
        "{subject}: the simulated p99 was slower than a threshold but within the simulator's error of it; "
        "credited under the spec's borderline = \"credit\" rule",
        "*{subject}* was credited with a threshold its simulated time was just over, within the simulator's "
        "error for kernels like it; course staff may check it on hardware."),
    TimedFlag.BORDERLINE_HARDWARE: (
        "{subject}: the simulated p99 is within the simulator's error of a threshold; provisional under the "
        "spec's borderline = \"hardware\" rule until a Trainium worker times the run again",
        "*{subject}* ran within the simulator's error of a threshold, so the course times it again on "
        "Trainium hardware; that run's score stands (without a Trainium worker, course staff review it)."),
    "uncalibrated_model": (
        "timed by the simulator's {subject} model, which no {subject} hardware measurement has checked yet",
        "This run was timed by a model of *{subject}* that has not yet been checked against {subject} "
        "hardware, so its times are estimates."),
    # reports graded before each platform had its own model (nkisim modelled trn2 only)
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
# Why a test has no message of its own (details["not_run"]): said on its row, not left blank; the
# header names the file and what it costs, once.
NOT_RUN_REASONS = {
    "rejected": "not run: its file was rejected by the static check (the findings are at the top of the report)",
    "not_submitted": "not run: its file was not submitted (see the top of the report)",
}
SLOW_HINT = ("Why is a kernel slow? Run `nkisim profile KERNEL_FILE --preset PRESET --svg timeline.svg` "
             "(`nkisim profile --help` lists the course's presets), or open the engine timeline of a timed "
             "test on the site's report page.")


# ----- numbers as text -----

def finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def format_points(value: float | None) -> str:
    """Up to 3 decimals without trailing zeros: 17.5, 16.625, 0."""
    if value is None or not finite(value):
        return "n/a"
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def format_us(value: float | None) -> str:
    """A latency with its unit: '1003.2 us'; 'n/a' when not measured."""
    return f"{value:.1f} us" if finite(value) else "n/a"


def threshold_us(value: float | None) -> str:
    """A threshold with its unit, as the spec wrote it: '1002 us'."""
    return f"{format_points(value)} us" if finite(value) else "n/a"


# ----- the view -----

@dataclass(frozen=True)
class Finding:
    """One static-check finding."""
    file: str
    line: int | None
    rule: str
    message: str

    @property
    def text(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}{f' [{self.rule}]' if self.rule else ''}: {self.message}"


@dataclass(frozen=True)
class Header:
    """What stopped a file or a test before it ran, once each."""
    status_sentence: str               # "" unless the grade was cancelled or interrupted
    files: tuple[str, ...]             # per file not sent (with its did-you-mean) or rejected
    rejections: tuple[Finding, ...]
    warnings: tuple[Finding, ...]
    budget: str                        # "Time budget (300 s): ..." when the budget did something

    def lines(self) -> tuple[str, ...]:
        """The header as lines of text (the terminal's, and the web's list)."""
        lines = [self.status_sentence] if self.status_sentence else []
        lines += self.files
        if self.rejections:
            lines += ["Static check (errors; the file is rejected):", *("  " + f.text for f in self.rejections)]
        if self.warnings:
            lines += ["Static check (warnings; not penalised):", *("  " + f.text for f in self.warnings)]
        if self.budget:
            lines.append(self.budget)
        return tuple(lines)


@dataclass(frozen=True)
class Threshold:
    tier: str                          # a Tier
    us: float | None

    @property
    def text(self) -> str:
        return threshold_us(self.us)


@dataclass(frozen=True)
class ProfileView:
    """A simulated timed run's profile, in the one shape every page reads."""
    mfu: float | None
    achieved_tflops: float | None
    total_us: float | None
    roofline_us: float | None
    roofline_limit: str                # "compute" or "memory" (the bound the roofline comes from), or ""
    verdict: str
    engines: tuple[tuple[str, float | None, float, int | None], ...]   # name, busy us, utilisation, instructions
    hotspots: tuple[dict, ...]
    svg: str | None                    # the engine timeline picture, when there is one

    @property
    def summary(self) -> str:
        """'MFU 41.0%, 12.30 TFLOP/s achieved; roofline 10.5 us (compute-bound)': the profile in a line."""
        parts = []
        if self.mfu is not None:
            parts.append(f"MFU {self.mfu:.1%}" + (f", {self.achieved_tflops:.2f} TFLOP/s achieved"
                                                  if self.achieved_tflops is not None else ""))
        if self.roofline_us is not None:
            parts.append(f"roofline {format_us(self.roofline_us)}"
                         + (f" ({self.roofline_limit}-bound)" if self.roofline_limit else ""))
        return "; ".join(parts)


@dataclass(frozen=True)
class TestView:
    __test__ = False                   # not a pytest test class

    name: str
    title: str
    kind: str
    kind_title: str
    timed: bool
    file: str
    status: str
    points: float
    max_points: float
    message: str                       # why this status, for the student (a not-run test says why too)
    p99_us: float | None
    thresholds: tuple[Threshold, ...]  # optimized, relaxed (timed tests with thresholds)
    output: str                        # captured kernel output
    profile: ProfileView | None
    band: float | None = None          # a simulated p99's error band for its kind of kernel (grader.bands)
    bound: str | None = None           # that kind: what bounds the kernel (tensor, vector, dma, latency)

    @property
    def error(self) -> str:
        """The message when the test did not pass (what the terminal prints under its row)."""
        return "" if self.status == TestStatus.PASSED else self.message

    @property
    def points_text(self) -> str:
        return f"{format_points(self.points)}/{format_points(self.max_points)}"

    @property
    def p99_text(self) -> str:
        """'1003.2 us' for a timed test ('n/a' if not measured), '' for an untimed one; a simulated
        p99 with its error band, '1003.2 us +/-9%' (the simulator is within 9% for kernels like it)."""
        if not self.timed:
            return ""
        band = f" +/-{self.band:.0%}" if self.band is not None and self.p99_us is not None else ""
        return format_us(self.p99_us) + band

    def threshold(self, tier: str) -> Threshold | None:
        return next((t for t in self.thresholds if t.tier == tier), None)

    @property
    def thresholds_text(self) -> str:
        """'opt 1002 us / rel 1365 us', or ''."""
        if not self.thresholds:
            return ""
        short = {Tier.OPTIMIZED: "opt", Tier.RELAXED: "rel"}
        return " / ".join(f"{short.get(t.tier, t.tier)} {t.text}" for t in self.thresholds)

    @property
    def tier(self) -> str:
        """Which threshold the p99 met: 'optimized', 'relaxed', or '' (none, or not timed)."""
        if not self.timed or not finite(self.p99_us) or self.status not in (TestStatus.PASSED, TestStatus.PARTIAL):
            return ""
        for t in self.thresholds:
            if finite(t.us) and self.p99_us <= t.us:
                return str(t.tier)
        return ""

    @property
    def timing_cell(self) -> str:
        """'1003.2 us  (opt 1002 us / rel 1365 us)' for timed tests, '' otherwise."""
        if not self.timed:
            return ""
        return self.p99_text + (f"  ({self.thresholds_text})" if self.thresholds else "")


@dataclass(frozen=True)
class Group:
    """One kind's tests and its line of the totals."""
    kind: str
    title: str
    earned: float
    maximum: float | None              # None for a kind the assignment does not know
    counts: str                        # '4 of 5 tests passed' and the like
    tests: tuple[TestView, ...]

    @property
    def points_text(self) -> str:
        return f"{format_points(self.earned)}/{format_points(self.maximum)}"


@dataclass(frozen=True)
class Points:
    groups: tuple[Group, ...]          # every known kind, in order (empty ones too), then unknown kinds
    total: float
    max_total: float
    extra_credit: float

    @property
    def regular(self) -> float:
        return self.total - self.extra_credit

    @property
    def total_text(self) -> str:
        """'65/70 (regular 55/70 + extra credit 10)': what was lost shows even under extra credit."""
        text = f"{format_points(self.total)}/{format_points(self.max_total)}"
        if self.extra_credit:
            text += (f" (regular {format_points(self.regular)}/{format_points(self.max_total)} + extra credit "
                     f"{format_points(self.extra_credit)})")
        return text


@dataclass(frozen=True)
class FlagView:
    flag: str                          # as stored: 'implausibly_fast:perf_x'
    code: str
    subject: str                       # the test's title, the file, or the platform
    for_staff: str
    for_student: str                   # with Gradescope's *emphasis*

    @property
    def student_plain(self) -> str:
        return self.for_student.replace("*", "")


@dataclass(frozen=True)
class Provenance:
    assignment: str
    title: str
    spec_version: str
    thresholds_version: str
    spec_hash: str
    backend: str                       # in words: 'simulated (nkisim)', 'Trainium2 hardware'
    dialect: str                       # the NKI its kernels were checked against: 'NKI 0.6 (nki) on Neuron SDK 2.32'
    seed: str                          # 'secret' or 'public 42'
    submission_sha256: str
    status: str
    grader_version: str
    graded_at: str                     # '2025-11-20 10:00:00 UTC' (the report keeps ISO 8601)
    duration_s: float | None
    time_budget_s: float | None
    rescored_from: str                 # the thresholds version before a rescore, or ""
    blas: str = ""                     # 'OpenBLAS 0.3.31, SkylakeX kernels': every process of the grade's
    hardware: str = ""                 # 'current SDK line (nki 0.6.0), LNC=2 (Trn2's default), NeuronCore 3'
    problems: str = ""                 # 'conv2d 1a2b3c4d5e6f': each problem folder graded, by its sha256
    timed_on: str = ""                 # 'the Trainium2 (NeuronCore-v3) model': whose cost model timed a sim run


@dataclass(frozen=True)
class ReportView:
    header: Header
    tests: tuple[TestView, ...]        # in report order
    points: Points
    flags: tuple[FlagView, ...]
    provenance: Provenance
    slow_hint: str                     # how to see why a kernel is slow ("" when no time was measured)
    source: Report                     # the report itself: the JSON renderer writes it whole

    @property
    def groups(self) -> tuple[Group, ...]:
        return tuple(g for g in self.points.groups if g.tests)

    @property
    def profiles(self) -> tuple[TestView, ...]:
        return tuple(t for t in self.tests if t.profile is not None)

    def test(self, name: str) -> TestView | None:
        return next((t for t in self.tests if t.name == name), None)


# ----- building it -----

def view_of(report: Report) -> ReportView:
    """The report as every front-end shows it."""
    tests = tuple(_test_view(report, t) for t in report.tests)
    flags = tuple(_flag_view(report, f) for f in report.flags)
    hint = SLOW_HINT if any(t.timed and t.p99_us is not None for t in tests) else ""    # something was timed
    return ReportView(_header(report), tests, _points(report, tests), flags, _provenance(report), hint, report)


def _title(test: TestResult) -> str:
    return test.title or test.name


def _test_view(report: Report, test: TestResult) -> TestView:
    timed = test.kind in TIMED_KINDS
    limits = test.thresholds_us if isinstance(test.thresholds_us, dict) else {}
    thresholds = tuple(Threshold(tier, _number(limits.get(tier))) for tier in (Tier.OPTIMIZED, Tier.RELAXED)
                       if tier in limits) if timed else ()
    message = test.message or NOT_RUN_REASONS.get((test.details or {}).get("not_run"), "")
    return TestView(test.name, _title(test), test.kind, KIND_TITLES.get(test.kind, test.kind), timed, test.file,
                    test.status, test.points, test.max_points, message,
                    test.p99_us if finite(test.p99_us) else None, thresholds, test.output,
                    _profile(test), _band(test), _bound(test))


def _band(test: TestResult) -> float | None:
    band = (test.details or {}).get("band")
    return float(band) if finite(band) and 0 <= band < 1 else None


def _bound(test: TestResult) -> str | None:
    bound = (test.details or {}).get("bound")
    return bound if isinstance(bound, str) and _band(test) is not None else None


def _number(value) -> float | None:
    return float(value) if finite(value) else None


def _profile(test: TestResult) -> ProfileView | None:
    """The one shape from what a report holds: {engine: utilisation} as the grader stores it
    (with engine_instructions beside), or {engine: {busy_us, utilisation, instructions}} as
    nkisim's Profile has it."""
    profile = (test.details or {}).get("profile")
    if not isinstance(profile, dict):
        return None
    total = _number(profile.get("total_us")) or _number(test.p99_us)
    engines = []
    counts = profile.get("engine_instructions") or {}
    for name, util in (profile.get("engine_utilisation") or {}).items():
        util = _number(util) or 0.0
        count = counts.get(name)
        engines.append((str(name), util * total if total else None, util,
                        count if isinstance(count, int) and not isinstance(count, bool) else None))
    for name, stats in (profile.get("engines") or {}).items():
        if isinstance(stats, dict):
            count = stats.get("instructions")
            engines.append((str(name), _number(stats.get("busy_us")), _number(stats.get("utilisation")) or 0.0,
                            count if isinstance(count, int) and not isinstance(count, bool) else None))
    hotspots = [h for h in (profile.get("busiest_lines") or profile.get("hotspots") or []) if isinstance(h, dict)]
    svg = profile.get("svg") or profile.get("timeline_svg")
    return ProfileView(
        _number(profile.get("mfu")), _number(profile.get("achieved_tflops")), total,
        _number(profile.get("roofline_us")) or _number((test.details or {}).get("roofline_us")),
        str(profile.get("roofline_limit") or ""), str(profile.get("verdict") or ""),
        tuple(sorted(engines, key=lambda row: -row[2])), tuple(hotspots[:8]),
        svg if isinstance(svg, str) and svg.lstrip().startswith("<svg") else None)


def _file_tests(report: Report, filename: str) -> list[TestResult]:
    return [t for t in report.tests if t.file == filename or t.file.endswith("/" + filename)]


def _findings(items: list[dict]) -> tuple[Finding, ...]:
    return tuple(Finding(str(v.get("file", "")), v.get("line") if isinstance(v.get("line"), int) else None,
                         str(v.get("rule") or ""), str(v.get("message", ""))) for v in items)


def _header(report: Report) -> Header:
    status = (f"STATUS: {report.status.upper()}. {STATUS_SENTENCES[report.status]}"
              if report.status in STATUS_SENTENCES else "")
    budget = (f"Time budget ({format_points(report.time_budget_s)} s): {report.budget_note}"
              if report.budget_note else "")
    return Header(status, tuple(_file_statements(report)), _findings(report.rejections),
                  _findings(report.warnings), budget)


def _file_statements(report: Report) -> list[str]:
    """Once per file that did not run: why, and what its tests score."""
    lines = []
    for name in report.missing_files:
        tests = _file_tests(report, name)
        worth = sum(t.max_points for t in tests if t.kind != TestKind.EXTRA_CREDIT)
        hint = report.missing_hints.get(name) if isinstance(report.missing_hints, dict) else None
        maybe = (f" (did you mean {hint.get('found')}? it must be at {hint.get('expected')})"
                 if isinstance(hint, dict) else "")
        lines.append(f"{name} was not submitted{maybe}: its {len(tests)} tests score 0 "
                     f"({format_points(worth)} points of the assignment's {format_points(report.score.max_total)})")
    for name in dict.fromkeys(v.get("file", "") for v in report.rejections):
        found = [v for v in report.rejections if v.get("file") == name]
        tests = _file_tests(report, name.rsplit("/", 1)[-1]) or _file_tests(report, name)
        lines.append(f"{name} was rejected by the static check ({len(found)} "
                     f"{'violation' if len(found) == 1 else 'violations'}): its {len(tests)} tests score 0")
    return lines


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


def _points(report: Report, tests: tuple[TestView, ...]) -> Points:
    s = report.score
    earned = {TestKind.CORRECTNESS: s.correctness, TestKind.PERFORMANCE: s.performance,
              TestKind.EXTRA_CREDIT: s.extra_credit}
    maxima = {TestKind.CORRECTNESS: s.max_correctness, TestKind.PERFORMANCE: s.max_performance,
              TestKind.EXTRA_CREDIT: s.max_extra_credit}
    kinds = dict.fromkeys([*KINDS, *(t.kind for t in tests)])     # unknown kinds last, in report order
    groups = tuple(Group(kind, KIND_TITLES.get(kind, kind),
                         earned.get(kind, sum(t.points for t in tests if t.kind == kind)), maxima.get(kind),
                         count_phrase(report, kind), tuple(t for t in tests if t.kind == kind))
                   for kind in kinds)
    return Points(groups, s.total, s.max_total, s.extra_credit if finite(s.extra_credit) else 0.0)


def _flag_view(report: Report, flag: str) -> FlagView:
    code, _, subject = flag.partition(":")
    titles = {t.name: _title(t) for t in report.tests}
    files = {t.file.rsplit(".", 1)[0]: t.file for t in report.tests if t.file}
    subject = titles.get(subject, files.get(subject, subject))
    staff, student = FLAG_EXPLANATIONS.get(code, UNKNOWN_FLAG)
    return FlagView(flag, code, subject, staff.format(subject=subject), student.format(subject=subject))


def _backend_title(backend: str) -> str:
    return Backend(backend).title if backend in Backend.__members__.values() else backend


def _dialect_title(name: str) -> str:
    """The dialect's title and SDK line (nkisim.dialects); a name nkisim does not know, as stored."""
    # imported when a report names its dialect: `import nkisim` brings NumPy and the simulator,
    # which the commands and pages that only show reports do not need (bench/startup.py)
    from nkisim.dialects import dialect_named
    try:
        dialect = dialect_named(name)
    except ValueError:
        return str(name)
    return dialect.label


def _when(iso: str) -> str:
    """An ISO 8601 time as people read it, to the second in UTC; text that is not one stays as it is."""
    try:
        moment = dt.datetime.fromisoformat(iso.replace("Z", "+00:00")) if iso else None
    except ValueError:
        return iso
    if moment is None:
        return ""
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _provenance(report: Report) -> Provenance:
    # a secret seed is never shown; a public one was given by whoever ran the grade
    seed = f"public {report.seed}" if report.seed_kind == "public" and report.seed is not None else "secret"
    return Provenance(report.assignment, report.title, report.spec_version, report.thresholds_version,
                      report.spec_hash, _backend_title(report.backend), _dialect_title(report.dialect), seed,
                      report.submission_sha256,
                      report.status, report.grader_version, _when(report.graded_at),
                      report.duration_s if finite(report.duration_s) else None, report.time_budget_s,
                      str((report.rescored_from or {}).get("thresholds_version") or ""), str(report.blas or ""),
                      str(report.hardware or ""), _problems(report.problem_hashes), _timed_on(report))


def _timed_on(report: Report) -> str:
    """The generation whose cost model timed a simulated run, and whether that model has been
    checked against its hardware; "" when the simulator timed nothing. A report from before each
    platform had its own model (flag simulated_platform) was timed by Trainium2's."""
    if report.backend != Backend.SIM or not any(t.p99_us is not None for t in report.tests):
        return ""
    old = any(str(f).startswith("simulated_platform:") for f in report.flags)
    platform = "trn2" if old else str(report.platform)
    from nkisim.cost import generation
    from nkisim.platforms import rules_for
    try:
        gen, chip = generation(platform), rules_for(platform).hardware.split(",")[0]
    except (KeyError, ValueError):          # a platform this nkisim does not know: as stored
        return f"the {platform} model"
    named = f"the {chip} ({gen.core}) model"
    return named if gen.calibrated else f"{named}, not yet checked against {chip} hardware"


def _problems(hashes) -> str:
    """'conv2d 1a2b3c4d5e6f, transpose 0f9e8d7c6b5a': the problem folders, each by its sha256."""
    if not isinstance(hashes, dict):
        return ""
    return ", ".join(f"{name} {str(digest)[:12]}" for name, digest in sorted(hashes.items()))
