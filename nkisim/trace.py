"""What one executed instruction leaves behind for the cost model, profiles and tests."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import NamedTuple

from .source import SourceSite


class Engine(enum.IntEnum):
    """Engines, numbered as nki.isa.engine numbers them; DMA is the queue of DMA rings."""

    UNKNOWN = 0
    TENSOR = 1   # PE array
    SCALAR = 2   # ACT
    GPSIMD = 3   # POOL
    VECTOR = 5   # DVE
    SYNC = 6     # SP
    DMA = 7

    @property
    def label(self) -> str:
        return {1: "Tensor", 2: "Scalar", 3: "GpSimd", 5: "Vector", 6: "Sync", 7: "DMA"}.get(
            int(self), "Unknown")


class Region:
    """Memory an instruction touches: element offsets [lo, hi) of one allocation.

    Built cheaply when an instruction runs (raw view geometry only); bounds and sizes are
    worked out when the cost model or a profile first asks."""

    __slots__ = ("alloc_id", "buffer", "start", "shape", "strides", "itemsize", "dtype", "partitions",
                 "_bounds", "offsets", "dyn")

    def __init__(self, alloc_id: int, buffer: str, start: int, shape: tuple, strides, itemsize: int,
                 dtype: str, partitions: int, bounds: tuple | None = None, offsets=None,
                 dyn: tuple | None = None) -> None:
        self.alloc_id = alloc_id
        self.buffer = buffer
        self.start = start
        self.shape = shape
        self.strides = strides        # in bytes, or None for a gathered (advanced-index) access
        self.itemsize = itemsize
        self.dtype = dtype
        self.partitions = partitions  # size of the partition dim of the access (1 for HBM)
        self._bounds = bounds
        self.offsets = offsets        # flat element offsets of a gathered access (NumPy int64)
        # (register number, elements per unit): moved at run time by that register's value times
        # the unit (nkisim.sequencer resolves it); start/offsets are the access at value 0
        self.dyn = dyn

    def _geometry(self) -> tuple[int, int, int]:
        if self._bounds is None:
            item = self.itemsize
            lo = hi = self.start
            contiguous, run_open = item, True
            for n, stride in zip(reversed(self.shape), reversed(self.strides)):
                if n == 0:
                    hi = lo - 1
                    break
                if stride >= 0:
                    hi += (n - 1) * (stride // item)
                else:
                    lo += (n - 1) * (stride // item)
                if run_open and (stride == contiguous or n == 1):
                    contiguous *= n
                else:
                    run_open = False
            self._bounds = (lo, hi + 1, min(contiguous, max(self.nbytes, item)))
        return self._bounds

    @property
    def lo(self) -> int:
        return self._geometry()[0]

    @property
    def hi(self) -> int:
        return self._geometry()[1]

    @property
    def contiguous_bytes(self) -> int:
        """Bytes of the innermost contiguous run (DMA efficiency depends on it)."""
        return self._geometry()[2]

    @property
    def nbytes(self) -> int:
        n = self.itemsize
        for s in self.shape:
            n *= s
        return n

    @property
    def elements_per_partition(self) -> int:
        return self.nbytes // self.itemsize // max(self.partitions, 1)

    def overlaps(self, other: "Region") -> bool:
        return self.alloc_id == other.alloc_id and self.lo < other.hi and other.lo < self.hi

    def __repr__(self) -> str:
        return f"Region({self.buffer}#{self.alloc_id} {self.dtype}{list(self.shape)})"


class AllocInfo(NamedTuple):
    """One allocation of a traced program, as the executor creates it. A named tuple: a
    program has one per instruction result, and a frozen dataclass cost ~1.7 us to make."""

    id: int
    buffer: str                       # hbm | shared_hbm | sbuf | psum
    shape: tuple
    dtype: str                        # nkisim dtype name
    par_axis: int = 0
    name: str = ""
    input_index: int | None = None    # kernel argument it holds (inputs only)


_FRESH = object()      # "make a new empty container" (a dataclass's default_factory)


@dataclass(slots=True, init=False)
class TraceRecord:
    """One instruction of a traced program: what the cost model times (opcode, engine,
    regions, attrs) and what the executor computes (kind, params, mask, stores).

    __init__ is written out (the dataclass's own, with its default factories, took ~0.6 us of
    a traced instruction's budget; this one ~0.45); the fields and defaults are as declared."""

    index: int
    opcode: str
    engine: Engine
    reads: list[Region]
    writes: list[Region]
    site: SourceSite | None
    accumulate: bool = False          # writes add into existing PSUM/HBM values
    attrs: dict = field(default_factory=dict)
    kind: str = ""                    # the value semantics nkisim.execute applies
    params: dict = field(default_factory=dict)
    mask: object = None               # NumPy bool array: elements of writes[0] to write
    stores: list = field(default_factory=list)   # extra regions that get the same values, at no cost

    def __init__(self, index: int, opcode: str, engine: Engine, reads: list, writes: list, site,
                 accumulate: bool = False, attrs: dict = _FRESH, kind: str = "", params: dict = _FRESH,
                 mask: object = None, stores: list = _FRESH) -> None:
        self.index = index
        self.opcode = opcode
        self.engine = engine
        self.reads = reads
        self.writes = writes
        self.site = site
        self.accumulate = accumulate
        self.attrs = {} if attrs is _FRESH else attrs
        self.kind = kind
        self.params = {} if params is _FRESH else params
        self.mask = mask
        self.stores = [] if stores is _FRESH else stores

    @property
    def elements_per_partition(self) -> int:
        """Largest free size among the operands: the N of the documented cost formulas."""
        return max((r.elements_per_partition for r in self.reads + self.writes), default=0)
