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
from .blas import one_blas_thread

LOWER_PRECISIONS = {np.dtype(np.float32): (("bfloat16", np.dtype(ml_dtypes.bfloat16)),
                                           ("float16", np.dtype(np.float16))),
                    np.dtype(np.float16): (("float8_e4m3", np.dtype(ml_dtypes.float8_e4m3fn)),
                                           ("float8_e5m2", np.dtype(ml_dtypes.float8_e5m2)))}
CLEARLY = 4.0           # the output must be this many times closer to the lower-precision answer
SAMPLE = 8              # output slices recomputed per lower precision (conv2d: output channels)


@one_blas_thread()
def lower_answers(problem: str, args: list[np.ndarray], kwargs: dict, dtype, rng: np.random.Generator):
    """What the check compares an output with, from the inputs alone (so it can be made ahead,
    grader.answer_pool): (the sampled slices, {precision name: the answer on them from inputs
    rounded to it}), in LOWER_PRECISIONS' order; None when the problem or dtype has no check.
    Worked out with one BLAS thread, as the answer is (grader.blas)."""
    prob = problems.get(problem)
    lower = LOWER_PRECISIONS.get(np.dtype(dtype))
    if prob.sampled_reference is None or not lower:
        return None
    picks = prob.sample(args, kwargs, SAMPLE, rng)
    answers = {}
    dtype = np.dtype(dtype)
    for name, low_dtype in lower:
        def rounding(a, low=low_dtype):          # applied by the problem to what it reads, a block at a time
            return rounded(a, low) if a.dtype == dtype else a
        answers[name] = prob.sampled_reference(args, kwargs, picks, rounding)
    return picks, answers


def rounded(a: np.ndarray, low: np.dtype) -> np.ndarray:
    """`a` rounded to `low`'s precision, in a's dtype: the bits of a.astype(low).astype(a.dtype).

    NumPy converts float32 to float16, and ml_dtypes float16 to float8, an element at a time
    (5-12 ns each way here: a third of a grade's downgrade answers). For those pairs, where the
    lower precision is normal and finite, rounding keeps a's exponent and the mantissa bits `low`
    has, to nearest, ties to even: an integer add of half a unit less one plus the lowest kept
    bit, then the dropped bits cleared (a carry out of the mantissa rightly raises the exponent).
    Every other magnitude (below `low`'s normal range, beyond its largest finite value, infinite
    or NaN) goes through the library's own conversion."""
    found = _BY_BITS.get((a.dtype, np.dtype(low)))
    if found is None:
        return a.astype(low).astype(a.dtype)
    unsigned, drop, normal_from, largest = found
    same = np.ascontiguousarray(a)
    bits = same.view(unsigned)
    out = bits + ((bits >> unsigned(drop)) & unsigned(1))
    out += unsigned((1 << (drop - 1)) - 1)
    out &= ~unsigned((1 << drop) - 1)
    magnitude = bits & ~unsigned(1 << (8 * bits.itemsize - 1))      # the sign bit cleared
    outside = (magnitude < normal_from) | (magnitude > largest)
    result = out.view(a.dtype).reshape(a.shape)
    if outside.any():
        flat, picked = result.reshape(-1), outside.reshape(-1)
        flat[picked] = same.reshape(-1)[picked].astype(low).astype(a.dtype)
    return result


# (a's dtype, the lower precision): (a's bits as unsigned integers, the mantissa bits the lower
# precision drops, and as a's bit patterns: the least magnitude where it is normal, the largest
# rounded here, which rounds to one of its finite values). For float16, the magnitude just below
# 65520, halfway from its largest finite 65504 to 2**16; for the float8s, their largest finite
# value itself. e5m2 has float16's exponent, e4m3fn a narrower one and no infinity.
_BY_BITS = {
    (np.dtype(np.float32), np.dtype(np.float16)): (np.uint32, 13, np.uint32(0x38800000), np.uint32(0x477FEFFF)),
    (np.dtype(np.float16), np.dtype(ml_dtypes.float8_e5m2)): (np.uint16, 8, np.uint16(0x0400), np.uint16(0x7B00)),
    (np.dtype(np.float16), np.dtype(ml_dtypes.float8_e4m3fn)): (np.uint16, 7, np.uint16(0x2400), np.uint16(0x5F00)),
}


def check(problem: str, args: list[np.ndarray], kwargs: dict, out: np.ndarray, expected: np.ndarray,
          rng: np.random.Generator, made=None) -> str | None:
    """A message when `out` was computed at a lower precision than `expected`'s dtype, else None.
    `made`: lower_answers() for these inputs and rng, worked out ahead (None: worked out here)."""
    prob = problems.get(problem)
    if prob.sampled_reference is None or not LOWER_PRECISIONS.get(np.dtype(expected.dtype)) or out.shape != expected.shape:
        return None
    picks, lows = made if made is not None else lower_answers(problem, args, kwargs, expected.dtype, rng)
    exact = prob.slice_output(expected, picks).astype(np.float64)
    got = prob.slice_output(out, picks).astype(np.float64)
    off_exact = float(np.mean(np.abs(got - exact)))
    for name, low_answer in lows.items():
        low = low_answer.astype(np.float64)
        apart = float(np.mean(np.abs(low - exact)))          # how far that precision moves the answer
        off_low = float(np.mean(np.abs(got - low)))
        if apart > 0 and off_exact > apart / 2 and off_low * CLEARLY < off_exact:
            closer = f"{off_exact / off_low:.0f}x closer to" if off_low > 0 else "exactly"
            return (f"the output was computed at {name} precision, not {expected.dtype}: it matches {closer} "
                    f"the answer from {name}-rounded inputs (mean error {off_low:.3g}) rather than the "
                    f"{expected.dtype} answer (mean error {off_exact:.3g}); compute {expected.dtype} tests in "
                    f"{expected.dtype}")
    return None

