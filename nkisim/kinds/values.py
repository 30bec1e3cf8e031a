"""The registry of value kinds, and the operand helpers their functions share."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class ValueKind:
    name: str
    compute: Callable          # (record, values) -> [array per write]
    reads: int | None          # operand counts of every record of the kind (None: it varies)
    writes: int | None


VALUE_KINDS: dict[str, ValueKind] = {}


def value_kind(name: str, reads: int | None = None, writes: int | None = None):
    def register(fn):
        if name in VALUE_KINDS:
            raise RuntimeError(f"value kind {name!r} registered twice")
        VALUE_KINDS[name] = ValueKind(name, fn, reads, writes)
        return fn
    return register


def f32(v) -> np.ndarray:
    """The engines' arithmetic precision: every element-wise engine computes in fp32."""
    v = np.asarray(v)
    return v if v.dtype == np.float32 else v.astype(np.float32)


def per_partition(x, parts: int, ndim: int):
    """A scalar operand's value, broadcastable over a (parts, ...) tile of `ndim` dimensions:
    a number as fp32, a (parts, 1) column as one value per partition."""
    if isinstance(x, np.ndarray):
        return f32(x).reshape((parts,) + (1,) * max(ndim - 1, 0))
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise ValueError(f"a scalar operand must be a number, got {type(x).__name__}")
    return np.float32(x)


def operand_value(spec, values: list):
    """An operand that is a constant ({"const": x}) or one of the record's reads ({"read": i})."""
    if not isinstance(spec, dict) or len(spec) != 1:
        raise ValueError(f"an operand is {{'const': x}} or {{'read': i}}, got {spec!r}")
    if "const" in spec:
        return spec["const"]
    return values[spec["read"]]
