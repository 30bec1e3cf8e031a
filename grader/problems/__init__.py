"""The registry of problems a spec's tests may exercise, one module each. spec.py, grade.py
and precheck callers take every problem fact from here; the functions below are the old
module-level names, kept as thin facades over the registry."""
from __future__ import annotations

import numpy as np

from .. import blas
from . import conv2d, transpose
from .base import Problem

REGISTRY: dict[str, Problem] = {p.name: p for p in (conv2d.PROBLEM, transpose.PROBLEM)}


def get(name: str) -> Problem:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown problem {name!r}: known problems are {', '.join(sorted(REGISTRY))}") from None


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


def roofline_us(problem: str, config: dict) -> float:
    return get(problem).roofline_us(config)


def output(problem: str, config: dict) -> tuple[tuple[int, ...], np.dtype]:
    """(shape, dtype) of the reference answer for `config`, without computing it."""
    return get(problem).output(config)


def label(problem: str, config: dict) -> str:
    return get(problem).label(config)


def problem_of_config(config: dict) -> Problem:
    """The problem whose config keys `config` has (for callers that hold only a config)."""
    for problem in REGISTRY.values():
        if all(k in config for k in problem.config_keys):
            return problem
    raise ValueError(f"no registered problem takes a config with keys {sorted(config)}")
