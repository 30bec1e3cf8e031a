"""The registry of problems a spec's tests may exercise, each a folder (grader/problems/folder.py):
the bundled ones, grader/problems/<name>/, under their names; a course's folder (a spec's path,
or a name found in NKI_GRADER_PROBLEM_DIRS) under name@<its sha256's first 12 digits>, once a
spec names it. spec.py, grade.py and precheck callers take every problem fact from here; the
functions below are the old module-level names, kept as thin facades over the registry."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from nkisim.platforms import DEFAULT_PLATFORM

from .. import blas
from . import folder
from .base import Problem

BUNDLED_DIR = Path(__file__).parent
# where an operator installs course problem folders (os.pathsep between directories): a spec
# from the database names them as it names a bundled one, by name
INSTALLED_ENV = "NKI_GRADER_PROBLEM_DIRS"


def _bundled() -> dict[str, Problem]:
    found = sorted(p.parent for p in BUNDLED_DIR.glob(f"*/{folder.PROBLEM_FILE}"))
    return {f.name: folder.load(f, bundled=True).problem for f in found}


REGISTRY: dict[str, Problem] = _bundled()
BUNDLED = tuple(REGISTRY)


def get(name: str) -> Problem:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown problem {name!r}: known problems are {', '.join(sorted(REGISTRY))}") from None


# where else a pinned problem may be found: callables (name, sha256) -> a folder's Path or None,
# added by the service (store.problem_folders: folders a site admin uploaded, kept in the
# database), so the pure core needs no database to grade with them
_finders: list = []


def add_finder(find) -> None:
    if find not in _finders:
        _finders.append(find)


def found_by_finders(ref: str, pin: str | None) -> Path | None:
    """The folder `ref` of sha256 `pin` as a finder (add_finder) has it now, or None."""
    if not pin:
        return None
    for find in _finders:
        path = find(ref, pin)
        if path is not None:
            return Path(path)
    return None


def known(ref: str, pin: str | None = None) -> bool:
    """Whether a problem name stands for a bundled, an installed or (pinned) a found folder."""
    return ref in BUNDLED or any((d / ref).is_dir() for d in installed_dirs()) or found_by_finders(ref, pin) is not None


def held_with_the_grader(name: str, pin: str) -> bool:
    """Whether the folder `name` of sha256 `pin` ships with the grader or sits in an installed
    directory: one no finder's store (a database) has to keep."""
    if name in BUNDLED:
        return REGISTRY[name].sha256 == pin
    return _installed_copy(name, pin) is not None


def _installed_copy(ref: str, pin: str | None) -> Path | None:
    """An installed directory's folder `ref` whose content is the pinned one, or None."""
    for directory in installed_dirs():
        if (directory / ref / folder.PROBLEM_FILE).is_file() and pin and folder.folder_hash(directory / ref) == pin:
            return directory / ref
    return None


def installed_dirs() -> list[Path]:
    return [Path(d) for d in os.environ.get(INSTALLED_ENV, "").split(os.pathsep) if d]


def is_path(ref: str) -> bool:
    """Whether a spec's `problem = ...` names a folder by path rather than a problem by name."""
    return "/" in ref or ref.startswith(".") or os.sep in ref


def resolve(ref: str, base: Path | None, pin: str | None = None) -> Problem:
    """The problem a spec's `problem = ref` names, registered: a bundled name, a folder path
    relative to `base` (the spec file's folder), a name in an installed directory, or a name
    whose pinned folder a finder has (add_finder): the pinned one first, whoever holds it."""
    if is_path(ref):
        if base is None:
            raise folder.ProblemFolderError(
                f"problem {ref!r} is a folder path, but this spec is text without a file to find it from",
                "Name an installed problem (NKI_GRADER_PROBLEM_DIRS) instead, or load the spec from its file.")
        return _register(folder.load(Path(base) / ref))
    if ref in BUNDLED:
        return REGISTRY[ref]
    installed = _installed_copy(ref, pin)     # an installed copy of the pinned content is used as it is
    if installed is not None:
        return _register(folder.load(installed))
    found = found_by_finders(ref, pin)
    if found is not None:
        return _register(folder.load(found))
    for directory in installed_dirs():
        if (directory / ref / folder.PROBLEM_FILE).is_file():
            return _register(folder.load(directory / ref))
    raise folder.ProblemFolderError(
        f"there is no problem {ref!r}: the bundled ones are {', '.join(BUNDLED)}"
        + (f", and none is installed under that name in {', '.join(map(str, installed_dirs()))}"
           if installed_dirs() else ""),
        "Name a bundled problem, give a problem folder's path (relative to the spec file), or install the "
        f"folder in a directory of {INSTALLED_ENV}.")


def _register(loaded: folder.Folder) -> Problem:
    """A course folder's problem, under its content's key (the same content: the same key)."""
    known = REGISTRY.get(loaded.problem.name)
    if known is None or not Path(known.folder).is_dir():   # a folder since removed (an upload's scratch copy)
        REGISTRY[loaded.problem.name] = loaded.problem
    return REGISTRY[loaded.problem.name]


def make_inputs(problem: str, config: dict, rng: np.random.Generator, empty=np.empty) -> tuple[list[np.ndarray], dict]:
    """A configuration's inputs and keyword arguments, each array made by `empty` (np.empty's
    signature) and written once."""
    return get(problem).make_inputs(config, rng, empty)


def signature(problem: str, config: dict) -> tuple[list[tuple[tuple[int, ...], np.dtype]], dict] | None:
    """([(shape, dtype) of each array argument], keyword arguments) of `config` without drawing
    them, as make_inputs gives them; None when the problem cannot tell."""
    known = get(problem).signature
    return known(config) if known is not None else None


@blas.one_blas_thread()
def reference(problem: str, args: list[np.ndarray], kwargs: dict, threads: int = 1) -> np.ndarray:
    """The answer, made on `threads` threads, each with one BLAS thread; the same bits for any
    number, and whatever BLAS threads the caller's process had (grader.blas)."""
    return get(problem).reference(args, kwargs, threads=threads)


def work(problem: str, config: dict) -> tuple[float, float]:
    """(FLOPs on the Tensor Engine, bytes to and from HBM) that any correct kernel needs."""
    return get(problem).work(config)


def roofline_us(problem: str, config: dict, platform: str = DEFAULT_PLATFORM) -> float:
    return get(problem).roofline_us(config, platform)


def output(problem: str, config: dict) -> tuple[tuple[int, ...], np.dtype]:
    """(shape, dtype) of the reference answer for `config`, without computing it."""
    return get(problem).output(config)


def label(problem: str, config: dict) -> str:
    return get(problem).label(config)


def problem_of_config(config: dict) -> Problem:
    """The problem whose config keys `config` has (for callers that hold only a config): of those
    whose keys it has, the one with the most keys (a matmul's m, k, n over a transpose's m, n)."""
    fitting = [p for p in REGISTRY.values() if all(k in config for k in p.config_keys)]
    if not fitting:
        raise ValueError(f"no registered problem takes a config with keys {sorted(config)}")
    return max(fitting, key=lambda p: len(p.config_keys))
