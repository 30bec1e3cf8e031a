"""nki.language functions, each lowered onto the registered nki.isa instructions (so every
trace opcode is an ISA instruction with a cost rule)."""
from __future__ import annotations

import numbers
import warnings

import numpy as np

from .. import dtypes
from ..alu import OPS, NkiOp, binary_op, reduce_op, register_op_call
from ..dialects import CURRENT, REMOVED_MASK
from ..errors import (ArgumentError, HardwareLimitError, MemorySpaceError, NotSimulatedError, ShapeError,
                      UnsupportedOperationError)
from ..indexing import Predicate
from ..memory import Buffer
from ..platforms import current_rules
from ..registry import instruction
from ..running import current_machine
from ..source import user_site
from ..tensor import DeviceTensor, check_align, checked_shape, register_tile_operators
from ..trace import Engine
from .common import ANY_HBM, ON_CHIP, SBUF_ONLY, broadcast_shape, number, operand, out_dtype
from .dma import dma_move
from .tensor_engine import nc_matmul, nc_transpose
from .vector import memset, normalize_axes, reduced_shape, tensor_copy, tensor_reduce, tensor_scalar, tensor_tensor
from .scalar import activation


class BlockDimensionWarning(UserWarning):
    """Leading block dimensions (nl.par_dim not first) are deprecated in NKI."""


class ParDim(int):
    """nl.par_dim(n): marks which entry of a shape is the partition dimension."""


def par_dim(n) -> ParDim:
    return ParDim(int(n))


# ----- allocation ------------------------------------------------------------------------------

def _buffer(buffer) -> Buffer:
    if buffer is None:
        return Buffer.SBUF
    if isinstance(buffer, Buffer):
        return buffer
    from ..direct_alloc import DirectAllocator      # ncc.sbuf/psum.alloc, mod_alloc: Machine.allocate places it
    if isinstance(buffer, DirectAllocator):
        return buffer
    raise MemorySpaceError(f"unknown buffer {buffer!r}",
                           remedy="use nl.sbuf, nl.psum, nl.hbm, nl.private_hbm or nl.shared_hbm")


def _partition_axis(shape, buffer: Buffer) -> int:
    marked = [i for i, s in enumerate(shape) if isinstance(s, ParDim)]
    if not marked or not buffer.on_chip:
        return 0
    axis = marked[0]
    # block dimensions are direct allocation's documented form (ncc.sbuf.mod_alloc and the others)
    if axis != 0 and isinstance(buffer, Buffer):
        machine = current_machine()
        message = ("The leading dimension of SBUF/PSUM tensors must be the partition dimension: "
                   f"block dimensions before nl.par_dim in shape {list(int(s) for s in shape)} are deprecated")
        if machine.settings.block_dims_are_errors:
            raise ShapeError(message, code="err_leading_dimension_of_tensor_must_be_partition",
                             remedy="put the partition dimension first, or use a list of tiles")
        site = user_site(3)
        warnings.warn_explicit(message + " (put the partition dimension first, or use a list of tiles)",
                               BlockDimensionWarning, site.filename if site else "<kernel>",
                               site.lineno if site else 0)
    return axis


def ndarray(shape, dtype=dtypes.float32, *, buffer=None, name=""):
    buf = _buffer(buffer)
    raw = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    return current_machine().allocate(checked_shape(raw), dtype, buf, par_axis=_partition_axis(raw, buf),
                                      name=name, site=user_site(2))


def _filled(shape, value, dtype, buffer, name):
    buf = _buffer(buffer)
    # an HBM tensor with an initial value: SDK 2.20/2.21 (trn1) allowed it, 2.22+ refuses
    if buf.is_hbm and not current_rules().hbm_tensor_init_value:
        raise MemorySpaceError("creating an HBM tensor with an initial value is not supported",
                               remedy="allocate with nl.ndarray(..., buffer=nl.hbm) and write it by DMA",
                               code="err_hbm_tensor_with_init_value_not_supported")
    m = current_machine()
    raw = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    t = m.allocate(checked_shape(raw), dtype, buf, par_axis=_partition_axis(raw, buf), name=name, site=user_site(3))
    m.emit("memset", Engine.VECTOR, "fill", [], [t], params={"value": number(value)}, value=float(value))
    return t


def zeros(shape, dtype=dtypes.float32, *, buffer=None, name=""):
    return _filled(shape, 0, dtype, buffer, name)


def ones(shape, dtype=dtypes.float32, *, buffer=None, name=""):
    return _filled(shape, 1, dtype, buffer, name)


def full(shape, fill_value, dtype=dtypes.float32, *, buffer=None, name=""):
    return _filled(shape, fill_value, dtype, buffer, name)


def empty_like(a, dtype=None, *, buffer=None, name=""):
    return ndarray(a.shape, dtype or a.dtype, buffer=buffer or a.buffer, name=name)


def zeros_like(a, dtype=None, *, buffer=None, name=""):
    return _filled(a.shape, 0, dtype or a.dtype, buffer or a.buffer, name)


def ones_like(a, dtype=None, *, buffer=None, name=""):
    return _filled(a.shape, 1, dtype or a.dtype, buffer or a.buffer, name)


# ----- data movement -----------------------------------------------------------------------------

def load(src, *, mask=None, dtype=None):
    m = current_machine()
    operand(src, "load", "src", ANY_HBM, tile=False, mask=mask)
    if not src.shape:
        raise ShapeError("nl.load needs at least a 1-D source")
    tile = m.allocate(src.shape, out_dtype(dtype, src.dtype), Buffer.SBUF, transient=True, site=user_site(2))
    dma_move(m, tile, src, mask)
    return tile


def store(dst, value, *, mask=None):
    m = current_machine()
    operand(dst, "store", "dst", ANY_HBM, tile=False, mask=mask)
    m.check_writable(dst, "nl.store destination")
    if isinstance(value, (numbers.Number, np.number)):     # nl.store(dst, value=0): a filled tile
        value = memset(dst.shape, value, dst.dtype)
    operand(value, "store", "value", ON_CHIP, mask=mask)
    if value.buffer is Buffer.PSUM:
        value = tensor_copy(value)   # PSUM is no DMA endpoint: an extra copy, as NKI 2.26 does
    if value.size != dst.size:
        raise ShapeError(f"nl.store: value {value._label()} and dst {dst._label()} differ in size")
    dma_move(m, dst, value, mask)


def load_transpose2d(src, *, mask=None, dtype=None):
    m = current_machine()
    operand(src, "load_transpose2d", "src", ANY_HBM, tile=False, mask=mask)
    if src.ndim != 2:
        raise ShapeError(f"load_transpose2d takes a 2-D HBM tensor, got {src._label()}")
    tile = m.allocate((src.shape[1], src.shape[0]), out_dtype(dtype, src.dtype), Buffer.SBUF,
                      transient=True, site=user_site(2))
    m.emit("dma_transpose", Engine.DMA, "permute", [src], [tile], mask=mask, params={"perm": [1, 0]})
    return tile


def copy(src, *, mask=None, dtype=None):
    return tensor_copy(src, mask=mask, dtype=dtype)


def broadcast_to(src, *, shape):
    """As tiles broadcast: the partition dimension stays first and free dimensions broadcast
    like NumPy's, so a [P] tile (one value per partition) spreads along new free dimensions
    ([P] -> [P, F]). NKI 0.6's nl.broadcast_to keeps the rank (its documentation)."""
    operand(src, "broadcast_to", "src")
    shape = checked_shape(shape)
    if shape == src.shape:
        return src
    m = current_machine()
    if m.dialect == CURRENT.name and len(shape) != src.ndim:
        raise ShapeError(f"nl.broadcast_to: shape {list(shape)} must have the same rank as {src._label()}",
                         remedy="give one size per dimension of the tile; add a size-1 dimension with "
                                "nl.expand_dims first")
    if not src.shape or len(shape) < src.ndim or src.shape[0] not in (1, shape[0]) \
            or not _free_broadcasts(src.shape[1:], shape[1:]):
        raise ShapeError(f"cannot broadcast {src._label()} to {list(shape)}",
                         remedy="the partition dimension must match (or be 1); free dimensions match, are "
                                "1 or are new")
    result = m.new_tile(shape, src.dtype, Buffer.SBUF)
    m.emit("tensor_copy", Engine.VECTOR, "broadcast", [src], [result], auto_engine=True)
    return result


def _free_broadcasts(free: tuple, target: tuple) -> bool:
    try:
        return np.broadcast_shapes(free, target) == target
    except ValueError:
        return False


def transpose(x, *, dtype=None, mask=None):
    operand(x, "transpose", "x")
    if x.ndim != 2:
        raise ShapeError(f"nl.transpose takes a 2-D tile, got {x._label()}",
                         code="err_size_of_dimension_exceed_arch_limit")
    for dim, size in enumerate(x.shape):
        if size > 128:
            raise HardwareLimitError(
                f"size of dimension {dim} in '{x.name or 'x'}{list(x.shape)}' of 'transpose' exceed "
                "architecture limitation of 128", remedy="transpose in 128x128 blocks")
    return nc_transpose(x, dtype=dtype, mask=mask)


def matmul(x, y, *, transpose_x=False, mask=None):
    """x @ y on the Tensor Engine; x is transposed first unless transpose_x says it already is.
    x and y are SBUF tiles (2.26's nl.matmul: "a tile on SBUF"): a PSUM one, such as
    nl.transpose's result, is refused here in nl.matmul's own terms."""
    for name, t in (("x", x), ("y", y)):
        operand(t, "matmul", name)
        if t._alloc.buffer is not Buffer.SBUF:
            raise MemorySpaceError(f"Expected operand '{name}' of 'matmul' to be in address space 'sbuf', but "
                                   f"got a tile in '{t.buffer.value}' instead.",
                                   remedy=f"copy it to SBUF first: {name} = nl.copy({name}) (or nisa.tensor_copy)")
    stationary = x
    if not transpose_x:
        stationary = tensor_copy(nc_transpose(x))
    return nc_matmul(stationary, y, mask=mask)


@instruction("device_print", Engine.SYNC, kinds=("print",))
def device_print(m, prefix, x, *, mask=None):
    """Printed when the program runs, with the values the device holds then: the text goes
    to the run's output, never back to the kernel."""
    label = str(prefix)[:200]
    if isinstance(x, DeviceTensor):
        if mask is not None:        # the elements it keeps are printed, the others shown as --
            mask = _print_mask(mask, x)
        m.emit("device_print", Engine.SYNC, "print", [x], [], params={"prefix": label}, mask=mask)
    elif mask is not None:
        raise UnsupportedOperationError(f"nl.device_print(mask=...) masks the elements of a tile, and "
                                        f"{type(x).__name__} {str(x)[:40]!r} is not one",
                                        remedy="pass the tile to print, or drop the mask")
    else:
        m.emit("device_print", Engine.SYNC, "print", [], [], params={"prefix": label, "text": repr(x)[:200]})


def _print_mask(mask, x: DeviceTensor):
    """The mask broadcast to the printed tile, as a predicate of its shape: a print writes
    nothing, so the machine's check against the result's shape has nothing to hold it to."""
    if isinstance(mask, Predicate):
        try:
            np.broadcast_shapes(mask.values.shape, x.shape)
        except ValueError:
            raise ShapeError(f"device_print's mask of shape {list(mask.values.shape)} does not fit the "
                             f"printed tile {list(x.shape)}", code="err_unsupported_expression_in_mask") from None
    return mask


# ----- element-wise functions: nl.add(a, b), nl.exp(t), nl.max(t, axis) ----------------------------

def _is_scalar(v) -> bool:
    return isinstance(v, (numbers.Number, np.number))


def elementwise_binary(opname, a, b, dtype=None, mask=None):
    op = binary_op(opname, opname)
    if isinstance(a, DeviceTensor) and isinstance(b, DeviceTensor):
        # `acc = acc + nc_matmul(...)` on a PSUM tile accumulates like `acc += nc_matmul(...)`
        if dtype is None and mask is None and op.name == "add":
            for target, other in ((a, b), (b, a)):
                if target.buffer is Buffer.PSUM and not target._alloc.transient and \
                        current_machine().accumulates(target, other, "add"):
                    return target
        return tensor_tensor(a, b, op, dtype=dtype, mask=mask)
    if isinstance(a, DeviceTensor) and _is_scalar(b):
        default = dtypes.promote(a.dtype, dtypes.scalar_dtype(b))
        return tensor_scalar(a, op, b, dtype=dtype or default, mask=mask)
    if isinstance(b, DeviceTensor) and _is_scalar(a):
        default = dtypes.promote(b.dtype, dtypes.scalar_dtype(a))
        return tensor_scalar(b, op, a, reverse0=True, dtype=dtype or default, mask=mask)
    raise ShapeError(f"nl.{opname} needs at least one tile operand, got {type(a).__name__} and "
                     f"{type(b).__name__}")


# the activation table of the Scalar engine; other unary ops run on the Vector engine
_ACTIVATION_NAMES = {"copy", "square", "sigmoid", "relu", "gelu", "gelu_dx", "gelu_apprx_tanh",
                     "gelu_apprx_sigmoid", "silu", "silu_dx", "tanh", "softplus", "mish", "erf",
                     "erf_dx", "exp", "log", "sin", "arctan", "sqrt", "rsqrt", "reciprocal", "sign", "abs",
                     "cos", "tan"}


def elementwise_unary(opname, x, dtype=None, mask=None):
    op = OPS[opname]
    operand(x, f"nl.{opname}", "x", mask=mask)
    if opname in _ACTIVATION_NAMES:
        return activation(op, x, dtype=dtype, mask=mask)
    m = current_machine()
    result = m.new_tile(x.shape, out_dtype(dtype, x.dtype), Buffer.SBUF)
    m.emit("tensor_scalar", Engine.VECTOR, "unary", [x], [result], params={"op": op.name}, mask=mask, op=op.name)
    return result


def _reduce(op: NkiOp, x, axis, dtype=None, mask=None, keepdims=False):
    if mask is not None:
        return _masked_reduce(op, x, axis, dtype, mask, bool(keepdims))
    if op.alias_of:
        return tensor_reduce(op, x, axis, dtype=dtype, mask=mask, keepdims=keepdims)
    operand(x, f"nl.{op.name}", "x", mask=mask)
    m = current_machine()
    axes = normalize_axes(axis, x.ndim, f"nl.{op.name}")
    result = m.new_tile(reduced_shape(x.shape, axes, bool(keepdims)), out_dtype(dtype, x.dtype), Buffer.SBUF)
    m.emit("tensor_reduce", Engine.VECTOR, "reduce", [x], [result], mask=mask,
           params={"op": op.name, "axes": list(axes), "keepdims": bool(keepdims), "negate": False},
           op=op.name, axes=axes)
    return result


# what a reduction adds where its mask leaves an element out (nkisim.execute's `select`): the
# op's identity, so the selected elements alone make the result
_SELECTABLE = ("add", "multiply", "maximum", "minimum", "bitwise_and", "bitwise_or", "bitwise_xor",
               "logical_and", "logical_or", "logical_xor")


def _masked_reduce(op: NkiOp, x, axis, dtype, mask, keepdims: bool):
    """A reduction's mask is a predicate over its input's indices (the Vector Engine walks the
    input): over the reduced axes it selects the elements that are reduced; over the others it
    selects the results written. A result no selected element reaches is not written, as a
    masked-out result is not. nkisim's reading of the 2.26 masking rules."""
    name = f"nl.{op.name}"
    operand(x, name, "x", mask=mask)
    axes = normalize_axes(axis, x.ndim, name)
    values = _mask_over_input(mask, x.shape)
    shape = reduced_shape(x.shape, axes, keepdims)
    written = values.any(axis=axes, keepdims=keepdims)
    if len(written.shape) < len(shape):               # a mask of fewer dimensions than the result
        written = written.reshape((1,) * (len(shape) - len(written.shape)) + written.shape)
    alu = reduce_op(op.alias_of, name) if op.alias_of else None
    params = {"op": alu.name if alu else op.name, "axes": list(axes), "keepdims": keepdims, "negate": False}
    if any(values.shape[a] > 1 for a in axes):
        if alu is None or alu.name not in _SELECTABLE:
            raise NotSimulatedError(
                f"{name} with a mask over its reduced axes: nkisim does not know which elements the "
                f"{op.name} then divides by", remedy="reduce with nl.sum under the mask, then multiply by "
                "the count of selected elements' reciprocal")
        if x._invalid is not None:
            raise NotSimulatedError(f"{name} of a tile reaching outside its tensor, with a mask over the reduced "
                                    "axes keeping those elements out", remedy="slice the tile to the tensor's "
                                    "valid range instead (bounds with min())")
        params["select"] = np.ascontiguousarray(values, dtype=np.uint8)     # read by execute's _selected
    m = current_machine()
    result = m.new_tile(shape, out_dtype(dtype, x.dtype), Buffer.SBUF)
    m.emit("tensor_reduce", Engine.VECTOR, "reduce", [x], [result], mask=Predicate(written), params=params,
           op=params["op"], axes=axes)
    return result


def _mask_over_input(mask, shape: tuple) -> np.ndarray:
    """The mask's values in the input's dimensions (a predicate of fewer leads with size 1)."""
    values = getattr(mask, "values", None)
    if not isinstance(mask, Predicate) or values is None:
        raise UnsupportedOperationError("mask= must be a predicate of index expressions "
                                        "(comparisons of nl.arange/nl.mgrid combined with '&')",
                                        code="err_unsupported_expression_in_mask")
    if values.ndim < len(shape):
        values = values.reshape((1,) * (len(shape) - values.ndim) + values.shape)
    try:
        if values.ndim != len(shape) or np.broadcast_shapes(values.shape, shape) != shape:
            raise ValueError
    except ValueError:
        raise ShapeError(f"mask of shape {list(values.shape)} does not fit the reduced tile {list(shape)}",
                         remedy="index the mask with the tile's own dimensions, e.g. nl.arange(n)[None, :] "
                                "for the first free one", code="err_unsupported_expression_in_mask") from None
    return values.astype(bool, copy=False)


# the keywords each kind of op call takes besides dtype= and mask=
_OP_KEYWORDS = {"binary": (), "unary": (), "reduce": ("x", "axis", "keepdims")}


def call_op(op: NkiOp, *args, dtype=None, mask=None, **kwargs):
    """What calling an op object does: nl.add(a, b), nl.exp(t), nl.max(t, axis=1)."""
    if op.name == "copy":   # nl.copy is also the activation identity code; as a call it is tensor_copy
        return copy(*args, dtype=dtype, mask=mask, **kwargs)
    unknown = sorted(set(kwargs) - set(_OP_KEYWORDS.get(op.kind, ())))
    if unknown:
        raise ArgumentError(f"nl.{op.name} got unexpected keyword arguments {unknown}",
                            remedy=f"call it as documented: nl.{op.name}("
                                   + {"binary": "x, y", "unary": "x"}.get(op.kind, "x, axis, keepdims=False")
                                   + ", dtype=None)")
    if mask is not None and current_machine().dialect == CURRENT.name:
        raise ArgumentError(f"nl.{op.name}(mask=...): {REMOVED_MASK}")
    if op.kind == "binary":
        if len(args) != 2:
            raise TypeError(f"nl.{op.name} takes two operands (x, y)")
        return elementwise_binary(op.name, args[0], args[1], dtype=dtype, mask=mask)
    if op.kind == "unary":
        if len(args) != 1:
            raise TypeError(f"nl.{op.name} takes one operand")
        return elementwise_unary(op.name, args[0], dtype=dtype, mask=mask)
    x = args[0] if args else kwargs.pop("x")
    axis = args[1] if len(args) > 1 else kwargs.pop("axis")
    return _reduce(op, x, axis, dtype=dtype, mask=mask, **kwargs)


def where(condition, x, y, *, dtype=None, mask=None):
    operand(condition, "where", "condition")
    tiles = [t for t in (x, y) if isinstance(t, DeviceTensor)]
    for t in tiles:
        operand(t, "where", "x/y")
    m = current_machine()
    shape = condition.shape
    for t in tiles:
        shape = broadcast_shape("where", shape, t.shape)
    reads = [condition]
    params = {}
    for key, v in (("x", x), ("y", y)):
        if isinstance(v, DeviceTensor):
            check_align(v.shape, shape, "where", "", "")
            reads.append(v)
            params[key] = {"read": len(reads) - 1}
        else:
            params[key] = {"const": number(v)}
    check_align(condition.shape, shape, "where", "", "")
    default = tiles[0].dtype if tiles else dtypes.float32
    result = m.new_tile(shape, out_dtype(dtype, default), Buffer.SBUF)
    m.emit("tensor_tensor", Engine.VECTOR, "select", reads, [result], params=params, mask=mask, op="select")
    return result


def check_sbuf_only(t, name):  # used by facade helpers
    return operand(t, name, "x", SBUF_ONLY)


# what the tile operators (t + u, -t, t.astype, ...) and calling an op code (nl.add(a, b)) trace:
# both live below the instructions (nkisim.tensor, nkisim.alu), which call these through hooks
register_tile_operators(elementwise_binary=elementwise_binary, elementwise_unary=elementwise_unary,
                        tensor_copy=tensor_copy, broadcast_to=broadcast_to)
register_op_call(call_op)
