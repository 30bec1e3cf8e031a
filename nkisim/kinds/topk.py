"""Values of GpSimd's top-k (nkisim.instructions.topk says the layout and what nkisim reads where
the reference is loose). A record read back from a program is untrusted: n, k and the shapes are
checked again here."""
from __future__ import annotations

import numpy as np

from .values import f32, value_kind

GROUP = 16
_UNSPECIFIED_INDEX = 0xFFFFFFFF


def _snake(rows: np.ndarray) -> np.ndarray:
    """(groups, 16 * positions): each group's elements in snake order (s = partition + 16 * position)."""
    groups = rows.shape[0] // GROUP
    return rows.reshape(groups, GROUP, -1).transpose(0, 2, 1).reshape(groups, -1)


def _unsnake(flat: np.ndarray, positions: int) -> np.ndarray:
    """The inverse of _snake for `positions` free positions: (groups * 16, positions)."""
    groups = flat.shape[0]
    return flat.reshape(groups, positions, GROUP).transpose(0, 2, 1).reshape(groups * GROUP, positions)


@value_kind("topk", reads=3, writes=2)
def topk(rec, values):
    """reads: src, val_dst and idx_dst as they were; writes: val_dst, idx_dst."""
    src, old_val, old_idx = values
    n, k = rec.params.get("n"), rec.params.get("k")
    if type(n) is not int or type(k) is not int or not 8 <= n < 65536 or not 1 <= k <= n:
        raise ValueError(f"topk needs ints 8 <= n < 65536 and 1 <= k <= n, got n={n!r} k={k!r}")
    x = f32(src)
    if x.ndim != 2 or x.shape[0] % GROUP or x.shape[1] * GROUP < n or old_val.shape != (x.shape[0], k) \
            or old_idx.shape != old_val.shape:
        raise ValueError("topk's operands do not have the shapes its n and k need")
    active = _snake(x)[:, :n]
    # stable ranking: NaN above every number, then by value, equal values by ascending index
    rank_key = np.where(np.isnan(active), np.inf, active)
    is_nan = np.isnan(active)
    index = np.broadcast_to(np.arange(n), active.shape)
    # ascending by (NaN last, value, descending index): the last k are the k largest, lower
    # indices kept where equal values straddle the cut
    order = np.lexsort((-index, rank_key, is_nan), axis=1)[:, n - k:]
    # the k in ascending order of value, equal values by ascending index
    keys = [np.take_along_axis(a, order, axis=1) for a in (index, rank_key, is_nan)]
    chosen = np.take_along_axis(order, np.lexsort(keys, axis=1), axis=1)
    written = -(-k // GROUP)
    slots = written * GROUP
    vals = np.full((active.shape[0], slots), np.nan, dtype=np.float32)
    idx = np.full((active.shape[0], slots), _UNSPECIFIED_INDEX, dtype=np.uint32)
    vals[:, :k] = np.take_along_axis(active, chosen, axis=1)
    idx[:, :k] = chosen.astype(np.uint32)
    out_val = f32(old_val).copy()
    out_idx = np.asarray(old_idx).astype(np.uint32, copy=True)
    out_val[:, :written] = _unsnake(vals, written)
    out_idx[:, :written] = _unsnake(idx, written)
    return [out_val, out_idx]
