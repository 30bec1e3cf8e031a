"""Executing a traced program on real inputs with NumPy: the device's half of a run.

Each instruction reads its operand regions, computes in fp32 (or exact integers) as the
engines do, rounds once to the destination's dtype, and writes its regions, honouring its
mask (elements outside it keep what they held) and accumulation (PSUM and DMA
read-modify-write). Memory the kernel never wrote holds NaN (integers: a byte pattern), as
hardware leaves garbage; a matmul accumulating into PSUM elements nothing has written yet
starts from zero, as the first matmul of an accumulation group overwrites its bank.

Linear in the program: every instruction costs its own elements, never a look back.
"""
from __future__ import annotations

import itertools
import math
import sys
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from . import alu, dtypes
from .dialects import DIALECTS
from .kinds import VALUE_KINDS
from .errors import KernelContractError, KernelValueError, NKISimError, SimulatorFailure
from .program import Program, ProgramError, ProgramLimits, is_dynamic, output_regions
from .sequencer import Sequencer
from .tensor import align_to
from .trace import Region, TraceRecord


@dataclass
class Execution:
    outputs: object                      # NumPy array, or the tuple/list/dict the kernel returned
    trace: list[TraceRecord]             # the executed instructions the cost model times
    printed: list[str] = field(default_factory=list)


class _Memory:
    """The allocations' values, created at first touch: flat arrays in each allocation's dtype."""

    def __init__(self, program: Program, inputs: list[np.ndarray], fill_nan: bool,
                 placed: dict[int, np.ndarray] | None, plan: _Plan, filled: frozenset = frozenset()) -> None:
        self.allocs = {a.id: a for a in program.allocs}
        self.sizes = plan.sizes                      # elements of each allocation but the inputs
        overwritten, zero_based = plan.overwritten, plan.zero_based
        self.inputs = inputs
        self.mutable_inputs = frozenset(program.mutable_inputs)
        self.placed = dict(placed or {})
        self.pinned = set(self.placed)               # memory given by the caller: written in place, never replaced
        self.fill_nan = fill_nan
        self.int_sentinel = DIALECTS[program.dialect].uninitialized_int
        self.filled = filled                         # placed memory that already holds its starting values
        self.arrays: dict[int, np.ndarray] = {}
        # views made of each allocation's current memory, by region (a region object is read
        # again and again in a loop); dropped with the allocation, so they hold no freed memory
        self.views: dict[int, dict] = {}
        self.written: dict[int, np.ndarray] = {}    # PSUM only: which elements hold a value
        self.overwritten, self.zero_based = overwritten, zero_based
        self.zero_pending = set(self.zero_based)     # those not yet written
        # fp32 copies of narrower allocations the PE array reads (see matmul_operand)
        self.widened: dict[int, tuple[str, np.ndarray]] = {}
        self.read_narrow: dict[int, int] = {}        # elements widened one read at a time since the last write

    def flat(self, alloc_id: int, dtype_name: str) -> np.ndarray:
        arr = self.arrays.get(alloc_id)
        if arr is not None and arr.dtype is _DTYPES.get(dtype_name):
            return arr                 # already in that dtype (a view of it as it would hold the same bits)
        if arr is None:
            a = self.allocs.get(alloc_id)
            if a is None:
                raise _MissingAllocation(alloc_id)
            arr = self.arrays[alloc_id] = self._create(a)
        if dtypes.name_of(arr.dtype) != dtype_name:
            arr = arr.view(dtypes.to_dtype(dtype_name))
        return arr

    def _create(self, a) -> np.ndarray:
        dtype = dtypes.to_dtype(a.dtype)
        if a.input_index is not None:
            values = np.ascontiguousarray(self.inputs[a.input_index])
            if values.dtype != dtype:
                values = dtypes.cast(values, dtype)
            elif a.input_index in self.mutable_inputs:     # the kernel writes it: never the caller's array
                values = values.copy()
            return values.reshape(-1)
        arr = self.placed.pop(a.id, None)
        if (arr is None or arr.shape != (math.prod(a.shape),) or not arr.flags.writeable
                or dtypes.name_of(arr.dtype) != dtypes.name_of(dtype)):
            arr = np.empty(math.prod(a.shape), dtype=dtype)
        elif a.id in self.filled:
            return arr                             # filled before this run began (nkisim.split)
        return self.fill(a, arr, dtype)

    def fill(self, a, arr: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """Give a new allocation's memory (of `dtype`, the allocation's) the values it starts
        with: nothing where its first instruction writes all of it, else NaN (integers: a byte
        pattern) or zeros."""
        if a.id in self.overwritten:
            pass                                   # its first instruction writes all of it
        elif a.id in self.zero_based:              # its first instruction adds to zeros, all of it
            return arr
        elif self.fill_nan and dtypes.is_float(dtype):
            arr[...] = np.nan
        elif self.fill_nan and self.int_sentinel is not None:
            arr[...] = self.int_sentinel           # the dialect's documented value (NKI 0.6: 4)
        elif self.fill_nan:
            arr.view(np.uint8)[...] = 0xA5        # recognisable garbage
        else:
            arr[...] = 0
        if a.buffer == "psum" and a.id not in self.overwritten:
            self.written[a.id] = np.zeros(arr.size, dtype=bool)   # until one write covers it all
        return arr

    def view(self, r: Region) -> np.ndarray:
        """The region's elements: a strided view (reads and writes go through it) or, for a
        gathered region, a copy (writes use `write`)."""
        flat = self.arrays.get(r.alloc_id)
        if flat is None or flat.dtype is not _DTYPES.get(r.dtype):
            flat = self.flat(r.alloc_id, r.dtype)
        if r.offsets is not None:
            return flat[r.offsets]
        views = self.views.get(r.alloc_id)
        if views is None:
            views = self.views[r.alloc_id] = {}
        else:
            made = views.get(r)
            if made is not None and made[0] is flat:
                return made[1]                # a loop reads the same region of the same memory
        shape = r.shape
        if 0 in shape:
            return np.empty(shape, dtype=flat.dtype)
        # NumPy checks the geometry stays inside the allocation; positional arguments: with
        # keywords the constructor takes 2-3 us, a quarter of an instruction's budget
        view = np.ndarray(shape, flat.dtype, flat, r.start * r.itemsize, r.strides)
        if len(views) < _VIEWS_PER_ALLOCATION:
            views[r] = (flat, view)
        return view

    def matmul_operand(self, r: Region) -> np.ndarray:
        """The region as the PE array multiplies it: in fp32, rounded to its own dtype first.

        A narrower operand (fp16, bf16, a tf32 view) is widened, and that copy was as slow as
        the matmul itself. A conv2d reads each tile many times between writes (every tap, every
        output tile), so once the elements widened one read at a time since the tile's last
        write add up to its size, the whole allocation is widened once and later reads are
        views of that copy, until the next write. The same bits either way: widening is
        element by element. At worst twice the widening of reading one at a time."""
        if r.dtype == "float32":
            return self.view(r)
        found = self.widened.get(r.alloc_id)
        if found is None or found[0] != r.dtype:
            flat = self.flat(r.alloc_id, r.dtype)
            done = self.read_narrow.get(r.alloc_id, 0) + math.prod(r.shape)
            if done < flat.size:
                self.read_narrow[r.alloc_id] = done
                return _f32(dtypes.cast(self.view(r), dtypes.to_dtype(r.dtype)))
            found = self.widened[r.alloc_id] = (r.dtype, _f32(dtypes.cast(flat, dtypes.to_dtype(r.dtype))))
        wide = found[1]
        if r.offsets is not None:
            return wide[r.offsets]
        if math.prod(r.shape) == 0:
            return np.empty(r.shape, dtype=np.float32)
        item = r.itemsize
        return np.ndarray(r.shape, np.float32, wide, r.start * 4, tuple(st // item * 4 for st in r.strides))

    def adopt(self, r: Region, values) -> bool:
        """Make `values` the allocation's memory, when they are all of it, in order, in its
        dtype, and a fresh array nothing else holds (an instruction's result): an instruction
        writing a whole new tile then neither creates the tile's memory nor copies into it."""
        if type(values) is not np.ndarray or values.base is not None or r.offsets is not None or r.start:
            return False
        alloc_id = r.alloc_id
        if alloc_id in self.pinned:
            return False
        a = self.allocs.get(alloc_id)
        if a is None or a.input_index is not None or r.dtype != a.dtype:
            return False
        dtype = _DTYPES.get(a.dtype)
        if dtype is None:
            dtype = dtypes.to_dtype(a.dtype)
        # all of the allocation in row-major order, as `values` (of r's shape, _store) lie:
        # the region's strides are the C strides of its shape, and so are theirs
        strides = r.strides
        if (values.dtype != dtype or strides != _contiguous(r.shape, r.itemsize) or values.strides != strides
                or values.size != self.sizes[alloc_id] or not values.flags.writeable):
            return False
        self.arrays[alloc_id] = values.reshape(-1)
        self.views.pop(alloc_id, None)
        self.written.pop(alloc_id, None)
        if self.widened or self.read_narrow:
            self.changed(alloc_id)
        return True


    def changed(self, alloc_id: int) -> None:
        """The allocation's values are about to change: its widened copy is stale."""
        if self.widened or self.read_narrow:
            self.widened.pop(alloc_id, None)
            self.read_narrow.pop(alloc_id, None)

    def release(self, alloc_id: int) -> None:
        """The allocation's last instruction has run: its memory goes, as its tile's would."""
        self.arrays.pop(alloc_id, None)
        self.views.pop(alloc_id, None)
        self.written.pop(alloc_id, None)
        if self.widened or self.read_narrow:
            self.changed(alloc_id)

    def write(self, r: Region, values: np.ndarray, keep: np.ndarray | None, flat: np.ndarray) -> None:
        """Write `values` into `r`, whose allocation's flat array (self.flat) is `flat`."""
        self.changed(r.alloc_id)
        if r.offsets is not None:
            if keep is None:
                flat[r.offsets] = values
            else:
                flat[r.offsets[keep]] = values[keep]
        else:
            v = (np.ndarray(r.shape, flat.dtype, flat, r.start * r.itemsize, r.strides) if math.prod(r.shape)
                 else np.empty(r.shape, dtype=flat.dtype))      # self.view(r), flat at hand
            if keep is None:
                v[...] = values
            else:
                np.copyto(v, values, where=keep)
        written = self.written.get(r.alloc_id)
        if written is None:
            return
        if keep is None and _covers(r, flat.size):
            del self.written[r.alloc_id]                # every element holds a value now
        elif r.offsets is not None:
            written[r.offsets if keep is None else r.offsets[keep]] = True
        elif math.prod(r.shape):
            view = self._written_view(r)
            if keep is None:
                view[...] = True
            else:
                view |= keep

    def _written_view(self, r: Region) -> np.ndarray:
        """The PSUM written-flags of a non-empty strided region: its geometry over one byte each."""
        return np.ndarray(r.shape, np.bool_, buffer=self.written[r.alloc_id], offset=r.start,
                          strides=tuple(s // r.itemsize for s in r.strides))

    def written_mask(self, r: Region) -> np.ndarray | None:
        """Which elements of a PSUM region hold a value (None: every element does)."""
        written = self.written.get(r.alloc_id)
        if written is None:
            return None
        if r.offsets is not None:
            return written[r.offsets]
        if not math.prod(r.shape):
            return np.zeros(r.shape, dtype=bool)
        return self._written_view(r).copy()


def _covers(r: Region, size: int) -> bool:
    """Does a strided region write every element of an allocation of `size` elements?"""
    if r.offsets is not None or r.start != 0 or math.prod(r.shape) != size:
        return False
    if r.strides == _contiguous(r.shape, r.itemsize):
        return True                 # row-major over all of it (most writes): hi == size below
    if r.hi != size:
        return False
    for n, stride in zip(r.shape, r.strides):
        if n > 1 and stride <= 0:
            return False
    return True


_CONTIGUOUS: dict = {}
_VIEWS_PER_ALLOCATION = 64     # a bound on what a program with a million distinct reads can make us keep
# NKI dtype name -> the dtype dtypes.to_dtype gives (a dict lookup per region otherwise costs a call)
_DTYPES: dict = dict(dtypes._BY_NAME)


def _contiguous(shape: tuple, itemsize: int) -> tuple:
    """Row-major byte strides of `shape` (as tracing gives a whole tile), cached."""
    key = (shape, itemsize)
    found = _CONTIGUOUS.get(key)
    if found is None:
        strides, step = [], itemsize
        for n in reversed(shape):
            strides.append(step)
            step *= max(n, 1)
        found = tuple(reversed(strides))
        if len(_CONTIGUOUS) < 4096:
            _CONTIGUOUS[key] = found
    return found


class _Plan(NamedTuple):
    last_uses: dict[int, list[int]]   # instruction index: the allocations nothing after it touches
    overwritten: set[int]             # first accessed by an unmasked non-accumulating write of all of it
    zero_based: set[int]              # PSUM, first accessed by an accumulating write of all of it
    sizes: dict[int, int]             # elements of every allocation but the inputs


def _plan(program: Program) -> _Plan:
    """One pass over the program (it costs about what executing an instruction does, so only
    one): for each instruction, the allocations nothing after it touches, never the outputs':
    freed as the program runs, so executing holds about what the kernel held live, not every
    tile it ever allocated; the allocations whose first access is an unmasked write of every
    element by a non-accumulating instruction; the PSUM ones whose accumulating first write
    adds to zeros. The last two need no garbage fill, nor the second its written-flags (most
    instruction results and matmul accumulators)."""
    sizes = {a.id: math.prod(a.shape) for a in program.allocs if a.input_index is None}
    psum = {a.id for a in program.allocs if a.buffer == "psum"}
    last: dict[int, int] = {}          # its keys: every allocation accessed so far
    full: set[int] = set()
    zero_based: set[int] = set()
    contiguous = _CONTIGUOUS.get
    for index, rec in enumerate(program.records):
        for r in rec.reads:
            last[r.alloc_id] = index
        writes, stores = rec.writes, rec.stores
        if len(writes) == 1 and not stores:        # most instructions: the loop below, unrolled
            r = writes[0]
            alloc_id = r.alloc_id
            if alloc_id not in last:
                size = sizes.get(alloc_id)
                # _covers(r, size), its common case (a whole new tile, row-major) without the call
                if size and rec.mask is None and (
                        (r.strides == contiguous((r.shape, r.itemsize)) and r.offsets is None and not r.start
                         and math.prod(r.shape) == size) or _covers(r, size)):
                    if not rec.accumulate:
                        full.add(alloc_id)
                    elif alloc_id in psum:
                        zero_based.add(alloc_id)
            last[alloc_id] = index
            continue
        for r, masked, adds in written_regions(rec):
            alloc_id = r.alloc_id
            accessed = alloc_id in last
            last[alloc_id] = index
            if accessed:
                continue
            size = sizes.get(alloc_id)
            if not size or masked or not _covers(r, size):
                continue
            if not adds:
                full.add(alloc_id)
            elif alloc_id in psum:
                zero_based.add(alloc_id)
    for r in output_regions(program.outputs):
        last.pop(r.alloc_id, None)
    by_index: dict[int, list[int]] = {}
    for alloc_id, index in last.items():
        by_index.setdefault(index, []).append(alloc_id)
    return _Plan(by_index, full, zero_based, sizes)


def written_regions(rec: TraceRecord):
    """(region, written under the mask?, adding to what it holds?) for each region `rec` writes,
    as execution writes them (_write_results): writes[0] with the record's accumulation and
    mask, other writes plainly, stores (a matmul's result tile beside its accumulator) masked."""
    writes = rec.writes
    masked = rec.mask is not None
    for i, r in enumerate(writes + rec.stores if rec.stores else writes):
        first = i == 0 and bool(writes)
        yield r, masked and (first or i >= len(writes)), first and rec.accumulate


# ----- value semantics, one function per kind ------------------------------------------------------

_FLOAT32 = np.dtype(np.float32)


def _f32(v: np.ndarray) -> np.ndarray:
    return v if v.dtype == np.float32 else v.astype(np.float32)


def _fit(values, shape: tuple) -> np.ndarray:
    """An instruction's values in the shape of the region they are written to."""
    values = np.asarray(values)
    if values.shape == shape:
        return values
    if values.size == math.prod(shape):
        return values.reshape(shape)
    return align_to(values, values.shape, shape, "instruction result", "", "")


def _operand(spec: dict, values: list[np.ndarray]):
    if "const" in spec:
        return spec["const"]
    return values[spec["read"]]


def _copy(rec, v):
    return [v[0]]


def _broadcast(rec, v):
    """Partition dimension first, as tiles broadcast: a [P] source is one value per partition."""
    src, shape = v[0], rec.writes[0].shape
    if 0 < src.ndim < len(shape):
        src = src.reshape(src.shape[:1] + (1,) * (len(shape) - src.ndim) + src.shape[1:])
    return [np.broadcast_to(src, shape)]


def _transpose(rec, v):
    src = v[0]
    p = src.shape[0] if src.ndim else 1
    return [src.reshape(p, -1).T]


def _permute(rec, v):
    return [np.transpose(v[0], rec.params["perm"])]


_BINARY: dict = {}


def _binary_op(name) -> alu.NkiOp:
    """alu.binary_op, remembered by name (a lookup per instruction otherwise)."""
    try:
        return _BINARY[name]
    except (KeyError, TypeError):
        op = alu.binary_op(name)
        if type(name) is str:
            _BINARY[name] = op
        return op


def _binary(rec, v):
    name = rec.params["op"]
    op = _BINARY.get(name) if type(name) is str else None
    if op is None:
        op = _binary_op(name)
    a, b = v
    shape = rec.writes[0].shape
    if a.dtype is _FLOAT32 and b.dtype is _FLOAT32 and not op.bitvec:
        pass                          # fp32 already (what _f32 below would give)
    elif not op.bitvec:
        if a.dtype.kind in "iu" and b.dtype.kind in "iu" and op.name != "divide":    # exact integers
            a, b = a.astype(np.int64), b.astype(np.int64)
        else:
            a, b = _f32(a), _f32(b)
    if a.shape != shape:
        a = align_to(a, a.shape, shape, "tensor_tensor", "", "")
    if b.shape != shape:
        b = align_to(b, b.shape, shape, "tensor_tensor", "", "")
    return [op.fn(a, b)]


def _scalar(rec, v):
    p = rec.params
    data = v[0]
    op0 = alu.binary_op(p["op0"])
    op1 = alu.binary_op(p["op1"]) if p.get("op1") else None
    parts = data.shape[0] if data.ndim else 1
    per_partition = (parts,) + (1,) * max(data.ndim - 1, 0)

    def value_of(spec):
        x = _operand(spec, v)
        if isinstance(x, np.ndarray):
            x = (x if op0.bitvec else _f32(x)).reshape(per_partition)
            return x.astype(data.dtype) if op0.bitvec else x
        if op0.bitvec:
            return data.dtype.type(int(x))
        return np.float32(x) if not isinstance(x, bool) else x

    out = data if op0.bitvec else _f32(data)
    a0 = value_of(p["operand0"])
    out = op0.fn(a0, out) if p.get("reverse0") else op0.fn(out, a0)
    if op1 is not None:
        a1 = value_of(p["operand1"])
        out = op1.fn(a1, out) if p.get("reverse1") else op1.fn(out, a1)
    return [out]


def _unary(rec, v):
    op = alu.OPS[rec.params["op"]]
    if op.kind != "unary":
        raise ProgramError(f"{rec.params['op']} is not a unary op")
    x = v[0] if op.bitvec or op.name == "logical_not" else _f32(v[0])
    return [op.fn(x)]


def _reduce(rec, v):
    p = rec.params
    axes = tuple(int(a) for a in p["axes"])
    keepdims = bool(p.get("keepdims"))
    if p["op"] in ("mean", "var"):
        x = _f32(v[0])
        out = x.mean(axis=axes, keepdims=keepdims) if p["op"] == "mean" else x.var(axis=axes, keepdims=keepdims)
        return [out]
    op = alu.reduce_op(p["op"])
    x = v[0] if op.bitvec else _f32(v[0])
    if "select" in p:               # a mask over the reduced axes: the others add the op's identity
        x = np.where(_selected(p["select"], x.shape), x, _identity(op.name, x.dtype))
    if op.reduce_ufunc in _ORDER_FREE and _short(x.shape, axes):
        out = _fold(op.reduce_ufunc, x, axes, keepdims)
    else:
        out = op.reduce_ufunc.reduce(x, axis=axes, keepdims=keepdims)
    return [-out if p.get("negate") else out]


# what an element a reduction's mask leaves out adds (nkisim.instructions.language_ops._SELECTABLE)
_IDENTITY = {"add": 0, "multiply": 1, "maximum": -np.inf, "minimum": np.inf, "bitwise_and": -1,
             "bitwise_or": 0, "bitwise_xor": 0, "logical_and": 1, "logical_or": 0, "logical_xor": 0}


def _selected(select, shape: tuple) -> np.ndarray:
    """A reduction's selection: a uint8 array (a program's parameter arrays hold no bools), one
    per input element, broadcast."""
    if type(select) is not np.ndarray or select.dtype != np.uint8 or select.ndim != len(shape):
        raise ProgramError("a reduction's select must be a uint8 array of its input's dimensions")
    return np.broadcast_to(select != 0, shape)


def _identity(op: str, dtype: np.dtype):
    if op not in _IDENTITY:
        raise ProgramError(f"a {op} reduction cannot select its elements")
    return np.array(_IDENTITY[op]).astype(dtype)


# the same values whatever order they combine in (a zero's sign aside, which no comparison
# sees): folding them slice by slice gives the reduce's values
_ORDER_FREE = (np.maximum, np.minimum, np.bitwise_and, np.bitwise_or, np.bitwise_xor)


def _short(shape: tuple, axes: tuple) -> bool:
    """Are the reduced axes a few short ones (a max-pool's windows), which NumPy's reduce walks
    one element at a time (~30x slower than folding whole slices)?"""
    n = 1
    for a in axes:
        n *= shape[a]
    return 1 < n <= 64 and all(shape[a] <= 8 for a in axes)


def _fold(ufunc, x: np.ndarray, axes: tuple, keepdims: bool) -> np.ndarray:
    """ufunc.reduce(x, axes) as elementwise ufunc calls on whole slices, one per reduced index."""
    picks = [range(n) if a in axes else (slice(None),) for a, n in enumerate(x.shape)]
    slices = itertools.product(*picks)
    out = np.array(x[next(slices)])
    for index in slices:
        ufunc(out, x[index], out=out)
    return np.expand_dims(out, axes) if keepdims else out


def _fill(rec, v):
    return [np.full(rec.writes[0].shape, rec.params["value"])]


def _activation(rec, v):
    p = rec.params
    fn = alu.activation_op(p["op"])
    data = _f32(v[0])
    parts = data.shape[0] if data.ndim else 1
    per_partition = (parts,) + (1,) * max(data.ndim - 1, 0)

    def value_of(spec):
        x = _operand(spec, v)
        return _f32(x).reshape(per_partition) if isinstance(x, np.ndarray) else np.float32(x)
    x = data * value_of(p["scale"])
    if "bias" in p:
        x = x + value_of(p["bias"])
    out = fn.fn(_f32(x))
    results = [out]
    if "reduce" in p:
        red = alu.reduce_op(p["reduce"]["op"], "activation")
        partial = red.reduce_ufunc.reduce(_f32(out).reshape(parts, -1), axis=1)
        if "read" in p["reduce"]:        # reduce_cmd=reduce: keep accumulating into reduce_res
            partial = red.fn(_f32(v[p["reduce"]["read"]]).reshape(parts), partial)
        results.append(partial)
    return results


def _matmul(rec, v):
    # the operands as _Memory.matmul_operand gives them: fp32, each rounded to its own dtype
    # (a tf32 view of fp32 data has its mantissa rounded to 10 bits)
    s, mv = v
    k = s.shape[0] if s.ndim else 1
    return [s.reshape(k, -1).T @ mv.reshape(k, -1)]


def _hold_to_onezero(rec, values) -> None:
    """nc_matmul's is_stationary_onezero / is_moving_onezero tell the Tensor Engine that an operand
    holds only 0.0 and 1.0, which it may rely on; an operand that breaks the promise stops the run
    at the kernel's line (Trainium's result would be undefined, so no value here could stand
    for it)."""
    for name in rec.attrs["onezero"]:
        x = values[0 if name == "stationary" else 1]
        if not np.all((x == 0) | (x == 1)):
            raise KernelValueError(
                f"nc_matmul(is_{name}_onezero=True): its {name} operand holds values other than 0.0 and 1.0 "
                f"(e.g. {float(x[~((x == 0) | (x == 1))].flat[0]):.6g}), which the hint promised it would not",
                remedy=f"drop is_{name}_onezero=True, or pass a {name} tile of only 0.0 and 1.0",
                site=rec.site)


def _iota(rec, v):
    return [rec.params["values"].astype(np.int32)]


def _affine_select(rec, v):
    keep = np.broadcast_to(rec.params["pred"], v[0].shape)
    return [np.where(keep, _f32(v[0]), np.float32(rec.params["on_false"]))]


def _partition_reduce(rec, v):
    op = alu.reduce_op(rec.params["op"], "tensor_partition_reduce")
    x = v[0] if op.bitvec else _f32(v[0])
    return [op.reduce_ufunc.reduce(x, axis=0, keepdims=True)]


def _select(rec, v):
    shape = rec.writes[0].shape

    def value_of(spec):
        x = _operand(spec, v)
        return align_to(_f32(x), x.shape, shape, "where", "", "") if isinstance(x, np.ndarray) else np.float32(x)
    cond = align_to(_f32(v[0]), v[0].shape, shape, "where", "", "")
    return [np.where(cond != 0, value_of(rec.params["x"]), value_of(rec.params["y"]))]


_KINDS = {"copy": _copy, "broadcast": _broadcast, "transpose": _transpose, "permute": _permute,
          "binary": _binary, "scalar": _scalar, "unary": _unary, "reduce": _reduce, "fill": _fill,
          "activation": _activation, "matmul": _matmul, "iota": _iota, "affine_select": _affine_select,
          "partition_reduce": _partition_reduce, "select": _select}
_KINDS.update({name: kind.compute for name, kind in VALUE_KINDS.items()})   # nkisim.kinds' families


def _print_text(rec: TraceRecord, values: list[np.ndarray]) -> str:
    prefix = str(rec.params.get("prefix", ""))
    if not values:
        return f"{prefix} {rec.params.get('text', '')}"
    x = values[0]
    if x.dtype.kind == "V" or x.dtype.itemsize < 4 and x.dtype.kind == "f":
        x = x.astype(np.float64)
    if rec.mask is not None:            # nl.device_print(mask=...): the elements it leaves out show as --
        x = np.ma.masked_array(x, mask=~np.broadcast_to(rec.mask, x.shape))
    with np.printoptions(threshold=64, edgeitems=3, linewidth=100, precision=6, floatmode="maxprec",
                         suppress=False, formatter=None, sign="-", nanstr="nan", infstr="inf"):
        return f"{prefix} {str(x) if np.ma.isMaskedArray(x) else np.array2string(x)}"


# ----- the whole program ---------------------------------------------------------------------------

def execute(program: Program, inputs: list[np.ndarray], *, fill_nan: bool = True, echo: bool = False,
            placed: dict[int, np.ndarray] | None = None, threads: int = 1,
            filled: frozenset = frozenset(), max_executed: int = ProgramLimits().max_records) -> Execution:
    """Run `program` on `inputs` (the kernel's array arguments in order). `echo` also prints
    nl.device_print text as it is produced (local runs). `placed`: memory given for some
    allocations, {allocation id: flat writable array of its size and dtype}, used as they are
    created (an output computed straight into memory its reader maps: no copy); one that does
    not fit is ignored. `threads` > 1: matmul products are computed on that many worker threads
    while execution goes on, stored in program order (nkisim.products): the same bits; BLAS
    is held to one thread meanwhile (one per worker). 1, the default: every instruction at
    once on this thread, no other thread started (a library call takes no more cores than its
    caller gave it). `filled`: ids of placed allocations whose memory already holds the values
    they start with (nkisim.split fills an output shared by several processes once, before they
    start). A ProgramError raised while executing carries the failing instruction's index in `at`.
    A program with run-time control (loops on loaded registers) is run by nkisim.sequencer, at
    most `max_executed` instructions of it, on this thread; its trace is the instructions executed."""
    if type(threads) is not int or threads < 1:
        raise ValueError(f"threads must be a whole number of at least 1, not {threads!r}")
    if is_dynamic(program.records):
        return _run_sequenced(program, inputs, fill_nan, placed, echo, max_executed)
    plan = _plan(program)
    last_uses = plan.last_uses
    mem = _Memory(program, inputs, fill_nan, placed, plan, filled)
    if threads == 1:
        return _run(program, mem, echo, None, last_uses)
    from threadpoolctl import threadpool_limits

    from .products import Pending
    pending = Pending(threads, lambda item, future: _retire(mem, item, future), limit=8 * threads)
    # one BLAS thread per worker: the products are small GEMMs, one core each
    with threadpool_limits(limits=1, user_api="blas"):
        try:
            return _run(program, mem, echo, pending, last_uses)
        except Exception:
            if pending:          # an earlier matmul's error is the one it would have raised first
                pending.retire_all()
            raise
        finally:
            pending.close()


def _run(program: Program, mem: _Memory, echo: bool, pending, last_uses: dict[int, list[int]]) -> Execution:
    printed: list[str] = []
    timed: list[TraceRecord] = []
    view, release, kinds, nothing = mem.view, mem.release, _KINDS, ()
    uses, time_it = last_uses.get, timed.append
    drop_array, drop_written, drop_views = mem.arrays.pop, mem.written.pop, mem.views.pop
    rec = None
    try:
        for index, rec in enumerate(program.records):
            freed = uses(index - 1)
            if freed is not None:
                for alloc_id in freed:
                    if pending:
                        pending.before_release(alloc_id)
                    if mem.widened or mem.read_narrow:
                        release(alloc_id)
                    else:                            # release(alloc_id) without its call
                        drop_array(alloc_id, None)
                        drop_written(alloc_id, None)
                        drop_views(alloc_id, None)
            kind = rec.kind
            if kind == "matmul":
                if pending:
                    pending.before_read(rec.reads)
                values = [mem.matmul_operand(r) for r in rec.reads]
                if "onezero" in rec.attrs:
                    _hold_to_onezero(rec, values)
            else:
                if pending:
                    pending.before_read(rec.reads)
                    pending.before_write(rec.writes)
                    if rec.stores:
                        pending.before_write(rec.stores)
                values = list(map(view, rec.reads))     # no comprehension frame per instruction
            if kind == "print":
                if echo and pending:
                    pending.retire_all()    # text shows only once what ran before it has run
                _print(rec, values, printed, echo)
                continue
            time_it(rec)
            if pending is not None and kind == "matmul":
                unread = uses(index, nothing)
                # a result tile nothing reads again is never stored (_write_results): not a hazard
                written = rec.writes + [r for r in rec.stores if r.alloc_id not in unread] if rec.stores else rec.writes
                pending.submit((rec, unread), written, rec.reads, kinds[rec.kind], rec, values)
                continue
            _apply(mem, rec, kinds[kind], values, uses(index, nothing))
    except Exception as err:
        # which instruction raised it (None: a product retired late, its own error says which)
        _locate_and_raise(err, rec, rec.index if pending is None and rec is not None else None)
    if pending:
        pending.retire_all()
    outputs = _outputs(mem, program.outputs)
    return Execution(outputs, timed, printed)


def _run_sequenced(program: Program, inputs: list[np.ndarray], fill_nan: bool, placed, echo: bool,
                   max_executed: int) -> Execution:
    """Execute a program with run-time control: the sequencer walks it and each instruction it
    reaches runs here as _run runs one. Nothing is freed early and no allocation skips its fill
    (a loop uses its tiles again, and may run no time at all: _plan's shortcuts assume one pass)."""
    plan = _plan(program)
    mem = _Memory(program, inputs, fill_nan, placed, _Plan({}, set(), set(), plan.sizes))
    printed: list[str] = []
    current = None

    def step(rec: TraceRecord) -> bool:
        nonlocal current
        current = rec
        kind = rec.kind
        values = [mem.matmul_operand(r) for r in rec.reads] if kind == "matmul" else list(map(mem.view, rec.reads))
        if kind == "matmul" and "onezero" in rec.attrs:
            _hold_to_onezero(rec, values)
        if kind == "print":
            _print(rec, values, printed, echo)
            return False
        if kind == "register_load":          # its value went to the sequencer's register file (load)
            return True
        _apply(mem, rec, _KINDS[kind], values, ())
        return True

    def load(rec: TraceRecord) -> int:
        nonlocal current
        current = rec
        value = np.asarray(mem.view(rec.reads[0])).reshape(-1)
        if value.size != 1 or value.dtype.kind not in "iu":
            raise ProgramError(f"instruction {rec.index} (register_load) loads one 32-bit integer element")
        return int(value[0])

    sequencer = Sequencer(program.records, max_executed, {a.id: a for a in program.allocs})
    try:
        trace = sequencer.run(step, load)
    except Exception as err:
        _locate_and_raise(err, current, None, current.index if current is not None else None)
    return Execution(_outputs(mem, program.outputs), trace, printed)


def _print(rec: TraceRecord, values: list, printed: list[str], echo: bool) -> None:
    text = _print_text(rec, values)
    printed.append(text)
    if echo:
        print(text, file=sys.stdout)


def _apply(mem: _Memory, rec: TraceRecord, compute, values: list, unread) -> None:
    """Run one instruction on its operands and store its results."""
    try:
        _write_results(mem, rec, compute(rec, values), unread)
    except (ProgramError, _MissingAllocation):
        raise
    except Exception as err:   # a forged program's nonsense; a traced one never gets here
        raise _cannot_execute(rec, err) from None


def _locate_and_raise(err: Exception, rec: TraceRecord | None, at: int | None, mark: int | None = ...):
    """Raise what stopped a run: nkisim's own fault as an internal error naming the instruction
    (`at`, None when a product retired late), a kernel's or program's error marked with where it
    happened (`mark`, by default `at`) unless it says already."""
    if not isinstance(err, _PASS_THROUGH):      # nkisim's own fault, or a tile of another call
        raise _unexpected(rec, err, at) from (None if isinstance(err, _MissingAllocation) else err)
    mark = at if mark is ... else mark
    if mark is not None and getattr(err, "at", None) is None:
        try:
            err.at = mark
        except AttributeError:
            pass
    raise err


def _write_results(mem: _Memory, rec: TraceRecord, results: list, unread) -> None:
    """Store an instruction's results: writes[0] with its accumulation and mask, other writes
    plainly, and its extra stores (masked) but those into allocations in `unread`."""
    mask = rec.mask
    if len(rec.writes) == 1 and not rec.stores:          # most instructions
        _store(mem, rec.writes[0], results[0], rec.accumulate, mask, adopt=True)
        return
    first = True
    for i, r in enumerate(rec.writes):
        _store(mem, r, results[i], rec.accumulate if first else False, mask if first else None, adopt=True)
        first = False
    if rec.stores:
        for r in rec.stores:
            if r.alloc_id in unread:
                continue            # nothing reads this result tile again (a matmul's, placed)
            _store(mem, r, results[0], False, mask)


def _retire(mem: _Memory, item: tuple, future) -> None:
    """Store a matmul's product computed by a worker (nkisim.products), on this thread."""
    rec, unread = item
    _apply(mem, rec, lambda _rec, _values: future.result(), None, unread)


class _MissingAllocation(Exception):
    """A region names an allocation the program does not have (never one program.validate passed)."""


# passed through as they are: the program's own errors, nkisim's typed ones, resources, warnings
_PASS_THROUGH = (ProgramError, NKISimError, MemoryError, RecursionError, Warning)


def _unexpected(rec: TraceRecord | None, err: Exception, at: int | None) -> NKISimError:
    """What an exception other than the program's own errors becomes: a traced program that
    names an allocation it does not have used a tile of an earlier kernel call (allocation ids
    are unique in the process); anything else is nkisim's bug, said so."""
    what = f"instruction {rec.index} ({rec.opcode})" if rec is not None else "the program's outputs"
    site = rec.site if rec is not None else None
    if isinstance(err, _MissingAllocation):
        failure = KernelContractError(
            f"{what} uses a tile that is not one of this kernel call's: a tile made by an earlier kernel "
            "call (kept in a global, an attribute or a cache such as functools.lru_cache) was used again",
            remedy="make every tile within the call that uses it: a tile lives only within the call that "
                   "made it", site=site)
    else:
        failure = SimulatorFailure(
            f"nkisim failed on {what}: {type(err).__name__}: {err}; this is a bug in the simulator, "
            "please report it", remedy="report it with this message and the kernel; nothing in the "
            "kernel needs changing for it", site=site)
    failure.at = at
    return failure


def _cannot_execute(rec: TraceRecord, err: Exception) -> ProgramError:
    where = f" at {rec.site}" if rec.site else ""
    return ProgramError(f"instruction {rec.index} ({rec.opcode}{where}) cannot execute: "
                        f"{type(err).__name__}: {err}")


def _store(mem: _Memory, r: Region, values, accumulate: bool, mask, adopt: bool = False) -> None:
    """Write an instruction's values into `r`. `adopt`: the values are this write's own (not
    also stored elsewhere), so they may become the allocation's memory (_Memory.adopt)."""
    if type(values) is not np.ndarray or values.shape != r.shape:
        values = _fit(values, r.shape)
    keep = None
    if mask is not None:
        keep = np.broadcast_to(mask, r.shape)
    if accumulate:
        if r.alloc_id in mem.zero_pending:        # the first write: every element adds to zero
            mem.zero_pending.discard(r.alloc_id)
            values = _f32(values) + np.float32(0)
        else:
            view = mem.view(r)                    # created here, written-flags and all
            mem.changed(r.alloc_id)
            if (keep is None and r.offsets is None and r.dtype == "float32" and r.alloc_id not in mem.written
                    and isinstance(values, np.ndarray) and values.dtype == np.float32 and not values.dtype.metadata):
                np.add(view, values, out=view)    # every element holds a value: add in place
                return
            old = _f32(view)
            written = mem.written_mask(r)
            if written is not None:
                old = np.where(written, old, np.float32(0))
            values = old + _f32(values)
    dtype = _DTYPES.get(r.dtype)
    if dtype is None or values.dtype is not dtype or dtype.metadata:   # the same array cast would give
        values = dtypes.cast(values, dtypes.to_dtype(r.dtype))
    if adopt and keep is None and mem.adopt(r, values):
        return
    flat = mem.flat(r.alloc_id, r.dtype)
    # an array owning its memory (base None: computed, never one of mem's arrays) cannot overlap
    if isinstance(values, np.ndarray) and values.base is not None and np.may_share_memory(values, flat):
        values = values.copy()     # an in-place instruction reading what it writes
    mem.write(r, values, keep, flat)


def _outputs(mem: _Memory, outputs, handed: set | None = None):
    handed = set() if handed is None else handed
    if isinstance(outputs, Region):
        return _output_array(mem, outputs, handed)
    if isinstance(outputs, dict):
        return {k: _outputs(mem, v, handed) for k, v in outputs.items()}
    return type(outputs)(_outputs(mem, v, handed) for v in outputs)


def _output_array(mem: _Memory, r: Region, handed: set) -> np.ndarray:
    """An output's values. An output that is all of an allocation the kernel made, in order,
    is handed over without a copy (a 224x224 batch's output is 200 MB), once: a second output
    of the same allocation, an input or any other view is copied."""
    view = mem.view(r)
    if (r.alloc_id not in handed and r.offsets is None and mem.allocs[r.alloc_id].input_index is None
            and view.flags.c_contiguous and view.size == mem.arrays[r.alloc_id].size):
        handed.add(r.alloc_id)
        return view
    return np.array(view, copy=True)
