"""Typed grading results. How they are computed lives elsewhere (grade.py, scoring.py); how
they are shown lives in render.py."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

KINDS = ("correctness", "performance", "extra_credit")
STATUSES = ("passed", "partial", "failed", "error", "skipped")


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
    message: str = ""               # one line for the student: why this status
    output: str = ""                # captured stdout/stderr of the kernel run (truncated)
    duration_s: float = 0.0         # wall time of this test
    details: dict = field(default_factory=dict)   # per-config results, mismatch stats, profile totals


@dataclass
class Score:
    correctness: float
    performance: float
    extra_credit: float
    total: float                    # all three added up
    max_total: float                # correctness + performance maxima (extra credit is on top)


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
    seed_kind: str = "secret"       # "public" when the seed was given (local runs), else fresh and secret
    seed: int | None = None         # recorded only for public seeds
    grader_version: str = ""
    graded_at: str = ""             # ISO 8601 UTC
    duration_s: float = 0.0
    platform: str = "trn2"          # hardware the thresholds were set on

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "Report":
        data = dict(data)
        data["score"] = Score(**data["score"])
        data["tests"] = [TestResult(**t) for t in data["tests"]]
        return cls(**data)
