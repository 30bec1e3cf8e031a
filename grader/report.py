"""Typed grading results. How they are computed lives elsewhere (grade.py, scoring.py); how
they are shown lives in render.py. Every text field is bounded here, at construction, so
no kernel (a 50 MB exception message, a flood of prints) can make a report huge."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from nkisim.dialects import LEGACY

from .vocabulary import ReportStatus, TestKind, TestStatus, values

KINDS = values(TestKind)
STATUSES = values(TestStatus)
REPORT_STATUSES = values(ReportStatus)

MESSAGE_LIMIT = 4000        # characters of one message (a test's, a rejection's)
OUTPUT_LIMIT = 8000         # characters of a test's captured kernel output
DETAIL_TEXT_LIMIT = 2000    # characters of any string inside details
DETAIL_ITEMS_LIMIT = 256    # entries of any list or dict inside details
SVG_LIMIT = 1_000_000       # characters of a profile's SVG timeline; a longer one is dropped whole


def bound_text(text, limit: int) -> str:
    """At most about `limit` characters: the head and the tail (an error's type comes first,
    its traceback's last line last), with what was cut said in between."""
    text = text if isinstance(text, str) else str(text)
    if len(text) <= limit:
        return text
    keep = max(0, limit - 60)
    head, tail = keep // 2, keep - keep // 2
    return f"{text[:head]}\n[... {len(text) - head - tail} characters omitted ...]\n{text[len(text) - tail:]}"


def _bound_details(value, depth: int = 0):
    """A copy of `value` whose strings, lists and dicts are bounded. An SVG (under a key
    naming it) may be long, but is kept whole or not at all: half a picture is no picture."""
    if isinstance(value, str):
        return bound_text(value, DETAIL_TEXT_LIMIT)
    if depth > 8:
        return None
    if isinstance(value, dict):
        items = list(value.items())[:DETAIL_ITEMS_LIMIT]
        return {bound_text(k, 200): _bound_svg(v) if "svg" in str(k).lower() and isinstance(v, str)
                else _bound_details(v, depth + 1) for k, v in items}
    if isinstance(value, (list, tuple)):
        return [_bound_details(v, depth + 1) for v in list(value)[:DETAIL_ITEMS_LIMIT]]
    return value


def _bound_svg(svg: str) -> str:
    return svg if len(svg) <= SVG_LIMIT else ""


@dataclass
class TestResult:
    __test__ = False    # not a pytest test class, despite the name

    name: str                       # spec test name, e.g. "perf_224_pool1_float16"
    kind: str                       # correctness | performance | extra_credit
    status: str                     # passed | partial | failed | error | skipped
    points: float
    max_points: float
    title: str = ""                 # human title, e.g. "Performance: 224x224, no maxpool, float16"
    file: str = ""                  # which submission file the test exercised
    p99_us: float | None = None     # performance tests: p99 of NeuronCore latency
    thresholds_us: dict | None = None   # {"optimized": us, "relaxed": us}
    message: str = ""               # for the student: why this status ("" when the header says it)
    output: str = ""                # captured stdout/stderr and nl.device_print of the kernel run (truncated)
    duration_s: float = 0.0         # wall time of this test
    details: dict = field(default_factory=dict)   # per-config results, mismatch stats, profile

    def __post_init__(self) -> None:
        self.title = bound_text(self.title, 200)
        self.message = bound_text(self.message, MESSAGE_LIMIT)
        self.output = bound_text(self.output, OUTPUT_LIMIT)
        self.details = _bound_details(self.details) if isinstance(self.details, dict) else {}


@dataclass
class Score:
    correctness: float
    performance: float
    extra_credit: float
    total: float                    # all three added up
    max_total: float                # the assignment's correctness + performance maxima (extra credit on top)
    max_correctness: float = 0.0    # the assignment's maxima per kind, whatever files were sent
    max_performance: float = 0.0
    max_extra_credit: float = 0.0
    # per kind: how many tests ended in each status, and how many there are ("tests")
    counts: dict = field(default_factory=dict)


@dataclass
class Report:
    assignment: str
    spec_version: str
    thresholds_version: str
    backend: str                    # sim | neuron
    submission_sha256: str
    score: Score
    flags: list[str]                # e.g. ["implausibly_fast:perf_224_pool1_float16"]
    tests: list[TestResult]
    seed_kind: str = "secret"       # "public" when the caller gave the seed (local runs), else fresh and secret
    seed: int | None = None         # the seed used; keep a secret one private (to_json leaves it out)
    answer_set: str | None = None   # the id of the answer set made ahead that graded it (its seed is `seed`)
    grader_version: str = ""
    graded_at: str = ""             # ISO 8601 UTC
    duration_s: float = 0.0
    platform: str = "trn2"          # hardware the thresholds were set on
    # the NKI dialect the kernels were checked against (a name in nkisim.dialects); every report
    # from before the field was graded in the legacy one, so one read without it is legacy
    dialect: str = LEGACY.name
    status: str = ReportStatus.COMPLETED.value     # a ReportStatus
    spec_hash: str = ""             # sha256 of the spec file that graded this run
    title: str = ""                 # the assignment's title
    time_budget_s: float | None = None   # wall time the grade was allowed
    budget_note: str = ""           # what the budget did, when it did something (a timeout, tests cut)
    missing_files: list[str] = field(default_factory=list)   # assignment files not sent: their tests score 0
    missing_hints: dict = field(default_factory=dict)        # missing file -> {"found", "expected"}: did you mean
    rejections: list[dict] = field(default_factory=list)     # static-check errors {file, line, rule, message}
    warnings: list[dict] = field(default_factory=list)       # static-check warnings, same shape
    rescored_from: dict | None = None    # {"spec_version", "thresholds_version", "spec_hash"} before a rescore
    blas: str = ""                  # the BLAS and core type every process of the grade computed with
    hardware: str = ""              # on a Neuron device: its SDK line, logical-NeuronCore degree and cores
    # {problem name: sha256 of its folder (problem.toml and reference.py)}: the course code that graded it
    problem_hashes: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.flags = [bound_text(f, 200) for f in self.flags][:DETAIL_ITEMS_LIMIT]
        self.budget_note = bound_text(self.budget_note, MESSAGE_LIMIT)
        self.rejections = [_bound_finding(v) for v in self.rejections][:DETAIL_ITEMS_LIMIT]
        self.warnings = [_bound_finding(v) for v in self.warnings][:DETAIL_ITEMS_LIMIT]
        hints = self.missing_hints if isinstance(self.missing_hints, dict) else {}
        self.missing_hints = {bound_text(str(k), 200): {"found": bound_text(str(v.get("found", "")), 300),
                                                        "expected": bound_text(str(v.get("expected", "")), 300)}
                              for k, v in list(hints.items())[:16] if isinstance(v, dict)}   # names from the upload

    def to_json(self, include_seed: bool = False) -> dict:
        """The report as plain data. A secret seed is left out unless include_seed (staff
        storage); a public seed, given by whoever ran the grade, stays."""
        data = asdict(self)
        if self.seed_kind != "public" and not include_seed:
            data.pop("seed")
        return data

    @classmethod
    def from_json(cls, data: dict) -> "Report":
        known = {f.name for f in fields(cls)}
        data = {k: v for k, v in data.items() if k in known}
        score = dict(data["score"])
        data["score"] = Score(**{k: v for k, v in score.items() if k in {f.name for f in fields(Score)}})
        test_fields = {f.name for f in fields(TestResult)}
        data["tests"] = [TestResult(**{k: v for k, v in t.items() if k in test_fields}) for t in data["tests"]]
        return cls(**data)


def _bound_finding(finding: dict) -> dict:
    return {"file": bound_text(finding.get("file", ""), 200), "line": finding.get("line"),
            "rule": bound_text(finding.get("rule", ""), 100),
            "message": bound_text(finding.get("message", ""), MESSAGE_LIMIT)}
