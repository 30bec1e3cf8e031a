"""Values of dma_compute (nkisim.instructions.dma_compute): the DMA engines' fp32 sum."""
from __future__ import annotations

import numpy as np

from .values import f32, value_kind

MAX_SOURCES = 16


@value_kind("dma_sum", reads=None, writes=1)
def dma_sum(rec, values):
    """reads: the sources (1 to 16, each with dst's element count): their sum, each cast to fp32
    and added left to right in fp32; the executor rounds it once into dst's dtype."""
    if not 1 <= len(values) <= MAX_SOURCES:
        raise ValueError(f"dma_compute adds 1 to {MAX_SOURCES} sources, got {len(values)}")
    shape = rec.writes[0].shape
    total = f32(values[0]).reshape(shape).copy()
    for v in values[1:]:
        np.add(total, f32(v).reshape(shape), out=total)
    return [total]
