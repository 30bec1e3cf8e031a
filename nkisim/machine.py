"""Tracing one kernel run: allocations, on-chip capacity and the program of instructions.

The `neuronxcc.nki`-shaped API finds the running machine through a ContextVar (nkisim.running,
which Machine.activate sets), so there is no module-level state and runs in different threads
or contexts never see each other.
"""
from __future__ import annotations

import contextlib
import math
from itertools import repeat
import numbers
import weakref
from sys import _getframe

import numpy as np

from . import collector, direct_alloc, dtypes
from .alu import binary_op
from .errors import HardwareLimitError, KernelContractError, MemorySpaceError, ShapeError, UnsupportedOperationError
from .indexing import Predicate
from .memory import Allocation, Buffer, MemoryTracker
from .registry import ALLOWED
from .running import RUNNING
from .settings import SimSettings
from .source import site_of_frame, user_site
from .tensor import DeviceTensor, check_access, check_align, checked_shape, contiguous_strides, same_region
from .trace import AllocInfo, Engine, Region, TraceRecord

_new_object = object.__new__
_weakref = weakref.ref
_TICK_EVERY = collector._EVERY
_SBUF = Buffer.SBUF

# Which buffers each engine may write as an instruction's destination.
ENGINE_OUTPUTS = {
    Engine.TENSOR: (Buffer.PSUM,),
    Engine.VECTOR: (Buffer.SBUF, Buffer.PSUM),
    Engine.SCALAR: (Buffer.SBUF, Buffer.PSUM),
    Engine.GPSIMD: (Buffer.SBUF,),
}


def fits_destination(dst_shape: tuple, shape: tuple) -> bool:
    """Can an instruction computing `shape` write a destination of `dst_shape`: the same shape,
    the same elements with only size-1 dimensions added or removed ((P, 1) for (P,)), or the same
    partitions and elements per partition (the 0.6 reference's tensor_copy: "the same partition
    axis size and also the same number of elements per partition"), written in row-major order
    (`as_destination`)."""
    if dst_shape == shape:
        return True
    if math.prod(dst_shape) != math.prod(shape):
        return False
    return _squeezed(dst_shape) == _squeezed(shape) or (len(dst_shape) > 1 and len(shape) > 1
                                                        and dst_shape[0] == shape[0])


DESTINATION_REMEDY = ("slice dst to the result's partitions and elements per partition (its shape, or "
                      "the same partitions with the free dimensions flattened or split)")


def as_destination(dst: "DeviceTensor", shape: tuple) -> "DeviceTensor":
    """`dst` seen in the shape of the result it receives (fits_destination said it fits): its
    elements in row-major order, which is the order an access pattern walks them."""
    return dst if dst.shape == tuple(shape) else dst.reshape(tuple(shape))


def _squeezed(shape: tuple) -> tuple:
    return tuple(n for n in shape if n != 1)


class Machine:
    """Traces one kernel: allocations, capacity, and the program of instructions. Nothing
    here holds a value; nkisim.execute runs the program on real inputs afterwards."""

    def __init__(self, settings: SimSettings | None = None) -> None:
        self.settings = settings or SimSettings()
        self.limits = self.settings.limits
        self.memory = MemoryTracker(self.limits)
        self.trace: list[TraceRecord] = []
        # every allocation, for the program's table: plain tuples while tracing (a frozen
        # dataclass costs ~1.7 us to make), AllocInfo when the table is asked for
        self._alloc_rows: list[tuple] = []
        # (shape, dtype, buffer text) of a result tile -> what new_tile derives from them
        self._result_facts: dict[tuple, tuple] = {}
        self._last_result: tuple = (None, None, None, None)     # (shape, dtype, buffer, facts)
        # (the calling frame, its kernel line) of the innermost nki.isa call running, set by the
        # instruction wrapper (nkisim.registry.instruction) for Machine.emit
        self.entry: tuple | None = None
        # (code, bytecode offset, kernel line) of the last instruction call from kernel code
        self.last_call: tuple = (None, -1, None)
        # the dialect of the kernel traced (nkisim.dialects name): tensors' dialect-only methods ask it
        self.dialect: str = "neuronxcc-nki"
        # the tile the next instruction writes instead of a result of its own (result_tile)
        self.destination: DeviceTensor | None = None
        # a launch on a logical NeuronCore of several physical cores (NKI 0.6's kernel[lnc]): each
        # core runs the kernel in turn (switch_core, nkisim.launch); state that is the core's own
        # (its accumulator registers, PSUM accumulation groups, ...) lives in core_state
        self.cores = 1
        self.core = 0
        self.core_state: dict = {}
        self._core_fields: dict[int, tuple] = {}      # a core's own fields while another traces
        self._core_start = 0
        self._shared_hbm: list[DeviceTensor] = []     # the first instance's shared_hbm tensors, in order
        self._shared_seen = 0
        # an SPMD launch grid (legacy kernel[grid]): every instance of the launch, and the program
        # ids and number of this core's instance being traced (nl.program_id)
        self.instances = 1
        self.grid = None                    # its nkisim.launch.Grid (None: no grid)
        self.grid_sizes: tuple = ()
        self.program_ids: tuple = ()
        self._core_instance = 0
        self.launch = None                  # the launch's cores and their meetings (nkisim.launch)
        # the name= label of the current-dialect instruction being traced (nkisim.nki06.bind)
        self.pending_label: str | None = None
        # the kernel's direct allocations (nkisim.direct_alloc.DirectState), from its first one;
        # force_auto_alloc: @nki.compiler.force_auto_alloc makes them automatic
        self.direct: direct_alloc.DirectState | None = None
        self.force_auto_alloc = False
        self.engine_tiles: set[int] = set()     # allocation ids of engine_state's tiles

    @property
    def allocations(self) -> dict[int, AllocInfo]:
        """Every allocation made so far, by id, in the order they were made."""
        return {info.id: info for info in self.allocation_table()}

    def allocation_table(self) -> list[AllocInfo]:
        """Every allocation made so far, in the order they were made (so by increasing id, each
        once): the program's table. Each row is a 7-tuple made here, so it becomes an AllocInfo
        without AllocInfo._make's length check, and in one C loop (one row per instruction)."""
        return list(map(tuple.__new__, repeat(AllocInfo), self._alloc_rows))

    @contextlib.contextmanager
    def activate(self):
        token = RUNNING.set(self)
        try:
            yield self
        finally:
            RUNNING.reset(token)

    # ----- several physical cores --------------------------------------------------------------
    def switch_core(self, core: int) -> None:
        """Trace on physical core `core` from here: the records traced since the last switch are
        labelled with the core that traced them, and each core keeps its own on-chip memory and
        per-core state (HBM, the inputs and shared_hbm, is the logical core's). The first switch
        to a core starts it afresh."""
        self._label_records()
        saved = self._core_fields
        saved[self.core] = (self.core_state, self.memory, self._shared_seen, self.pending_label, self.program_ids,
                            self._core_instance)
        if core in saved:
            (self.core_state, self.memory, self._shared_seen, self.pending_label, self.program_ids,
             self._core_instance) = saved[core]
        else:
            memory = self.memory if core == 0 else MemoryTracker(self.limits)
            self.core_state, self.memory, self._shared_seen, self.pending_label = {}, memory, 0, None
            self.program_ids, self._core_instance = (), 0
        self.core = core

    def _label_records(self) -> None:
        if self.core:
            for rec in self.trace[self._core_start:]:
                rec.attrs["core"] = self.core
        self._core_start = len(self.trace)

    def begin_instance(self, program_ids: tuple) -> None:
        """The core's next instance of the launch starts: its program ids, its shared tensors
        counted afresh."""
        self.program_ids = program_ids
        self._shared_seen = 0

    def end_instance(self) -> None:
        """The instance is traced: every instance after the first allocated the first's shared tensors."""
        if not self._creates_shared() and self._shared_seen != len(self._shared_hbm):
            raise KernelContractError(
                f"{self._instance_label()} allocated {self._shared_seen} nl.shared_hbm tensors, {self._first_label()} "
                f"{len(self._shared_hbm)}: every instance runs the same kernel and allocates the same shared tensors",
                remedy="allocate shared_hbm tensors outside any branch on nl.program_id()",
                code="err_lnc_control_flow")
        self._core_instance += 1

    def end_core(self) -> None:
        """The core's run is traced: its records labelled."""
        self._label_records()

    def _creates_shared(self) -> bool:
        return self.core == 0 and self._core_instance == 0

    def _instance_label(self) -> str:
        if self.grid_sizes:
            return f"SPMD instance {list(self.program_ids)}"
        return f"under LNC={self.cores} core {self.core}"

    def _first_label(self) -> str:
        return "the first instance" if self.grid_sizes else "core 0"

    def _shared_tensor(self, shape: tuple, dtype, name: str) -> DeviceTensor | None:
        """A later instance's nl.shared_hbm allocation is the first instance's of the same place
        in the kernel (the k-th): None while the first instance (core 0's first) allocates."""
        k = self._shared_seen
        self._shared_seen += 1
        if self._creates_shared():
            return None
        if k >= len(self._shared_hbm):
            raise KernelContractError(
                f"{self._instance_label()} allocates more nl.shared_hbm tensors than {self._first_label()} "
                f"({len(self._shared_hbm)})", remedy="allocate shared_hbm tensors outside any branch on "
                                                     "nl.program_id()", code="err_lnc_control_flow")
        first = self._shared_hbm[k]
        if tuple(shape) != first.shape or dtypes.to_dtype(dtype) != first.dtype:
            raise KernelContractError(
                f"{self._instance_label()}'s shared_hbm tensor #{k + 1} is "
                f"{dtypes.name_of(dtypes.to_dtype(dtype))}{list(shape)}, {self._first_label()}'s {first._label()}: "
                "every instance allocates the same shared tensors",
                remedy="give every instance the same shared_hbm allocations", code="err_lnc_control_flow")
        return DeviceTensor(first._alloc, first.shape, name=name or first.name)

    # ----- allocation ----------------------------------------------------------------------
    def allocate(self, shape, dtype, buffer: Buffer, *, par_axis: int = 0, name: str = "",
                 transient: bool = False, is_input: bool = False, input_index: int | None = None,
                 site=None) -> DeviceTensor:
        if self.instances > 1 and buffer is Buffer.SHARED_HBM and not is_input:
            shared = self._shared_tensor(tuple(checked_shape(shape)), dtype, name)
            if shared is not None:
                return shared
            t = self._allocate(shape, dtype, buffer, par_axis=par_axis, name=name, transient=transient,
                               site=site or user_site(2))
            self._shared_hbm.append(t)
            return t
        return self._allocate(shape, dtype, buffer, par_axis=par_axis, name=name, transient=transient,
                              is_input=is_input, input_index=input_index, site=site)

    def _allocate(self, shape, dtype, buffer: Buffer, *, par_axis: int = 0, name: str = "",
                  transient: bool = False, is_input: bool = False, input_index: int | None = None,
                  site=None) -> DeviceTensor:
        placer = None
        if type(buffer) is not Buffer:      # ncc.sbuf/psum.alloc or mod_alloc (nkisim.direct_alloc)
            placer, buffer = (None if self.force_auto_alloc else buffer), buffer.buffer
        if not transient:   # instruction results arrive with checked int shapes and dtypes
            shape = checked_shape(shape)
            dtype = dtypes.to_dtype(dtype)
        elif not isinstance(dtype, np.dtype):
            dtype = dtypes.to_dtype(dtype)
        if site is None and not transient:
            site = user_site(2)
        if buffer.on_chip and (shape or not transient):   # a 0-d result (t[0, 0] > 0) is fine
            self._check_tile_shape(shape, par_axis, name, site)
        alloc = Allocation(buffer, tuple(shape), dtype, par_axis, site, name, is_input=is_input,
                           transient=transient, written=is_input, input_index=input_index)
        if placer is not None or self.direct is not None:   # placed, or refused beside placed ones
            self.direct = direct_alloc.declare(self.direct, placer, alloc, self.limits, self._alloc_rows, site,
                                               self.engine_tiles)
        if placer is None:          # a direct allocation holds its own places: not the running totals
            self.memory.admit(alloc)
        self._alloc_rows.append((alloc.id, buffer.text, alloc.shape, dtypes.name_of(dtype), par_axis, name,
                                 input_index))
        return DeviceTensor(alloc, alloc.shape, par_axis=par_axis, name=name)

    def _check_tile_shape(self, shape, par_axis, name, site) -> None:
        if len(shape) < 1:
            raise ShapeError("on-chip tensors need at least one dimension", site=site)
        parts = shape[par_axis]
        if parts > self.limits.pmax:
            raise HardwareLimitError(
                f"number of partitions {parts} exceed architecture limitation of {self.limits.pmax}"
                f" (tensor {('%s' % name) if name else ''}{list(shape)})",
                remedy=f"split the first (partition) dimension into tiles of at most "
                       f"{self.limits.pmax} (nl.tile_size.pmax)",
                code="err_num_partition_exceed_arch_limit", site=site)

    def new_tile(self, shape: tuple, dtype, buffer: Buffer = Buffer.SBUF) -> DeviceTensor:
        """An instruction's result tile: counted for capacity only if the kernel keeps it.
        allocate(shape, dtype, buffer, transient=True), spelled out: one per instruction.
        `shape` is a tuple of ints (an instruction's own result shape; memset passes what the
        kernel gave through new_tile_checked).

        What a (shape, dtype, buffer) implies (strides, region geometry, capacity cost) is worked
        out and checked once per run, the first time (new_tile_checked), and looked up after."""
        last = self._last_result     # the same shape, dtype and buffer objects as the last result
        if shape is last[0] and dtype is last[1] and buffer is last[2]:   # (an instruction in a loop)
            facts = last[3]
        else:
            if not isinstance(dtype, np.dtype):
                dtype = dtypes.to_dtype(dtype)
            if type(shape) is not tuple:
                return self.new_tile_checked(shape, dtype, buffer)
            facts = self._result_facts.get((shape, dtype, buffer.text))
            if facts is None or facts[0] is not dtype:   # dtype equality ignores tf32's metadata
                return self.new_tile_checked(shape, dtype, buffer)
            self._last_result = (shape, dtype, buffer, facts)   # holds them: their ids stay theirs
        _, strides, byte_strides, itemsize, name, parts, cost = facts
        alloc = Allocation(buffer, shape, dtype, 0, None, "", False, True, False)
        memory = self.memory
        if buffer is _SBUF and memory.sbuf_bytes <= memory.peak_sbuf_bytes and \
                memory.psum_banks <= memory.peak_psum_banks:
            # memory.admit_known(alloc, cost) when it has nothing to check: an SBUF result
            # counted, below the peaks already checked
            memory.sbuf_bytes += cost
            alloc.cost = cost
            memory._live_sbuf[alloc.id] = _weakref(alloc)
            alloc.tracker = memory
        else:
            memory.admit_known(alloc, cost)
        text = buffer.text
        self._alloc_rows.append((alloc.id, text, shape, name, 0, "", None))
        t = DeviceTensor.whole(alloc, strides)
        t._region = Region(alloc.id, text, 0, shape, byte_strides, itemsize, name, parts)
        t.name = ""
        return t

    def result_tile(self, shape: tuple, dtype, buffer: Buffer = Buffer.SBUF) -> DeviceTensor:
        """The tile an instruction writes its result to: the destination a current-dialect call
        named (`self.destination`, set by its binding for this one instruction), else a new
        result tile. Writing the destination itself costs no transient tile and no retargeting
        (nkisim.nki06.bind.into)."""
        dst = self.destination
        if dst is None:
            return self.new_tile(shape, dtype, buffer)
        self.destination = None
        if not fits_destination(dst.shape, tuple(shape)):
            raise ShapeError(f"the destination {dst._label()} has shape {list(dst.shape)}, but the instruction "
                             f"computes {list(shape)}", remedy=DESTINATION_REMEDY, code="err_param_shape_mismatch")
        dst = as_destination(dst, shape)
        if dst._invalid is not None:
            check_access(dst, None, user_site(2))
        dst._alloc.written = True
        return dst

    def new_tile_checked(self, shape, dtype, buffer: Buffer = Buffer.SBUF) -> DeviceTensor:
        """new_tile with every check made here; what it learnt about an all-int shape is kept
        for the next result of the same shape, dtype and buffer."""
        if not isinstance(dtype, np.dtype):
            dtype = dtypes.to_dtype(dtype)
        shape = tuple(shape)
        if buffer.on_chip and shape and shape[0] > self.limits.pmax:
            self._check_tile_shape(shape, 0, "", None)
        alloc = Allocation(buffer, shape, dtype, 0, None, "", False, True, False)
        self.memory.admit(alloc)
        self._alloc_rows.append((alloc.id, buffer.text, shape, dtypes.name_of(dtype), 0, "", None))
        t = DeviceTensor.whole(alloc, contiguous_strides(shape))
        region = t.region()
        if all(type(n) is int for n in shape) and len(self._result_facts) < 4096:
            self._result_facts[(shape, dtype, buffer.text)] = (
                dtype, t._strides, region.strides, region.itemsize, region.dtype, region.partitions, alloc.cost)
        return t

    # ----- the program ---------------------------------------------------------------------------
    def emit(self, opcode: str, engine: Engine, kind: str, reads, writes, *, params: dict | None = None,
             mask=None, accumulate: bool = False, **attrs) -> TraceRecord:
        """Append one instruction: `kind` names its value semantics (nkisim.execute), the rest
        is what the cost model sees. Bounds are checked here, on the elements the instruction
        actually touches: a mask may keep overhanging elements out."""
        if (opcode, engine, kind) not in ALLOWED:   # every record goes through the table
            raise RuntimeError(f"nkisim bug: {opcode} ({kind}) on the {engine.label} engine is not in the "
                               "instruction table")
        # the kernel line (user_site(2)): the innermost frame outside nkisim, walking out from
        # the caller. Called by an instruction function that the wrapper called from frame F,
        # that walk passes the function's and the wrapper's frames (both nkisim's) and starts
        # again at F: the wrapper's answer is the same. Exactly then is frame 3 here F itself
        # (the frame F called into is the wrapper, whose callee is the function). A current-
        # dialect binding that lowers onto a table function adds one frame (frame 4), and one
        # that lowers through nkisim.nki06.bind.into two (frame 5).
        entry = self.entry
        if entry is not None and ((above := _getframe(3)) is entry[0] or (above := above.f_back) is entry[0]
                                  or (above is not None and above.f_back is entry[0])):
            site = entry[1]
        else:
            site = site_of_frame(_getframe(1))
        mask_values = None if mask is None else _mask_values(mask, writes[0].shape if writes else None)
        # t._region: the region a tensor has made already (region() makes it the first time)
        read_regions = []
        for t in reads:
            t._alloc.read = True
            if t._invalid is not None:
                check_access(t, mask_values, site)
            read_regions.append(t._region or t.region())
        write_regions = []
        for t in writes:
            if t._invalid is not None:
                check_access(t, mask_values, site)
            t._alloc.written = True
            write_regions.append(t._region or t.region())
        if self.direct is not None:     # physical bytes shared by direct-allocated tiles
            waits = self.direct.access(self.core, reads, writes, site, len(self.trace), engine)
            if waits:                   # the writes wait for the bytes' other tiles (direct_alloc)
                direct_alloc.add_waits(attrs, waits)
        trace = self.trace
        index = len(trace)
        # TraceRecord(index, opcode, engine, read_regions, write_regions, site, accumulate, attrs, kind,
        # params or {}, mask_values), its fields set here: one call less per instruction
        rec = _new_object(TraceRecord)
        rec.index = index
        rec.opcode = opcode
        rec.engine = engine
        rec.reads = read_regions
        rec.writes = write_regions
        rec.site = site
        rec.accumulate = accumulate
        rec.attrs = attrs
        rec.kind = kind
        rec.params = params or {}
        rec.mask = mask_values
        rec.stores = []
        trace.append(rec)
        if (index + 1) % _TICK_EVERY == 0:     # collector.tick, called only when it looks
            collector.tick(index + 1)
        for t in writes:
            alloc = t._alloc
            if alloc.transient and alloc.producer is None:
                alloc.producer = rec
                alloc.site = site   # a result tile was allocated where its instruction ran
        return rec


    # ----- writes into existing tensors ----------------------------------------------------------
    def engine_state(self, key: str, shape: tuple, dtype, name: str) -> DeviceTensor:
        """A tile of engine state this core keeps for the rest of the kernel (the Vector engine's
        accumulator registers, a generator's state), allocated on its first use, per core."""
        tile = self.core_state.get(key)
        if tile is None:
            direct, self.direct = self.direct, None     # registers, no kernel tensor: direct allocation's
            try:                                        # rules (all direct or all automatic) pass them by
                tile = self.core_state[key] = self.allocate(shape, dtype, Buffer.SBUF, name=name, site=None)
            finally:
                self.direct = direct
            self.engine_tiles.add(tile._alloc.id)
        return tile

    def check_writable(self, dest: DeviceTensor, how: str) -> None:
        if dest._alloc.is_input:
            raise KernelContractError(
                f"kernel parameter {dest._label()} is read-only ({how})",
                remedy="allocate the output with nl.ndarray(shape, dtype, buffer=nl.hbm), write it, "
                       "and return it", code="err_immutable_parameter")

    def assign(self, dest: DeviceTensor, value) -> None:
        """`dest[...] = value`: the producing instruction writes into dest, else a copy."""
        self.check_writable(dest, "assignment")
        if dest.buffer.is_hbm:
            raise MemorySpaceError(
                f"cannot assign into HBM tensor {dest._label()} with '='",
                remedy="HBM is written by DMA: use nisa.dma_copy(dst=..., src=tile)")
        if isinstance(value, DeviceTensor):
            if same_region(dest, value):
                return
            if value.buffer.is_hbm:
                raise MemorySpaceError(
                    f"cannot assign HBM tensor {value._label()} into on-chip {dest._label()}",
                    remedy="load HBM data with nisa.dma_copy(dst=tile, src=hbm_tensor[...])")
            check_align(value.shape, dest.shape, f"{dest.name or 'dst'}[...] = value", "value ", "destination")
            if not self._place_result(value, dest):
                engine = Engine.SCALAR if value.buffer is Buffer.PSUM else Engine.VECTOR
                if self.direct is not None:      # dest[...] = nl.load(...): the result goes into dest
                    self.direct.assigning(value, self.trace)
                self.emit("tensor_copy", engine, "copy", [value], [dest], auto_engine=True)
        elif isinstance(value, (numbers.Number, np.number)):
            self.emit("memset", Engine.VECTOR, "fill", [], [dest], params={"value": dtypes.plain_number(value)},
                      value=float(value))
        else:
            raise ShapeError(f"cannot assign a {type(value).__name__} into {dest._label()}",
                             remedy="assign a tile or a Python number")

    def _place_result(self, value: DeviceTensor, dest: DeviceTensor, accumulate: bool = False) -> bool:
        """Retarget the instruction that produced `value` to write `dest` directly, as the
        compiler does for `dest[...] = nisa.op(...)`. Only for a fresh, unread result; the
        result tile still gets the values (at no cost), should the kernel read it later."""
        alloc = value._alloc
        rec = alloc.producer
        if not alloc.transient or alloc.read or rec is None or value.shape != alloc.shape:
            return False
        if rec is not self.trace[-1]:      # something ran since: the copy keeps program order
            return False
        if dest._alloc.buffer not in ENGINE_OUTPUTS.get(rec.engine, ()):
            return False
        if rec.mask is not None and rec.mask.shape != () and \
                np.broadcast_shapes(rec.mask.shape, dest.shape) != dest.shape:
            return False
        if dest._invalid is not None:
            check_access(dest, rec.mask, rec.site)
        if self.direct is not None:
            waits = self.direct.access(self.core, [dest] if accumulate else (), [dest], rec.site, rec.index,
                                       rec.engine)
            if waits:
                direct_alloc.add_waits(rec.attrs, waits)
        rec.stores = rec.stores + [rec.writes[0]]
        rec.writes = [dest.region()] + rec.writes[1:]
        rec.accumulate = accumulate
        alloc.read = True
        dest._alloc.written = True
        return True

    def update_in_place(self, target: DeviceTensor, other, opname: str) -> None:
        """`target += other` (and -=, *=, /=). Into PSUM with a fresh matmul result this is
        the Tensor Engine's own accumulation; otherwise an element-wise instruction."""
        if target._alloc.is_input:
            self.check_writable(target, f"'{opname}' in place")
        if target._alloc.buffer.is_hbm:        # ._alloc.buffer: .buffer is a property call
            raise MemorySpaceError(f"cannot update HBM tensor {target._label()} in place",
                                   remedy="use nisa.dma_copy(dst=..., src=..., dst_rmw_op=np.add)")
        op = binary_op(opname)
        if isinstance(other, DeviceTensor):
            if other._alloc.buffer.is_hbm:
                raise MemorySpaceError(f"operand {other._label()} is in HBM",
                                       remedy="load it into SBUF with nisa.dma_copy first")
            if other.shape != target.shape:
                check_align(other.shape, target.shape, f"{opname} in place", "value ", "target")
            if self.accumulates(target, other, opname):
                return
            self.emit("tensor_tensor", Engine.VECTOR, "binary", [target, other], [target],
                      params={"op": op.name}, op=op.name)
        elif isinstance(other, (numbers.Number, np.number)):
            self.emit("tensor_scalar", Engine.VECTOR, "scalar", [target], [target],
                      params={"op0": op.name, "operand0": {"const": dtypes.plain_number(other)}}, op=op.name)
        else:
            raise ShapeError(f"cannot update {target._label()} in place with a {type(other).__name__}",
                             remedy="use a tile or a Python number")

    def accumulates(self, target: DeviceTensor, other: DeviceTensor, opname: str) -> bool:
        """`psum += nc_matmul(...)` (or `psum = psum + nc_matmul(...)`): the matmul accumulates
        into the PSUM tile itself, as the Tensor Engine does."""
        producer = other._alloc.producer
        if (opname == "add" and target._alloc.buffer is Buffer.PSUM and producer is not None
                and producer.engine is Engine.TENSOR and producer.opcode == "nc_matmul"):
            return self._place_result(other, target, accumulate=True)
        return False


def _mask_values(mask, shape):
    if mask is None:
        return None
    if not isinstance(mask, Predicate):
        raise UnsupportedOperationError("mask= must be a predicate of index expressions "
                                        "(comparisons of nl.arange/nl.mgrid combined with '&')",
                                        code="err_unsupported_expression_in_mask")
    values = mask.values
    if shape is not None:
        try:
            np.broadcast_shapes(values.shape, shape)
        except ValueError:
            raise ShapeError(f"mask of shape {list(values.shape)} does not fit the result {list(shape)}",
                             code="err_unsupported_expression_in_mask") from None
    return np.ascontiguousarray(values, dtype=bool)
