"""A problem as course staff write it: a folder of data and NumPy, read into the one Problem
record the grader uses (grader/problems/base.py).

    problem.toml        name, title, the kernel and its arguments, dialects, config keys,
                        tolerances, allowed instructions, and the tests (as a spec's [[tests]])
    reference.py        make_inputs(config, rng), reference(inputs, kwargs), work(config), and
                        optionally output(config), signature(config), label(config) and the
                        downgrade check's sample / slice_output / sampled_reference
    template/           the student's starter file (template/nki06/ for NKI 0.6's, when
                        the folder accepts both dialects)
    solutions/correct/  kernels that must earn full correctness and pass
    solutions/wrong/    kernels that must earn nothing they should not

reference.py is course code: it runs in the grader's own, trusted process (never in a
sandboxed child), so a folder is read only from where the grader ships its own (bundled) or
from a path an operator gave (a spec file's folder, NKI_GRADER_PROBLEM_DIRS), never from an
upload. Its sha256 (problem.toml and the folder's top-level .py files: what grades, not the
template or solutions) goes into every report graded with it."""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import json
import re
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import numpy as np
from nkisim.dialects import CURRENT, DIALECTS, LEGACY, dialect_of_module

from ..dtypes import dtype_of
from ..errors import GraderInputError
from .base import Problem

PROBLEM_FILE = "problem.toml"
REFERENCE_FILE = "reference.py"
REQUIRED = ("make_inputs", "reference", "work")
SAMPLED = ("sample", "slice_output", "sampled_reference")     # the downgrade check's: all three or none
KEYS = {"name", "title", "version", "kernel", "arguments", "file", "dialects", "config_keys", "tolerances",
        "allowed_instructions", "downgrade_check", "tests", "solutions", "thresholds_version"}
NAME = re.compile(r"[a-z][a-z0-9_-]{0,39}")
# what a spec's test table may say; problem.toml's tests leave out `file` and `problem` (theirs)
TEST_KEYS = {"name", "title", "kind", "points", "configs", "gated_by", "thresholds_us", "warmup", "iters",
             "compute_only"}


class ProblemFolderError(GraderInputError):
    """A problem folder that cannot be used as it is."""


@dataclass(frozen=True)
class Folder:
    """A loaded problem folder: its record, what problem.toml says, and where its parts are."""
    path: Path
    problem: Problem
    data: dict = field(repr=False)
    module: ModuleType = field(repr=False)

    @property
    def tests(self) -> list[dict]:
        return [dict(t) for t in self.data["tests"]]

    @property
    def tolerances(self) -> dict:
        return {dtype: dict(tol) for dtype, tol in self.data["tolerances"].items()}

    def solutions(self, kind: str) -> list[Path]:
        """The folder's solutions/<kind>/*.py, then those problem.toml names (paths from the folder)."""
        found = sorted((self.path / "solutions" / kind).glob("*.py"))
        named = [(self.path / p).resolve() for p in self.data.get("solutions", {}).get(kind, [])]
        return found + named

    def may_pass(self, solution: Path) -> set[str]:
        """The tests a wrong solution may pass (problem.toml [solutions.may_pass]: a kernel right
        on its correctness runs and wrong only when timed passes those, and must fail the rest)."""
        return set(self.data.get("solutions", {}).get("may_pass", {}).get(solution.name, ()))


TEMPLATE_DIR = "template"
# where a folder keeps each dialect's starter, as student_template/ does: template/nki06/<file>
# for NKI 0.6, template/<file> for the legacy dialect (or for a folder's only dialect)
TEMPLATE_SUBDIR = {CURRENT.name: "nki06"}


def dialect_of_file(path: Path) -> str:
    """The dialect a kernel file imports (the legacy one when it imports neither, or cannot be parsed)."""
    import ast
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, ValueError):
        return LEGACY.name
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else [])
        for name in names:
            found = dialect_of_module(name)
            if found is not None:
                return found.name
    return LEGACY.name


def starter_files(path: Path) -> list[Path]:
    """Every starter a folder holds: template/*.py and template/nki06/*.py."""
    base = Path(path) / TEMPLATE_DIR
    return sorted(base.glob("*.py")) + sorted((base / TEMPLATE_SUBDIR[CURRENT.name]).glob("*.py"))


def starter(path: Path, filename: str, dialect: str) -> Path | None:
    """The folder's starter `filename` in `dialect`: template/nki06/<file> or template/<file>,
    whichever is written in that dialect (a starter in the other dialect is never offered)."""
    base = Path(path) / TEMPLATE_DIR
    sub = TEMPLATE_SUBDIR.get(dialect)
    for candidate in ([base / sub / filename] if sub else []) + [base / filename]:
        if candidate.is_file() and dialect_of_file(candidate) == dialect:
            return candidate
    return None


def folder_hash(path: Path) -> str:
    """sha256 over problem.toml and the top-level .py files, each by name and content."""
    digest = hashlib.sha256()
    for file in [path / PROBLEM_FILE, *sorted(p for p in path.glob("*.py") if p.is_file())]:
        digest.update(file.name.encode() + b"\0" + hashlib.sha256(file.read_bytes()).hexdigest().encode() + b"\n")
    return digest.hexdigest()


def _fail(path: Path, what: str, remedy: str) -> ProblemFolderError:
    return ProblemFolderError(f"problem folder {path}: {what}", remedy)


_loaded: dict[tuple[str, str], Folder] = {}
_lock = threading.RLock()


def load(path: str | Path, bundled: bool = False) -> Folder:
    """The folder at `path`, loaded once per content (a changed folder is loaded again, under
    its new hash)."""
    path = Path(path).resolve()
    if not (path / PROBLEM_FILE).is_file():
        raise _fail(path, f"there is no {PROBLEM_FILE}" if path.is_dir() else "no such folder",
                    f"Give the folder that holds {PROBLEM_FILE} and {REFERENCE_FILE} (see docs/staff.md, "
                    f"'Problem folders').")
    sha = folder_hash(path)
    with _lock:
        found = _loaded.get((str(path), sha))
        if found is None:
            found = _loaded[(str(path), sha)] = _read(path, sha, bundled)
    return found


def _read(path: Path, sha: str, bundled: bool) -> Folder:
    data = _schema(path)
    if not (path / REFERENCE_FILE).is_file():
        raise _fail(path, f"there is no {REFERENCE_FILE}",
                    "Write reference.py with make_inputs(config, rng), reference(inputs, kwargs) and work(config).")
    module = _module(path, sha, data["name"], bundled)
    missing = [n for n in REQUIRED if not callable(getattr(module, n, None))]
    if missing:
        raise _fail(path, f"{REFERENCE_FILE} does not define {', '.join(missing)}",
                    "Define make_inputs(config, rng) -> (arrays, kwargs), reference(inputs, kwargs) -> array and "
                    "work(config) -> (Tensor Engine FLOPs, HBM bytes).")
    sampled = [n for n in SAMPLED if callable(getattr(module, n, None))]
    if sampled and len(sampled) != len(SAMPLED):
        raise _fail(path, f"{REFERENCE_FILE} defines {', '.join(sampled)} but not "
                          f"{', '.join(n for n in SAMPLED if n not in sampled)}",
                    "Define all three of sample, slice_output and sampled_reference, or none (the downgrade check "
                    "then recomputes the whole output).")
    return Folder(path, _problem(path, sha, data, module, bundled), data, module)


def _module(path: Path, sha: str, name: str, bundled: bool) -> ModuleType:
    """reference.py, executed here: a bundled folder's as the package module it is (it may use
    relative imports), any other's under a name of its own content."""
    try:
        if bundled:
            return importlib.import_module(f"{__package__}.{path.name}.reference")
        module_name = f"_nkigrader_problem_{name.replace('-', '_')}_{sha[:12]}"
        spec = importlib.util.spec_from_file_location(module_name, path / REFERENCE_FILE)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module          # dataclasses and pickling look modules up by name
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[module_name]
            raise
        return module
    except Exception as err:
        raise _fail(path, f"{REFERENCE_FILE} failed to load: {type(err).__name__}: {err}",
                    "Fix reference.py; it may import only NumPy, ml_dtypes and the standard library.") from None


def _schema(path: Path) -> dict:
    from ..spec import read_toml
    try:
        text = (path / PROBLEM_FILE).read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise _fail(path, f"{PROBLEM_FILE} is not UTF-8 text ({err.reason})", "Save it as UTF-8 TOML.") from None
    try:
        data = read_toml(text, PROBLEM_FILE)
    except GraderInputError as err:
        raise _fail(path, err.reason, err.remedy) from None
    unknown = sorted(set(data) - KEYS)
    if unknown:
        raise _fail(path, f"{PROBLEM_FILE} has unknown keys {', '.join(unknown)}",
                    f"Use only {', '.join(sorted(KEYS))} (a typo here would be ignored otherwise).")
    for key in ("name", "title", "version", "kernel", "file"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise _fail(path, f"{PROBLEM_FILE} needs {key} = \"...\" (a non-empty string)", f"Add {key} to it.")
    if not NAME.fullmatch(data["name"]):
        raise _fail(path, f"name {data['name']!r} is not a problem name",
                    "Use lower-case letters, digits, '-' and '_', starting with a letter (at most 40).")
    if not data["kernel"].isidentifier():
        raise _fail(path, f"kernel {data['kernel']!r} is not a Python function name", "Name the kernel function.")
    if not data["file"].endswith(".py") or "/" in data["file"]:
        raise _fail(path, f"file {data['file']!r} must be a .py file name without folders",
                    "Give the name of the student's file, as template/ has it (kernels.py, say).")
    for key in ("arguments", "config_keys"):
        value = data.get(key)
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.isidentifier() for v in value):
            raise _fail(path, f"{key} must be a list of names, got {value!r}",
                        f'Write {key} = ["..."] (the kernel\'s parameters; the keys every configuration gives).')
    dialects = data.setdefault("dialects", list(DIALECTS))
    if not isinstance(dialects, list) or not dialects or set(dialects) - set(DIALECTS):
        raise _fail(path, f"dialects must be a list of {', '.join(map(repr, DIALECTS))}, got {dialects!r}",
                    "Name the NKI dialects a kernel may be written in, or leave dialects out for both.")
    allowed = data.get("allowed_instructions")
    if allowed is not None and not (isinstance(allowed, list) and all(isinstance(a, str) for a in allowed)):
        raise _fail(path, f"allowed_instructions must be a list of instruction names, got {allowed!r}",
                    'Write allowed_instructions = ["nc_transpose"], say, or leave it out to allow any.')
    if not isinstance(data.get("downgrade_check", True), bool):
        raise _fail(path, "downgrade_check must be true or false", "Write downgrade_check = false, or leave it out.")
    _check_tolerances(path, data.get("tolerances"))
    _check_tests(path, data.get("tests"))
    _check_solutions(path, data.get("solutions", {}))
    return data


def _check_tolerances(path: Path, tolerances) -> None:
    remedy = "Write [tolerances] with float32 = { rtol = 1e-5, atol = 1e-8 }, say: one line per output dtype."
    if not isinstance(tolerances, dict) or not tolerances:
        raise _fail(path, "[tolerances] is missing or empty", remedy)
    for dtype, tol in tolerances.items():
        try:
            dtype_of(dtype)
        except TypeError:
            raise _fail(path, f"tolerances.{dtype}: {dtype!r} is not a NumPy dtype", remedy) from None
        numbers = isinstance(tol, dict) and set(tol) == {"rtol", "atol"} and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1 for v in tol.values())
        if not numbers:
            raise _fail(path, f"tolerances.{dtype} must be {{ rtol = ..., atol = ... }}, each in [0, 1); got {tol!r}",
                        remedy)


def _check_tests(path: Path, tests) -> None:
    if not isinstance(tests, list) or not tests:
        raise _fail(path, "there are no [[tests]]",
                    "Add [[tests]] tables as a spec has them (name, title, kind, points, configs, ...).")
    for i, test in enumerate(tests):
        if not isinstance(test, dict):
            raise _fail(path, f"tests[{i}] is not a table", "Write each test as a [[tests]] table.")
        unknown = sorted(set(test) - TEST_KEYS)
        if unknown:
            raise _fail(path, f"tests[{i}] has unknown keys {', '.join(unknown)}",
                        f"Use only {', '.join(sorted(TEST_KEYS))}; the folder names its own file and problem.")


def _check_solutions(path: Path, solutions) -> None:
    remedy = ('Write [solutions] with correct = ["../elsewhere.py"] (more correct kernels, as paths from the '
              'folder) and [solutions.may_pass] "cheat.py" = ["test name"], or leave it out.')
    if not isinstance(solutions, dict) or set(solutions) - {"correct", "wrong", "may_pass"}:
        raise _fail(path, f"[solutions] may hold only correct, wrong and may_pass; got {solutions!r}", remedy)
    for kind in ("correct", "wrong"):       # whether each is there is the check's (grader.problems.check)
        named = solutions.get(kind, [])
        if not isinstance(named, list) or not all(isinstance(rel, str) and rel for rel in named):
            raise _fail(path, f"solutions.{kind} must be a list of paths from the folder, got {named!r}", remedy)
    may = solutions.get("may_pass", {})
    if not isinstance(may, dict) or not all(isinstance(v, list) for v in may.values()):
        raise _fail(path, f"solutions.may_pass must map a wrong solution's file name to test names; got {may!r}",
                    remedy)


def _accepts(fn, name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _problem(path: Path, sha: str, data: dict, module: ModuleType, bundled: bool) -> Problem:
    name = data["name"]
    keys = tuple(data["config_keys"])
    allowed = data.get("allowed_instructions")
    sampled = {n: getattr(module, n) for n in SAMPLED if callable(getattr(module, n, None))}
    if not sampled and data.get("downgrade_check", True):
        sampled = _whole_output(module.reference)
    make = _make_inputs(module.make_inputs)
    reference = _reference(module.reference)
    output = getattr(module, "output", None)
    return Problem(
        name=name if bundled else f"{name}@{sha[:12]}", display=name, kernel=data["kernel"], config_keys=keys,
        make_inputs=make, reference=reference, work=module.work,
        label=getattr(module, "label", None) or _label(keys),
        output=(output if bundled else _declared(output)) if output else _output_of(make, reference),
        allowed_instructions=frozenset(allowed) if allowed is not None else None,
        sample=sampled.get("sample"), slice_output=sampled.get("slice_output"),
        sampled_reference=sampled.get("sampled_reference"), signature=getattr(module, "signature", None),
        sha256=sha, folder=str(path), bundled=bundled, title=data["title"], arguments=tuple(data["arguments"]),
        dialects=tuple(data["dialects"]))


def _make_inputs(fn):
    """make_inputs(config, rng, empty): a folder's own when it takes `empty` (writes its arrays
    where the grader says, once), else its arrays copied into arrays `empty` makes."""
    if _accepts(fn, "empty"):
        return fn

    def make(config: dict, rng: np.random.Generator, empty=np.empty):
        arrays, kwargs = _arrays_and_kwargs(fn(config, rng))
        placed = []
        for a in arrays:
            out = empty(a.shape, a.dtype)
            np.copyto(out, a)
            placed.append(out)
        return placed, kwargs
    return make


def _arrays_and_kwargs(made) -> tuple[list[np.ndarray], dict]:
    if isinstance(made, tuple) and len(made) == 2 and isinstance(made[1], dict):
        arrays, kwargs = made
    else:
        arrays, kwargs = made, {}
    arrays = list(arrays)
    if not all(isinstance(a, np.ndarray) for a in arrays):
        raise TypeError(f"make_inputs must return NumPy arrays (and a dict of keyword arguments), got "
                        f"{[type(a).__name__ for a in arrays]}")
    return arrays, dict(kwargs)


def _reference(fn):
    """reference(args, kwargs, threads=1), whether or not the folder's uses threads."""
    if _accepts(fn, "threads"):
        return fn

    def reference(args: list[np.ndarray], kwargs: dict, threads: int = 1) -> np.ndarray:
        return np.asarray(fn(args, kwargs))
    return reference


def _label(keys: tuple[str, ...]):
    def label(config: dict) -> str:
        shown = " ".join(f"{k}={config[k]}" for k in keys if k != "dtype")
        return f"{shown} {config.get('dtype', 'float32')}"
    return label


def _declared(output):
    """A folder's output(config), as (a tuple shape, an np.dtype) whatever it returns them as."""
    def declared(config: dict) -> tuple[tuple[int, ...], np.dtype]:
        shape, dtype = output(config)
        return tuple(int(n) for n in shape), dtype_of(dtype)
    return declared


def _output_of(make, reference):
    """output(config) for a folder whose reference.py does not say: the answer's shape and dtype
    for inputs from seed 0, worked out once per configuration."""
    known: dict[str, tuple] = {}

    def output(config: dict) -> tuple[tuple[int, ...], np.dtype]:
        key = json.dumps(config, sort_keys=True, default=str)
        if key not in known:
            args, kwargs = make(config, np.random.default_rng(0))
            answer = reference(args, kwargs)
            known[key] = (tuple(answer.shape), np.dtype(answer.dtype))
        return known[key]
    return output


def _whole_output(reference_fn) -> dict:
    """The downgrade check for a folder that names no sample: the whole output, from inputs
    rounded to each lower precision (two more reference answers a configuration)."""
    reference = _reference(reference_fn)

    def sample(args, kwargs, count, rng):
        return np.zeros(0, dtype=np.int64)        # nothing picked: the whole output

    def slice_output(out, picks):
        return out

    def sampled_reference(args, kwargs, picks, rounding=None):
        same = rounding or (lambda a: a)
        return reference([same(np.asarray(a)) for a in args], kwargs)
    return {"sample": sample, "slice_output": slice_output, "sampled_reference": sampled_reference}
