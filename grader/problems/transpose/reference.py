"""Part 1: `matrix_transpose`, which may compute only with nisa.nc_transpose."""
from __future__ import annotations

import numpy as np

from reference_kernels.numpy_reference import transpose_reference

from ..base import uniform


def make_inputs(config: dict, rng: np.random.Generator, empty=np.empty) -> tuple[list[np.ndarray], dict]:
    [(shape, dtype)], kwargs = signature(config)
    return [uniform(rng, dtype, *shape, empty=empty)], kwargs


def signature(config: dict) -> tuple[list[tuple[tuple[int, ...], np.dtype]], dict]:
    return [((config["m"], config["n"]), np.dtype(config.get("dtype", "float32")))], {}


def reference(args: list[np.ndarray], kwargs: dict, threads: int = 1) -> np.ndarray:    # one copy: no use for threads
    return transpose_reference(args[0])


def work(config: dict) -> tuple[float, float]:
    item = np.dtype(config.get("dtype", "float32")).itemsize
    return 0.0, 2.0 * config["m"] * config["n"] * item


def output(config: dict) -> tuple[tuple[int, ...], np.dtype]:
    return (config["n"], config["m"]), np.dtype(config.get("dtype", "float32"))


def label(config: dict) -> str:
    return f"{config['m']}x{config['n']} {config.get('dtype', 'float32')}"
