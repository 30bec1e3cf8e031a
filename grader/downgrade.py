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


def lower_answers(problem: str, args: list[np.ndarray], kwargs: dict, dtype, rng: np.random.Generator):
    """What the check compares an output with, from the inputs alone (so it can be made ahead,
    grader.answer_pool): (the sampled slices, {precision name: the answer on them from inputs
    rounded to it}), in LOWER_PRECISIONS' order; None when the problem or dtype has no check."""
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
    """`a` rounded to `low`'s precision, in a's dtype: a.astype(low).astype(a.dtype)."""
    if a.dtype == np.float32 and low == np.float16:
        return float16_rounded(a)
    if a.dtype == np.float16 and low in _FLOAT8_FROM_FLOAT16:
        return float8_rounded(a, low)
    return a.astype(low).astype(a.dtype)


# float32 bit patterns: float16's smallest normal (2**-14), and the least magnitude that rounds
# to float16's infinity (65520, halfway between its largest finite 65504 and 2**16)
_F16_NORMAL_FROM = np.uint32(0x38800000)
_F16_INFINITE_FROM = np.uint32(0x477FF000)


def float16_rounded(a: np.ndarray) -> np.ndarray:
    """float32 `a` rounded to float16 precision, as float32: the bits of
    a.astype(np.float16).astype(np.float32), five times faster (NumPy converts to float16 an
    element at a time: 6.8 ns each here, about a third of a grade's downgrade answers).

    Where float16 is normal, rounding keeps float32's exponent and the 10 high bits of its 23-bit
    mantissa, to nearest, ties to even: an integer add of 0xFFF plus the lowest kept bit, then
    the 13 low bits cleared (a carry out of the mantissa rightly raises the exponent). Magnitudes
    below float16's normal range, rounding to its infinity, and infinities and NaNs, go
    through NumPy's own conversion."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    out = bits + ((bits >> np.uint32(13)) & np.uint32(1))
    out += np.uint32(0xFFF)
    out &= np.uint32(0xFFFFE000)
    magnitude = bits & np.uint32(0x7FFFFFFF)
    outside = (magnitude < _F16_NORMAL_FROM) | (magnitude >= _F16_INFINITE_FROM)
    result = out.view(np.float32).reshape(np.shape(a))
    if outside.any():
        flat = result.reshape(-1)
        picked = outside.reshape(-1)
        flat[picked] = np.asarray(a, dtype=np.float32).reshape(-1)[picked].astype(np.float16).astype(np.float32)
    return result


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


# float8 formats as float16 bit patterns: (mantissa bits kept, the least magnitude where the float8
# value is normal, the largest finite float8 magnitude). e5m2 has float16's exponent; e4m3fn a
# narrower one, and no infinity.
_FLOAT8_FROM_FLOAT16 = {np.dtype(ml_dtypes.float8_e5m2): (2, np.uint16(0x0400), np.uint16(0x7B00)),
                        np.dtype(ml_dtypes.float8_e4m3fn): (3, np.uint16(0x2400), np.uint16(0x5F00))}


def float8_rounded(a: np.ndarray, low: np.dtype) -> np.ndarray:
    """float16 `a` rounded to a float8 format's precision, as float16: the bits of
    a.astype(low).astype(np.float16), several times faster (ml_dtypes converts an element at a
    time: 10 ns each way and back here). Where the float8 value is normal and no larger than
    its largest finite one, rounding keeps the float16 exponent and the float8's mantissa bits,
    to nearest, ties to even, by integer arithmetic as in float16_rounded; every other
    magnitude (small, overflowing, infinite or NaN) goes through ml_dtypes."""
    kept, normal_from, largest = _FLOAT8_FROM_FLOAT16[np.dtype(low)]
    drop = np.uint16(10 - kept)
    bits = np.ascontiguousarray(a, dtype=np.float16).view(np.uint16)
    out = bits + ((bits >> drop) & np.uint16(1))
    out += np.uint16((1 << (10 - kept - 1)) - 1)
    out &= np.uint16(0xFFFF ^ ((1 << (10 - kept)) - 1))
    magnitude = bits & np.uint16(0x7FFF)
    outside = (magnitude < normal_from) | (magnitude > largest)
    result = out.view(np.float16).reshape(np.shape(a))
    if outside.any():
        flat = result.reshape(-1)
        picked = outside.reshape(-1)
        flat[picked] = np.asarray(a, dtype=np.float16).reshape(-1)[picked].astype(low).astype(np.float16)
    return result
