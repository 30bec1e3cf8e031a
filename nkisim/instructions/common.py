"""Operand checks shared by the instructions: buffers, tile shape, partitions, engines."""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import dtypes
from ..errors import HardwareLimitError, MemorySpaceError, PartitionMismatchError, ShapeError, UnsupportedOperationError
from ..memory import Buffer
from ..source import user_site
from ..tensor import DeviceTensor, check_access
from ..trace import Engine

ON_CHIP = (Buffer.SBUF, Buffer.PSUM)
SBUF_ONLY = (Buffer.SBUF,)
ANY_HBM = (Buffer.HBM, Buffer.SHARED_HBM)
DMA_ENDPOINTS = (Buffer.HBM, Buffer.SHARED_HBM, Buffer.SBUF)

_SPACE_NAMES = {ON_CHIP: "psum|sbuf", SBUF_ONLY: "sbuf", ANY_HBM: "hbm", DMA_ENDPOINTS: "hbm|sbuf"}


def operand(t, instr: str, param: str, buffers=ON_CHIP, *, tile: bool = True, mask=None) -> DeviceTensor:
    """Check one tensor operand: its type, its buffer, and (for compute) that it is a tile."""
    if not isinstance(t, DeviceTensor):
        raise ShapeError(f"operand '{param}' of '{instr}' must be a tensor, got {type(t).__name__}",
                         remedy="pass a tile (an SBUF/PSUM tensor or a slice of one)",
                         code="err_operand_must_be_tensor")
    buffer = t._alloc.buffer
    if buffer not in buffers:
        wanted = _SPACE_NAMES.get(buffers, "|".join(b.value for b in buffers))
        remedy = {
            Buffer.PSUM: "copy the PSUM tile to SBUF first with nisa.tensor_copy",
            Buffer.HBM: "load the data into SBUF first with nisa.dma_copy",
            Buffer.SHARED_HBM: "load the data into SBUF first with nisa.dma_copy",
            Buffer.SBUF: "this operand must come from elsewhere (see the instruction's documentation)",
        }[t.buffer]
        raise MemorySpaceError(
            f"Expected operand '{param}' of '{instr}' to be in address space '{wanted}', but got a "
            f"tile in '{t.buffer.value}' instead.", remedy=remedy)
    if tile and buffer.on_chip and t.par_axis != 0:
        raise ShapeError(
            f"operand '{param}' of '{instr}' is {t._label()} whose partition dimension is not the "
            "first: a tile is needed", remedy="index the leading block dimensions away, e.g. t[i]",
            code="err_failed_to_infer_tile_from_local_tensor")
    if t._invalid is not None:      # elements outside the tensor: only a mask can keep them out
        check_access(t, getattr(mask, "values", None), user_site(2))
    return t


def partitions(t: DeviceTensor) -> int:
    return t.shape[0] if t.shape else 1


def start_partition(t: DeviceTensor) -> int:
    """The first partition of the allocation that the tile `t` touches."""
    alloc = t._alloc
    axis = alloc.par_axis
    stride = math.prod(alloc.shape[axis + 1:])
    first = int(t._offset_map().ravel()[0]) if t._offsets is not None else t._start
    return (first // max(stride, 1)) % max(alloc.shape[axis], 1)


def free_size(t: DeviceTensor) -> int:
    return math.prod(t.shape[1:])


def same_partitions(instr: str, **tiles: DeviceTensor) -> int:
    if len(tiles) == 2:
        a, b = tiles.values()
        if isinstance(a, DeviceTensor) and isinstance(b, DeviceTensor) and a.shape[:1] == b.shape[:1]:
            return a.shape[0] if a.shape else 1
    items = [(k, v) for k, v in tiles.items() if isinstance(v, DeviceTensor)]
    sizes = {v.shape[0] if v.shape else 1 for _, v in items}
    if len(sizes) > 1:
        listing = ", ".join(f"{k}{list(v.shape)}" for k, v in items)
        raise PartitionMismatchError(
            f"number of partitions (dimension 0 size of a tile) mismatch in parameters ({listing}) "
            f"of '{instr}'", remedy="make every operand span the same partitions; broadcast "
                                    "explicitly along the partition dimension if needed")
    return sizes.pop() if sizes else 1


def check_limit(value: int, limit: int, what: str, instr: str, remedy: str) -> None:
    if value > limit:
        raise HardwareLimitError(f"{what} {value} of '{instr}' exceed architecture limitation of {limit}",
                                 remedy=remedy)


def out_dtype(dtype, default) -> np.dtype:
    return dtypes.to_dtype(dtype) if dtype is not None else default


def resolve_engine(engine, default: Engine, allowed: tuple[Engine, ...], instr: str) -> Engine:
    if engine is None or int(engine) == 0:
        return default
    try:
        chosen = Engine(int(engine))
    except ValueError:
        chosen = None
    if chosen not in allowed:
        names = ", ".join(f"nisa.{e.name.lower()}_engine" for e in allowed)
        raise UnsupportedOperationError(f"engine {engine!r} cannot run '{instr}'", remedy=f"use one of {names}",
                                        code="err_instruction_engine_unsupported")
    return chosen


def engine_unspecified(engine) -> bool:
    """The kernel left the engine to the compiler (the cost model may balance such work)."""
    return engine is None or int(engine) == 0


number = dtypes.plain_number


def scalar_operand(value, instr: str, param: str, parts: int, reads: list) -> dict:
    """A tensor_scalar/activation operand: a Python number, or a (P, 1) vector tile that
    joins `reads`. Returns how the executor finds it: {"const": n} or {"read": index}."""
    if isinstance(value, (numbers.Number, np.number)):
        return {"const": number(value)}
    operand(value, instr, param)
    if partitions(value) != parts or free_size(value) != 1:
        raise ShapeError(
            f"operand '{param}' of '{instr}' must be a scalar or a per-partition vector of shape "
            f"({parts}, 1), got {list(value.shape)}",
            remedy="use nisa.tensor_tensor for element-wise operations between two tiles",
            code="err_tensor_scalar_operand_shape")
    reads.append(value)
    return {"read": len(reads) - 1}


def broadcast_shape(instr: str, a: tuple, b: tuple) -> tuple:
    """Shape of an element-wise result with partition-first free-dim broadcasting."""
    if a == b:
        return a
    fa, fb = a[1:], b[1:]
    try:
        free = np.broadcast_shapes(fa, fb)
    except ValueError:
        raise ShapeError(f"operand shapes {list(a)} and {list(b)} of '{instr}' could not be broadcast "
                         "together", remedy="free dimensions must match or be 1",
                         code="err_param_shape_incompatible_with_numpy") from None
    return a[:1] + tuple(free)


def pe_tile_pairs(tile_position, tile_size, instr: str) -> tuple[int, int, int, int]:
    """(row_size, column_size, start_row, start_column) of a matmul's PE tiling mode, from its
    tile_size and tile_position pairs; each instruction checks its own sizes and positions."""
    try:
        (row_size, column_size), (start_row, start_column) = tile_size, tile_position
        return tuple(int(v) for v in (row_size, column_size, start_row, start_column))
    except (TypeError, ValueError):
        raise UnsupportedOperationError(f"tile_size and tile_position of 'nisa.{instr}' are (rows, columns) pairs of "
                                        f"integers, got {tile_size!r} and {tile_position!r}",
                                        code="err_unsupported_args") from None
