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
    if out.shape != expected.shape:
        return CheckResult(False, f"output shape {out.shape} differs from the expected {expected.shape}")
    if out.dtype != expected.dtype:
        return CheckResult(False, f"output dtype {out.dtype} differs from the expected {expected.dtype}")
    finite = np.isfinite(out)
    if not finite.all():
        bad = int((~finite).sum())
        where = tuple(int(i) for i in np.argwhere(~finite)[0])
        return CheckResult(False, f"{bad} output values are NaN or infinite (first at index {where}); "
                                  "uninitialised memory reads as NaN in the simulator", mismatched=bad)
    o, e = out.astype(np.float64), expected.astype(np.float64)
    close = np.isclose(o, e, rtol=rtol, atol=atol)
    err = float(np.max(np.abs(o - e))) if o.size else 0.0
    if close.all():
        return CheckResult(True, "output matches", err)
    bad = int((~close).sum())
    where = tuple(int(i) for i in np.argwhere(~close)[0])
    return CheckResult(False, f"{bad} of {o.size} output values differ from the reference beyond rtol={rtol}, "
                              f"atol={atol} (first at index {where}: got {o[where]:.6g}, expected {e[where]:.6g})",
                       err, bad)
