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
    # in chunks: float64 copies of a whole 200 MB output would cost more than the comparison
    flat_out, flat_exp = out.reshape(-1), expected.reshape(-1)
    nonfinite = mismatched = 0
    first_nonfinite = first_mismatch = None
    err = 0.0
    for start in range(0, flat_out.size, CHUNK):
        o = flat_out[start:start + CHUNK].astype(np.float64)
        e = flat_exp[start:start + CHUNK].astype(np.float64)
        finite = np.isfinite(o)
        if not finite.all():
            nonfinite += int(o.size - np.count_nonzero(finite))
            if first_nonfinite is None:
                first_nonfinite = start + int(np.argmin(finite))
            continue
        if nonfinite:
            continue
        diff = np.abs(o - e)
        close = (diff <= atol + rtol * np.abs(e)) & np.isfinite(e)   # np.isclose's rule, finite values
        err = max(err, float(diff.max()) if o.size else 0.0)
        if not close.all():
            mismatched += int(o.size - np.count_nonzero(close))
            if first_mismatch is None:
                first_mismatch = start + int(np.argmin(close))
    if nonfinite:
        where = _index(first_nonfinite, out.shape)
        return CheckResult(False, f"{nonfinite} output values are NaN or infinite (first at index {where}); "
                                  "uninitialised memory reads as NaN in the simulator", mismatched=nonfinite)
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


CHUNK = 1 << 20


def _index(flat: int, shape: tuple) -> tuple:
    return tuple(int(i) for i in np.unravel_index(flat, shape))
