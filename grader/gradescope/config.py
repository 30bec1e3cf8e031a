"""The autograder's config file (source/nki_gradescope.json), written by `build` and read by
run_autograder. Checked field by field on both sides, so a hand-edited file fails with what
is wrong and how to fix it, not halfway through a grade."""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import GraderInputError

FORMAT = 1
MODES = ("local", "service")
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
SPEC_NAME = "spec.toml"


class ConfigError(GraderInputError):
    """The autograder config is missing or malformed."""


@dataclass
class Visibility:
    """Gradescope visibility of the tests: a default, per-test overrides (by spec test name),
    and when students may see run_autograder's stdout."""
    default: str = "visible"
    tests: dict[str, str] = field(default_factory=dict)
    stdout: str = "hidden"


@dataclass
class ServiceConfig:
    url: str
    token: str                      # a course submit token (`grader course-token create`)
    assignment: str                 # the assignment's name on the service
    timeout_s: float = 420.0        # wait this long for the service's grade, then an autograder error
    poll_s: float = 2.0


@dataclass
class Config:
    mode: str
    assignment: str                 # the spec's assignment name
    spec_file: str = SPEC_NAME      # beside the config, in source/
    time_budget_s: float | None = None    # local: the whole grade's wall time (None: the spec's)
    config_timeout_s: float | None = None
    seed: int | None = None         # local: a fixed secret seed (regrades reproduce); None: fresh per run
    jobs: int = 1
    child_memory_mb: int | None = None    # local: address-space limit of each sandboxed child
    visibility: Visibility = field(default_factory=Visibility)
    service: ServiceConfig | None = None
    grader_version: str = ""
    built_at: str = ""
    format: int = FORMAT

    def to_json(self) -> dict:
        return asdict(self)


def _fail(where: str, what: str) -> ConfigError:
    return ConfigError(f"autograder config {where}: {what}",
                       "Rebuild the zip with `grader gradescope build` rather than editing the config by hand.")


def _positive(value, where: str, optional: bool = True) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise _fail(where, f"must be a positive number, got {value!r}")
    return float(value)


def _visibility(value, where: str) -> str:
    if value not in VISIBILITIES:
        raise _fail(where, f"must be one of {', '.join(VISIBILITIES)}, got {value!r}")
    return value


def parse(data) -> Config:
    if not isinstance(data, dict):
        raise _fail("", "is not a JSON object")
    if data.get("format") != FORMAT:
        raise _fail("format", f"is {data.get('format')!r}; this grader reads format {FORMAT}")
    mode = data.get("mode")
    if mode not in MODES:
        raise _fail("mode", f"must be local or service, got {mode!r}")
    assignment = data.get("assignment")
    if not isinstance(assignment, str) or not assignment:
        raise _fail("assignment", "must name the spec's assignment")
    spec_file = data.get("spec_file", SPEC_NAME)
    if not isinstance(spec_file, str) or "/" in spec_file or spec_file.startswith("."):
        raise _fail("spec_file", f"must be a file name beside the config, got {spec_file!r}")
    seed = data.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise _fail("seed", f"must be a non-negative integer or null, got {seed!r}")
    jobs = data.get("jobs", 1)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise _fail("jobs", f"must be an integer of at least 1, got {jobs!r}")
    memory = data.get("child_memory_mb")
    if memory is not None and (isinstance(memory, bool) or not isinstance(memory, int) or memory < 64):
        raise _fail("child_memory_mb", f"must be an integer of at least 64, or null, got {memory!r}")
    vis = data.get("visibility") or {}
    if not isinstance(vis, dict) or not isinstance(vis.get("tests", {}), dict):
        raise _fail("visibility", "must be {default, tests: {name: visibility}, stdout}")
    visibility = Visibility(_visibility(vis.get("default", "visible"), "visibility.default"),
                            {str(k): _visibility(v, f"visibility.tests.{k}") for k, v in vis.get("tests", {}).items()},
                            _visibility(vis.get("stdout", "hidden"), "visibility.stdout"))
    service = None
    if mode == "service":
        raw = data.get("service")
        if not isinstance(raw, dict):
            raise _fail("service", "is needed in service mode: {url, token, assignment}")
        for key in ("url", "token", "assignment"):
            if not isinstance(raw.get(key), str) or not raw[key]:
                raise _fail(f"service.{key}", "must be a non-empty string")
        if not raw["url"].startswith(("http://", "https://")):
            raise _fail("service.url", f"must start with http:// or https://, got {raw['url']!r}")
        service = ServiceConfig(raw["url"].rstrip("/"), raw["token"], raw["assignment"],
                                _positive(raw.get("timeout_s", 420.0), "service.timeout_s", optional=False),
                                _positive(raw.get("poll_s", 2.0), "service.poll_s", optional=False))
    return Config(mode=mode, assignment=assignment, spec_file=spec_file,
                  time_budget_s=_positive(data.get("time_budget_s"), "time_budget_s"),
                  config_timeout_s=_positive(data.get("config_timeout_s"), "config_timeout_s"),
                  seed=seed, jobs=jobs, child_memory_mb=memory, visibility=visibility, service=service,
                  grader_version=str(data.get("grader_version", "")), built_at=str(data.get("built_at", "")))


def load(path: Path) -> Config:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"cannot read the autograder config {path}: {err.strerror or err}",
                          "The zip must hold nki_gradescope.json beside setup.sh; rebuild it with "
                          "`grader gradescope build`.") from None
    try:
        data = json.loads(text)
    except ValueError as err:
        raise _fail("", f"is not valid JSON ({err})") from None
    return parse(data)
