"""Values of the Vector engine's statistics and top-8 instructions (nkisim.instructions.
vector_stats): bn_stats / bn_aggr, max8, nc_find_index8, nc_match_replace8. Every operand is
taken per partition over its flattened free dimensions and computed in fp32.

The checks below repeat the hardware limits the tracer enforced: a record read back from a
program is untrusted, and a forged one must fail here rather than compute something else."""
from __future__ import annotations

import numpy as np

from .values import f32, value_kind

BN_STATS_FMAX = 512
TOP8_MIN, TOP8_MAX = 8, 16384
_INDEX_DTYPES = {"uint16": np.dtype(np.uint16), "uint32": np.dtype(np.uint32)}


def _rows(v, low: int, high: int, what: str) -> np.ndarray:
    """`v` as fp32 (partitions, elements), its elements per partition within [low, high]."""
    x = f32(v)
    parts = x.shape[0] if x.ndim else 1
    rows = x.reshape(parts, -1)
    if not low <= rows.shape[1] <= high:
        raise ValueError(f"{what} has {rows.shape[1]} elements per partition, outside {low}..{high}")
    return rows


def _index_dtype(region) -> np.dtype:
    dtype = _INDEX_DTYPES.get(region.dtype)
    if dtype is None:
        raise ValueError(f"indices are written as uint16 or uint32, not {region.dtype}")
    return dtype


def _half_stats(half: np.ndarray) -> tuple:
    count = half.shape[1]
    mean = half.mean(axis=1, dtype=np.float32)
    centred = half - mean[:, None]
    return np.float32(count), mean, (centred * centred).sum(axis=1, dtype=np.float32)


@value_kind("bn_stats", reads=1, writes=1)
def bn_stats(rec, values):
    """[count, mean, variance * count] of the even positions, then of the odd ones."""
    x = _rows(values[0], 2, BN_STATS_FMAX, "bn_stats data")
    out = np.empty((x.shape[0], 6), dtype=np.float32)
    for start in (0, 1):
        count, mean, m2 = _half_stats(x[:, start::2])
        out[:, 3 * start] = count
        out[:, 3 * start + 1] = mean
        out[:, 3 * start + 2] = m2
    return [out]


@value_kind("bn_aggr", reads=1, writes=1)
def bn_aggr(rec, values):
    """[mean, population variance] of the partition's (count, mean, variance * count) triples:
    each triple's sum of squared deviations plus its count times its mean's squared distance
    from the overall mean (Chan et al.), over the total count."""
    x = _rows(values[0], 3, 3 * 2 ** 20, "bn_aggr data")
    if x.shape[1] % 3:
        raise ValueError(f"bn_aggr data has {x.shape[1]} elements per partition, not whole triples")
    triples = x.reshape(x.shape[0], -1, 3)
    count, mean, m2 = triples[:, :, 0], triples[:, :, 1], triples[:, :, 2]
    total = count.sum(axis=1, dtype=np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):      # no elements counted: NaN, quietly
        overall = (count * mean).sum(axis=1, dtype=np.float32) / total
        spread = mean - overall[:, None]
        var = (m2.sum(axis=1, dtype=np.float32) + (count * spread * spread).sum(axis=1, dtype=np.float32)) / total
    return [np.stack([overall, var], axis=1).astype(np.float32)]


@value_kind("max8", reads=1, writes=1)
def max8(rec, values):
    """The 8 largest per partition, descending; NaN sorts above every number (as np.sort puts
    it last), so a read of never-written memory shows in the result."""
    x = _rows(values[0], TOP8_MIN, TOP8_MAX, "max8 src")
    n = x.shape[1]
    top = np.partition(x, n - 8, axis=1)[:, n - 8:] if n > 8 else x
    return [np.sort(top, axis=1)[:, ::-1]]


def _occurrence(data: np.ndarray, value: np.ndarray, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index, found) per partition: where `value` occurs for the (rank + 1)-th time in `data`."""
    hits = data == value[:, None]
    seen = np.cumsum(hits, axis=1)
    index = np.argmax(hits & (seen == (rank + 1)[:, None]), axis=1)
    return index, seen[:, -1] > rank


def _earlier_equal(vals: np.ndarray, j: int, reverse: bool) -> np.ndarray:
    """How many of the vals processed before vals[:, j] equal it (the order pairs duplicates)."""
    before = vals[:, j + 1:] if reverse else vals[:, :j]
    return (before == vals[:, j:j + 1]).sum(axis=1)


def _matches(data: np.ndarray, vals: np.ndarray, reverse: bool) -> tuple[np.ndarray, np.ndarray]:
    """(index, found), each (partitions, 8): every val paired with its own occurrence."""
    index = np.zeros(vals.shape, dtype=np.int64)
    found = np.zeros(vals.shape, dtype=bool)
    for j in range(8):
        index[:, j], found[:, j] = _occurrence(data, vals[:, j], _earlier_equal(vals, j, reverse))
    return index, found


def _absent_error(found: np.ndarray, vals: np.ndarray, instr: str, how: str) -> ValueError:
    p, j = map(int, np.argwhere(~found)[0])
    return ValueError(f"{instr}: partition {p} has no (further) occurrence of vals[{p}, {j}] = {vals[p, j]!r}; "
                      f"{how}. Make every val occur in data (as many times as it repeats in vals)")


@value_kind("find_index8", reads=2, writes=1)
def find_index8(rec, values):
    data = _rows(values[0], TOP8_MIN, TOP8_MAX, "nc_find_index8 data")
    vals = _rows(values[1], 8, 8, "nc_find_index8 vals")
    absent = rec.params.get("absent")
    if absent not in ("undefined", "all_ones"):
        raise ValueError(f"nc_find_index8: unknown absent rule {absent!r}")
    index, found = _matches(data, vals, reverse=False)
    if not found.all():
        if absent == "undefined":
            raise _absent_error(found, vals, "nc_find_index8", "the SDK 2.26 reference leaves the result undefined")
        index[~found] = np.iinfo(_index_dtype(rec.writes[0])).max      # all ones in the index's width
    return [index.astype(np.uint32)]


@value_kind("match_replace8", reads=2, writes=None)
def match_replace8(rec, values):
    if len(rec.writes) not in (1, 2):
        raise ValueError(f"nc_match_replace8 writes its result and optionally dst_idx, not {len(rec.writes)} tiles")
    p = rec.params
    imm, order = p.get("imm"), p.get("order")
    if isinstance(imm, bool) or not isinstance(imm, (int, float)) or order not in ("forward", "reverse"):
        raise ValueError(f"nc_match_replace8: bad imm {imm!r} or order {order!r}")
    data = _rows(values[0], 1, TOP8_MAX, "nc_match_replace8 data")
    vals = _rows(values[1], 8, 8, "nc_match_replace8 vals")
    imm32 = np.float32(imm)
    clash = vals == imm32
    if clash.any():
        q, j = map(int, np.argwhere(clash)[0])
        raise ValueError(f"nc_match_replace8: vals[{q}, {j}] equals imm ({imm!r}); whether an element already "
                         "replaced by imm matches a later val is not documented. Choose an imm none of the vals "
                         "can equal (e.g. below the data's range)")
    index, found = _matches(data, vals, reverse=order == "reverse")
    if not found.all():
        raise _absent_error(found, vals, "nc_match_replace8", "both references leave the result undefined")
    replaced = data.copy()
    np.put_along_axis(replaced, index, imm32, axis=1)
    out = [replaced.reshape(np.shape(values[0]))]
    if len(rec.writes) == 2:
        out.append(index.astype(np.uint32))
    return out
