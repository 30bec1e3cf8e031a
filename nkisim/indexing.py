"""Index expressions (nl.arange, nl.mgrid and affine arithmetic on them) and the checks a
subscript must pass before it touches memory: bounds, partition striding, and no mixing of
basic and advanced indexing."""
from __future__ import annotations

import numbers
import operator

import numpy as np

from .errors import IndexingError, OutOfBoundsError


class IndexExpr:
    """An integer index pattern (what nl.arange / nl.mgrid give), evaluated eagerly."""

    __slots__ = ("values",)
    __array_ufunc__ = None  # keep NumPy from treating it as an array operand

    def __init__(self, values) -> None:
        self.values = np.asarray(values, dtype=np.int64)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.values.shape

    @property
    def ndim(self) -> int:
        return self.values.ndim

    def __getitem__(self, key) -> "IndexExpr":
        # `nl.arange(128)[:, None]` gives the expression a 2-D shape
        return IndexExpr(self.values[key])

    def _combine(self, other, op, reverse=False):
        rhs = other.values if isinstance(other, IndexExpr) else other
        if not isinstance(rhs, (np.ndarray, numbers.Integral)):
            return NotImplemented
        lhs = self.values
        return IndexExpr(op(rhs, lhs) if reverse else op(lhs, rhs))

    def __add__(self, o): return self._combine(o, operator.add)
    def __radd__(self, o): return self._combine(o, operator.add, True)
    def __sub__(self, o): return self._combine(o, operator.sub)
    def __rsub__(self, o): return self._combine(o, operator.sub, True)
    def __mul__(self, o): return self._combine(o, operator.mul)
    def __rmul__(self, o): return self._combine(o, operator.mul, True)
    def __floordiv__(self, o): return self._combine(o, operator.floordiv)
    def __mod__(self, o): return self._combine(o, operator.mod)
    def __neg__(self): return IndexExpr(-self.values)

    def _compare(self, other, op):
        rhs = other.values if isinstance(other, IndexExpr) else other
        return Predicate(op(self.values, rhs))

    def __lt__(self, o): return self._compare(o, operator.lt)
    def __le__(self, o): return self._compare(o, operator.le)
    def __gt__(self, o): return self._compare(o, operator.gt)
    def __ge__(self, o): return self._compare(o, operator.ge)

    def __eq__(self, o): return self._compare(o, operator.eq)

    def __ne__(self, o):
        raise IndexingError("'!=' is not supported in index predicates",
                            remedy="combine '<' and '>' predicates with '&'",
                            code="err_mask_not_equal_not_supported")

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"IndexExpr(shape={self.shape})"


class Predicate:
    """A boolean pattern from comparing index expressions (for masks and affine_select)."""

    __slots__ = ("values",)

    def __init__(self, values) -> None:
        self.values = np.asarray(values, dtype=bool)

    def __and__(self, other: "Predicate") -> "Predicate":
        return Predicate(self.values & other.values)

    def __or__(self, other):
        raise IndexingError("'|' is not supported in index predicates",
                            remedy="use '&' of comparisons, or nl.where on tiles",
                            code="err_logic_or_not_supported")

    def __bool__(self):
        raise IndexingError("an index predicate has no single truth value",
                            remedy="combine predicates with '&', not 'and'",
                            code="err_unsupported_expression_in_mask")


def kept_box(mask, shape: tuple) -> tuple[slice, ...] | None:
    """One slice per dimension of `shape` when the elements `mask` (a Predicate, or a program's
    bool array) keeps are exactly a box (what comparisons of nl.arange/nl.mgrid along single axes
    combined with '&' give), else None; None too when it keeps nothing or does not fit `shape`
    (the instruction then says so)."""
    try:
        values = np.broadcast_to(mask.values if isinstance(mask, Predicate) else mask, shape)
    except ValueError:
        return None
    box = []
    for axis in range(len(shape)):
        kept = np.flatnonzero(values.any(axis=tuple(a for a in range(len(shape)) if a != axis)))
        if kept.size == 0 or kept.size != kept[-1] + 1 - kept[0]:
            return None
        box.append(slice(int(kept[0]), int(kept[-1]) + 1))
    inside = int(np.prod([b.stop - b.start for b in box]))
    return tuple(box) if int(np.count_nonzero(values)) == inside else None


class MGrid:
    """Result of nl.mgrid[...]: unpack it, or use .p, .x, .y, .z."""

    def __init__(self, exprs: list[IndexExpr]) -> None:
        self._exprs = exprs

    def __iter__(self):
        return iter(self._exprs)

    def __len__(self) -> int:
        return len(self._exprs)

    def __getitem__(self, i: int) -> IndexExpr:
        return self._exprs[i]

    def _axis(self, i: int) -> IndexExpr:
        if i >= len(self._exprs):
            raise IndexingError(f"this mgrid has {len(self._exprs)} dimensions")
        return self._exprs[i]

    p = property(lambda self: self._axis(0))
    x = property(lambda self: self._axis(1))
    y = property(lambda self: self._axis(2))
    z = property(lambda self: self._axis(3))


class _MGridMaker:
    def __getitem__(self, key) -> MGrid:
        if not isinstance(key, tuple):
            key = (key,)
        for k in key:
            if not isinstance(k, slice) or (k.step is not None and not isinstance(k.step, numbers.Integral)):
                raise IndexingError("nl.mgrid takes integer slices such as nl.mgrid[0:128, 0:512]")
        grids = np.mgrid[key]
        if len(key) == 1:
            grids = grids[None]
        return MGrid([IndexExpr(g) for g in grids])


mgrid = _MGridMaker()


def arange(*args) -> IndexExpr:
    return IndexExpr(np.arange(*[_int_arg(a) for a in args]))


def ds(start, size) -> slice:
    """nl.ds(start, size): the `size` elements from `start`. NKI treats it as a slice wherever
    it appears in a subscript (basic indexing), so it is the slice start:start+size."""
    from .errors import NotSimulatedError
    if isinstance(start, IndexExpr):
        raise IndexingError("nl.ds takes an integer start (a constant or an expression of loop "
                            "indices), not an nl.arange/nl.mgrid pattern",
                            remedy="index with the pattern itself, e.g. t[i_p, i_f], or give nl.ds "
                                   "an integer start such as nl.ds(i * 128, 128)",
                            code="err_tensor_index_not_supported")
    if not _is_integral(start):
        if type(start).__name__ == "DeviceTensor":
            raise NotSimulatedError("nl.ds with a start read from a tensor at run time (an indirect, "
                                    "runtime-valued window) is not simulated by nkisim",
                                    remedy="use a start computed in Python from loop indices, or grade "
                                           "this kernel on Trainium hardware")
        raise IndexingError(f"nl.ds start must be an integer, got {start!r}",
                            remedy="use integer arithmetic ('//') for the start",
                            code="err_tensor_index_not_supported")
    if not _is_integral(size) or int(size) < 1:
        raise IndexingError(f"nl.ds size must be a positive integer known when the kernel is built, "
                            f"got {size!r}", remedy="pass the window length as a Python int",
                            code="err_tensor_index_not_supported")
    start, size = int(start), int(size)
    if start < 0:
        raise OutOfBoundsError(f"nl.ds({start}, {size}) starts before index 0",
                               remedy="a window's start must be 0 or more; fix the start expression")
    return slice(start, start + size)


def _is_integral(value) -> bool:
    return isinstance(value, numbers.Integral) or (isinstance(value, float) and value.is_integer())


def _int_arg(value) -> int:
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise IndexingError(f"expected an integer, got {value!r}")


def normalize_key(key, shape: tuple[int, ...], name: str) -> tuple[tuple, bool]:
    """Expand `key` to one entry per dimension. Returns (key, is_advanced)."""
    if not isinstance(key, tuple):
        key = (key,)
    if len(key) <= len(shape) and all(type(k) is slice or type(k) is int for k in key):
        # the common case (ints and slices only): what every check below would pass
        return key + (slice(None),) * (len(shape) - len(key)), False
    n_ellipsis = sum(1 for k in key if k is Ellipsis)
    if n_ellipsis > 1:
        raise IndexingError("an index can only have a single ellipsis ('...')")
    if n_ellipsis:
        i = next(i for i, k in enumerate(key) if k is Ellipsis)
        fill = len(shape) - (len(key) - 1)
        key = key[:i] + (slice(None),) * max(fill, 0) + key[i + 1:]
    if len(key) > len(shape):
        raise IndexingError(f"too many indices for tensor {name}{list(shape)}: {len(key)} given, "
                            f"{len(shape)} dimensions")
    advanced = any(isinstance(k, IndexExpr) for k in key)
    for k in key:
        if k is None:
            raise IndexingError("None/np.newaxis is not supported when indexing a tensor",
                                remedy="use .reshape() or .expand_dims() instead")
        if not isinstance(k, (slice, IndexExpr, numbers.Integral)) and not (
                isinstance(k, float) and k.is_integer()):
            kind = type(k).__name__
            remedy = ("indirect (runtime-valued) indexing is not supported by nkisim"
                      if kind == "DeviceTensor" else "index with ints, slices or nl.mgrid expressions")
            raise IndexingError(f"unsupported index of type {kind} for tensor {name}", remedy=remedy,
                                code="err_tensor_index_not_supported")
    if advanced and any(isinstance(k, slice) for k in key):
        raise IndexingError("Mixing basic tensor indexing and advanced tensor indexing is not supported.",
                            remedy="index every dimension with nl.mgrid/nl.arange expressions, or use "
                                   "only slices and integers",
                            code="err_unsupported_mixing_basic_advanced_tensor_indexing")
    key = tuple(int(k) if isinstance(k, float) else k for k in key)
    key = key + (slice(None),) * (len(shape) - len(key)) if not advanced else key
    return key, advanced


def out_of_bound_message(name: str, dim: int, lo: int, hi: int, size: int, single: bool) -> str:
    if single:
        return (f"Out-of-bound access for tensor `{name}` on dimension {dim}: index {lo} "
                f"exceed dimension size of {size}")
    return (f"Out-of-bound access for tensor `{name}` on dimension {dim}: index range "
            f"[{lo}, {hi}] exceed dimension size of {size}")


def raise_empty_dimension(message: str, dim: int) -> None:
    """An index into a size-0 dimension: no element of it exists, so no mask can make the
    access valid; said at the subscript (clipping the index into the dimension is impossible)."""
    raise OutOfBoundsError(message, remedy=f"dimension {dim} has no elements: give the tensor at least one "
                                             "element along it, or skip the access when its size is 0")


def gather_indices(key: tuple, shape: tuple[int, ...], name: str) -> tuple[tuple, np.ndarray | None, str]:
    """Per-dimension index arrays of an advanced subscript, clipped into the tensor, with which
    elements fell outside it and the bounds message for them: bounds are the business of the
    instruction that touches the elements (a mask may keep them out), not of the subscript."""
    arrays, bad, oob = [], None, ""
    for dim, (k, size) in enumerate(zip(key, shape)):
        if isinstance(k, IndexExpr):
            if k.ndim < 2:
                raise IndexingError(
                    f"indexing dimension {dim} of {name} with 1d arange is not supported",
                    remedy="give it a 2-D shape, e.g. nl.arange(n)[:, None] for the partition "
                           "dimension and nl.arange(m)[None, :] for a free dimension",
                    code="err_1d_arange_not_supported")
            vals = k.values
        else:
            vals = np.asarray(int(k), dtype=np.int64)
        outside = (vals < 0) | (vals >= size)
        if outside.any():
            if not oob:
                oob = out_of_bound_message(name, dim, int(vals.min()), int(vals.max()), size, vals.ndim == 0)
            if size == 0:
                raise_empty_dimension(out_of_bound_message(name, dim, int(vals.min()), int(vals.max()), 0,
                                                           vals.ndim == 0), dim)
            bad = outside if bad is None else (bad | outside)
            vals = np.clip(vals, 0, max(size - 1, 0))
        arrays.append(vals)
    return tuple(arrays), bad, oob
