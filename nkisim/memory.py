"""Buffers (HBM, SBUF, PSUM), allocations, and on-chip capacity accounting.

An allocation is live while the kernel still references it (through any tensor or view):
Python's reference counting plays the compiler's live-range analysis (with one cycle collection
before an overflow is reported, for tiles dropped inside reference cycles). Capacity is checked
when the next allocation is made, so a tile rebound in a loop (`t = nl.ndarray(...)`) does
not count twice, and an instruction result consumed at once (`psum += nc_matmul(..)`)
never counts at all.
"""
from __future__ import annotations

import enum
import gc
import itertools
import math
import weakref

import numpy as np

from .errors import AllocationError, HardwareLimitError
from .limits import HardwareLimits
from .source import SourceSite


class Buffer(enum.Enum):
    HBM = "hbm"            # nl.hbm / nl.private_hbm
    SHARED_HBM = "shared_hbm"
    SBUF = "sbuf"
    PSUM = "psum"

    def __init__(self, value: str) -> None:
        # plain attributes: enum properties are slow on the per-instruction path
        self.on_chip = value in ("sbuf", "psum")
        self.is_hbm = not self.on_chip
        self.text = value       # .value, as a plain attribute (an enum's .value is a descriptor call)

    @property
    def nki_name(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return f"nl.{self.value}"


_ids = itertools.count(1)


class Allocation:
    """One tensor's storage, described, not held: values exist only when the traced
    program runs (nkisim.execute).

    A plain class with slots, not a dataclass: one is made per instruction result, and a
    16-field dataclass took ~2 us of an instruction's tracing budget. Identity is equality."""

    __slots__ = ("buffer", "shape", "dtype", "par_axis", "site", "name", "is_input", "transient", "written",
                 "parent", "read", "producer", "input_index", "id", "tracker", "cost", "__weakref__")

    def __init__(self, buffer: Buffer, shape: tuple, dtype: np.dtype, par_axis: int, site: SourceSite | None,
                 name: str = "", is_input: bool = False, transient: bool = False, written: bool = False,
                 parent: "Allocation | None" = None, read: bool = False, producer: object = None,
                 input_index: int | None = None, id: int | None = None,
                 tracker: "MemoryTracker | None" = None, cost: int = 0) -> None:
        self.buffer = buffer
        self.shape = shape
        self.dtype = dtype
        self.par_axis = par_axis
        self.site = site
        self.name = name
        self.is_input = is_input
        self.transient = transient          # an instruction's own result, not yet placed
        self.written = written
        self.parent = parent                # set on a .view(dtype) reinterpretation
        self.read = read                    # an instruction has read it (see Machine.assign)
        self.producer = producer            # TraceRecord of the instruction whose result this is
        self.input_index = input_index      # which kernel argument (inputs only)
        self.id = next(_ids) if id is None else id
        self.tracker = tracker
        self.cost = cost                    # bytes per partition (SBUF) or banks (PSUM) accounted

    def __repr__(self) -> str:
        return f"Allocation(#{self.id} {self.buffer.value} {self.dtype}{list(self.shape)})"

    def __del__(self) -> None:
        # MemoryTracker.release, spelled out: one call less per instruction result
        tracker = self.tracker
        if tracker is not None:
            buffer = self.buffer
            if buffer is Buffer.SBUF:
                tracker.sbuf_bytes -= self.cost
                tracker._live_sbuf.pop(self.id, None)
            elif buffer is Buffer.PSUM:
                tracker.psum_banks -= self.cost
                tracker._live_psum.pop(self.id, None)
            else:
                tracker.release(self)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def partitions(self) -> int:
        return self.shape[self.par_axis] if self.shape else 1

    @property
    def bytes_per_partition(self) -> int:
        shape = self.shape
        if not shape:
            return self.dtype.itemsize
        return (math.prod(shape) // max(shape[self.par_axis], 1)) * self.dtype.itemsize

    def describe(self) -> str:
        label = f"'{self.name}' " if self.name else ""
        where = f" allocated at {self.site.short}" if self.site else ""
        return (f"{label}{self.dtype.name}{list(self.shape)} in {self.buffer.value}"
                f" ({self.bytes_per_partition} B/partition){where}")


class MemoryTracker:
    """Keeps running per-partition totals of live SBUF bytes and PSUM banks."""

    def __init__(self, limits: HardwareLimits) -> None:
        self.limits = limits
        # weak references, so a live list never keeps a tile alive
        self.live: dict[Buffer, dict[int, weakref.ref]] = {Buffer.SBUF: {}, Buffer.PSUM: {}}
        # the same two dicts, picked by identity below: hashing an Enum member runs Python code
        self._live_sbuf, self._live_psum = self.live[Buffer.SBUF], self.live[Buffer.PSUM]
        self.sbuf_bytes = 0
        self.psum_banks = 0
        self.peak_sbuf_bytes = 0
        self.peak_psum_banks = 0

    def psum_banks_of(self, alloc: Allocation) -> int:
        return math.ceil(alloc.bytes_per_partition / self.limits.psum_bank_bytes)

    def admit(self, alloc: Allocation) -> None:
        """Check the state so far, then account for `alloc` until it is garbage."""
        if self.sbuf_bytes > self.peak_sbuf_bytes or self.psum_banks > self.peak_psum_banks:
            self.check()
        if alloc.buffer is Buffer.PSUM:
            self._check_psum_tile(alloc)
            alloc.cost = self.psum_banks_of(alloc)
            self.psum_banks += alloc.cost
            live = self._live_psum
        elif alloc.buffer is Buffer.SBUF:
            alloc.cost = alloc.bytes_per_partition
            self.sbuf_bytes += alloc.cost
            live = self._live_sbuf
        else:
            return
        live[alloc.id] = weakref.ref(alloc)
        alloc.tracker = self

    def admit_known(self, alloc: Allocation, cost: int) -> None:
        """admit() of a result tile whose shape, dtype and buffer admit() has accepted before in
        this run: its per-tile check (a PSUM tile fits one bank) passed then, and `cost` is what
        it counted then. The state so far is still checked, as admit() does."""
        if self.sbuf_bytes > self.peak_sbuf_bytes or self.psum_banks > self.peak_psum_banks:
            self.check()
        buffer = alloc.buffer
        if buffer is Buffer.SBUF:
            self.sbuf_bytes += cost
            live = self._live_sbuf
        elif buffer is Buffer.PSUM:
            self.psum_banks += cost
            live = self._live_psum
        else:
            return
        alloc.cost = cost
        live[alloc.id] = weakref.ref(alloc)
        alloc.tracker = self

    def release(self, alloc: Allocation) -> None:
        """Called when an allocation is garbage: its live range has ended."""
        if alloc.buffer is Buffer.PSUM:
            self.psum_banks -= alloc.cost
            self._live_psum.pop(alloc.id, None)
        else:
            self.sbuf_bytes -= alloc.cost
            (self._live_sbuf if alloc.buffer is Buffer.SBUF else self.live[alloc.buffer]).pop(alloc.id, None)

    def _check_psum_tile(self, alloc: Allocation) -> None:
        bank = self.limits.psum_bank_bytes
        per_block = alloc.bytes_per_partition
        # with leading block dims each block is its own tile; otherwise the tile is all of it
        blocks = math.prod(alloc.shape[:alloc.par_axis]) if alloc.par_axis else 1
        tile_bytes = per_block // max(blocks, 1)
        if tile_bytes > bank:
            raise HardwareLimitError(
                f"PSUM tile {alloc.dtype.name}{list(alloc.shape)} needs {tile_bytes} bytes per "
                f"partition, but a PSUM tile must fit in one {bank}-byte bank "
                f"({bank // 4} fp32 elements)",
                remedy="split the free dimension so each PSUM tile holds at most "
                       f"{bank // 4} fp32 values per partition (nl.tile_size.psum_fmax)",
                code="err_psum_tile_exceeds_bank", site=alloc.site)

    def check(self) -> None:
        """Raise if live on-chip allocations exceed capacity; blame the newest one.

        Before a verdict of overflow, the cycle collector runs: a tile the kernel dropped inside
        a reference cycle is dead, and whether it counts must not depend on when Python last
        happened to collect (see tests/nkisim/test_capacity_gc.py)."""
        limits = self.limits
        if self.sbuf_bytes > limits.sbuf_usable_bytes or self.psum_banks > limits.psum_banks:
            gc.collect()        # finalizers of unreachable tiles release them (Allocation.__del__)
        if self.sbuf_bytes > self.peak_sbuf_bytes:
            self.peak_sbuf_bytes = self.sbuf_bytes
        if self.psum_banks > self.peak_psum_banks:
            self.peak_psum_banks = self.psum_banks
        if self.sbuf_bytes > limits.sbuf_usable_bytes:
            raise self._overflow(
                Buffer.SBUF, f"required SBUF {self.sbuf_bytes} bytes per partition exceeds "
                f"the available {limits.sbuf_usable_bytes} bytes per partition "
                f"({limits.sbuf_partition_bytes} physical minus {limits.sbuf_reserved_bytes} reserved)",
                "allocate smaller tiles, or allocate tiles inside the loop that uses them so "
                "earlier ones can be freed", "err_stack_overflow_sbuf")
        if self.psum_banks > limits.psum_banks:
            raise self._overflow(
                Buffer.PSUM, f"required PSUM banks {self.psum_banks} exceeds the available "
                f"{limits.psum_banks} banks of {limits.psum_bank_bytes} bytes per partition",
                "keep at most 8 PSUM tiles alive at once: evict finished accumulators to SBUF "
                "and allocate PSUM tiles inside the loop that fills them",
                "err_stack_overflow_psum")

    def _overflow(self, buffer: Buffer, message: str, remedy: str, code: str) -> AllocationError:
        allocs = [a for a in (ref() for _, ref in sorted(self.live[buffer].items())) if a is not None]
        newest = allocs[-1] if allocs else None
        listing = "; ".join(a.describe() for a in allocs[-8:])
        return AllocationError(f"{message}. Live {buffer.value} tensors (newest last): {listing}",
                               remedy=remedy, code=code,
                               site=newest.site if newest is not None else None)
