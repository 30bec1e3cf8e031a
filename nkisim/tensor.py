"""Device tensors: what kernel arguments, nl.ndarray and every instruction give a kernel.

A DeviceTensor is a window onto one Allocation: either a NumPy view (basic indexing) or a
set of flat element offsets (advanced indexing, non-contiguous reshape). Shapes and dtypes
are ordinary Python values, as at trace time on hardware; the values are not: any attempt
to read them from host Python raises DeviceValueError, so a kernel cannot compute its
answer with NumPy and must use instructions.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from . import dtypes
from .errors import DeviceValueError, IndexingError, ShapeError
from .indexing import advanced_arrays, check_basic_bounds, normalize_key
from .memory import Allocation, Buffer
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


class DeviceTensor:
    __slots__ = ("_alloc", "_arr", "_offsets", "_start", "shape", "dtype", "par_axis", "_region", "name")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """A NumPy ufunc applied to tiles (np.add(a, b), np.float32(2) * t) is the NKI op of
        the same name, run as an instruction; anything else would read values on the host."""
        from .alu import _lookup
        op = _lookup(ufunc)
        if method == "__call__" and op is not None and not kwargs and op.kind in ("binary", "unary"):
            return op(*inputs)
        raise DeviceValueError(f"cannot apply numpy.{ufunc.__name__} to device tensor {self._label()} "
                               "on the host", remedy=_HOST_READ_REMEDY)

    def __init__(self, alloc: Allocation, arr: np.ndarray | None, offsets: np.ndarray | None,
                 par_axis: int = 0, name: str = "", start: int = 0) -> None:
        self._alloc = alloc
        self._arr = arr
        self._offsets = offsets
        self._start = start      # element offset of a basic view's first element
        self.shape = tuple(arr.shape if arr is not None else offsets.shape)
        self.dtype = alloc.dtype
        self.par_axis = par_axis
        self._region = None
        self.name = name or alloc.name

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

    # ----- storage access for instructions (not for kernels) ----------------------------------
    def _values(self) -> np.ndarray:
        if self._arr is not None:
            return self._arr
        return self._alloc.array.reshape(-1)[self._offsets]

    def _store(self, values) -> None:
        """Write values already shaped for this tensor, rounding to its dtype."""
        out = dtypes.cast(values, self.dtype)
        if self._arr is not None:
            self._arr[...] = out
        else:
            self._alloc.array.reshape(-1)[self._offsets] = out
        self._alloc.written = True

    def _offset_map(self) -> np.ndarray:
        """Flat element offsets into the allocation, one per element of this tensor."""
        if self._offsets is not None:
            return self._offsets
        item = self._alloc.array.itemsize
        offsets = np.full(self.shape, self._start, dtype=np.int64)
        for axis, (n, stride) in enumerate(zip(self._arr.shape, self._arr.strides)):
            shape = [1] * len(self.shape)
            shape[axis] = n
            offsets = offsets + (np.arange(n, dtype=np.int64) * (stride // item)).reshape(shape)
        return offsets

    def region(self) -> Region:
        if self._region is None:
            self._region = self._make_region()
        return self._region

    def _make_region(self) -> Region:
        alloc = self._alloc
        parts = self.shape[self.par_axis] if (alloc.buffer.on_chip and self.shape) else 1
        name = dtypes.name_of(self.dtype)
        if self._arr is not None:
            return Region(alloc.id, alloc.buffer.value, self._start, self.shape, self._arr.strides,
                          self.dtype.itemsize, name, parts)
        offs = self._offsets
        bounds = (int(offs.min()), int(offs.max()) + 1, self.dtype.itemsize) if offs.size else (0, 0, 0)
        return Region(alloc.id, alloc.buffer.value, bounds[0], self.shape, None, self.dtype.itemsize,
                      name, parts, bounds)

    def _view(self, arr=None, offsets=None, par_axis=None, start=None) -> "DeviceTensor":
        return DeviceTensor(self._alloc, arr, offsets, self.par_axis if par_axis is None else par_axis,
                            self.name, self._start if start is None else start)

    # ----- indexing ----------------------------------------------------------------------------
    def __getitem__(self, key) -> "DeviceTensor":
        key, advanced = normalize_key(key, self.shape, self.name or "tensor")
        if advanced:
            arrays = advanced_arrays(key, self.shape, self.name or "tensor")
            return self._view(offsets=self._offset_map()[arrays], par_axis=0)
        par = self.par_axis if self._alloc.buffer.on_chip else None
        check_basic_bounds(key, self.shape, self.name or "tensor", par)
        # integer indices before the partition axis move it left
        dropped = sum(1 for k in key[:self.par_axis] if not isinstance(k, slice))
        par_axis = max(self.par_axis - dropped, 0)
        if self._arr is not None:
            start = self._start
            item = self.dtype.itemsize
            for k, size, stride in zip(key, self.shape, self._arr.strides):
                first = k if not isinstance(k, slice) else k.indices(size)[0]
                if first < 0:
                    first += size
                start += first * (stride // item)
            return self._view(arr=self._arr[key], par_axis=par_axis, start=start)
        return self._view(offsets=self._offsets[key], par_axis=par_axis)

    def __setitem__(self, key, value) -> None:
        from .machine import current_machine
        current_machine().assign(self[key], value)

    # ----- shape methods -------------------------------------------------------------------------
    def reshape(self, *shape, **kwargs) -> "DeviceTensor":
        if "shape" in kwargs:
            shape = kwargs.pop("shape")
        elif len(shape) == 1 and not isinstance(shape[0], (numbers.Integral, float)):
            shape = shape[0]
        if kwargs:
            raise TypeError(f"reshape() got unexpected keyword arguments {sorted(kwargs)}")
        new_shape = as_shape(shape)
        if -1 in new_shape:
            known = math.prod(s for s in new_shape if s != -1)
            new_shape = tuple(self.size // known if s == -1 else s for s in new_shape)
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
        if self._arr is not None:
            try:
                view = self._arr.view()
                view.shape = new_shape   # raises when the view cannot be reshaped without a copy
                return self._view(arr=view)
            except AttributeError:
                pass
        return self._view(offsets=self._offset_map().reshape(new_shape))

    def view(self, dtype) -> "DeviceTensor":
        dt = dtypes.to_dtype(dtype)
        if self._arr is None or dt.itemsize != self.dtype.itemsize:
            raise ShapeError(f".view({dtypes.name_of(dt)}) on {self._label()} is only supported "
                             "for a basic view and a dtype of the same size")
        alloc = self._alloc
        # same bytes, other dtype: share the id (dependencies see one buffer) and keep the
        # original alive (its capacity accounting lasts as long as this view)
        reinterpreted = Allocation(alloc.buffer, alloc.array.view(dt), dt, alloc.par_axis, alloc.site,
                                   alloc.name, alloc.is_input, parent=alloc)
        reinterpreted.id = alloc.id
        reinterpreted.written = alloc.written
        return DeviceTensor(reinterpreted, self._arr.view(dt), None, self.par_axis, self.name, self._start)

    def astype(self, dtype) -> "DeviceTensor":
        from .instructions.vector import tensor_copy
        return tensor_copy(self, dtype=dtype)

    def broadcast_to(self, shape) -> "DeviceTensor":
        from .instructions.language_ops import broadcast_to
        return broadcast_to(self, shape=shape)

    def expand_dims(self, axis: int) -> "DeviceTensor":
        axis = integral(axis, "axis")
        shape = list(self.shape)
        shape.insert(axis if axis >= 0 else len(shape) + axis + 1, 1)
        if self._arr is not None:
            return self._view(arr=self._arr.reshape(shape))
        return self._view(offsets=self._offsets.reshape(shape))

    def assert_shape(self, shape) -> "DeviceTensor":
        if tuple(as_shape(shape)) != self.shape:
            raise ShapeError(f"{self._label()} does not have the asserted shape {list(shape)}")
        return self

    # ----- arithmetic lowers to instructions -------------------------------------------------------
    def _binary(self, other, opname: str, reverse: bool = False):
        from .instructions.language_ops import elementwise_binary
        return elementwise_binary(opname, other, self) if reverse else elementwise_binary(opname, self, other)

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
        from .instructions.language_ops import elementwise_unary
        return elementwise_unary("negative", self)

    def __abs__(self):
        from .instructions.language_ops import elementwise_unary
        return elementwise_unary("abs", self)

    def __invert__(self):
        from .instructions.language_ops import elementwise_unary
        return elementwise_unary("invert", self)

    def _inplace(self, other, opname: str):
        from .machine import current_machine
        current_machine().update_in_place(self, other, opname)
        return self

    def __iadd__(self, o): return self._inplace(o, "add")
    def __isub__(self, o): return self._inplace(o, "subtract")
    def __imul__(self, o): return self._inplace(o, "multiply")
    def __itruediv__(self, o): return self._inplace(o, "divide")


def same_region(a: DeviceTensor, b: DeviceTensor) -> bool:
    """True when two tensors are the very same elements (e.g. `t[k] += x` re-assigning)."""
    if a._alloc.array is not b._alloc.array and a._alloc.id != b._alloc.id:
        return False
    if a.shape != b.shape:
        return False
    if a._arr is not None and b._arr is not None:
        return a._arr.strides == b._arr.strides and a._start == b._start
    return bool(np.array_equal(a._offset_map(), b._offset_map()))


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
