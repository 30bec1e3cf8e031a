"""What a compute instruction's mask leaves it to do. The NKI reference's masks restrict "the
instruction to a sub-tile": a mask that keeps exactly a box of the result (a ragged last tile's
rows or columns, `(i_p < n) & (i_f < m)`) makes the instruction the box's, so the cost rules see
the record cut to that box. Any other mask (a band, a triangle) keeps the whole tile's cost: no
document says how the compiler lowers it (docs/cost-model.md, "masked compute"). DMAs are cut to their box
when they are traced (nkisim.instructions.dma); the executor and the dependency analysis keep the
whole record."""
from __future__ import annotations

import copy

from ..indexing import kept_box
from ..trace import Engine, Region, TraceRecord


def restricted(rec: TraceRecord) -> TraceRecord:
    """`rec` as its mask restricts it: a copy cut to the box the mask keeps of its result, or
    `rec` itself (no mask, a mask keeping everything, or one that keeps no box)."""
    if rec.mask is None or not rec.writes or rec.engine is Engine.DMA:
        return rec
    shape = tuple(rec.writes[0].shape)
    box = kept_box(rec.mask, shape)
    if box is None or all(b.start == 0 and b.stop == n for b, n in zip(box, shape)):
        return rec
    extents = [b.stop - b.start for b in box]
    cut = copy.copy(rec)
    if rec.opcode == "nc_matmul":          # the result's rows are stationary's columns, the rest moving's
        cut.attrs = {**rec.attrs, "m": extents[0], "n": _product(extents[1:])}
    elif rec.opcode == "nc_transpose":     # the result (f, p) of a (p, f) tile
        cut.attrs = {**rec.attrs, "f": extents[0], "p": _product(extents[1:])}
        if rec.engine is Engine.VECTOR and len(box) == 2:
            cut.reads = [_cut(r, box[::-1]) if tuple(r.shape) == shape[::-1] else r for r in rec.reads]
            cut.writes = [_cut(r, box) if tuple(r.shape) == shape else r for r in rec.writes]
    else:                                  # element-wise: the operands laid over the result
        cut.reads = [_cut(r, box) if tuple(r.shape) == shape else r for r in rec.reads]
        cut.writes = [_cut(r, box) if tuple(r.shape) == shape else r for r in rec.writes]
    return cut


def _cut(region: Region, box: tuple[slice, ...]) -> Region:
    """The part of `region` inside `box` (a strided access stays strided); a gathered access
    (no strides) stays whole."""
    if region.strides is None or len(region.strides) != len(box):
        return region
    item = region.itemsize
    start = region.start + sum(b.start * (stride // item) for b, stride in zip(box, region.strides))
    shape = tuple(b.stop - b.start for b in box)
    partitions = shape[0] if region.partitions == region.shape[0] else region.partitions
    return Region(region.alloc_id, region.buffer, start, shape, region.strides, item, region.dtype,
                  partitions, dyn=region.dyn)


def _product(values) -> int:
    n = 1
    for v in values:
        n *= v
    return n
