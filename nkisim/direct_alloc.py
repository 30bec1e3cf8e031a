"""Direct allocation (SDK 2.26's neuronxcc.nki.compiler sbuf/psum .alloc and .mod_alloc): each
logical tile of an SBUF or PSUM tensor gets a physical place, and logical tiles that share
physical bytes are modelled as the one memory they are on Trainium.

A tensor's dimensions before nl.par_dim are its block dimensions: each block index is one
logical (P, F) tile. The allocator's func(idx, pdim_size, fdim_size) gives each tile's place,
SBUF (start_partition, byte_addr), PSUM (bank_id, start_partition, byte_addr); every place is
computed and checked when the tensor is allocated (the compiler evaluates func statically).

nkisim keeps each logical tile's values apart (the program format and the executor see the
logical tensor, as with automatic allocation), so what sharing memory does is modelled at trace
time instead: per physical core, who last wrote each physical byte. A read of a tile whose bytes
another logical tile wrote since it wrote them is the lifetime conflict the 2.26 guide warns of
(on Trainium the read returns the other tile's data): a KernelContractError at the kernel's line.
A tile read before it was ever written is uninitialised memory, as everywhere in nkisim. An access
counts as its bounding box per tile (partitions by bytes), the mask aside.

Instruction costs do not depend on addresses, so the cost rules need nothing. What sharing bytes
does to the schedule is kept at trace time too: a write of a logical tile into bytes another
tile last wrote waits for that write and for every read of those bytes since (the waits the
compiler's dependency tracking inserts on physical addresses: assumed, as for automatically
allocated tiles, whose hazards the cost model finds by allocation), recorded as scheduling edges
(attrs["after"]) on the writing instruction: one buffer shared by a load and the compute that
reads it serialises them, as on Trainium, where two would overlap. Nor does the program format
need anything: values stay per logical tile, and program.validate counts a tensor with block
dimensions tile by tile, each live from its first to its last use.
Sources: the 2.26 pages of nki.compiler.sbuf.alloc, sbuf.mod_alloc, sbuf.auto_alloc, psum.alloc,
psum.mod_alloc, psum.auto_alloc, and the NKI Direct Allocation Developer Guide.
"""
from __future__ import annotations

import linecache
import math
import numbers
import re

import numpy as np

from .errors import ArgumentError, HardwareLimitError, KernelContractError, UnsupportedOperationError
from .memory import Buffer

# nl.tile_size.sbuf_min_align (the pages say byte_addr "must be aligned to" it, not its value):
# nkisim's legacy and 0.6 nl.tile_size both give 1
SBUF_MIN_ALIGN = 1
# the compiler evaluates func for every logical tile: a bound on how many, so a tensor of a
# billion blocks is refused instead of hanging the trace
MAX_LOGICAL_TILES = 1 << 16

# ----- the allocators ------------------------------------------------------------------------------

class DirectAllocator:
    """What ncc.sbuf.alloc / mod_alloc and ncc.psum.alloc / mod_alloc return: passed as buffer= of
    nl.ndarray (and nl.zeros, nl.full, ...). It stands where a Buffer does (on_chip, is_hbm)."""

    on_chip = True
    is_hbm = False

    def __init__(self, buffer: Buffer, func, label: str, per_block: tuple = ()) -> None:
        self.buffer = buffer
        self.func = func
        self.label = label
        self.per_block = per_block      # (argument name, tuple) whose length must be 0 or the block rank

    def __repr__(self) -> str:
        return self.label


def alloc(buffer: Buffer, func) -> DirectAllocator:
    if not callable(func):
        raise ArgumentError(f"ncc.{buffer.text}.alloc takes a callable func(idx, pdim_size, fdim_size), "
                            f"got {type(func).__name__}", remedy="pass a function or lambda returning the "
                            "tile's place", code="err_unsupported_args")
    return DirectAllocator(buffer, func, f"ncc.{buffer.text}.alloc({getattr(func, '__name__', 'func')})")


def _int_arg(api: str, name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ArgumentError(f"{name} of {api} must be a non-negative int, got {value!r}",
                            remedy=f"pass {name}=0 or another non-negative int", code="err_unsupported_args")
    return int(value)


def _counts_arg(api: str, name: str, value) -> tuple:
    if not isinstance(value, (tuple, list)) or any(
            isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1 for n in value):
        raise ArgumentError(f"{name} of {api} must be a tuple of positive ints (one per block dimension), "
                            f"got {value!r}", remedy=f"pass e.g. {name}=(2,), or leave it ()",
                            code="err_unsupported_args")
    return tuple(int(n) for n in value)


def _must_be(api: str, name: str, value, wanted: str, ok: bool) -> None:
    if not ok:
        raise UnsupportedOperationError(f"{name} of {api} must be {wanted} in SDK 2.26, got {value!r}",
                                        remedy=f"leave {name} at its default", code="err_unsupported_args")


def _rotation(base: int, counts: tuple, scale: int):
    """The modulo rule of the mod_alloc pages: each block index modulo `counts` (all 1 when empty),
    linearised row-major over `counts`, times `scale`, plus `base`."""
    def at(idx: tuple) -> int:
        linear = 0
        for i, n in zip(idx, counts):
            linear = linear * n + i % n
        return base + linear * scale
    return at


def sbuf_mod_alloc(base_addr, base_partition=0, num_par_tiles=(), num_free_tiles=()) -> DirectAllocator:
    api = "ncc.sbuf.mod_alloc"
    addr = _int_arg(api, "base_addr", base_addr)
    part = _int_arg(api, "base_partition", base_partition)
    _must_be(api, "base_partition", base_partition, "0", part == 0)
    par, free = _counts_arg(api, "num_par_tiles", num_par_tiles), _counts_arg(api, "num_free_tiles", num_free_tiles)

    def place(idx, pdim_size, fdim_size):
        return _rotation(part, par, pdim_size)(idx), _rotation(addr, free, fdim_size)(idx)
    return DirectAllocator(Buffer.SBUF, place, f"{api}(base_addr={addr}, base_partition={part}, "
                           f"num_par_tiles={par}, num_free_tiles={free})",
                           (("num_par_tiles", par), ("num_free_tiles", free)))


def psum_mod_alloc(base_bank, base_addr=0, base_partition=0, num_bank_tiles=(), num_par_tiles=(),
                   num_free_tiles=()) -> DirectAllocator:
    api = "ncc.psum.mod_alloc"
    bank = _int_arg(api, "base_bank", base_bank)
    addr = _int_arg(api, "base_addr", base_addr)
    part = _int_arg(api, "base_partition", base_partition)
    banks = _counts_arg(api, "num_bank_tiles", num_bank_tiles)
    par, free = _counts_arg(api, "num_par_tiles", num_par_tiles), _counts_arg(api, "num_free_tiles", num_free_tiles)
    _must_be(api, "base_addr", base_addr, "0", addr == 0)
    _must_be(api, "base_partition", base_partition, "0", part == 0)
    _must_be(api, "num_par_tiles", num_par_tiles, "() or all ones", all(n == 1 for n in par))
    _must_be(api, "num_free_tiles", num_free_tiles, "() or all ones", all(n == 1 for n in free))

    def place(idx, pdim_size, fdim_size):
        return (_rotation(bank, banks, 1)(idx), _rotation(part, par, pdim_size)(idx),
                _rotation(addr, free, fdim_size)(idx))
    return DirectAllocator(Buffer.PSUM, place, f"{api}(base_bank={bank}, num_bank_tiles={banks})",
                           (("num_bank_tiles", banks), ("num_par_tiles", par), ("num_free_tiles", free)))


# ----- placing a tensor's tiles -----------------------------------------------------------------------

def _span(lo: int, hi: int) -> str:
    return f"{lo}..{hi - 1}"


class Placed:
    """A direct-allocated tensor's geometry and the physical place of each logical tile: starts[b]
    = (first partition, first byte) of block b (linear, row-major). PSUM bytes are flat over the
    banks (bank * bank bytes + byte_addr), so one box never crosses a bank."""

    __slots__ = ("buffer", "blocks", "parts", "free", "item", "starts", "name", "bank_bytes")

    def __init__(self, buffer, blocks, parts, free, item, starts, name, bank_bytes) -> None:
        self.buffer, self.blocks, self.parts, self.free, self.item = buffer, blocks, parts, free, item
        self.starts, self.name, self.bank_bytes = starts, name, bank_bytes

    def tile(self, block: int) -> str:
        if not self.blocks:
            return self.name
        return f"{self.name}[{', '.join(map(str, np.unravel_index(block, self.blocks)))}]"

    def where(self, p0: int, p1: int, b0: int, b1: int) -> str:
        if self.buffer is Buffer.PSUM:
            bank, off = divmod(b0, self.bank_bytes)
            return f"PSUM bank {bank} (partitions {_span(p0, p1)}, bytes {_span(off, off + b1 - b0)} of the bank)"
        return f"SBUF bytes (partitions {_span(p0, p1)}, bytes {_span(b0, b1)})"

    def boxes(self, t) -> list:
        """(block, p0, p1, b0, b1) physical boxes the view `t` touches: per logical tile, the
        bounding box of its elements there."""
        out, starts = [], self.starts
        for block, p_lo, p_hi, f_lo, f_hi in self._spans(t):
            if not 0 <= block < len(starts):     # elements a mask keeps out (checked already)
                continue
            sp, base = starts[block]
            out.append((block, sp + p_lo, sp + p_hi, base + f_lo * self.item, base + f_hi * self.item))
        return out

    def _spans(self, t) -> list:
        """(block, partition lo/hi, free element lo/hi) of a view: from its strides when each
        dimension steps blocks, partitions or the free elements of one partition; else from its
        element offsets."""
        if t._strides is None:
            return self._gathered(t._offset_map())
        parts, free = self.parts, self.free
        per_block = parts * free
        start, steps, p_ext, f_ext = t._start, [], 0, 0
        for n, s in zip(t.shape, t._strides):
            if n == 0:
                return []
            if n == 1 or s == 0:
                continue
            if s < 0:
                start += (n - 1) * s
                s = -s
            if s % per_block == 0:
                steps.append((n, s // per_block))
            elif s % free == 0:
                p_ext += (n - 1) * (s // free)
            elif (n - 1) * s < free:
                f_ext += (n - 1) * s
            else:
                return self._gathered(t._offset_map())
        b0, rest = divmod(start, per_block)
        p0, f0 = divmod(rest, free)
        if p0 + p_ext >= parts or f0 + f_ext >= free:
            return self._gathered(t._offset_map())
        blocks = [b0]
        for n, step in steps:
            blocks = [b + k * step for b in blocks for k in range(n)]
        return [(b, p0, p0 + p_ext + 1, f0, f0 + f_ext + 1) for b in blocks]

    def _gathered(self, offsets) -> list:
        offsets = np.asarray(offsets, dtype=np.int64).ravel()
        if offsets.size == 0:
            return []
        block, rest = np.divmod(offsets, self.parts * self.free)
        part, elem = np.divmod(rest, self.free)
        out = []
        for b in np.unique(block):
            sel = block == b
            out.append((int(b), int(part[sel].min()), int(part[sel].max()) + 1, int(elem[sel].min()),
                        int(elem[sel].max()) + 1))
        return out


def _tensor_name(alloc, site) -> str:
    """What messages call the tensor: its name=, else the name the kernel's line assigns it to
    (`buf = nl.ndarray(...)`), else where it was allocated."""
    if alloc.name:
        return alloc.name
    if site is not None:
        found = re.match(r"\s*([A-Za-z_]\w*)\s*=[^=]", linecache.getline(site.filename, site.lineno))
        return found.group(1) if found else f"<the {alloc.buffer.text} tensor of {site.short}>"
    return f"<an {alloc.buffer.text} tensor>"


def place(allocator: DirectAllocator, alloc, limits, site) -> Placed:
    """Every logical tile's place, checked against the 2.26 rules."""
    shape, axis = alloc.shape, alloc.par_axis
    blocks, parts = tuple(shape[:axis]), shape[axis]
    free = math.prod(shape[axis + 1:])
    item = alloc.dtype.itemsize
    fdim = free * item
    name = _tensor_name(alloc, site)
    count = math.prod(blocks)
    for arg, counts in allocator.per_block:
        if counts and len(counts) != len(blocks):
            raise ArgumentError(f"{arg}={counts} of {allocator.label} has {len(counts)} entries, but {name} "
                                f"{list(shape)} has {len(blocks)} block dimensions (those before nl.par_dim)",
                                remedy=f"give {arg} one entry per block dimension, or leave it ()",
                                code="err_unsupported_args", site=site)
    if count > MAX_LOGICAL_TILES:
        raise UnsupportedOperationError(f"{name} {list(shape)} has {count} logical tiles; nkisim places at most "
                                        f"{MAX_LOGICAL_TILES} per direct-allocated tensor",
                                        remedy="use fewer block dimensions, or allocate the tensor inside the "
                                               "loop that uses it", code="err_not_simulated", site=site)
    psum = allocator.buffer is Buffer.PSUM
    if psum and fdim > limits.psum_bank_bytes:
        raise HardwareLimitError(f"{name} {list(shape)} has {fdim} bytes per partition per tile, but a PSUM tile "
                                 f"must fit one {limits.psum_bank_bytes}-byte bank (fdim_size of ncc.psum.alloc)",
                                 remedy=f"at most {limits.psum_bank_bytes // 4} fp32 elements per tile",
                                 code="err_psum_tile_exceeds_bank", site=site)
    placed = Placed(allocator.buffer, blocks, parts, free, item, [], name, limits.psum_bank_bytes)
    check = _check_psum if psum else _check_sbuf
    for b, idx in enumerate(np.ndindex(*blocks) if blocks else [()]):
        idx = tuple(int(i) for i in idx)
        placed.starts.append(check(allocator, placed, b, allocator.func(idx, parts, fdim), fdim, limits, site))
    return placed


def _ints(allocator, placed, block, got, n: int, what: str, site) -> tuple:
    if not isinstance(got, (tuple, list)) or len(got) != n or any(
            isinstance(v, bool) or not isinstance(v, numbers.Integral) for v in got):
        raise ArgumentError(f"the func of {allocator.label} returned {got!r} for tile {placed.tile(block)}; it "
                            f"must return a tuple of {n} ints {what}", remedy=f"return {what}",
                            code="err_unsupported_args", site=site)
    return tuple(int(v) for v in got)


def _bad_place(allocator, placed, block, place, rule, remedy, site) -> HardwareLimitError:
    return HardwareLimitError(f"tile {placed.tile(block)} is placed by {allocator.label} at {place}: {rule}",
                              remedy=remedy, code="err_invalid_direct_allocation", site=site)


def _check_sbuf(allocator, placed, block, got, fdim, limits, site) -> tuple:
    start, addr = _ints(allocator, placed, block, got, 2, "(start_partition, byte_addr)", site)
    where = f"(start_partition={start}, byte_addr={addr})"
    pdim = placed.parts
    allowed = (0,) if pdim > 64 else (0, 64) if pdim > 32 else (0, 32, 64, 96)
    if start not in allowed:
        raise _bad_place(allocator, placed, block, where, f"a tile of {pdim} partitions must start at partition "
                         f"{' or '.join(map(str, allowed))}", "start the tile at one of those partitions", site)
    if addr < 0 or addr + fdim > limits.sbuf_usable_bytes:
        raise _bad_place(allocator, placed, block, where, f"its {fdim} bytes per partition end past the "
                         f"{limits.sbuf_usable_bytes} usable bytes of an SBUF partition",
                         f"keep byte_addr + {fdim} within 0..{limits.sbuf_usable_bytes}", site)
    if addr % SBUF_MIN_ALIGN:
        raise _bad_place(allocator, placed, block, where, f"byte_addr must be a multiple of "
                         f"nl.tile_size.sbuf_min_align ({SBUF_MIN_ALIGN})", "align byte_addr", site)
    return start, addr


def _check_psum(allocator, placed, block, got, fdim, limits, site) -> tuple:
    bank, start, addr = _ints(allocator, placed, block, got, 3, "(bank_id, start_partition, byte_addr)", site)
    where = f"(bank_id={bank}, start_partition={start}, byte_addr={addr})"
    if not 0 <= bank < limits.psum_banks:
        raise _bad_place(allocator, placed, block, where, f"PSUM has banks 0..{limits.psum_banks - 1}",
                         f"use a bank_id below {limits.psum_banks}", site)
    if start or addr:
        raise _bad_place(allocator, placed, block, where, "in SDK 2.26 a PSUM tile starts at partition 0 and byte "
                         "0 of its bank (one physical tile per bank)", "return (bank_id, 0, 0)", site)
    return 0, bank * limits.psum_bank_bytes


# ----- the kernel's allocation mode and who owns each physical byte ---------------------------------

# scheduling edges one write may carry (program.validate allows 4096): the latest are kept
MAX_EDGES = 4096


def add_waits(attrs: dict, waits) -> None:
    """A record's scheduling edges (attrs["after"]) with `waits` added: in order, the latest
    MAX_EDGES kept."""
    attrs["after"] = tuple(sorted(set(waits).union(attrs.get("after", ()))))[-MAX_EDGES:]


class _Owners:
    """One buffer of one core: disjoint boxes (p0, p1, b0, b1, owner, writer, readers) of the
    bytes each logical tile (owner: (allocation id, block)) wrote last, with the instruction that
    wrote them (its trace index) and the latest instruction of each engine that read them since
    ({engine: index}); and the boxes each owner has written."""

    __slots__ = ("boxes", "written")

    def __init__(self) -> None:
        self.boxes: list[tuple] = []
        self.written: dict[tuple, list[tuple]] = {}

    def read(self, box: tuple, owner: tuple, index: int, engine) -> None:
        """`owner`'s instruction `index` on `engine` reads its own bytes in `box`."""
        p0, p1, b0, b1 = box
        for r in self.boxes:
            if r[4] == owner and r[0] < p1 and p0 < r[1] and r[2] < b1 and b0 < r[3]:
                r[6][engine] = index

    def write(self, box: tuple, owner: tuple, index: int | None = None) -> set:
        """`owner` writes `box` (instruction `index`); returns the instructions it must follow:
        the last writes and reads of those bytes by other logical tiles."""
        p0, p1, b0, b1 = box
        kept, after = [], set()
        for r in self.boxes:
            if r[0] < p1 and p0 < r[1] and r[2] < b1 and b0 < r[3]:
                if r[4] != owner:
                    if r[5] is not None:
                        after.add(r[5])
                    after.update(r[6].values())
                kept.extend(_minus(r, box))
            else:
                kept.append(r)
        kept.append((p0, p1, b0, b1, owner, index, {}))
        self.boxes = kept
        mine = self.written.get(owner)
        if mine is None:
            self.written[owner] = [box]
        else:
            mine[:] = [w for w in mine if not _covers(box, w)]
            mine.append(box)
        return after

    def clobbered(self, box: tuple, owner: tuple):
        """(the other owner, the bytes) when bytes of `box` that `owner` wrote were written by
        another logical tile since; None when every byte it wrote there is still its own."""
        mine = self.written.get(owner)
        if not mine:
            return None
        p0, p1, b0, b1 = box
        for r in self.boxes:
            if r[4] != owner and r[0] < p1 and p0 < r[1] and r[2] < b1 and b0 < r[3]:
                z = (max(p0, r[0]), min(p1, r[1]), max(b0, r[2]), min(b1, r[3]))
                for w in mine:
                    if w[0] < z[1] and z[0] < w[1] and w[2] < z[3] and z[2] < w[3]:
                        return r[4], (max(z[0], w[0]), min(z[1], w[1]), max(z[2], w[2]), min(z[3], w[3]))
        return None


def _covers(a: tuple, b: tuple) -> bool:
    return a[0] <= b[0] and b[1] <= a[1] and a[2] <= b[2] and b[3] <= a[3]


def _minus(r: tuple, box: tuple) -> list:
    """What is left of box r (its owner, writer and readers kept) once `box` is cut out of it: up
    to four boxes."""
    p0, p1, b0, b1, owner, writer, readers = r
    q0, q1, c0, c1 = max(p0, box[0]), min(p1, box[1]), max(b0, box[2]), min(b1, box[3])
    out = []
    if p0 < q0:
        out.append((p0, q0, b0, b1, owner, writer, dict(readers)))
    if q1 < p1:
        out.append((q1, p1, b0, b1, owner, writer, dict(readers)))
    if b0 < c0:
        out.append((q0, q1, b0, c0, owner, writer, dict(readers)))
    if c1 < b1:
        out.append((q0, q1, c1, b1, owner, writer, dict(readers)))
    return out


class DirectState:
    """A kernel's direct allocations (Machine.direct, made at its first one): the placed tensors
    by allocation id and, per physical core and buffer, who owns each physical byte."""

    def __init__(self, site) -> None:
        self.site = site                            # the kernel's first direct allocation
        self.placed: dict[int, Placed] = {}
        self.owners: dict[tuple, _Owners] = {}      # (core, buffer) -> owners
        self.passing = None                         # the result Machine.assign copies into its tensor

    def assigning(self, value, trace: list) -> None:
        """`dest[...] = value` copies an instruction's result: allowed when it is the result of the
        instruction just traced, not read yet (the compiler writes it into dest); a result the
        kernel kept is an automatically allocated tile, refused when the copy reads it."""
        alloc = value._alloc
        if alloc.transient and not alloc.read and trace and alloc.producer is trace[-1]:
            self.passing = alloc

    def access(self, core: int, reads, writes, site, index: int | None = None, engine=None) -> tuple:
        """An instruction's operands (Machine.emit; `index` its place in the trace, `engine` its
        engine): its reads checked and noted, then its writes owned. Returns the earlier
        instructions it must follow (its writes' waits on the bytes' other tiles), in order."""
        placed, passing = self.placed, self.passing
        self.passing = None
        for t in reads:
            p = placed.get(t._alloc.id)
            if p is not None:
                self._read(core, t, p, site, index, engine)
            elif t._alloc.transient and t._alloc.buffer.on_chip and t._alloc is not passing:
                raise self.auto_read(t, site)     # (tensors the kernel declared were checked then)
        after: set = set()
        for t in writes:
            p = placed.get(t._alloc.id)
            if p is not None:
                after |= self._write(core, t, p, index)
        after.discard(index)
        return tuple(sorted(after))

    def _owners(self, core: int, buffer: Buffer) -> _Owners:
        owners = self.owners.get((core, buffer))
        if owners is None:
            owners = self.owners[core, buffer] = _Owners()
        return owners

    def _write(self, core: int, t, p: Placed, index: int | None) -> set:
        owners, aid = self._owners(core, p.buffer), t._alloc.id
        after: set = set()
        for block, p0, p1, b0, b1 in p.boxes(t):
            after |= owners.write((p0, p1, b0, b1), (aid, block), index)
        return after

    def _read(self, core: int, t, p: Placed, site, index: int | None, engine) -> None:
        owners, aid = self._owners(core, p.buffer), t._alloc.id
        for block, p0, p1, b0, b1 in p.boxes(t):
            hit = owners.clobbered((p0, p1, b0, b1), (aid, block))
            if hit is not None:
                raise self._conflict(p, block, hit, site)
            if index is not None:
                owners.read((p0, p1, b0, b1), (aid, block), index, engine)

    def _conflict(self, p: Placed, block: int, hit, site) -> KernelContractError:
        (other_id, other_block), box = hit
        other = self.placed.get(other_id)
        theirs = other.tile(other_block) if other is not None else "another tile"
        mine = p.tile(block)
        return KernelContractError(
            f"tile {mine} is read after {theirs}, which lives at the same {p.where(*box)}, was written: on "
            f"Trainium the read returns {theirs}'s data",
            remedy=f"read {mine} before the next write to its physical tile, or give the tensor more physical "
                   "tiles (a larger num_free_tiles / num_bank_tiles, or an alloc func that places the two "
                   "tiles apart)", code="err_direct_alloc_lifetime_conflict", site=site)

    def auto_read(self, t, site) -> KernelContractError:
        return KernelContractError(
            f"the tile {t._label()} is allocated automatically (an instruction's own result), but this kernel "
            f"allocates directly (first at {self.site.short if self.site else 'an earlier line'}): "
            "when direct allocation is used, every SBUF and PSUM tensor of the kernel, the tensors returned "
            "by instructions included, must be allocated directly",
            remedy="write the instruction's result straight into a direct-allocated tensor "
                   "(t[...] = nl.load(...)), and avoid APIs that make implicit intermediate tiles",
            code="err_mixed_direct_and_auto_allocation", site=site)


def mixing_error(what: str, site, first) -> KernelContractError:
    """An automatically allocated SBUF/PSUM tensor in a kernel that allocates directly."""
    return KernelContractError(
        f"{what}: a kernel cannot mix automatic allocation (nl.sbuf, nl.psum, ncc.sbuf.auto_alloc(), "
        f"ncc.psum.auto_alloc()) with direct allocation (ncc.sbuf/psum.alloc or mod_alloc{first})",
        remedy="allocate every SBUF and PSUM tensor of the kernel directly, or none "
               "(@nki.compiler.force_auto_alloc turns the direct allocations into automatic ones)",
        code="err_mixed_direct_and_auto_allocation", site=site)


def non_io_hbm_error(what: str, site) -> KernelContractError:
    """The 2.26 guide's known limitation: nl.hbm / nl.private_hbm tensors in an allocated kernel."""
    return KernelContractError(
        f"Non IO HBM tensor is not supported in allocated NKI kernel: {what} (a kernel with direct allocation "
        "may declare HBM tensors only as its outputs, with buffer=nl.shared_hbm)",
        remedy="declare the kernel's outputs with buffer=nl.shared_hbm and return them",
        code="err_non_io_hbm_tensor_in_allocated_kernel", site=site)


def declare(state: DirectState | None, placer: DirectAllocator | None, alloc, limits, rows: list,
            site, registers: set = frozenset()) -> DirectState | None:
    """An allocation of a kernel that allocates directly (or its first direct one): a placed
    tensor gets its places; an automatic SBUF/PSUM tensor or a non-IO HBM one is refused, whichever
    came first. An instruction's own result (transient) may be made: it is refused when read
    (DirectState.access), as it would be a tile the compiler allocates. `registers`: allocations
    that model engine state (Machine.engine_state), no kernel tensor."""
    if placer is None:
        if alloc.transient or alloc.is_input:
            return state
        what = f"{alloc.describe()}"
        if alloc.buffer.on_chip:
            raise mixing_error(f"{what} is allocated automatically", site, _first(state))
        if alloc.buffer is Buffer.HBM:
            raise non_io_hbm_error(what, site)
        return state
    if state is None:
        for aid, buffer, shape, dtype, _, name, input_index in rows:
            if aid in registers:
                continue
            label = f"{'%r ' % name if name else ''}{dtype}{list(shape)}"
            if buffer in ("sbuf", "psum"):
                raise mixing_error(f"the {buffer} tensor {label} (allocation #{aid}) was allocated automatically "
                                   f"before this {placer.label}", site, "")
            if buffer == "hbm" and input_index is None:
                raise non_io_hbm_error(f"hbm tensor {label} (allocation #{aid})", site)
        state = DirectState(site)
    state.placed[alloc.id] = place(placer, alloc, limits, site)
    return state


def _first(state: DirectState | None) -> str:
    return f", first at {state.site.short}" if state is not None and state.site is not None else ""
