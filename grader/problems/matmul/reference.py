"""A tiled matrix multiplication, `matmul(a_tensor, b_tensor)`: C = A @ B for A [m, k] and
B [k, n] (each a multiple of 128), C in the inputs' dtype, accumulated in fp32 on the way."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..base import uniform

# The answer's GEMM runs in float32, as the kernel's PSUM accumulates: the inputs are drawn
# from [0, 1) (uniform), so no sum cancels, and a float32 BLAS sum of k products is within
# ~1.5e-6 of the exact value (relative; 1.3e-6 at most for k from 128 to 4096 here, against
# float64), under a quarter of the float32 tolerance (rtol 1e-5), which leaves the kernel's own
# float32 rounding the rest (tests/grader/test_problem_matmul_rmsnorm.py holds the folder's
# configurations to that quarter). bfloat16 and float16 inputs multiply exactly in float32.
ACCUMULATE = np.float32


def signature(config: dict) -> tuple[list[tuple[tuple[int, ...], np.dtype]], dict]:
    dtype = np.dtype(config.get("dtype", "float32"))
    return [((config["m"], config["k"]), dtype), ((config["k"], config["n"]), dtype)], {}


def make_inputs(config: dict, rng: np.random.Generator, empty=np.empty) -> tuple[list[np.ndarray], dict]:
    [(a_shape, dtype), (b_shape, _)], kwargs = signature(config)
    return [uniform(rng, dtype, *a_shape, empty=empty), uniform(rng, dtype, *b_shape, empty=empty)], kwargs


def reference(args: list[np.ndarray], kwargs: dict) -> np.ndarray:
    a, b = (np.asarray(x) for x in args)
    return np.matmul(a.astype(ACCUMULATE), b.astype(ACCUMULATE)).astype(a.dtype)


def work(config: dict) -> tuple[float, float]:
    """2mkn FLOPs; A and B read once and C written once."""
    m, k, n = config["m"], config["k"], config["n"]
    item = np.dtype(config.get("dtype", "float32")).itemsize
    return 2.0 * m * k * n, float((m * k + k * n + m * n) * item)


def output(config: dict) -> tuple[tuple[int, ...], np.dtype]:
    return (config["m"], config["n"]), np.dtype(config.get("dtype", "float32"))


def label(config: dict) -> str:
    return f"{config['m']}x{config['k']} @ {config['k']}x{config['n']} {config.get('dtype', 'float32')}"


# The downgrade check's sample: a few output columns, each computed from all of A and one column
# of B, so a kernel's precision shows on them as on the whole output.
def sample(args: list[np.ndarray], kwargs: dict, count: int, rng: np.random.Generator) -> np.ndarray:
    n = np.shape(args[1])[1]
    return np.sort(rng.choice(n, size=min(count, n), replace=False))


def slice_output(out: np.ndarray, columns: np.ndarray) -> np.ndarray:
    return out[:, columns]


def sampled_reference(args: list[np.ndarray], kwargs: dict, columns: np.ndarray,
                      rounding: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
    """The answer's columns `columns`, from the inputs passed through `rounding` first (a lower
    precision's), in float64: every product of two float32 values is exact there."""
    same = rounding or (lambda x: x)
    a, b = np.asarray(args[0]), np.asarray(args[1])
    product = same(a).astype(np.float64) @ same(np.ascontiguousarray(b[:, columns])).astype(np.float64)
    return product.astype(a.dtype)
