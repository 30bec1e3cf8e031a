"""Output checks, done in the grader's process on arrays the child sent back: exact shape
and dtype, finite values, then the tolerance."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    message: str
    max_abs_error: float | None = None
    mismatched: int = 0


def check_output(out, expected: np.ndarray, rtol: float, atol: float) -> CheckResult:
    if type(out) is not np.ndarray:
        return CheckResult(False, f"the kernel returned {type(out).__name__}, expected an array")
    wrong = layout_failure(out.shape, out.dtype, expected.shape, expected.dtype)
    if wrong is not None:
        return wrong
    flat_out, flat_exp = out.reshape(-1), expected.reshape(-1)
    nonfinite, first_nonfinite, mismatched, first_mismatch, err = _tally(flat_out, flat_exp, rtol, atol)
    if nonfinite:
        where = _index(first_nonfinite, out.shape)
        return CheckResult(False, f"{nonfinite} output values are NaN or infinite (first at index {where}); "
                                  "an overflow (exp of a large value, a division by zero) or memory the kernel never wrote "
                                  "(it reads as NaN in the simulator)", mismatched=nonfinite)
    if not mismatched:
        return CheckResult(True, "output matches", err)
    where = _index(first_mismatch, out.shape)
    return CheckResult(False, f"{mismatched} of {out.size} output values differ from the reference beyond "
                              f"rtol={rtol}, atol={atol} (first at index {where}: got {float(out[where]):.6g}, "
                              f"expected {float(expected[where]):.6g})", err, mismatched)


def layout_failure(shape: tuple, dtype, expected_shape: tuple, expected_dtype) -> CheckResult | None:
    """The failure when an output's shape or dtype is not the expected one, else None. Also
    what a run fails with when the traced program declares such an output (dtypes given by
    name there), so both say the same."""
    if tuple(shape) != tuple(expected_shape):
        return CheckResult(False, f"output shape {tuple(shape)} differs from the expected {tuple(expected_shape)}")
    if dtype != expected_dtype:
        return CheckResult(False, f"output dtype {dtype} differs from the expected {expected_dtype}")
    return None


CHUNK = 1 << 16      # elements compared at a time: float64 scratch that stays in cache


def _tally(out: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> tuple:
    """(non-finite outputs, the first one's flat index, outputs outside the tolerance, the first
    one's flat index, the largest |out - expected|) of two flat arrays, compared in float64 a
    chunk at a time in reused buffers: float64 copies of a whole 200 MB output would cost more
    than the comparison. Once an output is not finite only non-finite ones are counted (that
    failure is the one reported)."""
    size = min(CHUNK, out.size)
    o, e, diff, bound = (np.empty(size) for _ in range(4))
    ok, finite = np.empty(size, dtype=bool), np.empty(size, dtype=bool)
    nonfinite = mismatched = 0
    first_nonfinite = first_mismatch = None
    err = 0.0
    for start in range(0, out.size, CHUNK):
        n = min(CHUNK, out.size - start)
        o_, e_, diff_, bound_, ok_, finite_ = o[:n], e[:n], diff[:n], bound[:n], ok[:n], finite[:n]
        np.copyto(o_, out[start:start + n], casting="unsafe")
        np.isfinite(o_, out=finite_)
        bad = n - int(np.count_nonzero(finite_))
        if bad:
            nonfinite += bad
            if first_nonfinite is None:
                first_nonfinite = start + int(np.argmin(finite_))
            continue
        if nonfinite:
            continue
        np.copyto(e_, expected[start:start + n], casting="unsafe")
        np.subtract(o_, e_, out=diff_)
        np.abs(diff_, out=diff_)
        np.abs(e_, out=bound_)
        bound_ *= rtol
        bound_ += atol                    # atol + rtol * |e|: np.isclose's rule ...
        np.less_equal(diff_, bound_, out=ok_)
        np.isfinite(e_, out=finite_)
        ok_ &= finite_                    # ... on finite values
        err = max(err, float(diff_.max()))
        wrong = n - int(np.count_nonzero(ok_))
        if wrong:
            mismatched += wrong
            if first_mismatch is None:
                first_mismatch = start + int(np.argmin(ok_))
    return nonfinite, first_nonfinite, mismatched, first_mismatch, err


def _index(flat: int, shape: tuple) -> tuple:
    return tuple(int(i) for i in np.unravel_index(flat, shape))
