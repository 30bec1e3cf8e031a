"""The values of an embedded constant (nl.shared_constant): the record's own bytes."""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes
from .values import value_kind


@value_kind("constant", reads=0, writes=1)
def constant(rec, values):
    p = rec.params
    raw, shape = p["bytes"], tuple(int(n) for n in p["shape"])
    dtype = dtypes.to_dtype(p["dtype"])
    if not isinstance(raw, np.ndarray) or raw.dtype != np.uint8 or raw.size != math.prod(shape) * dtype.itemsize:
        raise ValueError("an embedded constant's bytes do not match its dtype and shape")
    return [raw.view(dtype).reshape(shape)]
