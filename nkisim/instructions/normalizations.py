"""nl.softmax and nl.rms_norm: the documented nki.language functions (experimental in both
dialects) that the compiler lowers onto several instructions. nkisim lowers each onto the table's
own instructions, so their values, capacity and cost are those instructions':

- softmax(x, axis): exp(x - max) / sum, the max and the sum over `axis` (free axes only).
  The reference writes exp(x) / sum(exp(x)); subtracting the maximum first gives the same
  values (to fp32 rounding) without overflowing for large inputs, and is what nkisim does.
- rms_norm(x, w, axis, n): x / RMS(x) * w with RMS(x) = sqrt(sum(x^2 over axis) / n + epsilon);
  w has x's shape (or broadcasts to it along free dimensions).

Which instructions the compiler emits for them is not documented: the cost is an estimate of
this lowering (docs/cost-model.md)."""
from __future__ import annotations

import numbers

from .. import dtypes
from ..alu import OPS
from ..errors import ShapeError, UnsupportedOperationError
from .common import operand, out_dtype
from .scalar import activation
from .vector import normalize_axes, tensor_reduce, tensor_scalar, tensor_tensor

_F32 = dtypes.float32


def _no_mask(mask, where: str) -> None:
    if mask is not None:
        raise UnsupportedOperationError(f"mask= of '{where}' is not simulated: it is lowered onto several "
                                        "instructions, and which elements each keeps is not documented",
                                        remedy="slice the operands to the valid region instead",
                                        code="err_not_simulated")


def _compute_dtype(compute_dtype, dtype, x):
    """The internal dtype: the reference says dtype and compute_dtype behave the same."""
    chosen = compute_dtype if compute_dtype is not None else dtype
    return _F32 if chosen is None else dtypes.to_dtype(chosen)


def softmax(x, axis=-1, *, dtype=None, compute_dtype=None, mask=None):
    _no_mask(mask, "softmax")
    operand(x, "softmax", "x")
    axes = normalize_axes(axis, x.ndim, "softmax")
    inner = _compute_dtype(compute_dtype, dtype, x)
    peak = tensor_reduce(OPS["maximum"], x, axes, keepdims=True, dtype=inner)
    shifted = tensor_tensor(x, peak, OPS["subtract"], dtype=inner)
    exps = activation(OPS["exp"], shifted, dtype=inner)
    total = tensor_reduce(OPS["add"], exps, axes, keepdims=True, dtype=inner)
    return tensor_tensor(exps, total, OPS["divide"], dtype=out_dtype(dtype, x.dtype))


def rms_norm(x, w, axis, n, epsilon=1e-06, *, dtype=None, compute_dtype=None, mask=None):
    _no_mask(mask, "rms_norm")
    operand(x, "rms_norm", "x")
    operand(w, "rms_norm", "w")
    if isinstance(n, bool) or not isinstance(n, numbers.Number) or n <= 0:
        raise ShapeError(f"n of 'rms_norm' is the number of values the RMS averages, a positive number; got {n!r}")
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Number) or epsilon < 0:
        raise ShapeError(f"epsilon of 'rms_norm' must be a non-negative number, got {epsilon!r}")
    axes = normalize_axes(axis, x.ndim, "rms_norm")
    inner = _compute_dtype(compute_dtype, dtype, x)
    squares = activation(OPS["square"], x, dtype=inner)
    total = tensor_reduce(OPS["add"], squares, axes, keepdims=True, dtype=inner)
    mean = tensor_scalar(total, OPS["multiply"], 1.0 / float(n), op1=OPS["add"], operand1=float(epsilon),
                         dtype=inner)
    inverse = activation(OPS["rsqrt"], mean, dtype=inner)
    scaled = tensor_tensor(x, inverse, OPS["multiply"], dtype=inner)
    return tensor_tensor(scaled, w, OPS["multiply"], dtype=out_dtype(dtype, x.dtype))
