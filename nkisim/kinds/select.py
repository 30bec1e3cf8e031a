"""Values of the Vector engine's selections (nkisim.instructions.select says which operands each
record reads and writes, and the readings of the reference it takes)."""
from __future__ import annotations

import numpy as np

from .. import alu, dtypes
from .accumulate import reduce_into
from .values import f32, operand_value, per_partition, value_kind

FP32_MIN = np.float32(np.finfo(np.float32).min)
_COMPARISONS = ("equal", "less", "less_equal", "greater", "greater_equal")
_DROPOUT_STREAM = 0x6E6B_6472     # keeps dropout's draws apart from any other seeded use of a record index
_MAX_SEED = 2 ** 63


def _flag(params: dict, key: str) -> bool:
    value = params.get(key, False)
    if type(value) is not bool:
        raise ValueError(f"{key} must be true or false, got {value!r}")
    return value


def _truth(predicate: np.ndarray, shape: tuple, reverse: bool) -> np.ndarray:
    """Where the predicate (nonzero is true) selects, in the shape of the data."""
    return (np.asarray(predicate).reshape(shape) != 0) != reverse


def _in_shape(x, shape: tuple) -> np.ndarray:
    return np.asarray(x).reshape(shape)


def _partial_max(values: np.ndarray) -> np.ndarray:
    parts = values.shape[0] if values.ndim else 1
    return values.reshape(parts, -1).max(axis=1)


@value_kind("copy_predicated", reads=None, writes=1)
def copy_predicated(rec, values):
    """reads: predicate, dst as it was, [src]: src where the predicate holds, the old dst elsewhere."""
    p = rec.params
    old = values[1]
    take = _truth(values[0], old.shape, _flag(p, "reverse"))
    src = operand_value(p["src"], values)
    if isinstance(src, np.ndarray):
        src = _in_shape(src, old.shape)
    else:
        src = _scalar(src, old.dtype)
    return [np.where(take, src, old)]


def _scalar(x, dtype: np.dtype) -> np.ndarray:
    """A scalar src as dst's dtype holds it (a float through fp32, as the engine takes it)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise ValueError(f"a scalar src must be a number, got {type(x).__name__}")
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if not isinstance(x, int) or not info.min <= x <= info.max:
            raise ValueError(f"src {x!r} does not fit {dtypes.name_of(dtype)}")
        return np.asarray(x, dtype=dtype)
    return dtypes.cast(np.asarray(x, dtype=np.float32), dtype)


@value_kind("range_select", reads=None, writes=None)
def range_select(rec, values):
    """reads: on_true_tile, bound0, bound1, [registers]; writes: dst, [registers, [reduce_res]]."""
    p = rec.params
    data = f32(values[0])
    if data.ndim != 2:
        raise ValueError("range_select selects along one free dimension")
    parts = data.shape[0]
    start = p["start"]
    if isinstance(start, bool) or not isinstance(start, (int, float)):
        raise ValueError(f"range_start must be a number, got {start!r}")
    index = (np.float32(start) + np.arange(data.shape[1], dtype=np.float32))[None, :]   # fp32, as documented
    keep = _compare(p["cmp0"], index, values[1], parts) & _compare(p["cmp1"], index, values[2], parts)
    out = np.where(keep, data, FP32_MIN)
    if "reduce" not in p:
        return [out]
    return [out] + reduce_into(p["reduce"], values, _partial_max(out))


def _compare(name, index: np.ndarray, bound: np.ndarray, parts: int) -> np.ndarray:
    if name not in _COMPARISONS:
        raise ValueError(f"range_select compares with one of {', '.join(_COMPARISONS)}, not {name!r}")
    return alu.OPS[name].fn(index, f32(bound).reshape(parts, 1)).astype(bool)


@value_kind("select_reduce", reads=None, writes=None)
def select_reduce(rec, values):
    """reads: predicate, on_true, [on_false column], [registers]; writes: dst, [registers, [reduce_res]]."""
    p = rec.params
    data = f32(values[1])
    parts = data.shape[0] if data.ndim else 1
    take = _truth(values[0], data.shape, _flag(p, "reverse"))
    on_false = per_partition(operand_value(p["on_false"], values), parts, data.ndim)
    out = np.where(take, data, on_false)
    if "reduce" not in p:
        return [out]
    return [out] + reduce_into(p["reduce"], values, _partial_max(out))


@value_kind("dropout", reads=None, writes=1)
def dropout(rec, values):
    """reads: data, [prob column]: each element zeroed with its partition's probability, from the
    record's own seed (nkisim's draw, not the hardware's random stream)."""
    p = rec.params
    data = values[0]
    parts = data.shape[0] if data.ndim else 1
    prob = per_partition(operand_value(p["prob"], values), parts, data.ndim)
    seed = p["seed"]
    if type(seed) is not int or not 0 <= seed < _MAX_SEED:
        raise ValueError(f"a dropout seed is an integer in [0, 2**63), got {seed!r}")
    drawn = np.random.default_rng([_DROPOUT_STREAM, seed]).random(data.shape, dtype=np.float32)
    return [np.where(drawn < prob, np.zeros((), data.dtype), data)]
