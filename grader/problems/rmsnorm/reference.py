"""A fused RMSNorm, `rmsnorm(x, gamma, eps)`: y = x / sqrt(mean(x^2, axis=-1) + eps) * gamma for
x [rows, d] (rows a multiple of 128) and gamma [d], y in x's dtype."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

EPS = 1e-6                     # a configuration's eps unless it gives one
# Each row of x is uniform in [-scale, scale) with its own scale, 10^u for u uniform in
# [LOW_DECADE, HIGH_DECADE): a row's mean square spans ~1e-7 .. 3, so eps decides a sizeable
# share of the rows (a kernel that leaves it out fails on them) and the signed values make
# mean(x) nothing like mean(x^2).
LOW_DECADE, HIGH_DECADE = -3.5, 0.5
ROW_BLOCK = 1024               # rows drawn or normalised at a time: float32 temporaries stay small


def signature(config: dict) -> tuple[list[tuple[tuple[int, ...], np.dtype]], dict]:
    dtype = np.dtype(config.get("dtype", "float32"))
    return [((config["rows"], config["d"]), dtype), ((config["d"],), dtype)], {"eps": float(config.get("eps", EPS))}


def make_inputs(config: dict, rng: np.random.Generator, empty=np.empty) -> tuple[list[np.ndarray], dict]:
    [(x_shape, dtype), (g_shape, _)], kwargs = signature(config)
    rows, d = x_shape
    scales = np.power(np.float32(10), rng.uniform(LOW_DECADE, HIGH_DECADE, size=(rows, 1)).astype(np.float32))
    x = empty(x_shape, dtype)
    for r0 in range(0, rows, ROW_BLOCK):
        r1 = min(rows, r0 + ROW_BLOCK)
        u = rng.random((r1 - r0, d), dtype=np.float32)
        x[r0:r1] = (np.float32(2) * u - np.float32(1)) * scales[r0:r1]
    gamma = empty(g_shape, dtype)
    gamma[...] = np.float32(0.5) + rng.random(d, dtype=np.float32)          # [0.5, 1.5): no column vanishes
    return [x, gamma], kwargs


def _normalised(x: np.ndarray, gamma: np.ndarray, eps: float, dtype) -> np.ndarray:
    """RMSNorm of x's rows times gamma, computed in `dtype`, cast to x's dtype, a block of rows at a time."""
    out = np.empty(x.shape, x.dtype)
    g = gamma.astype(dtype)
    for r0 in range(0, x.shape[0], ROW_BLOCK):
        block = x[r0:r0 + ROW_BLOCK].astype(dtype)
        mean_square = np.mean(np.square(block), axis=-1, keepdims=True, dtype=dtype)
        out[r0:r0 + ROW_BLOCK] = block * (dtype(1) / np.sqrt(mean_square + dtype(eps))) * g
    return out


def reference(args: list[np.ndarray], kwargs: dict) -> np.ndarray:
    """In float32, as the kernel's engines compute (NumPy's pairwise sums are within ~1e-7 of the
    exact mean square; tests/grader/test_problem_matmul_rmsnorm.py holds it to a float64 answer)."""
    x, gamma = (np.asarray(a) for a in args)
    return _normalised(x, gamma, kwargs.get("eps", EPS), np.float32)


def work(config: dict) -> tuple[float, float]:
    """No Tensor Engine work; x read and y written once, gamma read once."""
    item = np.dtype(config.get("dtype", "float32")).itemsize
    return 0.0, float((2 * config["rows"] * config["d"] + config["d"]) * item)


def output(config: dict) -> tuple[tuple[int, ...], np.dtype]:
    return (config["rows"], config["d"]), np.dtype(config.get("dtype", "float32"))


def label(config: dict) -> str:
    return f"{config['rows']}x{config['d']} eps={config.get('eps', EPS):g} {config.get('dtype', 'float32')}"


# The downgrade check's sample: a few rows, each normalised from its own values and gamma alone.
def sample(args: list[np.ndarray], kwargs: dict, count: int, rng: np.random.Generator) -> np.ndarray:
    rows = np.shape(args[0])[0]
    return np.sort(rng.choice(rows, size=min(count, rows), replace=False))


def slice_output(out: np.ndarray, rows: np.ndarray) -> np.ndarray:
    return out[rows]


def sampled_reference(args: list[np.ndarray], kwargs: dict, rows: np.ndarray,
                      rounding: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
    """The answer's rows `rows` from the inputs passed through `rounding` first (a lower
    precision's), in float64."""
    same = rounding or (lambda a: a)
    x, gamma = np.asarray(args[0]), np.asarray(args[1])
    return _normalised(same(np.ascontiguousarray(x[rows])), same(gamma), kwargs.get("eps", EPS), np.float64)
