"""One simulated NeuronCore per kernel run: memory, allocations and the instruction trace.

The `neuronxcc.nki`-shaped API finds the running machine through a ContextVar, so there is
no module-level state and runs in different threads or contexts never see each other.
"""
from __future__ import annotations

import contextlib
import contextvars
import numbers

import numpy as np

from . import dtypes
from .errors import HardwareLimitError, KernelContractError, MemorySpaceError, OutsideKernelError, ShapeError
from .memory import Allocation, Buffer, MemoryTracker
from .settings import SimSettings
from .source import user_site
from .tensor import DeviceTensor, align_to, as_shape, same_region
from .trace import Engine, TraceRecord

_current: contextvars.ContextVar["Machine | None"] = contextvars.ContextVar("nkisim_machine", default=None)

# Which buffers each engine may write as an instruction's destination.
ENGINE_OUTPUTS = {
    Engine.TENSOR: (Buffer.PSUM,),
    Engine.VECTOR: (Buffer.SBUF, Buffer.PSUM),
    Engine.SCALAR: (Buffer.SBUF, Buffer.PSUM),
    Engine.GPSIMD: (Buffer.SBUF,),
}


def current_machine() -> "Machine":
    machine = _current.get()
    if machine is None:
        raise OutsideKernelError(
            "calling NKI API outside of NKI kernels is not supported",
            remedy="run the kernel through nki.baremetal(kernel)(...), nki.simulate_kernel(kernel, ...) "
                   "or nki.benchmark(...)(kernel)(...)")
    return machine


class Machine:
    def __init__(self, settings: SimSettings | None = None) -> None:
        self.settings = settings or SimSettings()
        self.limits = self.settings.limits
        self.memory = MemoryTracker(self.limits)
        self.trace: list[TraceRecord] = []
        self.printed: list[str] = []

    @contextlib.contextmanager
    def activate(self):
        token = _current.set(self)
        try:
            yield self
        finally:
            _current.reset(token)

    # ----- allocation ----------------------------------------------------------------------
    def allocate(self, shape, dtype, buffer: Buffer, *, par_axis: int = 0, fill=None,
                 name: str = "", transient: bool = False, is_input: bool = False,
                 site=None) -> DeviceTensor:
        if not transient:   # instruction results arrive with checked int shapes and dtypes
            shape = as_shape(shape)
            dtype = dtypes.to_dtype(dtype)
        elif not isinstance(dtype, np.dtype):
            dtype = dtypes.to_dtype(dtype)
        if site is None and not transient:
            site = user_site(2)
        if buffer.on_chip and (shape or not transient):   # a 0-d result (t[0, 0] > 0) is fine
            self._check_tile_shape(shape, par_axis, name, site)
        array = np.empty(shape, dtype=dtype)
        if fill is not None:
            array[...] = dtypes.cast(np.asarray(fill), dtype)
        elif transient:
            pass   # an instruction result: written in full right away (see store_result for masks)
        elif self.settings.fill_uninitialized_with_nan:
            if dtypes.is_float(dtype):
                array[...] = np.nan
            else:
                array.view(np.uint8)[...] = 0xA5   # recognisable garbage
        alloc = Allocation(buffer, array, dtype, par_axis, site, name, is_input=is_input,
                           transient=transient, written=fill is not None or is_input)
        if fill is None and transient:
            alloc.written = False
        self.memory.admit(alloc)
        return DeviceTensor(alloc, array, None, par_axis, name)

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

    def new_tile(self, shape, dtype, buffer: Buffer = Buffer.SBUF) -> DeviceTensor:
        """An instruction's result tile: counted for capacity only if the kernel keeps it."""
        return self.allocate(shape, dtype, buffer, transient=True)

    # ----- trace ---------------------------------------------------------------------------
    def record(self, opcode: str, engine: Engine, reads, writes, *, accumulate: bool = False,
               **attrs) -> TraceRecord | None:
        for t in reads:
            t._alloc.read = True
        if not self.settings.record_trace:
            return None
        rec = TraceRecord(len(self.trace), opcode, engine, [t.region() for t in reads],
                          [t.region() for t in writes], user_site(2), accumulate, attrs)
        self.trace.append(rec)
        for t in writes:
            if t._alloc.transient and t._alloc.producer is None:
                t._alloc.producer = rec
                t._alloc.site = rec.site   # a result tile was allocated where its instruction ran
        return rec

    # ----- writes into existing tensors ----------------------------------------------------------
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
            values = align_to(value._values(), value.shape, dest.shape, f"{dest.name or 'dst'}[...] = value",
                              "value ", "destination")
            if not self._place_result(value, dest):
                engine = Engine.SCALAR if value.buffer is Buffer.PSUM else Engine.VECTOR
                self.record("tensor_copy", engine, [value], [dest])
            dest._store(values)
        elif isinstance(value, (numbers.Number, np.number)):
            self.record("memset", Engine.VECTOR, [], [dest], value=float(value))
            dest._store(np.full(dest.shape, value))
        else:
            raise ShapeError(f"cannot assign a {type(value).__name__} into {dest._label()}",
                             remedy="assign a tile or a Python number")

    def _place_result(self, value: DeviceTensor, dest: DeviceTensor, accumulate: bool = False) -> bool:
        """Retarget the instruction that produced `value` to write `dest` directly, as the
        compiler does for `dest[...] = nisa.op(...)`. Only for a fresh, unread result."""
        alloc = value._alloc
        rec = alloc.producer
        if not alloc.transient or alloc.read or rec is None or value.shape != alloc.shape:
            return False
        if dest.buffer not in ENGINE_OUTPUTS.get(rec.engine, ()):
            return False
        rec.writes = [dest.region()]
        rec.accumulate = accumulate
        alloc.read = True
        return True

    def update_in_place(self, target: DeviceTensor, other, opname: str) -> None:
        """`target += other` (and -=, *=, /=). Into PSUM with a fresh matmul result this is
        the Tensor Engine's own accumulation; otherwise an element-wise instruction."""
        from .alu import binary_op
        self.check_writable(target, f"'{opname}' in place")
        if target.buffer.is_hbm:
            raise MemorySpaceError(f"cannot update HBM tensor {target._label()} in place",
                                   remedy="use nisa.dma_copy(dst=..., src=..., dst_rmw_op=np.add)")
        op = binary_op(opname)
        if isinstance(other, DeviceTensor):
            if other.buffer.is_hbm:
                raise MemorySpaceError(f"operand {other._label()} is in HBM",
                                       remedy="load it into SBUF with nisa.dma_copy first")
            rhs = align_to(other._values(), other.shape, target.shape, f"{opname} in place",
                           "value ", "target")
            accumulate = (opname == "add" and target.buffer is Buffer.PSUM and other._alloc.producer is not None
                          and other._alloc.producer.engine is Engine.TENSOR)
            if not (accumulate and self._place_result(other, target, accumulate=True)):
                self.record("tensor_tensor", Engine.VECTOR, [target, other], [target], op=opname)
        else:
            rhs = other
            self.record("tensor_scalar", Engine.VECTOR, [target], [target], op=opname)
        lhs = target._values()
        if lhs.dtype != np.float32:
            lhs = lhs.astype(np.float32)
        target._store(op.apply(lhs, rhs))
