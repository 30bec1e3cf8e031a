"""`grader problem check DIR`: is a problem folder fit to grade with? Its schema (on loading),
its reference (deterministic for a seed, drawing other inputs for another seed, the declared
output shape and dtype, the declared signature), its tolerances (sane for their dtypes), and
every solution graded on the simulator with the folder's own tests: each correct one must earn
full correctness and pass every timed test unflagged, each wrong one (and each starter) must
earn nothing but what problem.toml's [solutions.may_pass] allows it, and pass what that allows
(so a kernel wrong only when timed is seen to reach the timed tests, and to fail them).

Everything here runs in the grader's process but the solutions, which are graded as any
submission is: in sandboxed children."""
from __future__ import annotations

import ast
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from nkisim.dialects import CURRENT, DIALECTS

from ..vocabulary import Backend, TestKind, TestStatus
from . import folder as folders

SEEDS = (1, 2)
GRADE_SEED = 45                      # public: the check's grades are reproducible
CHECKED_CONFIGS = 3                  # reference checks on at most this many configurations
# unit roundoff: a tolerance below it fails honest kernels; at or above a lower precision's,
# results computed from that precision's operands pass (only the downgrade check stops them)
ROUNDOFF = {"float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}
LOWER = {"float32": ("bfloat16", 2.0 ** -9), "float16": ("float8_e4m3", 2.0 ** -4)}
ALLOWED_IMPORTS = {"numpy", "ml_dtypes", "grader.problems.base", "reference_kernels.numpy_reference"}


@dataclass(frozen=True)
class Row:
    what: str                        # "reference", "tolerances", a solution's file name
    expected: str
    got: str
    ok: bool


def check(path: str | Path, progress: Callable[[int, int], None] | None = None) -> tuple[folders.Folder, list[Row]]:
    """The folder (a ProblemFolderError when its schema is wrong) and one row per finding;
    `progress(graded, to_grade)` hears of each solution and starter graded (what takes long)."""
    loaded = folders.load(path, bundled=Path(path).resolve().parent == Path(__file__).parent)
    rows = [*_imports(loaded), *_reference(loaded), *_tolerances(loaded), *_templates(loaded)]
    graded = [(solution, kind) for kind in ("correct", "wrong") for solution in loaded.solutions(kind)]
    graded += [(starter, "template") for starter in folders.starter_files(loaded.path)]
    for done, (solution, kind) in enumerate(graded):
        if progress:
            progress(done, len(graded))
        rows.append(_graded(loaded, solution, kind))
    if progress:
        progress(len(graded), len(graded))
    return loaded, rows


def spec_for(loaded: folders.Folder, dialect: str):
    """The folder's own tests as a spec of one file, in `dialect`."""
    from .. import spec as specs
    data, problem = loaded.data, loaded.problem
    key = data["name"]
    ref = problem.display if problem.bundled else str(loaded.path)
    spec = {"assignment": f"problem-{key}", "title": data["title"], "spec_version": data["version"],
            "thresholds_version": data.get("thresholds_version", data["version"]), "dialect": dialect,
            "files": {key: {"filename": data["file"], "archive_path": data["file"],
                            "functions": {data["kernel"]: list(data["arguments"])}}},
            "tolerances": loaded.tolerances, "tests": [dict(t, file=key, problem=ref) for t in loaded.tests]}
    return specs.parse(spec, f"{loaded.path / folders.PROBLEM_FILE}", base=loaded.path)


def _configs(loaded: folders.Folder) -> list[dict]:
    seen, configs = set(), []
    for test in loaded.tests:
        for config in test.get("configs", []):
            key = repr(sorted(config.items()))
            if key not in seen:
                seen.add(key)
                configs.append(dict(config))
    return configs[:CHECKED_CONFIGS]


def _imports(loaded: folders.Folder) -> list[Row]:
    """reference.py is NumPy only (and the helpers the bundled ones share)."""
    tree = ast.parse((loaded.path / folders.REFERENCE_FILE).read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:          # `from reference_kernels import numpy_reference`
                full = f"{node.module}.{alias.name}"
                found.add(full if full in ALLOWED_IMPORTS else node.module)
    def fine(name: str) -> bool:
        top = name.split(".")[0]
        return name in ALLOWED_IMPORTS or top in {"numpy", "ml_dtypes"} or (
            top in sys.stdlib_module_names and top not in {"subprocess", "socket", "ctypes", "multiprocessing"})
    bad = sorted(n for n in found if not fine(n))
    return [Row("reference.py imports", "NumPy, ml_dtypes, the standard library", ", ".join(bad) or "those only",
                not bad)]


def _reference(loaded: folders.Folder) -> list[Row]:
    problem, rows = loaded.problem, []
    for config in _configs(loaded):
        label = problem.label(config)
        try:
            runs = []
            for seed in (SEEDS[0], SEEDS[0], SEEDS[1]):
                args, kwargs = problem.make_inputs(config, np.random.default_rng(seed))
                runs.append((args, kwargs, problem.reference(args, kwargs)))
        except Exception as err:
            rows.append(Row(f"reference {label}", "inputs and an answer", f"{type(err).__name__}: {err}", False))
            continue
        (a1, k1, r1), (a2, k2, r2), (a3, _, _) = runs
        same = k1 == k2 and all(_same(x, y) for x, y in zip(a1, a2)) and len(a1) == len(a2)
        rows.append(Row(f"reference {label}", "one seed: the same inputs and answer", "the same" if same and _same(
            r1, r2) else "they differ", same and _same(r1, r2)))
        differ = any(not _same(x, y) for x, y in zip(a1, a3))
        rows.append(Row(f"inputs {label}", "another seed: other inputs", "other" if differ else "the same inputs",
                        differ))
        shape, dtype = problem.output(config)
        got = (tuple(np.shape(r1)), np.asarray(r1).dtype)
        rows.append(Row(f"output {label}", f"{tuple(shape)} {np.dtype(dtype)}", f"{got[0]} {got[1]}",
                        isinstance(r1, np.ndarray) and got == (tuple(shape), np.dtype(dtype))))
        if problem.signature is not None:
            specs_, kw = problem.signature(config)
            drawn = [(tuple(a.shape), a.dtype) for a in a1]
            declared = [(tuple(int(n) for n in s), np.dtype(d)) for s, d in specs_]
            rows.append(Row(f"signature {label}", "what make_inputs draws", "the same" if (declared, kw) == (
                drawn, k1) else f"{declared} {kw} against {drawn} {k1}", (declared, kw) == (drawn, k1)))
        if str(np.dtype(dtype)) not in loaded.tolerances:
            rows.append(Row(f"tolerances {label}", f"an entry for {np.dtype(dtype)}", "none", False))
    return rows


def _same(x, y) -> bool:
    x, y = np.asarray(x), np.asarray(y)
    return x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes()


def _tolerances(loaded: folders.Folder) -> list[Row]:
    rows = []
    for dtype, tol in loaded.tolerances.items():
        roundoff = ROUNDOFF.get(dtype)
        problems_ = []
        if roundoff is not None and tol["rtol"] < roundoff and tol["atol"] == 0:
            problems_.append(f"rtol {tol['rtol']:g} is below {dtype}'s unit roundoff with atol 0: honest kernels fail")
        lower = LOWER.get(dtype)
        if lower is not None and tol["rtol"] >= lower[1]:
            problems_.append(f"rtol {tol['rtol']:g} accepts results from {lower[0]} operands")
        rows.append(Row(f"tolerances {dtype}", "tight enough, not tighter than the dtype",
                        "; ".join(problems_) or f"rtol {tol['rtol']:g}, atol {tol['atol']:g}", not problems_))
    return rows


def _templates(loaded: folders.Folder) -> list[Row]:
    """template/ holds the starters: a file of problem.toml's name defining the kernel, one for each
    dialect the folder accepts (template/nki06/ holds NKI 0.6's when it accepts both), each in the
    dialect of its place."""
    starters = folders.starter_files(loaded.path)
    if loaded.problem.bundled:              # the bundled ones' starters are student_template/
        return [_template_row(loaded, s) for s in starters]
    rows = [_template_row(loaded, s) for s in starters]
    name = loaded.data["file"]
    for dialect in loaded.problem.dialects or tuple(DIALECTS):
        if folders.starter(loaded.path, name, dialect) is None:
            sub = folders.TEMPLATE_SUBDIR.get(dialect)
            where = f"template/{sub}/{name}" if sub and len(loaded.problem.dialects or DIALECTS) > 1 else \
                f"template/{name}"
            rows.append(Row(where, f"a starter {name} in {dialect}", "none", False))
    return rows


def _template_row(loaded: folders.Folder, starter: Path) -> Row:
    what = starter.relative_to(loaded.path).as_posix()
    try:
        tree = ast.parse(starter.read_text(encoding="utf-8"))
    except (SyntaxError, ValueError) as err:
        return Row(what, "a Python file", f"{type(err).__name__}: {err}", False)
    defined = {n.name: [a.arg for a in n.args.args] for n in tree.body if isinstance(n, ast.FunctionDef)}
    params = defined.get(loaded.data["kernel"])
    want = list(loaded.data["arguments"])
    problems_ = [] if params is not None and params[:len(want)] == want else ["not defined so"]
    dialect = folders.dialect_of_file(starter)
    placed = CURRENT.name if starter.parent.name == folders.TEMPLATE_SUBDIR[CURRENT.name] else None
    if placed is not None and dialect != placed:
        problems_.append(f"written in {dialect}, but template/{starter.parent.name}/ holds {placed} starters")
    elif dialect not in (loaded.problem.dialects or tuple(DIALECTS)):
        problems_.append(f"written in {dialect}, which problem.toml's dialects does not accept")
    return Row(what, f"def {loaded.data['kernel']}({', '.join(want)}) in {placed or 'an accepted dialect'}",
               "; ".join(problems_) or f"defined, in {dialect}", not problems_)


def dialect_of_file(path: Path) -> str:
    """The dialect a kernel file imports (the legacy one when it imports neither)."""
    return folders.dialect_of_file(path)


def _graded(loaded: folders.Folder, solution: Path, kind: str) -> Row:
    from ..grade import GradeOptions, grade
    from ..submission import submission_from_bytes
    if not solution.is_file():
        return Row(f"{kind}: {os.path.relpath(solution, loaded.path)}", "a kernel file", "no such file", False)
    what = solution.relative_to(loaded.path).as_posix() if kind == "template" else \
        f"{kind}/{solution.name}" if solution.is_relative_to(loaded.path) else \
        f"{kind}: {os.path.relpath(solution, loaded.path)}"
    dialect = dialect_of_file(solution)
    accepted = loaded.problem.dialects or tuple(DIALECTS)
    if dialect not in accepted:
        return Row(what, f"a kernel in {' or '.join(accepted)}", f"a kernel in {dialect}", kind != "correct")
    spec = spec_for(loaded, dialect)
    try:
        sub = submission_from_bytes(loaded.data["file"], solution.read_bytes(), spec)
    except Exception as err:                      # a wrong solution may well not even load
        return Row(what, "graded", f"not accepted: {err}", kind != "correct")
    report = grade(sub, spec, GradeOptions(backend=Backend.SIM, seed=GRADE_SEED))
    if kind == "correct":
        return _correct_row(what, report)
    return _wrong_row(what, report, loaded.may_pass(solution), kind)


def _correct_row(what: str, report) -> Row:
    unmet = [f"{t.name} {t.status}" for t in report.tests if (
        t.status != TestStatus.PASSED if t.kind == TestKind.CORRECTNESS else t.points <= 0)]
    if report.flags:
        unmet.append(f"flagged {', '.join(report.flags)}")
    got = f"{_points(report)}" + (f": {'; '.join(unmet)}" if unmet else "")
    return Row(what, "full correctness, every timed test passed, no flag", got, not unmet)


def _wrong_row(what: str, report, may_pass: set[str], kind: str) -> Row:
    earned = [f"{t.name} {t.status} ({t.points:g})" for t in report.tests
              if t.name not in may_pass and (t.points > 0 or t.status in (TestStatus.PASSED, TestStatus.PARTIAL))]
    # a solution allowed to pass tests must pass them: one wrong only when timed that fails its
    # correctness tests too never reaches the timed tests, and so shows nothing about them
    status = {t.name: t.status for t in report.tests}
    unreached = [f"{name} {status.get(name, 'not a test of this folder')} (may_pass names it)"
                 for name in sorted(may_pass) if status.get(name) != TestStatus.PASSED]
    expected = "nothing" + (f" but {', '.join(sorted(may_pass))}, passed" if may_pass else "")
    wrong = earned + unreached
    return Row(what, expected, _points(report) + (f": {'; '.join(wrong)}" if wrong else ""), not wrong)


def _points(report) -> str:
    s = report.score
    return (f"correctness {s.correctness:g}/{s.max_correctness:g}, performance {s.performance:g}/"
            f"{s.max_performance:g}")


def table(loaded: folders.Folder, rows: list[Row]) -> str:
    """The rows as a table, with the folder's name and sha256 above it."""
    head = ["", "check", "expected", "got"]
    body = [["ok" if r.ok else "SURPRISE", r.what, r.expected, r.got] for r in rows]
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(3)]
    lines = [f"problem {loaded.problem.display} ({loaded.data['title']}), {loaded.path}",
             f"sha256 {loaded.problem.sha256}", ""]
    for line in [head, *body]:
        lines.append("  ".join(cell.ljust(widths[i]) if i < 3 else cell for i, cell in enumerate(line)).rstrip())
    surprises = sum(not r.ok for r in rows)
    lines += ["", f"{surprises} surprise{'s' if surprises != 1 else ''} in {len(rows)} checks"]
    return "\n".join(lines)
