"""Adjacent DMAs the backend can issue as one (an inference from C5, not a documented rule).

trn2-conv-measurements.md C5: a conv kernel with 3,112 DMAs passed the 1,002 us fp16 threshold
in the graded (DGE) mode, yet B1, B2, B4 and B6 each issue only one DMA per ~0.5-0.6 us and
B6's DMAs have the very shape of C5's (128 rows of ~500 bytes). What sets C5's kernel apart: its
input rows come three at a time from one `dma_copy` line in an unrolled loop, each DMA taking up
where the last one's rows end, in HBM and in SBUF; such a run is one DMA of rows three times as
long (C5's other kernel, 1,338 DMAs, writes exactly that and passed too). No calibration
kernel's DMAs chain like that, so merging them leaves every other fact where it was.

A group: consecutive trace records, all `dma_copy` from the same source line with the same
options, the same source and destination allocations, shapes and strides, no mask, each one's
source and destination starting exactly one contiguous run after the previous one's.
"""
from __future__ import annotations

import copy

from ..trace import Region, TraceRecord

MAX_GROUP = 64       # a bound on one merged DMA (the backend's descriptor queue is finite)


def _run_dims(r: Region) -> tuple[int, int]:
    """(elements, trailing dimensions) of a region's innermost contiguous run."""
    run = max(r.contiguous_bytes // r.itemsize, 1)
    n, dims = 1, 0
    for size in reversed(r.shape):
        if n >= run:
            break
        n *= size
        dims += 1
    return run, dims


def _plain(r: Region) -> bool:
    return r.offsets is None and r.strides is not None and r.nbytes > 0


def _same_form(a: TraceRecord, b: TraceRecord) -> bool:
    if b.opcode != "dma_copy" or b.accumulate or b.mask is not None or b.stores or b.site != a.site \
            or b.attrs != a.attrs or len(b.reads) != 1 or len(b.writes) != 1:
        return False
    return all(x.alloc_id == y.alloc_id and x.shape == y.shape and x.strides == y.strides and _plain(y)
               for x, y in ((a.reads[0], b.reads[0]), (a.writes[0], b.writes[0])))


def _continues(prev: TraceRecord, nxt: TraceRecord) -> bool:
    """`nxt` starts one contiguous run after `prev`, on both sides."""
    for x, y in ((prev.reads[0], nxt.reads[0]), (prev.writes[0], nxt.writes[0])):
        run, _ = _run_dims(x)
        if y.start - x.start != run:
            return False
    return True


def adjacent_dma_groups(trace: list[TraceRecord]) -> list[tuple[int, ...]]:
    """Runs of two or more records that issue as one DMA."""
    groups = []
    i, n = 0, len(trace)
    while i < n:
        lead = trace[i]
        j = i + 1
        if lead.opcode == "dma_copy" and not lead.accumulate and lead.mask is None and not lead.stores \
                and len(lead.reads) == 1 and len(lead.writes) == 1 and _plain(lead.reads[0]) \
                and _plain(lead.writes[0]) and _run_dims(lead.reads[0])[0] > 1:
            while j < n and j - i < MAX_GROUP and _same_form(lead, trace[j]) and _continues(trace[j - 1], trace[j]):
                j += 1
        if j - i > 1:
            groups.append(tuple(range(i, j)))
        i = j
    return groups


def _merged_region(r: Region, count: int) -> Region:
    """The region `count` back-to-back copies of `r`'s contiguous runs cover."""
    run, dims = _run_dims(r)
    keep = len(r.shape) - dims
    return Region(r.alloc_id, r.buffer, r.start, tuple(r.shape[:keep]) + (run * count,),
                  tuple(r.strides[:keep]) + (r.itemsize,), r.itemsize, r.dtype, r.partitions)


def merge_trace(trace: list[TraceRecord], groups: list[tuple[int, ...]]):
    """(merged trace, owner): owner[i] is the merged record that stands for trace[i]."""
    lead_of = {g[0]: g for g in groups}
    merged: list[TraceRecord] = []
    owner = [0] * len(trace)
    i = 0
    while i < len(trace):
        group = lead_of.get(i)
        rec = trace[i]
        if group is None:
            owner[i] = len(merged)
            merged.append(rec)
            i += 1
            continue
        k = len(group)
        merged.append(TraceRecord(rec.index, rec.opcode, rec.engine, [_merged_region(rec.reads[0], k)],
                                  [_merged_region(rec.writes[0], k)], rec.site, False, dict(rec.attrs),
                                  rec.kind, rec.params))
        for j in group:
            owner[j] = len(merged) - 1
        i += k
    if any("after" in rec.attrs for rec in merged):     # scheduling edges name the group's first DMA
        lead = {trace[j].index: merged[owner[j]].index for j in range(len(trace))}
        for pos, rec in enumerate(merged):
            if "after" in rec.attrs:
                rec = merged[pos] = copy.copy(rec)
                rec.attrs = dict(rec.attrs, after=tuple(sorted({lead.get(j, j) for j in rec.attrs["after"]})))
    return merged, owner
