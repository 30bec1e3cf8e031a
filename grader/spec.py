"""Assignment specs: one versioned TOML file per assignment in grader/specs/, loaded into
frozen dataclasses and checked, so a typo in a spec fails loudly before anything is graded.

A changed spec must bump `spec_version` (any change) and also `thresholds_version` (when a
threshold changes); every report records both and the spec's content hash (`spec_hash`,
sha256 of the TOML bytes), and a test pins each bundled spec's hash to its versions.

`from_toml` is the one place a spec is built from TOML text: files, the database's spec rows
(store/specs.py) and a threshold adoption (`with_thresholds`) all go through it, and the spec
keeps its text (`toml`) so it can be stored byte for byte.

A test's `problem` names a bundled problem ("conv2d"), a problem folder's path relative to the
spec file ("problems/matmul"), or a folder installed under NKI_GRADER_PROBLEM_DIRS by name
(grader/problems/__init__.py). A spec may pin each problem's folder by its sha256
(`problem_sha256 = { matmul = "..." }`); a spec read from text alone (a database row) must pin
every problem that does not ship with the grader, so a stored spec never grades with other
course code than it was stored with."""
from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from nkisim.dialects import CURRENT, DIALECTS, LEGACY, Dialect, dialect_named
from nkisim.platforms import PLATFORMS

from .errors import GraderInputError
from .vocabulary import TIERS, TIMED_KINDS, Borderline, TestKind, Tier, values

SPEC_DIR = Path(__file__).parent / "specs"
KINDS = values(TestKind)
DEFAULT_TIME_BUDGET_S = 600.0      # one submission's whole grade
DEFAULT_CONFIG_TIMEOUT_S = 300.0   # one configuration's run


def _problems():
    """grader.problems, imported when first used: loading the bundled problem folders reads
    their problem.toml with this module's TOML reader (read_toml)."""
    from . import problems
    return problems


def read_toml(text: str, where: str) -> dict:
    """TOML text as data (a spec's, a problem folder's problem.toml): the one TOML reader."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise SpecError(f"{where} is not valid TOML: {err}", "Fix the TOML syntax at that line.") from None


class SpecError(GraderInputError):
    """A spec file is missing or malformed."""


@dataclass(frozen=True)
class FileSpec:
    key: str                          # "conv2d"
    filename: str                     # "conv2d.py"
    archive_path: str                 # where the course's submission script puts it
    functions: dict[str, tuple[str, ...]]   # required function -> its leading parameters
    optional: bool = False            # may be left out of an upload (its tests then score 0)


@dataclass(frozen=True)
class TestSpec:
    __test__ = False    # not a pytest test class, despite the name

    name: str
    title: str
    kind: str
    file: str                         # FileSpec key
    problem: str
    points: float
    configs: tuple[dict, ...]
    gated_by: tuple[str, ...] = ()
    thresholds_us: dict | None = None  # {"optimized": us, "relaxed": us}
    warmup: int = 5
    iters: int = 20
    compute_only: tuple[str, ...] | None = None   # the only compute instructions allowed

    @property
    def timed(self) -> bool:
        return self.kind in TIMED_KINDS

    @property
    def thresholds_from_references(self) -> bool:
        """Whether the course derives this test's thresholds from its reference kernels' p99s
        (performance tests: 120% of the optimized and relaxed references); extra-credit
        thresholds are set by hand and never proposed from a nightly run."""
        return self.kind == TestKind.PERFORMANCE

    @property
    def kernel(self) -> str:
        return _problems().get(self.problem).kernel


@dataclass(frozen=True)
class AssignmentSpec:
    assignment: str
    title: str
    spec_version: str
    thresholds_version: str
    platform: str
    partial_credit: float
    precheck: bool
    implausible_speedup: float
    files: dict[str, FileSpec]
    tolerances: dict[str, dict]       # output dtype -> {rtol, atol}, for every run, timed or not
    tests: tuple[TestSpec, ...] = field(default=())
    time_budget_s: float = DEFAULT_TIME_BUDGET_S   # wall time one submission's grade may take
    config_timeout_s: float = DEFAULT_CONFIG_TIMEOUT_S   # wall time one configuration's run may take
    spec_hash: str = ""               # sha256 of the spec's TOML bytes
    toml: str = field(default="", repr=False, compare=False)    # the TOML text it was built from
    gradescope: dict = field(default_factory=dict, repr=False, compare=False)   # its [gradescope] table
    dialect: str = LEGACY.name        # the NKI dialect its kernels are written in (nkisim.dialects)
    lnc: int = 1                      # physical cores of the logical NeuronCore kernels are launched on
    # what a simulated p99 within the model's error band of a threshold earns (grader.bands)
    borderline: str = Borderline.STRICT
    # {problem name: its folder's sha256} of every problem its tests use (a report records them)
    problem_hashes: dict = field(default_factory=dict)
    # the folder of the spec file it was loaded from ("": from text), where folder paths start
    base: str = field(default="", repr=False, compare=False)

    @property
    def nki(self) -> Dialect:
        """The dialect its kernels are written in: package, modules, title and SDK."""
        return dialect_named(self.dialect)

    def test(self, name: str) -> TestSpec:
        for t in self.tests:
            if t.name == name:
                return t
        raise KeyError(name)

    def tolerance(self, dtype) -> dict:
        """{rtol, atol} for outputs of `dtype`: the same for correctness and timed runs, so a
        kernel cannot switch to cheaper arithmetic when it sees it is being timed."""
        from .dtypes import dtype_of   # here: reading a spec (the site, `grader submit`) needs no NumPy
        return self.tolerances[dtype_of(dtype).name]

    def tolerance_warnings(self) -> list[str]:
        """What this spec's tolerances would let through: a float32 (float16) tolerance loose enough
        for a result computed from bfloat16 or float16 (float8) operands (their unit roundoff). Such kernels are
        still failed by the downgrade check (grader/downgrade.py); the course should know."""
        found = []
        lower = {"float32": (("bfloat16", 2.0 ** -9), ("float16", 2.0 ** -12)),
                 "float16": (("float8_e4m3", 2.0 ** -4), ("float8_e5m2", 2.0 ** -3))}
        for dtype, precisions in lower.items():
            tol = self.tolerances.get(dtype)
            for name, roundoff in precisions if tol else ():
                if tol["rtol"] >= roundoff:                # atol is absolute: it depends on the values' scale
                    found.append(f"the {dtype} tolerance (rtol={tol['rtol']:g}, atol={tol['atol']:g}) would accept "
                                 f"results computed from {name} operands (unit roundoff {roundoff:.2g}); only the "
                                 f"downgrade check stops them. Tighten it")
        return found

    def max_points(self, kind: str) -> float:
        """The assignment's maximum for one kind of test, whatever files a submission holds."""
        return sum(t.points for t in self.tests if t.kind == kind)

    def thresholds(self) -> dict[str, dict[str, float]]:
        """{test name: {"optimized": us, "relaxed": us}} of every timed test."""
        return {t.name: dict(t.thresholds_us) for t in self.tests if t.thresholds_us}

    def titles(self) -> dict[str, str]:
        """{test name: the title people read}."""
        return {t.name: t.title or t.name for t in self.tests}


def with_thresholds(spec: AssignmentSpec, thresholds: dict[str, dict[str, float]], version: str) -> AssignmentSpec:
    """A new spec: `spec` with these tests' thresholds and thresholds_version `version` (its TOML
    rewritten with comments and layout kept, so it has a new hash). Checked like any spec."""
    import tomlkit          # here, not above: the Gradescope wheel never adopts thresholds and ships without it
    unknown = sorted(set(thresholds) - {t.name for t in spec.tests if t.timed})
    if unknown:
        raise SpecError(f"{', '.join(unknown)} {'is not a timed test' if len(unknown) == 1 else 'are not timed tests'} "
                        f"of {spec.assignment}", "Give thresholds only for the spec's timed tests.")
    partial = sorted(name for name, levels in thresholds.items() if set(TIERS) - set(levels))
    if partial:
        raise SpecError(f"{', '.join(partial)}: give both the optimized and the relaxed threshold",
                        'For example {"optimized": 1002, "relaxed": 1365} (microseconds).')
    if not spec.toml:
        raise SpecError(f"{spec.assignment} was built in code, not from TOML: it has no text to rewrite",
                        "Load the spec with grader.load_spec or grader.spec.from_toml.")
    doc = tomlkit.parse(spec.toml)
    doc["thresholds_version"] = version
    for test in doc.get("tests", []):
        if test.get("name") in thresholds:
            table = tomlkit.inline_table()
            table.update({tier: thresholds[test["name"]][tier] for tier in TIERS})
            test["thresholds_us"] = table
    return from_toml(tomlkit.dumps(doc), spec.assignment, base=spec.base or None)


def available() -> list[str]:
    return sorted(p.stem for p in SPEC_DIR.glob("*.toml"))


def load(name_or_path: str | Path) -> AssignmentSpec:
    """A bundled spec by name (`asst4-trainium2`) or any spec file by path (`my.toml`)."""
    text = str(name_or_path)
    path = Path(text)
    if not path.suffix and "/" not in text:
        path = SPEC_DIR / f"{text}.toml"
        if not path.is_file():
            raise SpecError(f"unknown assignment {text!r}",
                            f"Choose one of {', '.join(available())}, or give the path of a spec .toml file.")
    if path.is_dir():           # a problem folder is graded under its own tests by `grader grade` alone
        raise SpecError(f"{text} is a folder, not a spec file",
                        "`grader grade FILE --assignment FOLDER` grades under a problem folder's own tests; "
                        "elsewhere give a spec .toml whose [[tests]] name the folder (problem = \"<its path from "
                        "the spec file>\"; docs/staff.md, 'Problem folders').")
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise SpecError(f"cannot read the spec file {text}: {err.strerror or err}",
                        f"Check the path, or name a bundled assignment ({', '.join(available())}).") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SpecError(f"{path.name} is not UTF-8 text ({err.reason} at byte {err.start})",
                        "Save the spec as UTF-8 TOML.") from None
    return from_toml(text, path.name, base=path.resolve().parent)


def from_toml(text: str, where: str = "spec", base: str | Path | None = None) -> AssignmentSpec:
    """The checked spec of this TOML text; its spec_hash is the sha256 of the text's UTF-8 bytes
    (the file's bytes, for a file). `base`: the spec file's folder, where a test's problem folder
    path starts (None: text without a file, which may name problems only by name, pinned)."""
    return parse(read_toml(text, where), where, text.encode("utf-8"), text, base=base)


def content_hash(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def _fail(where: str, what: str, remedy: str = "Fix the spec file and try again.") -> SpecError:
    return SpecError(f"{where}: {what}", remedy)


def _need(table: dict, key: str, where: str):
    if not isinstance(table, dict) or key not in table:
        raise _fail(where, f"missing '{key}'", f"Add '{key}' there (see grader/specs/asst4-trainium2.toml).")
    return table[key]


def _number(value, where: str, what: str, positive: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (positive and not value > 0):
        raise _fail(where, f"{what} must be a {'positive ' if positive else ''}number, got {value!r}")
    return float(value)


def parse(data: dict, where: str = "spec", raw: bytes | None = None, text: str = "",
          base: str | Path | None = None) -> AssignmentSpec:
    """Check and load a spec's parsed TOML. `raw` is the file's bytes (for spec_hash); a spec
    built in code is hashed from its canonical JSON instead (and has no TOML text). `base`: the
    spec file's folder (from_toml)."""
    files = {}
    for key, f in _need(data, "files", where).items():
        functions = {fn: tuple(params) for fn, params in _need(f, "functions", f"{where} files.{key}").items()}
        files[key] = FileSpec(key, f.get("filename", f"{key}.py"), _need(f, "archive_path", f"{where} files.{key}"),
                              functions, bool(f.get("optional", False)))
    tolerances = dict(_need(data, "tolerances", where))
    dialect = _dialect(data.get("dialect"), where)
    used: dict = {}
    pins = data.get("problem_sha256", {})
    tests = [_test(t, at, files, tolerances, _problem(t, at, base, dialect, used, pins))
             for i, t in enumerate(_need(data, "tests", where)) for at in (f"{where} tests[{i}]",)]
    hashes = _pinned(data.get("problem_sha256", {}), used, where, base)
    names = [t.name for t in tests]
    if len(set(names)) != len(names):
        raise _fail(where, "test names must be unique")
    for t in tests:
        unknown = set(t.gated_by) - set(names)
        if unknown:
            raise _fail(where, f"test {t.name} is gated by unknown tests {sorted(unknown)}")
    budget = _number(data.get("time_budget_s", DEFAULT_TIME_BUDGET_S), where, "time_budget_s")
    config_timeout = _number(data.get("config_timeout_s", DEFAULT_CONFIG_TIMEOUT_S), where, "config_timeout_s")
    platform = _platform(data.get("platform", "trn2"), where)
    lnc = _lnc(data.get("lnc", 1), dialect, platform, where)
    if raw is None:
        raw = json.dumps(data, sort_keys=True, default=str).encode()
    return AssignmentSpec(
        assignment=_need(data, "assignment", where), title=data.get("title", ""),
        spec_version=str(_need(data, "spec_version", where)),
        thresholds_version=str(_need(data, "thresholds_version", where)),
        platform=platform, partial_credit=float(data.get("partial_credit", 0.95)),
        precheck=bool(data.get("precheck", True)), implausible_speedup=float(data.get("implausible_speedup", 3.0)),
        files=files, tolerances=tolerances, tests=tuple(tests), time_budget_s=budget,
        config_timeout_s=config_timeout, spec_hash=content_hash(raw), toml=text,
        gradescope=dict(data.get("gradescope", {})), dialect=dialect, lnc=lnc,
        borderline=_borderline(data.get("borderline", Borderline.STRICT), where), problem_hashes=hashes,
        base=str(base) if base is not None else "")


def _problem(t: dict, at: str, base, dialect: str, used: dict, pins=None):
    """The problem a test names (bundled, a folder path or installed), loaded and registered;
    one name stands for one folder in a spec, and the spec's dialect must be one it accepts."""
    problems = _problems()
    bundled = problems.BUNDLED
    ref = t.get("problem") if isinstance(t, dict) else None
    if not isinstance(ref, str) or not ref:
        raise _fail(at, f"problem must be one of {bundled}, or a problem folder's path, got {ref!r}",
                    "Name a bundled problem (grader/problems/) or a problem folder (relative to the spec file).")
    pin = pins.get(ref) if isinstance(pins, dict) and isinstance(pins.get(ref), str) else None
    try:
        known = problems.is_path(ref) or problems.known(ref, pin)
    except GraderInputError as err:         # a stored folder that is not what its name says
        raise SpecError(f"{at}: {err.reason}", err.remedy) from None
    if not known:
        dirs = ", ".join(map(str, problems.installed_dirs())) or f"none: {problems.INSTALLED_ENV} is not set"
        raise _fail(at, f"problem must be one of {bundled}, a problem installed in {problems.INSTALLED_ENV} "
                        f"({dirs}), or a problem folder's path, got {ref!r}",
                    f"Name a bundled problem (grader/problems/), a folder an operator installed in a directory of "
                    f"{problems.INSTALLED_ENV} (on every machine that grades), or, in a spec file, a folder's "
                    f"path relative to it, with a slash (\"./{ref}\").")
    try:
        problem = problems.resolve(ref, Path(base) if base is not None else None, pin)
    except GraderInputError as err:
        raise SpecError(f"{at}: {err.reason}", err.remedy) from None
    name = problem.display or problem.name
    other = used.setdefault(name, problem)
    if other.sha256 != problem.sha256:
        raise _fail(at, f"two different problem folders are both called {name!r} here ({other.folder} and "
                        f"{problem.folder})", "Rename one of them (its problem.toml's name).")
    if problem.dialects and dialect not in problem.dialects:
        raise _fail(at, f"problem {name!r} accepts kernels in {', '.join(problem.dialects)}, not {dialect}",
                    f"Write dialect = one of those, or add {dialect!r} to its problem.toml's dialects.")
    return problem


def _pinned(pins, used: dict, where: str, base) -> dict[str, str]:
    """{problem name: folder sha256} of the problems used, each as the spec pins it (a spec read
    from text alone must pin every problem not bundled with the grader)."""
    if not isinstance(pins, dict) or not all(isinstance(v, str) for v in pins.values()):
        raise _fail(where, "problem_sha256 must map problem names to sha256 digests",
                    'Write problem_sha256 = { matmul = "<its sha256>" } (grader problem check prints it).')
    unknown = sorted(set(pins) - set(used))
    if unknown:
        raise _fail(where, f"problem_sha256 pins {', '.join(unknown)}, which no test uses",
                    "Pin only the problems the tests name, by the name in their problem.toml.")
    for name, problem in used.items():
        pin = pins.get(name)
        if pin is not None and pin != problem.sha256:
            raise _fail(where, f"problem {name!r}'s folder ({problem.folder}) is not the one this spec pins: its "
                               f"sha256 is {problem.sha256}, the spec's problem_sha256 says {pin}",
                        "Restore the folder the spec was written for, or pin the new one (after `grader problem "
                        "check` passes on it) and bump spec_version.")
        if pin is None and base is None and not problem.bundled:
            raise _fail(where, f"problem {name!r} does not ship with the grader, and a spec read from text (a stored "
                               f"spec row) must pin it", f'Add problem_sha256 = {{ {name} = "{problem.sha256}" }} '
                                                        f"to the spec.")
    return {name: problem.sha256 for name, problem in used.items()}


def _borderline(value, where: str) -> str:
    """The spec's `borderline`: "strict" (the default, today's rule), "credit" or "hardware"."""
    if value in tuple(Borderline):
        return Borderline(value)
    raise _fail(where, f'borderline must be "strict", "credit" or "hardware", got {value!r}',
                'Write borderline = "credit" to credit a p99 within the simulator\'s error of a threshold, '
                'borderline = "hardware" to time such a run again on a Trainium worker, or leave the key out.')


def _dialect(value, where: str) -> str:
    """The spec's `dialect` (absent: the legacy one, which every spec before the key meant)."""
    if value is None:
        return LEGACY.name
    if isinstance(value, str) and value in DIALECTS:
        return value
    allowed = ", ".join(f"{d.name!r} ({d.title}, {d.sdk})" for d in DIALECTS.values())
    raise _fail(where, f"dialect must be one of {allowed}, got {value!r}",
                f'Write dialect = "{CURRENT.name}" for {CURRENT.title}, or leave the key out for {LEGACY.title}.')


def _platform(value, where: str) -> str:
    """The Trainium generation the thresholds were set on, which also times a simulated run."""
    if not isinstance(value, str) or value not in PLATFORMS:
        known = ", ".join(f'"{name}" ({rules.hardware})' for name, rules in PLATFORMS.items())
        raise _fail(where, f"platform must be one of {known}, got {value!r}",
                    "Set platform to the Trainium generation the course's thresholds were measured on.")
    return value


def _lnc(value, dialect: str, platform: str, where: str) -> int:
    """The spec's `lnc`: kernels are launched as kernel[lnc] (NKI 0.6 on Trn2: 1 or 2 physical cores)."""
    if value == 1 and type(value) is int:
        return 1
    if value == 2 and type(value) is int and dialect == CURRENT.name and platform == "trn2":
        return 2
    raise _fail(where, f"lnc must be 1, or 2 for an {CURRENT.title} spec on trn2 (a logical NeuronCore of two "
                       f"physical cores); got {value!r}",
                f'Write lnc = 2 with dialect = "{CURRENT.name}" and platform = "trn2", or leave lnc out for one core.')


def _test(t: dict, at: str, files: dict, tolerances: dict, problem) -> TestSpec:
    name = _need(t, "name", at)
    kind = _need(t, "kind", at)
    if kind not in KINDS:
        raise _fail(at, f"kind must be one of {KINDS}, got {kind!r}")
    if t.get("file") not in files:
        raise _fail(at, f"file must be one of {sorted(files)}, got {t.get('file')!r}")
    if problem.kernel not in files[t["file"]].functions:
        raise _fail(at, f"problem {problem.display or problem.name!r} grades the kernel {problem.kernel}, which "
                        f"files.{t['file']} does not list", f"Add {problem.kernel} = {list(problem.arguments)} to "
                                                           f"files.{t['file']}.functions, or test another file.")
    thresholds = t.get("thresholds_us")
    if kind in TIMED_KINDS:
        if not thresholds or set(TIERS) - set(thresholds):
            raise _fail(at, "timed tests need thresholds_us = { optimized = ..., relaxed = ... }")
        for tier in TIERS:
            _number(thresholds[tier], at, f"thresholds_us.{tier}")
        if thresholds[Tier.OPTIMIZED] > thresholds[Tier.RELAXED]:
            raise _fail(at, "the optimized threshold must not exceed the relaxed one")
    configs = tuple(dict(c) for c in _need(t, "configs", at))
    if not configs:
        raise _fail(at, "needs at least one config")
    for j, config in enumerate(configs):
        missing = [k for k in problem.config_keys if k not in config]
        if missing:
            raise _fail(at, f"configs[{j}] lacks {', '.join(missing)}, which problem {problem.name!r} needs")
        dtype = str(config.get("dtype", "float32"))
        if dtype not in tolerances:
            raise _fail(at, f"configs[{j}] uses dtype {dtype!r}, which has no entry in [tolerances]",
                        f"Add `{dtype} = {{ rtol = ..., atol = ... }}` under [tolerances].")
    compute_only = tuple(t["compute_only"]) if "compute_only" in t else (
        tuple(sorted(problem.allowed_instructions)) if problem.allowed_instructions is not None else None)
    return TestSpec(
        name=name, title=t.get("title", name), kind=kind, file=t["file"], problem=problem.name,
        points=_number(_need(t, "points", at), at, "points"), configs=configs, gated_by=tuple(t.get("gated_by", ())),
        thresholds_us=dict(thresholds) if thresholds else None, warmup=int(t.get("warmup", 5)),
        iters=int(t.get("iters", 20)), compute_only=compute_only)
