"""Assignment specs: one versioned TOML file per assignment in grader/specs/, loaded into
frozen dataclasses and checked, so a typo in a spec fails loudly before anything is graded."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

SPEC_DIR = Path(__file__).parent / "specs"
PROBLEMS = ("conv2d", "transpose")
KINDS = ("correctness", "performance", "extra_credit")


class SpecError(ValueError):
    """A spec file is malformed."""


@dataclass(frozen=True)
class FileSpec:
    key: str                          # "conv2d"
    filename: str                     # "conv2d.py"
    archive_path: str                 # where the course's submission script puts it
    functions: dict[str, tuple[str, ...]]   # required function -> its leading parameters
    optional: bool = False


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
        return self.kind in ("performance", "extra_credit")

    @property
    def kernel(self) -> str:
        return {"conv2d": "fused_conv2d_maxpool", "transpose": "matrix_transpose"}[self.problem]


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
    tolerances: dict[str, dict]
    tests: tuple[TestSpec, ...] = field(default=())

    def test(self, name: str) -> TestSpec:
        for t in self.tests:
            if t.name == name:
                return t
        raise KeyError(name)


def available() -> list[str]:
    return sorted(p.stem for p in SPEC_DIR.glob("*.toml"))


def load(name_or_path: str) -> AssignmentSpec:
    path = Path(name_or_path)
    if not path.suffix:
        path = SPEC_DIR / f"{name_or_path}.toml"
    if not path.is_file():
        raise SpecError(f"unknown assignment {name_or_path!r}: choose one of {', '.join(available())}")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise SpecError(f"{path.name}: {err}") from None
    return parse(data, path.name)


def _need(table: dict, key: str, where: str):
    if key not in table:
        raise SpecError(f"{where}: missing '{key}'")
    return table[key]


def parse(data: dict, where: str = "spec") -> AssignmentSpec:
    files = {}
    for key, f in _need(data, "files", where).items():
        functions = {fn: tuple(params) for fn, params in _need(f, "functions", f"{where} files.{key}").items()}
        files[key] = FileSpec(key, f.get("filename", f"{key}.py"), _need(f, "archive_path", f"{where} files.{key}"),
                              functions, bool(f.get("optional", False)))
    tests = []
    for i, t in enumerate(_need(data, "tests", where)):
        at = f"{where} tests[{i}]"
        name = _need(t, "name", at)
        kind = _need(t, "kind", at)
        if kind not in KINDS:
            raise SpecError(f"{at}: kind must be one of {KINDS}, got {kind!r}")
        if t.get("file") not in files:
            raise SpecError(f"{at}: file must be one of {sorted(files)}")
        if t.get("problem") not in PROBLEMS:
            raise SpecError(f"{at}: problem must be one of {PROBLEMS}")
        thresholds = t.get("thresholds_us")
        if kind != "correctness":
            if not thresholds or {"optimized", "relaxed"} - set(thresholds):
                raise SpecError(f"{at}: timed tests need thresholds_us = {{ optimized = ..., relaxed = ... }}")
            if thresholds["optimized"] > thresholds["relaxed"]:
                raise SpecError(f"{at}: the optimized threshold must not exceed the relaxed one")
        configs = tuple(dict(c) for c in _need(t, "configs", at))
        if not configs:
            raise SpecError(f"{at}: needs at least one config")
        tests.append(TestSpec(
            name=name, title=t.get("title", name), kind=kind, file=t["file"], problem=t["problem"],
            points=float(_need(t, "points", at)), configs=configs, gated_by=tuple(t.get("gated_by", ())),
            thresholds_us=dict(thresholds) if thresholds else None, warmup=int(t.get("warmup", 5)),
            iters=int(t.get("iters", 20)),
            compute_only=tuple(t["compute_only"]) if "compute_only" in t else None))
    names = [t.name for t in tests]
    if len(set(names)) != len(names):
        raise SpecError(f"{where}: test names must be unique")
    for t in tests:
        unknown = set(t.gated_by) - set(names)
        if unknown:
            raise SpecError(f"{where}: test {t.name} is gated by unknown tests {sorted(unknown)}")
    return AssignmentSpec(
        assignment=_need(data, "assignment", where), title=data.get("title", ""),
        spec_version=str(_need(data, "spec_version", where)),
        thresholds_version=str(_need(data, "thresholds_version", where)),
        platform=data.get("platform", "trn2"), partial_credit=float(data.get("partial_credit", 0.95)),
        precheck=bool(data.get("precheck", True)), implausible_speedup=float(data.get("implausible_speedup", 3.0)),
        files=files, tolerances=dict(_need(data, "tolerances", where)), tests=tuple(tests))
