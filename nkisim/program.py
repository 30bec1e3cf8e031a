"""A traced kernel as a program: what tracing produces and execution consumes.

A Program is the allocation table, the instruction list (nkisim.trace.TraceRecord: opcode,
engine, operand regions, value semantics and parameters, the kernel's file:line) and the
regions the kernel returned. It holds no values. Between processes it travels as bytes
(`encode` / `decode`): a JSON header and a binary section for index arrays. A program read
from an untrusted process is just data: `decode` accepts only the documented shapes and
types, and `validate` checks every instruction against the hardware rules and every region
against its allocation, and derives what the cost model needs (partitions, matmul sizes)
from the regions themselves, so nothing a program claims changes its latency.
"""
from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass, field

import numpy as np

from . import collector, dtypes
from . import instructions  # noqa: F401 (fills the table a program is held to)
from .dialects import DIALECTS, LEGACY
from .kinds import VALUE_KINDS
from .registry import INSTRUCTIONS
from .limits import HardwareLimits
from .source import SourceSite
from .trace import AllocInfo, Engine, Region, TraceRecord

MAGIC = b"NKIPROG1"
MAX_LNC = 2          # Trn2's logical NeuronCores pair two physical cores at most
BUFFERS = ("hbm", "shared_hbm", "sbuf", "psum")
_CORE_KINDS = ("copy", "broadcast", "transpose", "permute", "binary", "scalar", "unary", "reduce", "fill",
               "activation", "matmul", "iota", "affine_select", "partition_reduce", "select", "print",
               "control", "register_load")     # the last two: run-time control (nkisim.sequencer)
KINDS = _CORE_KINDS + tuple(VALUE_KINDS)        # nkisim.kinds: the later instructions' families


class ProgramError(ValueError):
    """A program that no kernel could have traced, or that breaks a hardware rule."""


@dataclass(frozen=True)
class ProgramLimits:
    """Caps on what a program read from another process may hold."""

    max_records: int = 2_000_000
    max_allocs: int = 500_000
    max_bytes: int = 1 << 30             # encoded size
    max_hbm_bytes: int = 4 << 30         # all HBM allocations the kernel makes, together
    max_array_elements: int = 1 << 26    # all index arrays, together
    max_text: int = 4096                 # any string


@dataclass
class Program:
    kernel: str
    allocs: list[AllocInfo]
    records: list[TraceRecord]
    outputs: object                      # a Region, or a tuple/list/dict of them
    compile_options: dict = field(default_factory=dict)
    platform: str = "trn2"
    dialect: str = LEGACY.name           # the NKI dialect traced (nkisim.dialects): its memory sentinels
    lnc: int = 1                         # physical cores of the logical NeuronCore (records: attrs["core"])
    # the inputs the kernel may write (legacy nt.mutable_tensor parameters), by argument index:
    # each starts with its argument's values and the kernel returns it
    mutable_inputs: tuple = ()


# ----- encoding ---------------------------------------------------------------------------------

class _Arrays:
    def __init__(self) -> None:
        self.table: list = []
        self.chunks: list[bytes] = []
        self.offset = 0

    def add(self, arr: np.ndarray) -> int:
        arr = np.ascontiguousarray(arr)
        data = arr.tobytes()
        self.table.append([arr.dtype.str, list(arr.shape), self.offset, len(data)])
        self.chunks.append(data)
        self.offset += len(data)
        return len(self.table) - 1


MAX_DIMS = 8
# id, start, ndim, shape, strides, dtype, offsets, partitions, run-time register (-1: none) and its unit
_REGION_COLUMNS = 3 + 2 * MAX_DIMS + 5


# padding of the unused dimensions, by the number of used ones (a row is built in one list
# display: one region per distinct operand of a program)
_ONES = [(1,) * (MAX_DIMS - n) for n in range(MAX_DIMS + 1)]
_ZEROS = [(0,) * (MAX_DIMS - n) for n in range(MAX_DIMS + 1)]


def _enc_region(r: Region, arrays: _Arrays, dtype_codes: dict) -> list:
    """One row of the region matrix; unused dimensions are 1 with stride 0."""
    shape = r.shape
    n = len(shape)
    strides = r.strides if r.strides is not None else (0,) * n
    offsets = arrays.add(r.offsets.astype(np.int64, copy=False)) if r.offsets is not None else -1
    code = dtype_codes.setdefault(r.dtype, len(dtype_codes))
    dyn = r.dyn if r.dyn is not None else (-1, 0)
    if n > MAX_DIMS:     # a row of the wrong length, refused by np.array as before
        return [r.alloc_id, r.start, n, *shape, *strides, code, offsets, r.partitions, *dyn]
    return [r.alloc_id, r.start, n, *shape, *_ONES[n], *strides, *_ZEROS[n], code, offsets, r.partitions, *dyn]


class _Table:
    """Each distinct object once (a tile's region is used by many instructions), by index."""

    def __init__(self, encode) -> None:
        self.encode = encode
        self.index: dict = {}
        self.rows: list = []

    def __call__(self, key, value) -> int:
        found = self.index.get(key)
        if found is None:
            found = self.index[key] = len(self.rows)
            self.rows.append(self.encode(value))
        return found


def _enc_outputs(value, regions: _Table):
    if isinstance(value, Region):
        return {"region": regions(id(value), value)}
    if isinstance(value, dict):
        return {"dict": {k: _enc_outputs(v, regions) for k, v in value.items()}}
    return {"tuple" if isinstance(value, tuple) else "list": [_enc_outputs(v, regions) for v in value]}


def output_regions(value):
    """Every Region of a program's outputs (a Region, or a tuple/list/dict of them), in order."""
    if isinstance(value, Region):
        yield value
    else:
        for item in (value.values() if isinstance(value, dict) else value):
            yield from output_regions(item)


def encode(program: Program) -> bytes:
    with collector.off():       # a 224x224 program: 0.3 s to encode or decode with it on, 0.1 s off
        return _encode(program)


_PLAIN = frozenset({str, int, bool, type(None)})


def _encode(program: Program) -> bytes:
    arrays = _Arrays()
    dtype_codes: dict[str, int] = {}
    regions = _Table(lambda r: _enc_region(r, arrays, dtype_codes))

    region_index, region_rows = regions.index, regions.rows

    def region(r: Region) -> int:
        # by value: every instruction makes its own Region objects, most of them equal (a loop
        # over one tile), and a row per object made a million-instruction program 400 MiB
        key = id(r) if r.offsets is not None else (r.alloc_id, r.start, r.shape, r.strides, r.dtype, r.partitions,
                                                    r.dyn)
        found = region_index.get(key)          # _Table's lookup inlined: called for every operand
        if found is None:
            found = region_index[key] = len(region_rows)
            region_rows.append(_enc_region(r, arrays, dtype_codes))
        return found
    sites = _Table(lambda site: [site.filename, site.lineno])
    # what an instruction is, apart from its operands: most of a program repeats a few of these
    heads = _Table(lambda rec: [rec.opcode, int(rec.engine), rec.kind, rec.accumulate, rec.params, rec.attrs])
    # a placed result's own tile (a store) matters only if something uses it later; most are
    # never read, and each would cost the program an allocation and a region
    used = {r.alloc_id for rec in program.records for r in rec.reads}
    used.update([r.alloc_id for rec in program.records for r in rec.writes])
    used.update(r.alloc_id for r in output_regions(program.outputs))
    records = []
    head_index, site_index = heads.index, sites.index     # the tables' lookups inlined: per record
    # a kernel line's site is one object for all its instructions: found by identity, its
    # dataclass hash (a Python call) is paid once per object (the program keeps them alive)
    site_by_id: dict[int, int] = {}
    # repr(attrs) is most of a head key (~1 us for a matmul's six): an opcode's last attrs of
    # plain values (exact type str, int, bool or None) lend their text to equal attrs with the
    # same keys in the same order and the same value types, which have the same repr (floats do
    # not: -0.0 == 0.0; nor containers, by their items' types)
    last_attrs: dict = {}
    for rec in program.records:
        params = rec.params
        params = repr(params) if params else "{}"
        attrs = rec.attrs
        opcode = rec.opcode
        last = last_attrs.get(opcode)
        kinds = tuple(map(type, attrs.values()))
        # types first: values are compared only when all are plain (an array's == is no bool)
        if last is not None and kinds == last[2] and tuple(attrs) == last[1] and attrs == last[0]:
            text = last[3]
        else:
            text = repr(attrs)
            if _PLAIN.issuperset(kinds):
                last_attrs[opcode] = (attrs, tuple(attrs), kinds, text)
        key = (opcode, rec.engine, rec.kind, rec.accumulate, params, text)   # Engine == its int
        if "array" in params:
            key = id(rec)
        head = head_index.get(key)
        if head is None:
            head = heads(key, rec)
        site = rec.site
        if site:
            where = site_by_id.get(id(site))
            if where is None:
                where = site_index.get(site)
                where = site_by_id[id(site)] = where if where is not None else sites(site, site)
            site = where
        else:
            site = None
        records.append([head, [region(r) for r in rec.reads], [region(r) for r in rec.writes],
                        [region(r) for r in rec.stores if r.alloc_id in used] if rec.stores else [],
                        arrays.add(rec.mask) if rec.mask is not None else None, site])
    outputs = _enc_outputs(program.outputs, regions)

    def array_ref(value):          # what JSON cannot hold itself: index arrays in parameters
        if isinstance(value, np.ndarray):
            return {"$array": arrays.add(value)}
        raise TypeError(f"cannot encode a {type(value).__name__} in a program")
    header = {"kernel": program.kernel, "platform": program.platform, "dialect": program.dialect, "lnc": program.lnc,
              "mutable_inputs": list(program.mutable_inputs),
              "compile_options": program.compile_options,
              "allocs": [[a.id, a.buffer, list(a.shape), a.dtype, a.par_axis, a.name, a.input_index]
                         for a in program.allocs if a.id in used or a.input_index is not None],
              "regions": arrays.add(np.array(regions.rows, dtype=np.int64).reshape(-1, _REGION_COLUMNS)),
              "dtypes": list(dtype_codes), "sites": sites.rows, "heads": heads.rows, "records": records,
              "outputs": outputs}
    body = json.dumps(header, separators=(",", ":"), default=array_ref)
    # the array table is complete only now: put it in front of the rest of the object
    head = (json.dumps({"arrays": arrays.table}, separators=(",", ":"))[:-1] + "," + body[1:]).encode()
    return b"".join([MAGIC, struct.pack("<Q", len(head)), head] + arrays.chunks)


# ----- decoding (untrusted bytes) ---------------------------------------------------------------------

def _fail(what: str):
    raise ProgramError(what)


def _int(v, what: str) -> int:
    if type(v) is not int:       # what json.loads makes of an integer, and nothing else (not bool)
        _fail(f"{what} must be an integer")
    return v


def _ints(v, what: str) -> tuple:
    if type(v) is not list or not all(type(x) is int for x in v):
        _fail(f"{what} must be a list of integers")
    return tuple(v)


def _text(v, what: str, limits: ProgramLimits) -> str:
    if type(v) is not str or len(v) > limits.max_text:
        _fail(f"{what} must be a string of at most {limits.max_text} characters")
    return v


class _Reader:
    def __init__(self, data, limits: ProgramLimits) -> None:
        view = memoryview(data)
        if len(view) < 16 or bytes(view[:8]) != MAGIC:
            _fail("not a program (bad magic)")
        if len(view) > limits.max_bytes:
            _fail(f"program larger than {limits.max_bytes} bytes")
        (n,) = struct.unpack("<Q", view[8:16])
        if n > len(view) - 16:
            _fail("truncated program header")
        try:
            self.header = json.loads(bytes(view[16:16 + n]))
        except (ValueError, UnicodeDecodeError, RecursionError) as err:
            _fail(f"program header is not JSON: {err}")
        if not isinstance(self.header, dict):
            _fail("program header must be an object")
        self.blob = view[16 + n:]
        self.limits = limits
        self.arrays = self._arrays(self.header.get("arrays"))

    def _arrays(self, table) -> list[np.ndarray]:
        if type(table) is not list:
            _fail("arrays must be a list")
        out, total = [], 0
        # index arrays, and the bytes of embedded constants (nl.shared_constant)
        allowed = {np.dtype(np.int64).str, np.dtype(np.int32).str, np.dtype(bool).str, np.dtype(np.uint8).str}
        for entry in table:
            if type(entry) is not list or len(entry) != 4 or entry[0] not in allowed:
                _fail("bad array entry")
            dtype = np.dtype(entry[0])
            shape = _ints(entry[1], "array shape")
            offset, nbytes = _int(entry[2], "array offset"), _int(entry[3], "array size")
            count = math.prod(shape) if shape else 1
            if any(s < 0 for s in shape) or len(shape) > 8 or count * dtype.itemsize != nbytes:
                _fail("array shape does not match its size")
            total += count
            if total > self.limits.max_array_elements or offset < 0 or offset + nbytes > len(self.blob):
                _fail("arrays exceed their limits or the program's bytes")
            out.append(np.frombuffer(self.blob, dtype=dtype, count=count, offset=offset).reshape(shape))
        return out

    def array(self, index, what: str, kind: str) -> np.ndarray:
        i = _int(index, what)
        if not 0 <= i < len(self.arrays):
            _fail(f"{what} refers to a missing array")
        arr = self.arrays[i]
        if (kind == "bool") != (arr.dtype == bool):
            _fail(f"{what} has the wrong element type")
        return arr

    def value(self, raw, depth: int = 0):
        """A parameter as JSON gave it (objects, lists, numbers, short strings), index arrays
        put back where the encoder left {"$array": i}."""
        kind = type(raw)
        if kind in (int, float, bool) or raw is None:
            return raw
        if depth > 8:
            _fail("parameters nested too deeply")
        if kind is str:
            return _text(raw, "parameter", self.limits)
        if kind is list:
            return [self.value(v, depth + 1) for v in raw]
        if kind is dict:
            if len(raw) == 1 and "$array" in raw:
                return self.array(raw["$array"], "parameter", "any")
            return {_text(k, "parameter name", self.limits): self.value(v, depth + 1) for k, v in raw.items()}
        _fail("bad parameter")


def _instruction_table() -> dict:
    """The registry, filled (importing nkisim.instructions, above, filled it)."""
    return INSTRUCTIONS


def decode(data, limits: ProgramLimits | None = None) -> Program:
    """Parse program bytes from an untrusted process; structure only (see validate)."""
    with collector.off():       # a 224x224 program: 0.3 s to encode or decode with it on, 0.1 s off
        return _decode(data, limits)


def _decode(data, limits: ProgramLimits | None) -> Program:
    limits = limits or ProgramLimits()
    _instruction_table()
    reader = _Reader(data, limits)
    h = reader.header
    allocs_raw, records_raw = h.get("allocs"), h.get("records")
    if type(allocs_raw) is not list or len(allocs_raw) > limits.max_allocs:
        _fail(f"allocs must be a list of at most {limits.max_allocs}")
    if type(records_raw) is not list or len(records_raw) > limits.max_records:
        _fail(f"the program must have at most {limits.max_records} instructions "
              f"(this one has {len(records_raw) if type(records_raw) is list else 'none'})")
    allocs = {}
    for raw in allocs_raw:
        if type(raw) is not list or len(raw) != 7:
            _fail("bad allocation")
        aid, buffer, shape, dtype, par_axis, name, input_index = raw
        aid = _int(aid, "allocation id")
        if buffer not in BUFFERS or aid in allocs:
            _fail("bad or repeated allocation")
        shape = _ints(shape, "allocation shape")
        if len(shape) > 8 or any(s < 0 for s in shape):
            _fail("bad allocation shape")
        _dtype(dtype)
        par_axis = _int(par_axis, "partition axis")
        if shape and not 0 <= par_axis < len(shape):
            _fail("bad partition axis")
        if input_index is not None:
            _int(input_index, "input index")
        allocs[aid] = AllocInfo(aid, buffer, shape, dtype, par_axis, _text(name, "name", limits), input_index)
    sites_raw = h.get("sites")
    if type(sites_raw) is not list:
        _fail("sites must be a list")
    regions_table = _regions(reader.array(h.get("regions"), "regions", "any"), h.get("dtypes"), allocs, reader)
    sites_table = []
    for site in sites_raw:
        if type(site) is not list or len(site) != 2:
            _fail("bad source site")
        sites_table.append(SourceSite(_text(site[0], "file name", limits), _int(site[1], "line")))
    heads_raw = h.get("heads")
    if type(heads_raw) is not list:
        _fail("heads must be a list")
    heads = [_head(i, raw, reader) for i, raw in enumerate(heads_raw)]
    records = []
    n_heads, n_regions, n_sites = len(heads), len(regions_table), len(sites_table)
    for i, raw in enumerate(records_raw):
        if type(raw) is not list or len(raw) != 6:
            _fail(f"instruction {i} is malformed")
        head, reads, writes, stores, mask, site = raw
        # each index is a plain int inside its table (type() is int rules out bools); the
        # checks _pick makes, inlined: this loop runs once per instruction
        if type(head) is not int or not 0 <= head < n_heads:
            _fail("a instruction head index points nowhere")
        opcode, engine, kind, accumulate, params, attrs = heads[head]
        regions = []
        for group in (reads, writes, stores):
            if type(group) is not list or len(group) > 8:
                _fail(f"instruction {i}: bad operand list")
            for r in group:
                if type(r) is not int or not 0 <= r < n_regions:
                    _fail("a region index points nowhere")
            regions.append([regions_table[r] for r in group])
        mask_arr = reader.array(mask, "mask", "bool") if mask is not None else None
        if site is None:
            site_obj = None
        elif type(site) is int and 0 <= site < n_sites:
            site_obj = sites_table[site]
        else:
            _fail("a source site index points nowhere")
        records.append(TraceRecord(i, opcode, engine, regions[0], regions[1], site_obj, accumulate, dict(attrs),
                                   kind, params, mask_arr, regions[2]))
    if any(r.dyn is not None for r in regions_table) and not is_dynamic(records):
        _fail("a region moved by a run-time register in a program that sets none")
    outputs = _outputs(h.get("outputs"), regions_table, reader, 0)
    options = reader.value(h.get("compile_options", {}))
    dialect = h.get("dialect", LEGACY.name)
    if dialect not in DIALECTS:
        _fail(f"unknown NKI dialect {dialect!r}")
    lnc = h.get("lnc", 1)
    if type(lnc) is not int or not 1 <= lnc <= MAX_LNC:
        _fail(f"a logical NeuronCore has 1 to {MAX_LNC} physical cores, not {lnc!r}")
    mutable = h.get("mutable_inputs", [])
    if type(mutable) is not list or len(mutable) > len(allocs) or \
            any(type(i) is not int or i < 0 for i in mutable) or len(set(mutable)) != len(mutable):
        _fail("mutable_inputs lists argument indices, each once")
    return Program(_text(h.get("kernel", ""), "kernel name", limits), list(allocs.values()), records, outputs,
                   options if isinstance(options, dict) else {}, _text(h.get("platform", "trn2"), "platform", limits),
                   dialect, lnc, tuple(mutable))


def _head(i: int, raw, reader: _Reader) -> tuple:
    """Opcode, engine, semantics, accumulation, parameters and attributes, checked once for
    every instruction that shares them (params are shared read-only; attrs copied per record)."""
    if type(raw) is not list or len(raw) != 6:
        _fail(f"instruction head {i} is malformed")
    opcode, engine, kind, accumulate, params, attrs = raw
    if opcode not in INSTRUCTIONS:
        _fail(f"instruction head {i}: unknown opcode {opcode!r}")
    if kind not in KINDS:
        _fail(f"instruction head {i}: unknown semantics {kind!r}")
    try:
        engine = Engine(_int(engine, "engine"))
    except ValueError:
        _fail(f"instruction head {i}: unknown engine")
    params, attrs = reader.value(params), reader.value(attrs)
    if not isinstance(params, dict) or not isinstance(attrs, dict):
        _fail(f"instruction head {i}: parameters must be objects")
    attrs = {k: tuple(v) if isinstance(v, list) else v for k, v in attrs.items()}
    return opcode, engine, kind, accumulate is True, params, attrs


def _pick(table: list, index, what: str):
    if type(index) is not int or not 0 <= index < len(table):
        _fail(f"a {what} index points nowhere")
    return table[index]


def _dtype(name) -> np.dtype:
    if type(name) is not str:
        _fail("dtype must be a name")
    try:
        return dtypes.to_dtype(name)
    except Exception:
        _fail(f"unknown dtype {name!r}")


def _regions(matrix: np.ndarray, dtype_names, allocs: dict, reader: _Reader) -> list[Region]:
    """Every operand region of the program, checked at once: each lies inside its allocation,
    reinterprets it only with a dtype of the same size, and touches the partitions it is
    recorded with (recomputed here, never taken from the program)."""
    if matrix.dtype != np.int64 or matrix.ndim != 2 or matrix.shape[1] != _REGION_COLUMNS:
        _fail("the region table has the wrong layout")
    if type(dtype_names) is not list:
        _fail("dtypes must be a list")
    items = np.array([_dtype(name).itemsize for name in dtype_names] or [0], dtype=np.int64)
    ids = np.array(sorted(allocs), dtype=np.int64)
    table = [allocs[i] for i in ids.tolist()]
    alloc_size = np.array([math.prod(a.shape) for a in table] or [0], dtype=np.int64)
    alloc_item = np.array([_dtype(a.dtype).itemsize for a in table] or [0], dtype=np.int64)
    n = len(matrix)
    start, ndim = matrix[:, 1], matrix[:, 2]
    shape = matrix[:, 3:3 + MAX_DIMS]
    strides = matrix[:, 3 + MAX_DIMS:3 + 2 * MAX_DIMS]
    code, offsets_ref = matrix[:, 3 + 2 * MAX_DIMS], matrix[:, 4 + 2 * MAX_DIMS]
    dyn_register, dyn_unit = matrix[:, 6 + 2 * MAX_DIMS], matrix[:, 7 + 2 * MAX_DIMS]
    where = np.searchsorted(ids, matrix[:, 0]) if len(ids) else np.zeros(n, dtype=np.int64)
    unused = np.arange(MAX_DIMS)[None, :] >= ndim[:, None]
    bad = ((ndim < 0) | (ndim > MAX_DIMS) | (code < 0) | (code >= len(dtype_names))
           | (where >= max(len(ids), 1)) | (shape < 0).any(1) | (shape > 1 << 28).any(1)
           | (np.abs(strides) > 1 << 34).any(1) | (start < 0) | (start > 1 << 40)
           | (unused & ((shape != 1) | (strides != 0))).any(1)
           | (dyn_register < -1) | (dyn_register >= MAX_REGISTERS) | (np.abs(dyn_unit) > 1 << 34)
           | ((dyn_register == -1) & (dyn_unit != 0)))
    if bad.any():
        _fail(f"region {int(np.argmax(bad))} is malformed")
    if not np.array_equal(ids[where], matrix[:, 0]):
        _fail("a region refers to a missing allocation")
    item = items[code]
    if (item != alloc_item[where]).any():
        _fail("a region reinterprets its allocation with a dtype of another size")
    if (strides % item[:, None]).any():
        _fail("region strides do not match its element size")
    if (np.where(unused, 0, np.log2(np.maximum(shape, 1))).sum(1) > 40).any():
        _fail("a region holds more elements than any allocation")
    count = np.prod(shape, axis=1)
    steps = (shape - 1) * (strides // item[:, None])
    lo = start + np.minimum(steps, 0).sum(1)
    hi = start + np.maximum(steps, 0).sum(1) + 1
    gathered = offsets_ref >= 0
    outside = (count > 0) & ~gathered & ((lo < 0) | (hi > alloc_size[where]))
    if outside.any():
        a = table[int(where[np.argmax(outside)])]
        _fail(f"a region reaches outside its allocation ({a.buffer}#{a.id})")
    parts = _partitions_fast(table, where, shape, strides // item[:, None], start, ndim)
    regions = []
    rows = matrix.tolist()
    where_l, item_l, count_l, parts_l = where.tolist(), item.tolist(), count.tolist(), parts.tolist()
    sizes_l = alloc_size.tolist()
    for i, row in enumerate(rows):
        alloc = table[where_l[i]]
        dims = row[2]
        shp = tuple(row[3:3 + dims])
        dtype = dtype_names[row[3 + 2 * MAX_DIMS]]
        itemsize = item_l[i]
        if row[4 + 2 * MAX_DIMS] >= 0:
            offs = reader.array(row[4 + 2 * MAX_DIMS], "region offsets", "any")
            if offs.dtype != np.int64 or offs.shape != shp:
                _fail("region offsets do not match the region's shape")
            glo, ghi = (int(offs.min()), int(offs.max()) + 1) if offs.size else (0, 0)
            if offs.size and (glo < 0 or ghi > sizes_l[where_l[i]]):
                _fail(f"a region reaches outside its allocation ({alloc.buffer}#{alloc.id})")
            region = Region(alloc.id, alloc.buffer, glo, shp, None, itemsize, dtype, 1, (glo, ghi, itemsize),
                            offsets=offs)
        else:
            region = Region(alloc.id, alloc.buffer, row[1], shp, tuple(row[3 + MAX_DIMS:3 + MAX_DIMS + dims]),
                            itemsize, dtype, 1)
        if row[6 + 2 * MAX_DIMS] >= 0:     # checked again where it lands, when the sequencer runs it
            region.dyn = (row[6 + 2 * MAX_DIMS], row[7 + 2 * MAX_DIMS])
        if not dims or not count_l[i]:
            region.partitions = 1
        elif parts_l[i] >= 0:
            region.partitions = parts_l[i]
        else:
            region.partitions = _partitions(region, alloc)
        regions.append(region)
    return regions


def _partitions_fast(table: list, where, shape, steps, start, ndim) -> np.ndarray:
    """Partitions touched, for every region at once where the geometry says it plainly: HBM
    (1), or dim 0 walking the partitions of a tile whose other dims stay within one partition's
    row. -1 where it takes a look at the elements (_partitions)."""
    on_chip = np.array([a.buffer in ("sbuf", "psum") for a in table] or [False])[where]
    plain = np.array([a.par_axis == 0 and len(a.shape) > 0 for a in table] or [False])[where]
    row = np.array([math.prod(a.shape[1:]) if a.shape else 1 for a in table] or [1], dtype=np.int64)[where]
    rest = (np.maximum(shape[:, 1:] - 1, 0) * np.abs(steps[:, 1:])).sum(1)
    within = (start % np.maximum(row, 1)) + rest < row
    result = np.full(len(where), -1, dtype=np.int64)
    result[on_chip & plain & within & (steps[:, 0] == row)] = shape[:, 0][on_chip & plain & within & (steps[:, 0] == row)]
    result[on_chip & plain & within & (shape[:, 0] == 1)] = 1
    result[~on_chip] = 1
    result[ndim == 0] = 1
    return result


def _partitions(region: Region, alloc: AllocInfo) -> int:
    """How many partitions a region really touches (the cost model's P), from its geometry."""
    if alloc.buffer not in ("sbuf", "psum") or not alloc.shape:
        return 1
    p_ax = alloc.par_axis
    row = math.prod(alloc.shape[p_ax + 1:])
    parts = alloc.shape[p_ax]
    if region.offsets is None and p_ax == 0 and region.shape:
        item = region.itemsize
        s0 = region.strides[0] // item
        rest = sum((n - 1) * abs(s // item) for n, s in zip(region.shape[1:], region.strides[1:]))
        if s0 == row and (region.start % row) + rest < row:
            return region.shape[0]       # dim 0 walks partitions, the rest stays within a row
        if region.shape[0] == 1 and (region.start % row) + rest < row:
            return 1
    offsets = region.offsets if region.offsets is not None else _offset_map(region)
    seen = np.zeros(parts, dtype=bool)
    seen[(offsets // row) % parts] = True
    return int(seen.sum())


def _offset_map(region: Region) -> np.ndarray:
    offsets = np.full(region.shape, region.start, dtype=np.int64)
    for axis, (n, stride) in enumerate(zip(region.shape, region.strides)):
        if n > 1 and stride:
            shape = [1] * len(region.shape)
            shape[axis] = n
            offsets = offsets + (np.arange(n, dtype=np.int64) * (stride // region.itemsize)).reshape(shape)
    return offsets


def _outputs(raw, regions: list, reader: _Reader, depth: int):
    if depth > 4 or not isinstance(raw, dict) or len(raw) != 1:
        _fail("bad outputs")
    (kind, value), = raw.items()
    if kind == "region":
        return _pick(regions, value, "region")
    if kind in ("list", "tuple") and type(value) is list and len(value) <= 16:
        items = [_outputs(v, regions, reader, depth + 1) for v in value]
        return tuple(items) if kind == "tuple" else items
    if kind == "dict" and isinstance(value, dict) and len(value) <= 16:
        return {_text(k, "output name", reader.limits): _outputs(v, regions, reader, depth + 1) for k, v in value.items()}
    _fail("bad outputs")


# ----- validation against the hardware rules --------------------------------------------------------

_ON_CHIP = ("sbuf", "psum")
_ENGINE_WRITES = {Engine.TENSOR: ("psum",), Engine.VECTOR: ("sbuf", "psum"), Engine.SCALAR: ("sbuf", "psum"),
                  Engine.GPSIMD: ("sbuf",), Engine.DMA: ("hbm", "shared_hbm", "sbuf"), Engine.SYNC: ()}
_ARITY = {"copy": (1, 1), "broadcast": (1, 1), "transpose": (1, 1), "permute": (1, 1), "binary": (2, 1),
          "scalar": (None, 1), "unary": (1, 1), "reduce": (1, 1), "fill": (0, 1), "activation": (None, None),
          "matmul": (2, 1), "iota": (0, 1), "affine_select": (1, 1), "partition_reduce": (1, 1),
          "select": (None, 1), "print": (None, 0), "control": (0, 0), "register_load": (1, 0)}
_ARITY.update({name: (kind.reads, kind.writes) for name, kind in VALUE_KINDS.items()})


# ----- run-time control (the sequencers' loops and registers, nkisim.sequencer) -------------------

MAX_REGISTERS = 1 << 16          # register numbers a program may use (the compiler maps them onto 64 a sequencer)
_INT32 = (-2 ** 31, 2 ** 31)
_BLOCKS = {"loop_begin": "loop_end", "while_begin": "while_end"}
# each control record's parameters (nkisim.instructions.registers makes them)
_CONTROL_FORMS = {"loop_begin": {"counter", "lower", "upper", "step"}, "loop_end": set(), "while_begin": {"cond"},
                  "while_end": {"cond", "next"}, "register_move": {"dst", "src"}}


def is_dynamic(records) -> bool:
    """Does the program hold run-time control: a loop, a register move or load, a value the
    sequencer supplies? Such a program is run by nkisim.sequencer, its instructions expanded as
    they execute; any other runs as the static list it is."""
    for rec in records:
        if rec.kind == "control" or rec.kind == "register_load" or "register" in rec.params:
            return True
    return False


def control_blocks(records) -> dict[int, int]:
    """Check every control record's parameters and the blocks' nesting; return the blocks, by
    the position of each begin its end's and of each end its begin's."""
    matched: dict[int, int] = {}
    open_blocks: list[int] = []
    for i, rec in enumerate(records):
        if rec.kind == "register_load":
            _register_number(rec.params.get("register"), rec)
            if set(rec.params) != {"register"}:
                raise ProgramError(f"{record_place(rec)}: a register load takes its register's number only")
            continue
        if "register" in rec.params:
            if rec.opcode != "register_store" or set(rec.params) != {"value", "register"}:
                raise ProgramError(f"{record_place(rec)}: only a register_store takes a register's run-time value")
            _register_number(rec.params["register"], rec)
            continue
        if rec.kind != "control":
            continue
        p, op = rec.params, rec.opcode
        expected = _CONTROL_FORMS.get(op)
        if expected is None or set(p) != expected:
            raise ProgramError(f"{record_place(rec)}: a control record of unknown form")
        if op == "loop_begin":
            _register_number(p["counter"], rec)
            _control_operand(p["lower"], rec)
            _control_operand(p["upper"], rec)
            if type(p["step"]) is not int or not 1 <= p["step"] < _INT32[1]:
                raise ProgramError(f"{record_place(rec)}: a loop's step is a positive 32-bit int")
        elif op == "while_begin":
            _register_number(p["cond"], rec)
        elif op == "while_end":
            _register_number(p["cond"], rec)
            _register_number(p["next"], rec)
        elif op == "register_move":
            _register_number(p["dst"], rec)
            _control_operand(p["src"], rec)
        if op in _BLOCKS:
            open_blocks.append(i)
        elif op in ("loop_end", "while_end"):
            if not open_blocks or _BLOCKS[records[open_blocks[-1]].opcode] != op:
                raise ProgramError(f"{record_place(rec)}: ends no open {op.removesuffix('_end')} block")
            begin = open_blocks.pop()
            if op == "while_end" and records[begin].params["cond"] != p["cond"]:
                raise ProgramError(f"{record_place(rec)}: ends a while block testing another register")
            matched[begin], matched[i] = i, begin
    if open_blocks:
        raise ProgramError(f"{record_place(records[open_blocks[-1]])}: a block the program never ends")
    return matched


def _register_number(value, rec) -> int:
    if type(value) is not int or not 0 <= value < MAX_REGISTERS:
        raise ProgramError(f"{record_place(rec)}: a register number is an int in [0, {MAX_REGISTERS})")
    return value


def _control_operand(value, rec) -> None:
    """["imm", a 32-bit int] or ["reg", a register number]."""
    if type(value) is list and len(value) == 2 and value[0] == "imm":
        if type(value[1]) is int and _INT32[0] <= value[1] < _INT32[1]:
            return
    elif type(value) is list and len(value) == 2 and value[0] == "reg":
        _register_number(value[1], rec)
        return
    raise ProgramError(f"{record_place(rec)}: a control operand is [\"imm\", a 32-bit int] or [\"reg\", a register]")


def validate(program: Program, limits: HardwareLimits, inputs: list[np.ndarray] | None = None,
             program_limits: ProgramLimits | None = None) -> None:
    """Raise ProgramError unless every instruction keeps the hardware rules. Recomputes the
    matmul and transpose sizes the cost model reads from the operand regions."""
    program_limits = program_limits or ProgramLimits()
    allocs = {a.id: a for a in program.allocs}
    # on-chip tensors of logical tiles are counted per tile live (_tile_live_ranges), so their
    # values, which the executor holds whole, count with HBM's
    tiled = {a.id: [a, []] for a in program.allocs if _is_tiled(a)}
    hbm = sum(math.prod(a.shape) * _dtype(a.dtype).itemsize for a in program.allocs
              if (a.buffer not in _ON_CHIP and a.input_index is None) or a.id in tiled)
    if hbm > program_limits.max_hbm_bytes:
        raise ProgramError(f"the kernel allocates {hbm} bytes of HBM and tiled on-chip tensors, more than the "
                           f"{program_limits.max_hbm_bytes} allowed")
    inputs_seen = {}
    for a in program.allocs:
        if a.buffer in _ON_CHIP:
            if not a.shape or a.shape[a.par_axis] > limits.pmax:
                raise ProgramError(f"on-chip allocation #{a.id} {list(a.shape)} exceeds {limits.pmax} partitions")
            if a.buffer == "psum":
                blocks = math.prod(a.shape[:a.par_axis]) if a.par_axis else 1
                per_tile = (math.prod(a.shape) // max(a.shape[a.par_axis], 1) // max(blocks, 1)
                            * _dtype(a.dtype).itemsize)
                if per_tile > limits.psum_bank_bytes:
                    raise ProgramError(f"PSUM allocation #{a.id} {list(a.shape)} does not fit one bank")
        if a.input_index is not None:
            if a.buffer not in ("hbm", "shared_hbm") or a.input_index in inputs_seen:
                raise ProgramError("bad input allocation")
            inputs_seen[a.input_index] = a
    if inputs is not None:
        if sorted(inputs_seen) != list(range(len(inputs))):
            raise ProgramError("the program's inputs do not match the kernel's arguments")
        for i, arr in enumerate(inputs):
            a = inputs_seen[i]
            if tuple(arr.shape) != a.shape or dtypes.name_of(dtypes.to_dtype(arr.dtype)) != a.dtype:
                raise ProgramError(f"input {i} of the program is {a.dtype}{list(a.shape)}, "
                                   f"the kernel was given {arr.dtype}{list(arr.shape)}")
    first, last = {}, {}
    heads: set = set()           # (opcode, engine, kind, operand counts) found in the table already
    # what no record may write: the inputs but the mutable ones
    inputs_ids = {a.id for a in program.allocs if a.input_index is not None and a.input_index not in program.mutable_inputs}
    if not set(program.mutable_inputs) <= set(inputs_seen):
        raise ProgramError("a mutable input is not one of the program's inputs")
    core_of: dict[int, int] = {}     # on-chip allocation -> the one physical core whose memory it is
    for index, rec in enumerate(program.records):
        _check_record(rec, allocs, limits, heads, inputs_ids)
        if program.lnc > 1 or "core" in rec.attrs:
            _check_core(rec, program.lnc, core_of)
        after = rec.attrs.get("after")
        if after is not None and not (type(after) in (list, tuple) and len(after) <= 4096 and
                                      all(type(j) is int and 0 <= j < rec.index for j in after)):
            raise ProgramError(f"{record_place(rec)}: scheduling edges must name earlier instructions")
        # a store is the result tile a placed result still fills (machine._place_result): one,
        # on chip, the shape of the write, never used before; anything else is a free copy
        if rec.stores and (len(rec.stores) > 1 or rec.stores[0].alloc_id in first
                           or rec.stores[0].buffer not in _ON_CHIP or not rec.writes
                           or rec.stores[0].shape != rec.writes[0].shape):
            raise ProgramError(f"{record_place(rec)}: an extra store no traced instruction makes")
        for group in (rec.reads, rec.writes, rec.stores):
            for r in group:
                if r.alloc_id not in first:
                    first[r.alloc_id] = index
                last[r.alloc_id] = index
                if tiled and r.alloc_id in tiled:
                    tiled[r.alloc_id][1].append((index, r))
    if is_dynamic(program.records):
        control_blocks(program.records)
    _check_capacity(program, allocs, first, last, limits, core_of, tiled)
    _check_outputs(program.outputs, allocs, set(program.mutable_inputs))


def _reaches_psum(rec: TraceRecord) -> bool:
    """Does the record read or write PSUM (which neither DMA nor GpSimd reaches)?"""
    for group in (rec.reads, rec.writes):
        for r in group:
            if r.buffer == "psum":
                return True
    return False


def record_place(rec: TraceRecord) -> str:
    """How an error names an instruction: its index, opcode and source line."""
    return f"instruction {rec.index} ({rec.opcode}{' at ' + str(rec.site) if rec.site else ''})"


def _check_record(rec: TraceRecord, allocs: dict, limits: HardwareLimits, heads: set | None = None,
                  inputs: set | None = None) -> None:
    """The hardware rules for one instruction. `heads`: what the instruction table said already
    (its checks depend on the opcode, engine, kind and operand counts only); `inputs`: the ids
    of the kernel's input allocations. Plain loops, no generators: this runs per instruction."""
    engine = rec.engine
    head = (rec.opcode, int(engine), rec.kind, len(rec.reads), len(rec.writes))
    if heads is None or head not in heads:
        spec = INSTRUCTIONS.get(rec.opcode)
        if (rec.opcode == "device_print") != (rec.kind == "print"):
            raise ProgramError(f"{record_place(rec)}: device_print and only it prints")
        if spec is None or engine not in spec.engines:
            raise ProgramError(f"{record_place(rec)}: engine {engine.label} cannot run it")
        # what an instruction computes (and so what it costs) follows from its opcode alone: a
        # record whose semantics were rewritten after tracing is not an instruction
        if rec.kind not in spec.kinds:
            raise ProgramError(f"{record_place(rec)}: {rec.opcode} computes {' or '.join(spec.kinds)}, "
                               f"this record claims {rec.kind}")
        n_reads, n_writes = _ARITY[rec.kind]
        if (n_reads is not None and len(rec.reads) != n_reads) or (n_writes is not None and len(rec.writes) != n_writes):
            raise ProgramError(f"{record_place(rec)}: wrong number of operands for {rec.kind}")
        if heads is not None:
            heads.add(head)
    if inputs is None:
        inputs = {aid for aid, a in allocs.items() if a.input_index is not None}
    for group in (rec.writes, rec.stores):
        for r in group:
            if r.alloc_id in inputs:
                raise ProgramError(f"{record_place(rec)}: writes a kernel input")
    if engine is Engine.DMA:
        if _reaches_psum(rec):
            raise ProgramError(f"{record_place(rec)}: DMA cannot reach PSUM")
        if rec.reads and rec.writes and math.prod(rec.reads[0].shape) != math.prod(rec.writes[0].shape):
            raise ProgramError(f"{record_place(rec)}: a DMA moves as many elements as it writes")
        if rec.opcode == "shared_constant" and not (
                len(rec.writes) == 1 and rec.writes[0].buffer == "shared_hbm"
                and math.prod(rec.writes[0].shape) == math.prod(allocs[rec.writes[0].alloc_id].shape)):
            # loaded with the binary at no cost: only ever the whole of a shared-HBM tensor
            raise ProgramError(f"{record_place(rec)}: an embedded constant fills a whole shared-HBM tensor")
        if len(rec.reads) > 1:           # dma_compute: at most 16 sources, each of dst's element count
            n = math.prod(rec.writes[0].shape) if rec.writes else 0
            if len(rec.reads) > 16 or any(math.prod(r.shape) != n for r in rec.reads):
                raise ProgramError(f"{record_place(rec)}: a DMA adds at most 16 sources, each of its destination's size")
    elif engine is not Engine.SYNC:
        for r in rec.reads:
            if r.buffer not in _ON_CHIP:
                raise ProgramError(f"{record_place(rec)}: compute engines read only SBUF and PSUM")
        for r in rec.writes:
            if r.buffer not in _ENGINE_WRITES[engine] and rec.kind != "fill":
                raise ProgramError(f"{record_place(rec)}: the {engine.label} engine cannot write there")
        pmax = limits.pmax
        for group in (rec.reads, rec.writes):
            for r in group:
                if r.shape and r.buffer in _ON_CHIP and r.shape[0] > pmax:
                    raise ProgramError(f"{record_place(rec)}: more than {limits.pmax} partitions")
        if engine is Engine.GPSIMD and _reaches_psum(rec):
            raise ProgramError(f"{record_place(rec)}: GpSimd cannot reach PSUM")
    if rec.mask is not None and rec.kind == "print":     # a print masks what it reads
        try:
            fits = bool(rec.reads) and \
                np.broadcast_shapes(rec.mask.shape, tuple(rec.reads[0].shape)) == tuple(rec.reads[0].shape)
        except ValueError:
            fits = False
        if not fits:
            raise ProgramError(f"{record_place(rec)}: mask does not fit the printed tile")
    elif rec.mask is not None and rec.writes:
        try:
            np.broadcast_shapes(rec.mask.shape, rec.writes[0].shape)
        except ValueError:
            raise ProgramError(f"{record_place(rec)}: mask does not fit the result") from None
    if rec.kind == "matmul":
        s, mv = rec.reads
        if s.buffer != "sbuf" or mv.buffer != "sbuf" or rec.writes[0].buffer != "psum":
            raise ProgramError(f"{record_place(rec)}: matmul reads SBUF and writes PSUM")
        k, k2 = (s.shape[0] if s.shape else 1), (mv.shape[0] if mv.shape else 1)
        m, n = math.prod(s.shape[1:]), math.prod(mv.shape[1:])
        if k != k2 or k > limits.pmax or m > limits.gemm_stationary_fmax or n > limits.gemm_moving_fmax:
            raise ProgramError(f"{record_place(rec)}: matmul sizes break the Tensor Engine's limits")
        for r in (s, mv):
            if not _multipliable(r.dtype):
                raise ProgramError(f"{record_place(rec)}: the Tensor Engine cannot multiply {r.dtype}")
        rec.attrs.update(dtype=s.dtype, moving_dtype=mv.dtype, k=k, m=m, n=n)
    elif rec.kind == "transpose":
        src = rec.reads[0]
        p, f = (src.shape[0] if src.shape else 1), math.prod(src.shape[1:])
        bound = limits.pmax if rec.engine is Engine.TENSOR else limits.vector_transpose_max
        if p > bound or f > bound:
            raise ProgramError(f"{record_place(rec)}: transpose larger than {bound}x{bound}")
        rec.attrs.update(dtype=src.dtype, p=p, f=f)


_MULTIPLIABLE: dict = {}


def _multipliable(name: str) -> bool:
    """Can the Tensor Engine multiply this dtype (by name, remembered)?"""
    found = _MULTIPLIABLE.get(name)
    if found is None:
        dt = dtypes.to_dtype(name)
        found = _MULTIPLIABLE[name] = dt in dtypes.MATMUL_INPUT_TYPES or dtypes.is_tf32(dt)
    return found


def _check_core(rec: TraceRecord, lnc: int, core_of: dict) -> None:
    """A record runs on one physical core of the logical one, and on-chip memory is that core's:
    a tile two cores touch is no program any kernel traced."""
    core = rec.attrs.get("core", 0)
    if type(core) is not int or not 0 <= core < lnc:
        raise ProgramError(f"{record_place(rec)}: runs on core {core!r} of a logical NeuronCore of {lnc}")
    crossing = rec.opcode == "sendrecv"        # the one instruction that writes the other core's SBUF
    for group in (rec.reads, rec.writes, rec.stores):
        for r in group:
            if r.buffer not in _ON_CHIP:
                continue
            if crossing and group is rec.writes:
                if lnc < 2 or core_of.setdefault(r.alloc_id, 1 - core) == core:
                    raise ProgramError(f"{record_place(rec)}: a sendrecv writes the other physical core's SBUF")
            elif core_of.setdefault(r.alloc_id, core) != core:
                raise ProgramError(f"{record_place(rec)}: touches on-chip memory of another physical core")


def _check_capacity(program: Program, allocs: dict, first: dict, last: dict, limits: HardwareLimits,
                    core_of: dict | None = None, tiled: dict | None = None) -> None:
    """On-chip tiles live at least from their first to their last use: the sum over those
    ranges may not exceed SBUF or the 8 PSUM banks of the core they are on (a lower bound of
    what the kernel held). A tensor with block dimensions is that many logical tiles, each live
    from its own first to its last use (the compiler, or ncc.sbuf/psum.mod_alloc, rotates them
    through fewer physical tiles)."""
    events = []
    for aid, start in first.items():
        a = allocs[aid]
        if a.buffer not in _ON_CHIP:
            continue
        per_partition = math.prod(a.shape) // max(a.shape[a.par_axis], 1) * _dtype(a.dtype).itemsize
        core = (core_of or {}).get(aid, 0)
        ranges = [(start, last[aid])]
        if tiled and aid in tiled:
            count = math.prod(a.shape[:a.par_axis])
            per_partition //= count
            ranges = _tile_live_ranges(tiled[aid][1], math.prod(a.shape[a.par_axis:]), count)
        cost = per_partition if a.buffer == "sbuf" else math.ceil(per_partition / limits.psum_bank_bytes)
        for begin, end in ranges:
            events.append((begin, 0, core, a.buffer, cost))
            events.append((end, 1, core, a.buffer, -cost))
    used: dict = {}
    for _, _, core, buffer, cost in sorted(events):
        used[core, buffer] = used.get((core, buffer), 0) + cost
        if used.get((core, "sbuf"), 0) > limits.sbuf_usable_bytes or used.get((core, "psum"), 0) > limits.psum_banks:
            raise ProgramError("the program keeps more on-chip memory live than the NeuronCore has")


# most logical tiles of one on-chip tensor counted tile by tile (nkisim.direct_alloc places as many)
MAX_TILES_COUNTED = 1 << 16


def _is_tiled(a: AllocInfo) -> bool:
    """An on-chip allocation with block dimensions (before its partition axis): logical tiles."""
    return a.buffer in _ON_CHIP and a.par_axis > 0 and 1 < math.prod(a.shape[:a.par_axis]) <= MAX_TILES_COUNTED


def _tile_live_ranges(uses: list, tile_elems: int, count: int) -> list[tuple[int, int]]:
    """(first, last) use of each logical tile that was used, from the element bounds of the
    regions that used it ((record index, region), in program order). O(uses + tiles): a sweep
    forward finds each tile's first use once, skipping tiles found (path-halving next-free
    links), a sweep backward its last."""
    found = []
    for order in (uses, uses[::-1]):
        at = [None] * count
        following = list(range(count + 1))

        def free(b):
            while following[b] != b:
                following[b] = following[following[b]]
                b = following[b]
            return b
        for index, r in order:
            lo, hi = r.lo, r.hi
            if hi <= lo:
                continue
            b, top = free(max(lo // tile_elems, 0)), min((hi - 1) // tile_elems, count - 1)
            while b <= top:
                at[b] = index
                following[b] = b + 1
                b = free(b + 1)
        found.append(at)
    return [(f, l) for f, l in zip(*found) if f is not None]


def _check_outputs(outputs, allocs: dict, mutable: set) -> None:
    if isinstance(outputs, Region):
        a = allocs[outputs.alloc_id]
        if a.buffer not in ("hbm", "shared_hbm") or (a.input_index is not None and a.input_index not in mutable):
            raise ProgramError("kernel outputs must be HBM tensors the kernel allocated, or its mutable parameters")
        if outputs.dyn is not None:
            raise ProgramError("a kernel output is a tensor, not an access a run-time register moves")
        return
    items = outputs.values() if isinstance(outputs, dict) else outputs
    for item in items:
        _check_outputs(item, allocs, mutable)
