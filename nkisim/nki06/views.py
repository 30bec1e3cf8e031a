"""NKI 0.6's tensor views: the methods and attributes an `NkiTensor` has that the legacy
dialect's tensors do not (`t.ap(...)`, `permute`, `slice`, `select`, `broadcast`, ...).

Every one is a view: same storage, new geometry, no instruction and no cost, as the 0.6
reference says. They are registered on nkisim's one tensor type for kernels of this dialect
(nkisim.tensor.register_dialect_attributes), so the instruction table sees the tiles it always
sees. A strided view keeps strides; a gathered one (an overhanging slice, advanced indexing)
carries its element offsets, and each method moves those the same way."""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import dtypes as _dt
from ..dialects import CURRENT
from ..errors import NotSimulatedError, OutOfBoundsError, ShapeError
from ..running import current_machine
from ..tensor import REFUSED_METHODS, SUBSCRIPT_RULES, DeviceTensor, register_dialect_attributes
from .registers import VirtualRegister, number_of


def _int(value, what: str, method: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
        raise ShapeError(f"{what} of tensor.{method} must be an int known when the kernel is traced, got "
                         f"{type(value).__name__}", code="err_expected_constant_value")
    return int(value)


def _dim(t: DeviceTensor, dim, method: str) -> int:
    d = _int(dim, "dim", method)
    d = d + t.ndim if d < 0 else d
    if not 0 <= d < t.ndim:
        raise ShapeError(f"dim {dim} of tensor.{method} is out of range for {t._label()}")
    return d


def _on_chip(t: DeviceTensor) -> bool:
    return t._alloc.buffer.on_chip


def _not_partition(t: DeviceTensor, d: int, method: str) -> None:
    if _on_chip(t) and d == 0:
        raise ShapeError(f"tensor.{method} cannot change the partition dimension (dim 0) of on-chip "
                         f"{t._label()}", remedy="apply it to a free dimension (1 or later); move data across "
                                                 "partitions with nisa.nc_transpose or a DMA",
                         code="err_partition_dim_view")


def _geometry(t: DeviceTensor, shape: tuple, strides: tuple | None = None, start: int | None = None,
              offsets: np.ndarray | None = None, invalid: np.ndarray | None = None) -> DeviceTensor:
    return t._view(tuple(shape), start=start, strides=None if strides is None else tuple(strides),
                   offsets=offsets, par_axis=0, invalid=invalid)


def _moved(t: DeviceTensor, shape: tuple, strides: tuple, array_op) -> DeviceTensor:
    """The view of `t` with new `shape`/`strides` (a strided view), or its offsets and invalid
    marks moved by `array_op` (a gathered one)."""
    if t._offsets is None:
        return _geometry(t, shape, strides, start=t._start)
    invalid = None if t._invalid is None else np.ascontiguousarray(array_op(t._invalid))
    return _geometry(t, shape, offsets=np.ascontiguousarray(array_op(t._offsets)), invalid=invalid)


# ----- attributes --------------------------------------------------------------------------------
def strides(t: DeviceTensor) -> tuple:
    """Element strides of each dimension (0: broadcast)."""
    if t._offsets is not None:
        raise NotSimulatedError(f"{t._label()} is a gathered view (an overhanging slice or advanced "
                                "index), which has no strides", remedy="slice within the tensor's bounds")
    return tuple(t._strides)


def offset(t: DeviceTensor) -> int:
    """The view's first element, as an element offset into its storage."""
    if t._offsets is not None:
        return int(t._offsets.flat[0]) if t._offsets.size else 0
    return int(t._start)


def get_pattern(t: DeviceTensor) -> list:
    return [[s, n] for s, n in zip(strides(t), t.shape)]


def is_contiguous(t: DeviceTensor) -> bool:
    """Row-major dense free dimensions (on chip the partition dimension does not count)."""
    if t._offsets is not None:
        return False
    dims = list(zip(t.shape, t._strides))
    if _on_chip(t):
        dims = dims[1:]
    expected = 1
    for n, s in reversed(dims):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


def is_indirect(t: DeviceTensor) -> bool:
    return False


# ----- methods -----------------------------------------------------------------------------------
def permute(t: DeviceTensor, dims) -> DeviceTensor:
    order = tuple(_int(d, "each of dims", "permute") for d in dims)
    order = tuple(d + t.ndim if d < 0 else d for d in order)
    if sorted(order) != list(range(t.ndim)):
        raise ShapeError(f"dims {list(dims)} of tensor.permute are not a permutation of the {t.ndim} dimensions "
                         f"of {t._label()}")
    if _on_chip(t) and order[0] != 0:
        _not_partition(t, 0, "permute")
    shape = tuple(t.shape[d] for d in order)
    st = tuple(t._strides[d] for d in order) if t._offsets is None else None
    return _moved(t, shape, st, lambda a: np.transpose(a, order))


def broadcast(t: DeviceTensor, dim, size) -> DeviceTensor:
    d = _dim(t, dim, "broadcast")
    n = _int(size, "size", "broadcast")
    if t.shape[d] != 1:
        raise ShapeError(f"tensor.broadcast({d}, {n}): dimension {d} of {t._label()} has size {t.shape[d]}, not 1")
    if n < 1:
        raise ShapeError(f"size {n} of tensor.broadcast must be at least 1")
    _not_partition(t, d, "broadcast")
    shape = t.shape[:d] + (n,) + t.shape[d + 1:]
    st = None if t._offsets is not None else t._strides[:d] + (0,) + t._strides[d + 1:]
    return _moved(t, shape, st, lambda a: np.broadcast_to(a, shape))


def expand_dim(t: DeviceTensor, dim) -> DeviceTensor:
    d = _int(dim, "dim", "expand_dim")
    d = d + t.ndim + 1 if d < 0 else d
    if not 0 <= d <= t.ndim:
        raise ShapeError(f"dim {dim} of tensor.expand_dim is out of range for {t._label()}")
    _not_partition(t, d, "expand_dim")
    shape = t.shape[:d] + (1,) + t.shape[d:]
    st = None if t._offsets is not None else t._strides[:d] + (0,) + t._strides[d:]
    return _moved(t, shape, st, lambda a: a.reshape(shape))


def squeeze_dim(t: DeviceTensor, dim) -> DeviceTensor:
    d = _dim(t, dim, "squeeze_dim")
    if t.shape[d] != 1:
        raise ShapeError(f"tensor.squeeze_dim({d}): dimension {d} of {t._label()} has size {t.shape[d]}, not 1")
    _not_partition(t, d, "squeeze_dim")
    shape = t.shape[:d] + t.shape[d + 1:]
    st = None if t._offsets is not None else t._strides[:d] + t._strides[d + 1:]
    return _moved(t, shape, st, lambda a: a.reshape(shape))


def reshape_dim(t: DeviceTensor, dim, shape) -> DeviceTensor:
    """Split dimension `dim` into `shape` (one entry may be -1)."""
    d = _dim(t, dim, "reshape_dim")
    sizes = [_int(n, "each size", "reshape_dim") for n in shape]
    if sizes.count(-1) > 1 or any(n < 1 and n != -1 for n in sizes):
        raise ShapeError(f"shape {list(shape)} of tensor.reshape_dim: sizes are positive, with at most one -1")
    known = math.prod(n for n in sizes if n != -1)
    if -1 in sizes:
        sizes[sizes.index(-1)] = t.shape[d] // known if known and t.shape[d] % known == 0 else 0
    if math.prod(sizes) != t.shape[d]:
        raise ShapeError(f"tensor.reshape_dim({d}, {list(shape)}): dimension {d} of {t._label()} has "
                         f"{t.shape[d]} elements, the new shape {math.prod(sizes)}")
    if len(sizes) != 1:
        _not_partition(t, d, "reshape_dim")
    new_shape = t.shape[:d] + tuple(sizes) + t.shape[d + 1:]
    st = None
    if t._offsets is None:
        inner = [math.prod(sizes[i + 1:]) * t._strides[d] for i in range(len(sizes))]
        st = t._strides[:d] + tuple(inner) + t._strides[d + 1:]
    return _moved(t, new_shape, st, lambda a: a.reshape(new_shape))


def flatten_dims(t: DeviceTensor, start_dim, end_dim) -> DeviceTensor:
    lo, hi = _dim(t, start_dim, "flatten_dims"), _dim(t, end_dim, "flatten_dims")
    if lo > hi:
        raise ShapeError(f"tensor.flatten_dims({start_dim}, {end_dim}): start_dim comes after end_dim")
    if _on_chip(t) and lo == 0 and hi > 0:
        _not_partition(t, 0, "flatten_dims")
    merged = math.prod(t.shape[lo:hi + 1])
    shape = t.shape[:lo] + (merged,) + t.shape[hi + 1:]
    st = None
    if t._offsets is None:
        for i in range(lo, hi):
            if t.shape[i + 1] != 1 and t.shape[i] != 1 and t._strides[i] != t._strides[i + 1] * t.shape[i + 1]:
                raise ShapeError(f"tensor.flatten_dims({lo}, {hi}) on {t._label()}: the dimensions are not "
                                 f"contiguous with one another (strides {list(t._strides[lo:hi + 1])})",
                                 remedy="flatten only dimensions that are dense one inside the other")
        inner = [s for n, s in zip(t.shape[lo:hi + 1], t._strides[lo:hi + 1]) if n != 1]
        st = t._strides[:lo] + ((inner[-1] if inner else 1),) + t._strides[hi + 1:]
    return _moved(t, shape, st, lambda a: a.reshape(shape))


def slice_(t: DeviceTensor, dim, start, end, step=1) -> DeviceTensor:
    d = _dim(t, dim, "slice")
    lo, hi, st = _int(start, "start", "slice"), _int(end, "end", "slice"), _int(step, "step", "slice")
    if not (0 <= lo < hi <= t.shape[d]) or st < 1:
        raise OutOfBoundsError(f"tensor.slice({d}, {lo}, {hi}, {st}) on {t._label()}: needs "
                               f"0 <= start < end <= {t.shape[d]} and step >= 1",
                               remedy="slice within the dimension")
    key = [slice(None)] * t.ndim
    key[d] = slice(lo, hi, st)
    return t[tuple(key)]


def select(t: DeviceTensor, dim, index) -> DeviceTensor:
    """Index `dim` at `index`, removing it: an int, or a register: one whose value nkisim knows
    at each traced iteration (a loop's counter), or one known only on the device (the access
    then moves by its value when the sequencer runs it: nkisim.sequencer)."""
    d = _dim(t, dim, "select")
    if isinstance(index, VirtualRegister) and index.runtime:
        if _on_chip(t) and d == 0:
            _not_partition(t, 0, "select")
        if t._offsets is not None:
            raise NotSimulatedError(f"tensor.select with a run-time register on {t._label()}, a gathered view",
                                    remedy="select on a strided view (a slice within the tensor's bounds)")
        shape = t.shape[:d] + t.shape[d + 1:]
        view = _geometry(t, shape, t._strides[:d] + t._strides[d + 1:], start=t._start)
        view._dyn = _moved_by(t, index, t._strides[d], "tensor.select")
        return view
    if isinstance(index, VirtualRegister):
        if _on_chip(t) and d == 0:
            _not_partition(t, 0, "select")
        i = index.traced_value("tensor.select")
    elif isinstance(index, DeviceTensor):
        raise NotSimulatedError("tensor.select with a tensor index reads the index at run time, which "
                                "nkisim's static programs cannot express",
                                remedy="select with an int, or a fori_loop/dynamic_range register")
    else:
        i = _int(index, "index", "select")
    if not -t.shape[d] <= i < t.shape[d]:
        raise OutOfBoundsError(f"tensor.select({d}, {i}) on {t._label()}: index out of range "
                               f"[0, {t.shape[d]})", remedy="select an index within the dimension")
    i = i + t.shape[d] if i < 0 else i
    shape = t.shape[:d] + t.shape[d + 1:]
    if t._offsets is None:
        return _geometry(t, shape, t._strides[:d] + t._strides[d + 1:], start=t._start + i * t._strides[d])
    take = (lambda a: np.take(a, i, axis=d))
    invalid = None if t._invalid is None else np.ascontiguousarray(take(t._invalid))
    return _geometry(t, shape, offsets=np.ascontiguousarray(take(t._offsets)), invalid=invalid)


def ap(t: DeviceTensor, pattern, offset=None, scalar_offset=None, vector_offset=None, indirect_dim=0,
       dtype=None) -> DeviceTensor:
    """A physical access pattern over the view's storage: [[stride, count], ...] outer to inner,
    from the view's own offset (plus `offset`), the view's shape and strides set aside."""
    if vector_offset is not None:
        raise NotSimulatedError("tensor.ap(vector_offset=...) reads per-partition offsets at run time, which "
                                "nkisim's static programs cannot express", remedy="use static offsets")
    if dtype is not None and _dt.to_dtype(dtype) != t.dtype:
        raise NotSimulatedError("tensor.ap(dtype=...) reinterpreting storage as another dtype is not simulated "
                                "by nkisim", remedy="access the tensor in its own dtype, or reinterpret with "
                                                    "tensor.view(dtype) of the same size")
    try:
        pairs = [(int(s), int(n)) for s, n in pattern]
    except (TypeError, ValueError):
        raise ShapeError(f"'pattern' of tensor.ap must be a list of [stride, count] pairs, got {pattern!r}",
                         code="err_expected_index_expression") from None
    if not pairs or any(n < 1 for _, n in pairs):
        raise ShapeError(f"'pattern' of tensor.ap needs [stride, count] pairs with count >= 1, got {pattern!r}")
    base = globals()["offset"](t) + (0 if offset is None else _int(offset, "offset", "ap"))
    dyn = t._dyn
    if scalar_offset is not None:
        if not isinstance(scalar_offset, VirtualRegister):
            raise NotSimulatedError("tensor.ap(scalar_offset=<tensor>) reads the offset from memory at run time, "
                                    "which nkisim's static programs cannot express",
                                    remedy="use a fori_loop/dynamic_range register or a static offset")
        d = _int(indirect_dim, "indirect_dim", "ap")
        alloc_shape = t._alloc.shape
        if not 0 <= d < len(alloc_shape):
            raise ShapeError(f"indirect_dim {d} of tensor.ap is out of range for the storage {list(alloc_shape)}")
        if scalar_offset.runtime:        # moved when it runs; checked here as the access at 0
            dyn = _moved_by(t, scalar_offset, math.prod(alloc_shape[d + 1:]), "tensor.ap")
        else:
            base += scalar_offset.traced_value("tensor.ap") * math.prod(alloc_shape[d + 1:])
    alloc = t._alloc
    size = alloc.size
    shape = tuple(n for _, n in pairs)
    st = tuple(s for s, _ in pairs)
    if alloc.buffer.on_chip:
        per_partition = size // alloc.shape[0] if alloc.shape else 1
        if st[0] != per_partition:
            raise ShapeError(f"the first pair of tensor.ap's pattern on on-chip {t._label()} is the partition "
                             f"dimension: its stride must be the storage's {per_partition} elements a partition, "
                             f"got {st[0]}", remedy=f"start the pattern with [{per_partition}, partitions]",
                             code="err_ap_partition_stride")
        first, within = divmod(base, per_partition)
        low = within + sum(min(0, s * (n - 1)) for s, n in pairs[1:])
        high = within + sum(max(0, s * (n - 1)) for s, n in pairs[1:])
        if first < 0 or first + shape[0] > alloc.shape[0] or low < 0 or high >= per_partition:
            raise OutOfBoundsError(f"tensor.ap({pattern!r}) reaches outside {t._label()}'s storage "
                                   f"({alloc.shape[0]} partitions of {per_partition} elements)",
                                   remedy="keep the pattern within the storage")
    else:
        low = base + sum(min(0, s * (n - 1)) for s, n in pairs)
        high = base + sum(max(0, s * (n - 1)) for s, n in pairs)
        if low < 0 or high >= size:
            raise OutOfBoundsError(f"tensor.ap({pattern!r}) reaches outside {t._label()}'s storage of {size} elements",
                                   remedy="keep the pattern within the storage")
    return DeviceTensor(alloc, shape, start=base, strides=st, par_axis=0, name=t.name, dtype=t.dtype, dyn=dyn)


def _moved_by(t: DeviceTensor, register: VirtualRegister, unit: int, where: str) -> tuple:
    """(register number, unit): the access moves by the register's run-time value times `unit`
    elements. One run-time register per access (the sequencer adds one offset)."""
    if t._dyn is not None:
        raise NotSimulatedError(f"{where} moves {t._label()} by a second run-time register: nkisim moves an "
                                "access by one run-time register", remedy="address with one run-time register "
                                "per access (a loop counter, or one loaded offset)", code="err_register_runtime")
    return (number_of(current_machine(), register), int(unit))


def keep_dims(t: DeviceTensor, key: tuple) -> tuple:
    """NKI 0.6's subscript of an on-chip tensor, as slices: an int on the partition dimension keeps
    it (size 1), and ints on free dimensions drop them unless fewer than two dimensions would be
    left, when the last of them stays (size 1): t(64, 64, 64)[0, 0, 10] is (1, 1), t[:, 0, 10] is
    (64, 1). (An HBM subscript drops every int-indexed dimension, as the legacy one does.)"""
    key = tuple(key) + (slice(None),) * (t.ndim - len(key))
    out = list(key)

    def as_slice(d: int) -> None:
        k, size = int(out[d]), t.shape[d]
        k = k + size if k < 0 else k
        if 0 <= k < size:
            out[d] = slice(k, k + 1)
    free_ints = [d for d, k in enumerate(key) if d > 0 and type(k) is not slice]
    if type(key[0]) is not slice:
        as_slice(0)
    if free_ints and t.ndim - len(free_ints) < 2:
        as_slice(free_ints[-1])
    return tuple(out)


def _not_simulated(method: str, remedy: str):
    def refuse(t, *args, **kwargs):
        raise NotSimulatedError(f"tensor.{method} is not simulated by nkisim", remedy=remedy)
    refuse.__name__ = method
    return refuse


register_dialect_attributes(
    CURRENT.name, CURRENT.label,
    methods={"permute": permute, "broadcast": broadcast, "expand_dim": expand_dim, "squeeze_dim": squeeze_dim,
             "reshape_dim": reshape_dim, "flatten_dims": flatten_dims, "slice": slice_, "select": select,
             "ap": ap, "get_pattern": get_pattern, "is_contiguous": is_contiguous, "is_indirect": is_indirect,
             "reinterpret_cast": lambda t, dtype: t.view(dtype),
             "rearrange": _not_simulated("rearrange", "compose tensor.permute, tensor.reshape_dim and "
                                                      "tensor.flatten_dims"),
             "vector_select": _not_simulated("vector_select", "select with an int, or a fori_loop register"),
             "indirect": _not_simulated("indirect", "tensor indirection runs on Trainium3 (NeuronCore-v4), which "
                                                    "nkisim does not model yet")},
    properties={"strides": strides, "offset": offset})
SUBSCRIPT_RULES[CURRENT.name] = keep_dims
REFUSED_METHODS[CURRENT.name] = {
    "astype": "NKI 0.6 tensors have no .astype: cast with nisa.tensor_copy(dst=tile_of_new_dtype, src=t)",
    "broadcast_to": "NKI 0.6 tensors have no .broadcast_to: use t.broadcast(dim, size) on a size-1 free dimension",
    "expand_dims": "NKI 0.6 tensors have t.expand_dim(dim) (or nl.expand_dims(t, axis))",
}
