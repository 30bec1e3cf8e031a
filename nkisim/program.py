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

from . import dtypes
from .registry import INSTRUCTIONS
from .settings import HardwareLimits
from .source import SourceSite
from .trace import AllocInfo, Engine, Region, TraceRecord

MAGIC = b"NKIPROG1"
BUFFERS = ("hbm", "shared_hbm", "sbuf", "psum")
KINDS = ("copy", "broadcast", "transpose", "permute", "binary", "scalar", "unary", "reduce", "fill",
         "activation", "matmul", "iota", "affine_select", "partition_reduce", "select", "print")


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


def _enc_region(r: Region, arrays: _Arrays) -> list:
    strides = list(r.strides) if r.strides is not None else None
    offsets = arrays.add(r.offsets.astype(np.int64, copy=False)) if r.offsets is not None else None
    return [r.alloc_id, r.start, list(r.shape), strides, r.dtype, r.partitions, offsets]


def _enc_value(value, arrays: _Arrays):
    if isinstance(value, np.ndarray):
        return {"array": arrays.add(value)}
    if isinstance(value, dict):
        return {"dict": {str(k): _enc_value(v, arrays) for k, v in value.items()}}
    if isinstance(value, (list, tuple)):
        return {"list": [_enc_value(v, arrays) for v in value]}
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    raise TypeError(f"cannot encode a {type(value).__name__} in a program")


def _enc_outputs(value, arrays: _Arrays):
    if isinstance(value, Region):
        return {"region": _enc_region(value, arrays)}
    if isinstance(value, dict):
        return {"dict": {k: _enc_outputs(v, arrays) for k, v in value.items()}}
    return {"tuple" if isinstance(value, tuple) else "list": [_enc_outputs(v, arrays) for v in value]}


def encode(program: Program) -> bytes:
    arrays = _Arrays()
    records = []
    for rec in program.records:
        site = [rec.site.filename, rec.site.lineno] if rec.site else None
        mask = arrays.add(rec.mask) if rec.mask is not None else None
        records.append([rec.opcode, int(rec.engine), rec.kind, rec.accumulate,
                        _enc_value(rec.params, arrays), _enc_value(_plain_attrs(rec.attrs), arrays),
                        [_enc_region(r, arrays) for r in rec.reads], [_enc_region(r, arrays) for r in rec.writes],
                        [_enc_region(r, arrays) for r in rec.stores], mask, site])
    header = {"kernel": program.kernel, "platform": program.platform,
              "compile_options": _enc_value(program.compile_options, arrays),
              "allocs": [[a.id, a.buffer, list(a.shape), a.dtype, a.par_axis, a.name, a.input_index]
                         for a in program.allocs],
              "records": records, "outputs": _enc_outputs(program.outputs, arrays), "arrays": arrays.table}
    head = json.dumps(header, separators=(",", ":")).encode()
    return b"".join([MAGIC, struct.pack("<Q", len(head)), head] + arrays.chunks)


def _plain_attrs(attrs: dict) -> dict:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in attrs.items()}


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
        allowed = {np.dtype(np.int64).str, np.dtype(np.int32).str, np.dtype(bool).str}
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
        if depth > 8:
            _fail("parameters nested too deeply")
        if isinstance(raw, dict):
            if set(raw) == {"array"}:
                return self.array(raw["array"], "parameter", "any")
            if set(raw) == {"dict"} and isinstance(raw["dict"], dict):
                return {_text(k, "parameter name", self.limits): self.value(v, depth + 1) for k, v in raw["dict"].items()}
            if set(raw) == {"list"} and isinstance(raw["list"], list):
                return [self.value(v, depth + 1) for v in raw["list"]]
            _fail("bad parameter")
        if isinstance(raw, str):
            return _text(raw, "parameter", self.limits)
        if raw is None or type(raw) in (bool, int, float):
            return raw
        _fail("bad parameter")


def _instruction_table() -> dict:
    """The registry, filled: it fills as nkisim.nki imports the instruction modules."""
    from . import nki  # noqa: F401
    return INSTRUCTIONS


def decode(data, limits: ProgramLimits | None = None) -> Program:
    """Parse program bytes from an untrusted process; structure only (see validate)."""
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
    records = []
    for i, raw in enumerate(records_raw):
        if type(raw) is not list or len(raw) != 11:
            _fail(f"instruction {i} is malformed")
        opcode, engine, kind, accumulate, params, attrs, reads, writes, stores, mask, site = raw
        if opcode not in INSTRUCTIONS:
            _fail(f"instruction {i}: unknown opcode {opcode!r}")
        if kind not in KINDS:
            _fail(f"instruction {i}: unknown semantics {kind!r}")
        try:
            engine = Engine(_int(engine, "engine"))
        except ValueError:
            _fail(f"instruction {i}: unknown engine")
        params, attrs = reader.value(params), reader.value(attrs)
        if not isinstance(params, dict) or not isinstance(attrs, dict):
            _fail(f"instruction {i}: parameters must be objects")
        regions = []
        for group in (reads, writes, stores):
            if type(group) is not list or len(group) > 8:
                _fail(f"instruction {i}: bad operand list")
            regions.append([_region(r, allocs, reader) for r in group])
        mask_arr = reader.array(mask, "mask", "bool") if mask is not None else None
        site_obj = None
        if site is not None:
            if type(site) is not list or len(site) != 2:
                _fail(f"instruction {i}: bad source site")
            site_obj = SourceSite(_text(site[0], "file name", limits), _int(site[1], "line"))
        records.append(TraceRecord(i, opcode, engine, regions[0], regions[1], site_obj, accumulate is True,
                                   {k: tuple(v) if isinstance(v, list) else v for k, v in attrs.items()},
                                   kind, params, mask_arr, regions[2]))
    outputs = _outputs(h.get("outputs"), allocs, reader, 0)
    options = reader.value(h.get("compile_options", {"dict": {}}))
    return Program(_text(h.get("kernel", ""), "kernel name", limits), list(allocs.values()), records, outputs,
                   options if isinstance(options, dict) else {}, _text(h.get("platform", "trn2"), "platform", limits))


def _dtype(name) -> np.dtype:
    if type(name) is not str:
        _fail("dtype must be a name")
    try:
        return dtypes.to_dtype(name)
    except Exception:
        _fail(f"unknown dtype {name!r}")


def _region(raw, allocs: dict, reader: _Reader) -> Region:
    if type(raw) is not list or len(raw) != 7:
        _fail("bad operand region")
    aid, start, shape, strides, dtype, partitions, offsets = raw
    alloc = allocs.get(_int(aid, "region allocation"))
    if alloc is None:
        _fail("a region refers to a missing allocation")
    shape = _ints(shape, "region shape")
    if len(shape) > 8 or any(s < 0 for s in shape):
        _fail("bad region shape")
    item = _dtype(dtype).itemsize
    if item != _dtype(alloc.dtype).itemsize:
        _fail("a region reinterprets its allocation with a dtype of another size")
    count = math.prod(shape)
    offs = None
    if offsets is not None:
        if strides is not None:
            _fail("a region is strided or gathered, not both")
        offs = reader.array(offsets, "region offsets", "any")
        if offs.dtype != np.int64 or offs.shape != shape:
            _fail("region offsets do not match the region's shape")
        lo, hi = (int(offs.min()), int(offs.max()) + 1) if count else (0, 0)
        region = Region(alloc.id, alloc.buffer, lo, shape, None, item, dtype, 1, (lo, hi, item), offsets=offs)
    else:
        strides = _ints(strides, "region strides")
        if len(strides) != len(shape) or any(s % item for s in strides):
            _fail("region strides do not match its shape or element size")
        start = _int(start, "region start")
        region = Region(alloc.id, alloc.buffer, start, shape, strides, item, dtype, 1)
        lo, hi = (region.lo, region.hi) if count else (0, 0)
    if count and (lo < 0 or hi > math.prod(alloc.shape)):
        _fail(f"a region reaches outside its allocation ({alloc.buffer}#{alloc.id})")
    region.partitions = _partitions(region, alloc) if count else 1
    return region


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


def _outputs(raw, allocs: dict, reader: _Reader, depth: int):
    if depth > 4 or not isinstance(raw, dict) or len(raw) != 1:
        _fail("bad outputs")
    (kind, value), = raw.items()
    if kind == "region":
        return _region(value, allocs, reader)
    if kind in ("list", "tuple") and type(value) is list and len(value) <= 16:
        items = [_outputs(v, allocs, reader, depth + 1) for v in value]
        return tuple(items) if kind == "tuple" else items
    if kind == "dict" and isinstance(value, dict) and len(value) <= 16:
        return {_text(k, "output name", reader.limits): _outputs(v, allocs, reader, depth + 1) for k, v in value.items()}
    _fail("bad outputs")


# ----- validation against the hardware rules --------------------------------------------------------

_ON_CHIP = ("sbuf", "psum")
_ENGINE_WRITES = {Engine.TENSOR: ("psum",), Engine.VECTOR: ("sbuf", "psum"), Engine.SCALAR: ("sbuf", "psum"),
                  Engine.GPSIMD: ("sbuf",), Engine.DMA: ("hbm", "shared_hbm", "sbuf"), Engine.SYNC: ()}
_ARITY = {"copy": (1, 1), "broadcast": (1, 1), "transpose": (1, 1), "permute": (1, 1), "binary": (2, 1),
          "scalar": (None, 1), "unary": (1, 1), "reduce": (1, 1), "fill": (0, 1), "activation": (None, None),
          "matmul": (2, 1), "iota": (0, 1), "affine_select": (1, 1), "partition_reduce": (1, 1),
          "select": (None, 1), "print": (None, 0)}


def validate(program: Program, limits: HardwareLimits, inputs: list[np.ndarray] | None = None,
             program_limits: ProgramLimits | None = None) -> None:
    """Raise ProgramError unless every instruction keeps the hardware rules. Recomputes the
    matmul and transpose sizes the cost model reads from the operand regions."""
    program_limits = program_limits or ProgramLimits()
    allocs = {a.id: a for a in program.allocs}
    hbm = sum(math.prod(a.shape) * _dtype(a.dtype).itemsize for a in program.allocs
              if a.buffer not in _ON_CHIP and a.input_index is None)
    if hbm > program_limits.max_hbm_bytes:
        raise ProgramError(f"the kernel allocates {hbm} bytes of HBM, more than the "
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
    for index, rec in enumerate(program.records):
        _check_record(rec, allocs, limits)
        for r in rec.reads + rec.writes + rec.stores:
            first.setdefault(r.alloc_id, index)
            last[r.alloc_id] = index
    _check_capacity(program, allocs, first, last, limits)
    _check_outputs(program.outputs, allocs)


def _where(rec: TraceRecord) -> str:
    return f"instruction {rec.index} ({rec.opcode}{' at ' + str(rec.site) if rec.site else ''})"


def _check_record(rec: TraceRecord, allocs: dict, limits: HardwareLimits) -> None:
    spec = INSTRUCTIONS.get(rec.opcode)
    if (rec.opcode == "device_print") != (rec.kind == "print"):
        raise ProgramError(f"{_where(rec)}: device_print and only it prints")
    if spec is None or rec.engine not in spec.engines:
        raise ProgramError(f"{_where(rec)}: engine {rec.engine.label} cannot run it")
    n_reads, n_writes = _ARITY[rec.kind]
    if (n_reads is not None and len(rec.reads) != n_reads) or (n_writes is not None and len(rec.writes) != n_writes):
        raise ProgramError(f"{_where(rec)}: wrong number of operands for {rec.kind}")
    for r in rec.writes + rec.stores:
        if allocs[r.alloc_id].input_index is not None:
            raise ProgramError(f"{_where(rec)}: writes a kernel input")
    if rec.engine is Engine.DMA:
        if any(r.buffer == "psum" for r in rec.reads + rec.writes):
            raise ProgramError(f"{_where(rec)}: DMA cannot reach PSUM")
        if rec.reads and rec.writes and math.prod(rec.reads[0].shape) != math.prod(rec.writes[0].shape):
            raise ProgramError(f"{_where(rec)}: a DMA moves as many elements as it writes")
    elif rec.engine is not Engine.SYNC:
        if any(r.buffer not in _ON_CHIP for r in rec.reads):
            raise ProgramError(f"{_where(rec)}: compute engines read only SBUF and PSUM")
        if any(r.buffer not in _ENGINE_WRITES[rec.engine] for r in rec.writes) and rec.kind != "fill":
            raise ProgramError(f"{_where(rec)}: the {rec.engine.label} engine cannot write there")
        for r in rec.reads + rec.writes:
            if r.shape and r.buffer in _ON_CHIP and r.shape[0] > limits.pmax:
                raise ProgramError(f"{_where(rec)}: more than {limits.pmax} partitions")
        if rec.engine is Engine.GPSIMD and any(r.buffer == "psum" for r in rec.reads + rec.writes):
            raise ProgramError(f"{_where(rec)}: GpSimd cannot reach PSUM")
    if rec.mask is not None and rec.writes:
        try:
            np.broadcast_shapes(rec.mask.shape, rec.writes[0].shape)
        except ValueError:
            raise ProgramError(f"{_where(rec)}: mask does not fit the result") from None
    if rec.kind == "matmul":
        s, mv = rec.reads
        if s.buffer != "sbuf" or mv.buffer != "sbuf" or rec.writes[0].buffer != "psum":
            raise ProgramError(f"{_where(rec)}: matmul reads SBUF and writes PSUM")
        k, k2 = (s.shape[0] if s.shape else 1), (mv.shape[0] if mv.shape else 1)
        m, n = math.prod(s.shape[1:]), math.prod(mv.shape[1:])
        if k != k2 or k > limits.pmax or m > limits.gemm_stationary_fmax or n > limits.gemm_moving_fmax:
            raise ProgramError(f"{_where(rec)}: matmul sizes break the Tensor Engine's limits")
        for r in (s, mv):
            if dtypes.to_dtype(r.dtype) not in dtypes.MATMUL_INPUT_TYPES and not dtypes.is_tf32(dtypes.to_dtype(r.dtype)):
                raise ProgramError(f"{_where(rec)}: the Tensor Engine cannot multiply {r.dtype}")
        rec.attrs.update(dtype=s.dtype, moving_dtype=mv.dtype, k=k, m=m, n=n)
    elif rec.kind == "transpose":
        src = rec.reads[0]
        p, f = (src.shape[0] if src.shape else 1), math.prod(src.shape[1:])
        bound = limits.pmax if rec.engine is Engine.TENSOR else limits.vector_transpose_max
        if p > bound or f > bound:
            raise ProgramError(f"{_where(rec)}: transpose larger than {bound}x{bound}")
        rec.attrs.update(dtype=src.dtype, p=p, f=f)


def _check_capacity(program: Program, allocs: dict, first: dict, last: dict, limits: HardwareLimits) -> None:
    """On-chip tiles live at least from their first to their last use: the sum over those
    ranges may not exceed SBUF or the 8 PSUM banks (a lower bound of what the kernel held)."""
    events = []
    for aid, start in first.items():
        a = allocs[aid]
        if a.buffer not in _ON_CHIP:
            continue
        per_partition = math.prod(a.shape) // max(a.shape[a.par_axis], 1) * _dtype(a.dtype).itemsize
        cost = per_partition if a.buffer == "sbuf" else math.ceil(per_partition / limits.psum_bank_bytes)
        events.append((start, 0, a.buffer, cost))
        events.append((last[aid], 1, a.buffer, -cost))
    used = {"sbuf": 0, "psum": 0}
    for _, _, buffer, cost in sorted(events):
        used[buffer] += cost
        if used["sbuf"] > limits.sbuf_usable_bytes or used["psum"] > limits.psum_banks:
            raise ProgramError("the program keeps more on-chip memory live than the NeuronCore has")


def _check_outputs(outputs, allocs: dict) -> None:
    if isinstance(outputs, Region):
        a = allocs[outputs.alloc_id]
        if a.buffer not in ("hbm", "shared_hbm") or a.input_index is not None:
            raise ProgramError("kernel outputs must be HBM tensors the kernel allocated")
        return
    items = outputs.values() if isinstance(outputs, dict) else outputs
    for item in items:
        _check_outputs(item, allocs)
