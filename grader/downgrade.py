"""Precision downgrades, caught whatever the spec's tolerance.

A kernel that computes a float32 test with bfloat16 or float16 operands runs faster on the Tensor
Engine; a loose tolerance may accept its output. So every checked float32 (float16) output is also
compared with references computed from the inputs rounded to each lower precision the Tensor
Engine offers (bfloat16 and float16; float8 e4m3 and e5m2): an output clearly closer to a lower-precision reference than to the float32 one was
computed at that precision, and the run fails. Only a sample of the output is recomputed (the
problem says how: for conv2d, a few output channels), so the check costs a small fraction of the
reference answer."""
from __future__ import annotations

import ml_dtypes
import numpy as np

from . import problems

LOWER_PRECISIONS = {np.dtype(np.float32): (("bfloat16", np.dtype(ml_dtypes.bfloat16)),
                                           ("float16", np.dtype(np.float16))),
                    np.dtype(np.float16): (("float8_e4m3", np.dtype(ml_dtypes.float8_e4m3fn)),
                                           ("float8_e5m2", np.dtype(ml_dtypes.float8_e5m2)))}
CLEARLY = 4.0           # the output must be this many times closer to the lower-precision answer
SAMPLE = 8              # output slices recomputed per lower precision (conv2d: output channels)


def check(problem: str, args: list[np.ndarray], kwargs: dict, out: np.ndarray, expected: np.ndarray,
          rng: np.random.Generator) -> str | None:
    """A message when `out` was computed at a lower precision than `expected`'s dtype, else None."""
    prob = problems.get(problem)
    lower = LOWER_PRECISIONS.get(np.dtype(expected.dtype))
    if prob.sampled_reference is None or not lower or out.shape != expected.shape:
        return None
    picks = prob.sample(args, kwargs, SAMPLE, rng)
    exact = prob.slice_output(expected, picks).astype(np.float64)
    got = prob.slice_output(out, picks).astype(np.float64)
    off_exact = float(np.mean(np.abs(got - exact)))
    for name, dtype in lower:
        rounded = [a.astype(dtype).astype(a.dtype) if a.dtype == expected.dtype else a for a in args]
        low = prob.sampled_reference(rounded, kwargs, picks).astype(np.float64)
        apart = float(np.mean(np.abs(low - exact)))          # how far that precision moves the answer
        off_low = float(np.mean(np.abs(got - low)))
        if apart > 0 and off_exact > apart / 2 and off_low * CLEARLY < off_exact:
            closer = f"{off_exact / off_low:.0f}x closer to" if off_low > 0 else "exactly"
            return (f"the output was computed at {name} precision, not {expected.dtype}: it matches {closer} "
                    f"the answer from {name}-rounded inputs (mean error {off_low:.3g}) rather than the "
                    f"{expected.dtype} answer (mean error {off_exact:.3g}); compute {expected.dtype} tests in "
                    f"{expected.dtype}")
    return None
