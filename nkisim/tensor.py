"""Device tensors: what kernel arguments, nl.ndarray and every instruction give a kernel.

A DeviceTensor is value-free, as at trace time on hardware: a window onto one Allocation
described by geometry only, either strided (first element, element strides) or gathered (a
flat element offset per element, from advanced indexing or a reshape no stride can express).
Shapes and dtypes are ordinary Python values; there are no values to read at all: any
attempt from host Python raises DeviceValueError, so a kernel must compute with instructions.
The values exist only when the traced program is executed (nkisim.execute).

Bounds are checked where memory is touched, not where a view is taken: a slice that
overhangs its tensor becomes a view whose overhanging elements are marked invalid, and an
instruction refuses it unless its mask keeps those elements out (check_access).
"""
from __future__ import annotations

import functools
import math
import numbers

import numpy as np

from . import dtypes
from .alu import lookup_op
from .errors import DeviceValueError, IndexingError, NoSuchNameError, OutOfBoundsError, ShapeError
from .indexing import gather_indices, normalize_key, out_of_bound_message, raise_empty_dimension
from .memory import Allocation
from .running import RUNNING, current_machine
from .trace import Region

_HOST_READ_REMEDY = ("device tensors hold their values on the NeuronCore; compute with nki.isa "
                     "instructions and return an HBM tensor, or use nl.device_print to inspect values")


def _host_read(what: str):
    def deny(self, *args, **kwargs):
        raise DeviceValueError(f"cannot {what} of device tensor {self._label()} from host Python",
                               remedy=_HOST_READ_REMEDY)
    return deny


def integral(value, what: str) -> int:
    """Sizes may be integral floats (e.g. from '/'): accept them, reject anything else."""
    if type(value) is int:          # the common case, before the slower ABC check
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise ShapeError(f"{what} must be an integer, got {value!r}",
                     remedy="use integer arithmetic ('//') for shapes")


def as_shape(shape) -> tuple[int, ...]:
    if type(shape) is tuple and all(type(s) is int for s in shape):
        return shape   # the common case, kept fast
    if isinstance(shape, (numbers.Integral, float)):
        shape = (shape,)
    return tuple(integral(s, "a shape entry") for s in shape)


def checked_shape(shape) -> tuple[int, ...]:
    """A shape the kernel gives for a new tensor (nl.ndarray, nl.zeros, nisa.memset, reshape):
    integral entries, none negative. A negative size would count negative bytes toward on-chip
    capacity while tracing (hiding the tiles a kernel really keeps) and fail only at execution."""
    shape = as_shape(shape)
    for dim, n in enumerate(shape):
        if n < 0:
            raise ShapeError(f"dimension {dim} of shape {list(shape)} is negative ({n})",
                             remedy="a size counts elements: give every dimension a size of 0 or more "
                                    "(check the arithmetic that computes it)")
    return shape


def contiguous_strides(shape: tuple) -> tuple[int, ...]:
    if len(shape) == 2:             # a tile: the common case, kept fast
        return (max(shape[1], 1), 1)
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


class DeviceTensor:
    __slots__ = ("_alloc", "_start", "_strides", "_offsets", "_invalid", "_oob", "shape", "dtype",
                 "par_axis", "_region", "name", "_dyn")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """A NumPy ufunc applied to tiles (np.add(a, b), np.float32(2) * t) is the NKI op of
        the same name, run as an instruction; anything else would read values on the host."""
        op = lookup_op(ufunc)
        if method == "__call__" and op is not None and not kwargs and op.kind in ("binary", "unary"):
            return op(*inputs)
        raise DeviceValueError(f"cannot apply numpy.{ufunc.__name__} to device tensor {self._label()} "
                               "on the host", remedy=_HOST_READ_REMEDY)

    def __init__(self, alloc: Allocation, shape: tuple, *, start: int = 0, strides: tuple | None = None,
                 offsets: np.ndarray | None = None, par_axis: int = 0, name: str = "",
                 dtype: np.dtype | None = None, invalid: np.ndarray | None = None, oob: str = "",
                 dyn: tuple | None = None) -> None:
        self._alloc = alloc
        # (register number, elements per unit): the access moves by the value of a register known
        # only on the device (nkisim.nki06.views, tensor.ap / tensor.select), its start here the
        # access at value 0 (nkisim.sequencer adds the rest when it runs)
        self._dyn = dyn
        self._start = start
        self._offsets = offsets
        self._strides = strides if offsets is None else None
        if offsets is None and strides is None:
            self._strides = contiguous_strides(shape)
        self._invalid = invalid        # bool per element (gathered views only): outside its tensor
        self._oob = oob                # the bounds message for those elements
        self.shape = tuple(shape)
        self.dtype = dtype if dtype is not None else alloc.dtype
        self.par_axis = par_axis
        self._region = None
        self.name = name or alloc.name

    @classmethod
    def whole(cls, alloc: Allocation, strides: tuple) -> "DeviceTensor":
        """DeviceTensor(alloc, alloc.shape): all of a new allocation (an instruction's result
        tile, `strides` its contiguous_strides), its fields set directly: one is made per
        instruction."""
        t = object.__new__(cls)
        t._alloc = alloc
        t._start = 0
        t._offsets = None
        t._strides = strides
        t._invalid = None
        t._oob = ""
        t.shape = alloc.shape
        t.dtype = alloc.dtype
        t.par_axis = 0
        t._region = None
        t.name = alloc.name
        t._dyn = None
        return t

    # ----- what a kernel may ask ------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def buffer(self):
        return self._alloc.buffer

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"<DeviceTensor {self._label()}>"

    def _label(self) -> str:
        name = f"'{self.name}' " if self.name else ""
        return f"{name}{dtypes.name_of(self.dtype)}{list(self.shape)} in {self._alloc.buffer.value}"

    # host reads are refused
    __array__ = _host_read("convert the values to a NumPy array")
    __float__ = _host_read("read a float")
    __int__ = _host_read("read an int")
    __index__ = _host_read("use as an index the value")
    __complex__ = _host_read("read a complex")
    __bool__ = _host_read("take the truth value")
    __iter__ = _host_read("iterate over the values")
    tolist = _host_read("read the values")
    item = _host_read("read a value")
    __array_function__ = _host_read("apply a NumPy function to the values")

    # ----- geometry (for instructions, not for kernels) ---------------------------------------
    def _offset_map(self) -> np.ndarray:
        """Flat element offsets into the allocation, one per element of this tensor."""
        if self._offsets is not None:
            return self._offsets
        offsets = np.full(self.shape, self._start, dtype=np.int64)
        for axis, (n, stride) in enumerate(zip(self.shape, self._strides)):
            if n > 1 and stride:
                shape = [1] * len(self.shape)
                shape[axis] = n
                offsets = offsets + (np.arange(n, dtype=np.int64) * stride).reshape(shape)
        return offsets

    def _offsets_at(self, index: tuple) -> np.ndarray:
        """`self._offset_map()[index]` for one integer index array per dimension, worked out from
        the strides: a gather touches a few rows of a tensor, and the whole map of a large HBM
        input costs more than the rest of the instruction (3 ms a row load of a 256x66x66 input)."""
        if self._offsets is not None or len(index) != len(self.shape):
            return self._offset_map()[index]
        total = np.asarray(self._start, dtype=np.int64)
        for idx, stride in zip(index, self._strides):
            if stride:
                total = total + np.asarray(idx, dtype=np.int64) * stride
        shape = np.broadcast_shapes(*(np.shape(idx) for idx in index))
        return np.ascontiguousarray(np.broadcast_to(total, shape))

    def _strided_gather(self, arrays: tuple) -> tuple[tuple, int, tuple] | None:
        """(shape, start, strides) of an advanced subscript of this strided tensor when each
        index array is affine in the result's coordinates (what nl.arange/nl.mgrid arithmetic
        gives), else None. Each index array is checked at its own small shape (a (128, 1) or
        (1, W) arange), never at the result's; the strides are those affine_form would find in
        the result's offsets, a size-1 axis's 0 included."""
        shape = np.broadcast_shapes(*(np.shape(idx) for idx in arrays))
        if 0 in shape:
            return None
        ndim = len(shape)
        start = self._start
        strides = [0] * ndim
        for idx, stride in zip(arrays, self._strides):
            idx = np.asarray(idx)
            idx = idx.reshape((1,) * (ndim - idx.ndim) + idx.shape)
            first = int(idx.flat[0]) if idx.size else 0
            start += first * stride
            expected = np.full(idx.shape, first, dtype=np.int64)
            for axis, n in enumerate(idx.shape):
                if n > 1:
                    unit = [0] * ndim
                    unit[axis] = 1
                    step = int(idx[tuple(unit)]) - first
                    strides[axis] += step * stride
                    where = [1] * ndim
                    where[axis] = n
                    expected = expected + (np.arange(n, dtype=np.int64) * step).reshape(where)
            if not np.array_equal(expected, idx):
                return None
        return shape, start, tuple(0 if n == 1 else st for n, st in zip(shape, strides))

    def region(self) -> Region:
        if self._region is None:
            self._region = self._make_region()
        return self._region

    def _make_region(self) -> Region:
        alloc = self._alloc
        parts = self.shape[self.par_axis] if (alloc.buffer.on_chip and self.shape) else 1
        item = self.dtype.itemsize
        name = dtypes.name_of(self.dtype)
        if self._offsets is not None:
            affine = affine_form(self._offsets)
            if affine is None:
                offs = self._offsets
                bounds = (int(offs.min()), int(offs.max()) + 1, item) if offs.size else (0, 0, 0)
                return Region(alloc.id, alloc.buffer.text, bounds[0], self.shape, None, item, name, parts,
                              bounds, offsets=offs, dyn=self._dyn)
            start, strides = affine
        else:
            start, strides = self._start, self._strides
        n = len(strides)      # tiles and their slices have 2 to 4 dims: no generator for those
        if n == 2:
            byte_strides = (strides[0] * item, strides[1] * item)
        elif n == 3:
            byte_strides = (strides[0] * item, strides[1] * item, strides[2] * item)
        elif n == 4:
            byte_strides = (strides[0] * item, strides[1] * item, strides[2] * item, strides[3] * item)
        else:
            byte_strides = tuple(s * item for s in strides)
        return Region(alloc.id, alloc.buffer.text, start, self.shape, byte_strides, item, name, parts,
                      dyn=self._dyn)

    def _view(self, shape, *, start=None, strides=None, offsets=None, par_axis=None, invalid=None,
              oob="") -> "DeviceTensor":
        return DeviceTensor(self._alloc, shape, start=self._start if start is None else start, strides=strides,
                            offsets=offsets, par_axis=self.par_axis if par_axis is None else par_axis,
                            name=self.name, dtype=self.dtype, invalid=invalid, oob=oob or self._oob, dyn=self._dyn)

    # ----- indexing ----------------------------------------------------------------------------
    def __getitem__(self, key) -> "DeviceTensor":
        """A view. Fast path: a strided tensor subscripted with in-bounds ints and slices of
        non-negative int bounds and a positive int step (what tiled kernels write, several times
        per instruction); anything else, including every subscript that is refused or overhangs,
        is left to _subscript, which checks it and says what is wrong."""
        strides = self._strides
        shape = self.shape
        if type(key) is not tuple:
            key = (key,)
        if strides is None or len(key) > len(shape):
            return self._subscript(key)
        start = self._start
        par = self.par_axis
        new_shape = []
        new_strides = []
        dropped = 0
        dim = 0
        ints = False
        for k in key:
            size = shape[dim]
            if type(k) is slice:
                step, lo, hi = k.step, k.start, k.stop
                if lo is None:
                    lo = 0
                elif type(lo) is not int or lo < 0:
                    return self._subscript(key)
                if hi is None:
                    hi = size
                elif type(hi) is not int or hi < 0:
                    return self._subscript(key)
                if step is None:                   # step 1: the last index is hi - 1
                    length = hi - lo
                    if length <= 0 or hi > size:   # empty, or overhangs
                        return self._subscript(key)
                    new_strides.append(strides[dim])
                else:
                    if type(step) is not int or step < 1 or (step != 1 and dim == par and self._alloc.buffer.on_chip):
                        return self._subscript(key)
                    length = -(-(hi - lo) // step)
                    if length <= 0 or lo + (length - 1) * step >= size:     # empty, or overhangs
                        return self._subscript(key)
                    new_strides.append(strides[dim] * step)
                new_shape.append(length)
                start += lo * strides[dim]
            elif type(k) is int and 0 <= k < size:
                start += k * strides[dim]
                ints = True
                if dim < par:
                    dropped += 1
            else:
                return self._subscript(key)
            dim += 1
        if ints and self._alloc.buffer.on_chip and SUBSCRIPT_RULES:
            rule = SUBSCRIPT_RULES.get(_dialect())
            if rule is not None:           # the kernel's dialect reads ints on a tile its own way
                return self._subscript(rule(self, key), ruled=True)
        while dim < len(shape):                    # dimensions the subscript leaves out: all of them
            new_shape.append(shape[dim])
            new_strides.append(strides[dim])
            dim += 1
        t = object.__new__(DeviceTensor)           # what _view makes, its fields set directly
        alloc = t._alloc = self._alloc
        t._start = start
        t._offsets = None
        t._strides = tuple(new_strides)
        t._invalid = None
        t._oob = self._oob
        t.shape = tuple(new_shape)
        t.dtype = self.dtype
        t.par_axis = par - dropped if par > dropped else 0
        t._region = None
        t.name = self.name or alloc.name
        t._dyn = self._dyn
        return t

    def _subscript(self, key, ruled: bool = False) -> "DeviceTensor":
        """Any subscript: checked, then a strided view, or a gathered one (advanced indexing, or
        a slice that overhangs, its outside elements marked invalid)."""
        label = self.name or "tensor"
        key, advanced = normalize_key(key, self.shape, label)
        if not ruled and not advanced and self._alloc.buffer.on_chip and SUBSCRIPT_RULES:
            rule = SUBSCRIPT_RULES.get(_dialect())
            if rule is not None and any(type(k) is not slice for k in key):
                key, _ = normalize_key(rule(self, key), self.shape, label)
        if advanced:
            return self._gather(key, label)
        on_chip_par = self.par_axis if self._alloc.buffer.on_chip else None
        dims = []          # per kept dimension: (first, length, step); ints as (index, None, 0)
        overhang = False
        # the view's geometry is worked out in the same pass (used unless a gather is needed):
        # one loop per subscript, plain int checks before the general ones
        self_strides = self._strides
        start = self._start
        shape, strides = [], []
        dropped = 0
        for dim, k in enumerate(key):
            size = self.shape[dim]
            if type(k) is slice:
                step = k.step
                if step is None:
                    step = 1
                else:
                    step = step if type(step) is int else integral(step, "a slice step")
                    if step <= 0:
                        raise IndexingError(f"slice step {step} on dimension {dim} of {label} must be positive")
                    if step != 1 and dim == on_chip_par:
                        raise IndexingError(
                            f"strided access along the partition dimension of {label} (step {step})",
                            remedy="the hardware cannot stride across partitions; slice partitions "
                                   "contiguously and stride along a free dimension instead",
                            code="err_partition_dim_stride_not_supported")
                lo, hi = k.start, k.stop
                lo = 0 if lo is None else (lo if type(lo) is int else integral(lo, "a slice start"))
                hi = size if hi is None else (hi if type(hi) is int else integral(hi, "a slice stop"))
                if lo < 0:
                    lo += size
                if hi < 0:
                    hi += size
                length = -(-(hi - lo) // step)
                if length <= 0:
                    length = 0
                elif lo < 0 or lo + (length - 1) * step >= size:
                    overhang = True
                dims.append((lo, length, step))
                shape.append(length)
                if self_strides is not None:
                    start += lo * self_strides[dim]
                    strides.append(self_strides[dim] * step)
            else:
                index = int(k)
                if index < 0:
                    index += size
                if not 0 <= index < size:
                    overhang = True
                dims.append((index, None, 0))
                if dim < self.par_axis:
                    dropped += 1
                if self_strides is not None:
                    start += index * self_strides[dim]
        par_axis = max(self.par_axis - dropped, 0)
        shape = tuple(shape)
        if overhang or self._offsets is not None:
            return self._gather_basic(dims, shape, par_axis, label)
        return self._view(shape, start=start, strides=tuple(strides), par_axis=par_axis)

    def _gather_basic(self, dims, shape, par_axis, label) -> "DeviceTensor":
        """Slices of a gathered view, or slices that overhang: per-dimension index lists,
        clipped into the tensor, with the overhanging elements marked invalid."""
        index, invalid, oob = [], None, ""
        out_axis = 0
        for dim, ((first, length, step), size) in enumerate(zip(dims, self.shape)):
            if length is None:
                idx = np.asarray(first, dtype=np.int64)
            else:
                where = [1] * len(shape)
                where[out_axis] = length
                idx = (first + step * np.arange(length, dtype=np.int64)).reshape(where)
                out_axis += 1
            bad = (idx < 0) | (idx >= size)
            if bad.any():
                if not oob:
                    oob = out_of_bound_message(label, dim, int(idx.min()), int(idx.max()), size, length is None)
                if size == 0:
                    raise_empty_dimension(out_of_bound_message(label, dim, int(idx.min()), int(idx.max()), 0,
                                                               length is None), dim)
                invalid = bad if invalid is None else (invalid | bad)
                idx = np.clip(idx, 0, max(size - 1, 0))
            index.append(idx)
        offsets = np.broadcast_to(self._offsets_at(tuple(index)), shape)
        if self._invalid is not None:
            inherited = self._invalid[tuple(index)]
            invalid = inherited if invalid is None else (invalid | inherited)
        if invalid is not None:
            invalid = np.ascontiguousarray(np.broadcast_to(invalid, shape))
        return self._view(shape, offsets=np.ascontiguousarray(offsets), par_axis=par_axis, invalid=invalid,
                          oob=oob)

    def _gather(self, key, label) -> "DeviceTensor":
        arrays, bad, oob = gather_indices(key, self.shape, label)
        if bad is None and self._offsets is None and self._invalid is None and len(arrays) == len(self.shape):
            strided = self._strided_gather(arrays)
            if strided is not None:
                shape, start, strides = strided
                return self._view(shape, start=start, strides=strides, par_axis=0)
        offsets = self._offsets_at(arrays)
        invalid = self._invalid[arrays] if self._invalid is not None else None
        if bad is not None:
            bad = np.broadcast_to(bad, offsets.shape)
            invalid = bad if invalid is None else (invalid | bad)
        return self._view(offsets.shape, offsets=offsets, par_axis=0, invalid=invalid, oob=oob)

    def __setitem__(self, key, value) -> None:
        _machine().assign(self[key], value)

    # ----- shape methods -------------------------------------------------------------------------
    def reshape(self, *shape, **kwargs) -> "DeviceTensor":
        if "shape" in kwargs:
            shape = kwargs.pop("shape")
        elif len(shape) == 1 and not isinstance(shape[0], (numbers.Integral, float)):
            shape = shape[0]
        if kwargs:
            raise TypeError(f"reshape() got unexpected keyword arguments {sorted(kwargs)}")
        new_shape = as_shape(shape)
        if new_shape.count(-1) == 1:      # the one size left for NumPy-style inference
            known = math.prod(s for s in new_shape if s != -1)
            new_shape = tuple(self.size // known if s == -1 and known > 0 else s for s in new_shape)
        new_shape = checked_shape(new_shape)
        if math.prod(new_shape) != self.size:
            raise ShapeError(f"cannot reshape {self._label()} ({self.size} elements) into "
                             f"{list(new_shape)} ({math.prod(new_shape)} elements)",
                             remedy="keep the number of elements the same")
        if self._alloc.buffer.on_chip and self.par_axis == 0 and self.shape and new_shape[:1] != self.shape[:1]:
            raise ShapeError(f"reshape of on-chip tile {self._label()} into {list(new_shape)} "
                             "changes its partition dimension",
                             remedy="keep the first (partition) dimension and reshape only the "
                                    "free dimensions; move data across partitions with "
                                    "nisa.nc_transpose or a DMA",
                             code="err_reshape_partition_dim")
        invalid = self._invalid.reshape(new_shape) if self._invalid is not None else None
        if self._offsets is None:
            strides = _reshaped_strides(self.shape, self._strides, new_shape)
            if strides is not None:
                return self._view(new_shape, strides=strides)
        return self._view(new_shape, offsets=self._offset_map().reshape(new_shape), invalid=invalid)

    def view(self, dtype) -> "DeviceTensor":
        dt = dtypes.to_dtype(dtype)
        if self._offsets is not None or dt.itemsize != self.dtype.itemsize:
            raise ShapeError(f".view({dtypes.name_of(dt)}) on {self._label()} is only supported "
                             "for a basic view and a dtype of the same size")
        alloc = self._alloc
        # same bytes, other dtype: share the id (dependencies see one buffer) and keep the
        # original alive (its capacity accounting lasts as long as this view)
        reinterpreted = Allocation(alloc.buffer, alloc.shape, dt, alloc.par_axis, alloc.site, alloc.name,
                                   alloc.is_input, parent=alloc)
        reinterpreted.id = alloc.id
        reinterpreted.written = alloc.written
        return DeviceTensor(reinterpreted, self.shape, start=self._start, strides=self._strides,
                            par_axis=self.par_axis, name=self.name, dtype=dt, dyn=self._dyn)

    def astype(self, dtype) -> "DeviceTensor":
        _refused_in_dialect("astype")
        return _tensor_copy(self, dtype=dtype)

    def broadcast_to(self, shape) -> "DeviceTensor":
        _refused_in_dialect("broadcast_to")
        return _broadcast_to(self, shape=shape)

    def expand_dims(self, axis: int) -> "DeviceTensor":
        _refused_in_dialect("expand_dims")
        axis = integral(axis, "axis")
        shape = list(self.shape)
        where = axis if axis >= 0 else len(shape) + axis + 1
        shape.insert(where, 1)
        if self._offsets is not None:
            invalid = self._invalid.reshape(shape) if self._invalid is not None else None
            return self._view(tuple(shape), offsets=self._offsets.reshape(shape), invalid=invalid)
        strides = list(self._strides)
        strides.insert(where, 0)
        return self._view(tuple(shape), strides=tuple(strides))

    def __getattr__(self, name: str):
        """A method or attribute one dialect's tensors have and the other's do not (NKI 0.6's
        views, registered by its front end): found only when ordinary lookup fails, so no
        tile operation pays for it."""
        found = DIALECT_ATTRIBUTES.get(name)
        if found is None or name.startswith("__"):
            raise AttributeError(f"'DeviceTensor' object has no attribute '{name}'")
        dialect, label, fn, is_property = found
        machine = RUNNING.get()
        if machine is not None and machine.dialect != dialect:
            raise NoSuchNameError(f"tensor.{name} is {label}'s; this kernel is written in another dialect",
                                  remedy="use the tensor methods of the kernel's own dialect (docs/students.md "
                                         "shows both side by side)")
        if is_property:
            return fn(self)
        return functools.partial(fn, self)

    def assert_shape(self, shape) -> "DeviceTensor":
        if tuple(as_shape(shape)) != self.shape:
            raise ShapeError(f"{self._label()} does not have the asserted shape {list(shape)}")
        return self

    # ----- arithmetic lowers to instructions -------------------------------------------------------
    def _binary(self, other, opname: str, reverse: bool = False):
        return _elementwise_binary(opname, other, self) if reverse else _elementwise_binary(opname, self, other)

    def __add__(self, o): return self._binary(o, "add")
    def __radd__(self, o): return self._binary(o, "add", True)
    def __sub__(self, o): return self._binary(o, "subtract")
    def __rsub__(self, o): return self._binary(o, "subtract", True)
    def __mul__(self, o): return self._binary(o, "multiply")
    def __rmul__(self, o): return self._binary(o, "multiply", True)
    def __truediv__(self, o): return self._binary(o, "divide")
    def __rtruediv__(self, o): return self._binary(o, "divide", True)
    def __pow__(self, o): return self._binary(o, "power")
    def __mod__(self, o): return self._binary(o, "mod")
    def __and__(self, o): return self._binary(o, "bitwise_and")
    def __or__(self, o): return self._binary(o, "bitwise_or")
    def __xor__(self, o): return self._binary(o, "bitwise_xor")
    def __lshift__(self, o): return self._binary(o, "left_shift")
    def __rshift__(self, o): return self._binary(o, "right_shift")
    def __lt__(self, o): return self._binary(o, "less")
    def __le__(self, o): return self._binary(o, "less_equal")
    def __gt__(self, o): return self._binary(o, "greater")
    def __ge__(self, o): return self._binary(o, "greater_equal")
    def __eq__(self, o): return self._binary(o, "equal")
    def __ne__(self, o): return self._binary(o, "not_equal")
    __hash__ = object.__hash__

    def __neg__(self):
        return _elementwise_unary("negative", self)

    def __abs__(self):
        return _elementwise_unary("abs", self)

    def __invert__(self):
        return _elementwise_unary("invert", self)

    def _inplace(self, other, opname: str):
        _machine().update_in_place(self, other, opname)
        return self

    def __iadd__(self, o): return self._inplace(o, "add")
    def __isub__(self, o): return self._inplace(o, "subtract")
    def __imul__(self, o): return self._inplace(o, "multiply")
    def __itruediv__(self, o): return self._inplace(o, "divide")


def _machine():
    """The running machine (nkisim.running.current_machine, whose error comes outside a
    kernel), read from the ContextVar directly: `t[...] = x` and `acc += ...` run once per
    instruction."""
    machine = RUNNING.get()
    if machine is None:
        machine = current_machine()
    return machine


# ----- tile operators: t + u, -t, t.astype(dt), t.broadcast_to(shape) -----------------------------
# Each lowers onto an instruction, and the instructions are a layer up (they are made of these
# tensors): nkisim.instructions.language_ops registers the functions at its import, and nkisim
# imports it whenever it is imported (nkisim.runtime, nkisim.program). Module globals, read as
# such once per operator: no import and no lookup on a hot path.

def _unregistered(*args, **kwargs):
    raise RuntimeError("nkisim bug: the tile operators are not registered (nkisim.instructions.language_ops "
                       "registers them at its import)")


_elementwise_binary = _elementwise_unary = _tensor_copy = _broadcast_to = _unregistered


# dialect name -> fn(tensor, key) -> key: how a dialect whose on-chip subscripts keep the dimensions
# ints index (NKI 0.6: nkisim.nki06.views) rewrites them into slices; legacy kernels have none
SUBSCRIPT_RULES: dict = {}


def _dialect() -> str | None:
    machine = RUNNING.get()
    return machine.dialect if machine is not None else None


# dialect name -> {method: what to use instead}: the shared methods a dialect's tensors do not have
REFUSED_METHODS: dict[str, dict[str, str]] = {}


def _refused_in_dialect(method: str) -> None:
    if REFUSED_METHODS:
        remedy = REFUSED_METHODS.get(_dialect(), {}).get(method)
        if remedy is not None:
            raise NoSuchNameError(f"tensor.{method} is not part of the kernel's dialect", remedy=remedy)


# name -> (dialect name, its label, fn(tensor, ...), is a property): what one dialect's tensors have
# beyond the methods both share (nkisim.nki06.views registers NKI 0.6's)
DIALECT_ATTRIBUTES: dict[str, tuple] = {}


def register_dialect_attributes(dialect: str, label: str, methods: dict, properties: dict) -> None:
    for name, fn in methods.items():
        DIALECT_ATTRIBUTES[name] = (dialect, label, fn, False)
    for name, fn in properties.items():
        DIALECT_ATTRIBUTES[name] = (dialect, label, fn, True)


def register_tile_operators(*, elementwise_binary, elementwise_unary, tensor_copy, broadcast_to) -> None:
    """What a tile's operators call: `elementwise_binary(opname, a, b)` for t + u (and the other
    binary operators), `elementwise_unary(opname, t)` for -t, abs(t), ~t, `tensor_copy(t, dtype=)`
    for t.astype, `broadcast_to(t, shape=)` for t.broadcast_to."""
    global _elementwise_binary, _elementwise_unary, _tensor_copy, _broadcast_to
    _elementwise_binary, _elementwise_unary = elementwise_binary, elementwise_unary
    _tensor_copy, _broadcast_to = tensor_copy, broadcast_to


def _reshaped_strides(shape: tuple, strides: tuple, new_shape: tuple) -> tuple | None:
    """Element strides of a no-copy reshape of a strided view, or None when the elements are
    not laid out so that any strides can express the new shape (NumPy decides, on a stand-in
    array that has the geometry and no data)."""
    if not shape or not all(n > 0 for n in shape):
        return contiguous_strides(new_shape)
    stand_in = np.lib.stride_tricks.as_strided(np.empty(1, np.uint8), shape, strides, writeable=False)
    try:
        return np.reshape(stand_in, new_shape, copy=False).strides
    except ValueError:
        return None


def affine_form(offsets: np.ndarray) -> tuple[int, tuple[int, ...]] | None:
    """(start, element strides) when per-element offsets follow a strided layout (what
    nl.arange/nl.mgrid indexing usually gives), else None: a program then carries a few
    integers instead of one offset per element."""
    if offsets.size == 0:
        return None
    start = int(offsets.flat[0])
    strides = []
    for axis, n in enumerate(offsets.shape):
        if n > 1:
            index = [0] * offsets.ndim
            index[axis] = 1
            strides.append(int(offsets[tuple(index)]) - start)
        else:
            strides.append(0)
    expected = np.full(offsets.shape, start, dtype=np.int64)
    for axis, (n, stride) in enumerate(zip(offsets.shape, strides)):
        if n > 1 and stride:
            shape = [1] * offsets.ndim
            shape[axis] = n
            expected = expected + (np.arange(n, dtype=np.int64) * stride).reshape(shape)
    if not np.array_equal(expected, offsets):
        return None
    return start, tuple(strides)


def same_region(a: DeviceTensor, b: DeviceTensor) -> bool:
    """True when two tensors are the very same elements (e.g. `t[k] += x` re-assigning)."""
    if a._alloc.id != b._alloc.id or a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a._offsets is None and b._offsets is None:
        return a._strides == b._strides and a._start == b._start
    return bool(np.array_equal(a._offset_map(), b._offset_map()))


def check_align(value_shape: tuple, target_shape: tuple, what: str, value_label: str,
                target_label: str) -> None:
    """Raise unless a value of `value_shape` can be written to `target_shape` (see align_to)."""
    if value_shape == target_shape:
        return
    align_to(np.broadcast_to(np.zeros((), np.int8), value_shape), value_shape, target_shape, what,
             value_label, target_label)


def align_to(values: np.ndarray, value_shape: tuple, target_shape: tuple, what: str,
             value_label: str, target_label: str) -> np.ndarray:
    """Broadcast `values` to `target_shape` the way tiles broadcast: the partition dimension
    stays first, free dimensions broadcast like NumPy's, from the right. A tile with fewer free
    dims ((P,), (P,1)) is a per-partition value spread over all free dims."""
    if value_shape == target_shape:
        return values
    if len(value_shape) < len(target_shape) and value_shape:
        pad = len(target_shape) - len(value_shape)
        value_shape = value_shape[:1] + (1,) * pad + value_shape[1:]
        values = values.reshape(value_shape)
    try:
        return np.broadcast_to(values, target_shape)
    except ValueError:
        pass
    if math.prod(value_shape) == math.prod(target_shape) and value_shape[:1] == target_shape[:1]:
        # same elements per partition, different free shape: row-major re-view
        return values.reshape(target_shape)
    raise ShapeError(
        f"Illegal assignment destination shape in '{what}': shape {list(target_shape)} of "
        f"{target_label} is smaller than or incompatible with {value_label}{list(value_shape)}",
        remedy="make the destination at least as large as the value, with the same partition "
               "size; only size-1 free dimensions broadcast",
        code="err_store_dst_shape_smaller_than_other_shape")


def check_access(t: DeviceTensor, mask_values, site) -> None:
    """Refuse an access to elements outside `t`'s tensor unless the mask excludes them (an
    instruction's operand with elements marked invalid: see the module's docstring)."""
    touched = t._invalid
    if mask_values is not None:
        try:
            touched = touched & np.broadcast_to(mask_values, touched.shape)
        except ValueError:
            pass
    if touched.any():
        raise_out_of_bounds(t, site)


def raise_out_of_bounds(t: DeviceTensor, site=None) -> None:
    raise OutOfBoundsError(t._oob or f"Out-of-bound access for tensor `{t.name}`",
                           remedy="fix the index range, or restrict the access with mask=",
                           site=site)
