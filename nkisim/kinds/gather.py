"""Cross-partition movement and gathers in values (nkisim.instructions.gather traces them).

Elements move unchanged: no fp32 round trip, the executor casts only where the destination's
dtype differs (nl.gather_flattened's dtype=). Which elements move is the data of the indices
or segment ids, seen only here: an index outside its operand raises, naming it, where the
hardware's behaviour is undefined."""
from __future__ import annotations

import numpy as np

from .values import value_kind

QUADRANT, KEEP = 32, 255


def _mask_entries(params: dict) -> np.ndarray:
    entries = params.get("mask") if isinstance(params, dict) else None
    if not isinstance(entries, list) or len(entries) != QUADRANT or not all(
            type(e) is int and (0 <= e < QUADRANT or e == KEEP) for e in entries):
        raise ValueError(f"a shuffle mask is {QUADRANT} ints, each 0..31 or {KEEP}")
    return np.asarray(entries, dtype=np.int64)


@value_kind("stream_shuffle", reads=None, writes=1)
def stream_shuffle(rec, values):
    """dst partition i <- src partition (i // 32) * 32 + mask[i % 32]; 255 keeps dst's own
    (the record's second read)."""
    entries = _mask_entries(rec.params)
    if len(values) not in (1, 2):
        raise ValueError("a stream shuffle reads src, and dst when it keeps partitions")
    src = values[0]
    parts = rec.writes[0].shape[0] if rec.writes[0].shape else 1
    src_parts = src.shape[0] if src.ndim else 1
    flat = src.reshape(src_parts, -1)
    lane = np.arange(parts)
    picked = entries[lane % QUADRANT]
    keep = picked == KEEP
    source = (lane // QUADRANT) * QUADRANT + np.where(keep, 0, picked)
    if (source[~keep] >= src_parts).any():
        raise ValueError(f"the shuffle reads a partition beyond src's {src_parts}")
    out = flat[np.minimum(source, src_parts - 1)]
    if keep.any():
        if len(values) != 2:
            raise ValueError(f"a shuffle with {KEEP} entries reads dst, to keep those partitions")
        old = values[1].reshape(parts, -1)
        out[keep] = old[keep]
    return [out]


@value_kind("n_gather", reads=2, writes=1)
def n_gather(rec, values):
    """out[p, j] = data_flat[p, indices_flat[p, j]], each partition on its own row."""
    data, indices = values
    parts = data.shape[0] if data.ndim else 1
    flat = data.reshape(parts, -1)
    idx = indices.reshape(indices.shape[0] if indices.ndim else 1, -1)
    if idx.shape[0] != parts:
        raise ValueError("data and indices of a gather span different partitions")
    row = flat.shape[1]
    wide = idx.astype(np.int64)
    bad = (wide < 0) | (wide >= row)
    if bad.any():
        p, j = (int(k) for k in np.argwhere(bad)[0])
        raise IndexError(f"nc_n_gather index {int(wide[p, j])} (partition {p}, element {j} of indices, "
                         f"{int(bad.sum())} out of bounds in all) is outside data's {row} elements per "
                         f"partition: valid indices are 0..{row - 1}")
    return [np.take_along_axis(flat, wide, axis=1)]


@value_kind("sequence_bounds", reads=1, writes=1)
def sequence_bounds(rec, values):
    """[start, end) of each element's run of equal ids; id 0 is padding (start n, end -1)."""
    ids = values[0].reshape(-1)
    n = ids.size
    wrong = (ids < 0) | (ids != np.floor(ids)) | ~np.isfinite(ids.astype(np.float64))
    if wrong.any():
        j = int(np.argmax(wrong))
        raise ValueError(f"sequence_bounds segment id {ids[j].item()!r} at element {j} is not a non-negative integer "
                         "(the ISA reference's rule; 0 marks padding)")
    lane = np.arange(n, dtype=np.int64)
    if n == 0:
        return [np.zeros((1, 2, 0), dtype=np.int64)]
    new = np.ones(n, dtype=bool)
    new[1:] = ids[1:] != ids[:-1]
    last = np.ones(n, dtype=bool)
    last[:-1] = ids[:-1] != ids[1:]
    starts = np.maximum.accumulate(np.where(new, lane, 0))
    ends = np.minimum.accumulate(np.where(last, lane, n)[::-1])[::-1] + 1
    pad = ids == 0
    starts = np.where(pad, n, starts)
    ends = np.where(pad, -1, ends)
    return [np.stack([starts, ends]).reshape(1, 2, n)]


@value_kind("nonzero_with_count", reads=2, writes=1)
def nonzero_with_count(rec, values):
    """In each row of params["rows"]: src's nonzero positions + offset, padding, then the count;
    dst's other rows unchanged (values[1])."""
    src, old = values
    p = rec.params
    rows, offset, padding = p.get("rows"), p.get("offset"), p.get("padding")
    if not isinstance(rows, list) or type(offset) is not int or type(padding) is not int:
        raise ValueError("nonzero_with_count needs rows, offset and padding")
    n = src.shape[1]
    out = old.astype(np.int64)
    if out.shape != (src.shape[0], n + 1) or not all(type(r) is int and 0 <= r < src.shape[0] for r in rows):
        raise ValueError("nonzero_with_count rows or shapes do not fit its operands")
    for r in rows:
        found = np.flatnonzero(src[r] != 0)
        out[r, :] = padding
        out[r, :found.size] = found + offset
        out[r, n] = found.size
    return [out]
