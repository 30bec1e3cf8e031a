"""Tensor Engine (PE array) instructions: matmul into PSUM and PE transposes."""
from __future__ import annotations

import math

from .. import dtypes
from ..errors import DtypeError, ShapeError, UnsupportedOperationError
from ..memory import Buffer
from ..platforms import current_rules
from ..registry import instruction
from ..trace import Engine
from .common import (ON_CHIP, SBUF_ONLY, check_limit, free_size, operand, out_dtype, partitions, pe_tile_pairs,
                     resolve_engine)


def _matmul_dtype(t, param: str) -> None:
    if t.dtype not in dtypes.MATMUL_INPUT_TYPES and not dtypes.is_tf32(t.dtype):
        raise DtypeError(f"operand '{param}' of 'nc_matmul' has dtype {dtypes.name_of(t.dtype)}",
                         remedy="the Tensor Engine multiplies fp8, bf16, fp16, tf32 or fp32 tiles; "
                                "cast with nisa.tensor_copy(..., dtype=...)",
                         code="err_instruction_unsupported_dtypes")


# the Tensor Engine's input types as their canonical dtype objects (a tile's dtype is one of these
# unless it carries metadata, as tf32 does); anything else is checked by _matmul_dtype
_MATMUL_TYPES = frozenset(id(d) for d in dtypes.MATMUL_INPUT_TYPES)


def _check_pe_tiling(tile_position, tile_size, k: int, m_size: int) -> tuple[int, int]:
    """The tiling mode's rules (nc_matmul's reference, "Tiling mode"): tile_size (row_size,
    column_size) of 128 or 64 PE rows and columns, or 32 from NeuronCore-v3 on; the stationary
    tile (k contraction rows, m_size columns) within it; tile_position (start_row, start_column)
    multiples of the tile size inside the 128 x 128 array. Returns the tile size. The values are
    those of an untiled matmul; the cost model times it as one (docs/cost-model.md, "Tensor Engine
    tiling mode"), and the profile counts such matmuls."""
    if not tile_position or not tile_size:
        raise UnsupportedOperationError("tile_position and tile_size of 'nc_matmul' must be given together",
                                        remedy="pass both, e.g. tile_position=(64, 0), tile_size=(64, 128) for "
                                               "the lower half of the PE array, or neither",
                                        code="err_unsupported_args")
    row_size, column_size, start_row, start_column = pe_tile_pairs(tile_position, tile_size, "nc_matmul")
    sizes = (32, 64, 128) if current_rules().nc_version >= 3 else (64, 128)
    if row_size not in sizes or column_size not in sizes:
        raise UnsupportedOperationError(
            f"tile_size of 'nc_matmul' is {tile_size!r}: each of row_size and column_size must be one of "
            f"{', '.join(map(str, sizes))} on this NeuronCore", remedy="slice the PE array into halves (64) "
            "or, from NeuronCore-v3 on, quarters (32)", code="err_unsupported_args")
    if k > row_size or m_size > column_size:
        raise UnsupportedOperationError(
            f"the stationary tile of 'nc_matmul' ({k} contraction rows x {m_size} columns) does not fit the PE tile "
            f"of tile_size {tile_size!r}", remedy="use a tile_size at least as large as the stationary tile",
            code="err_unsupported_args")
    for start, size, what in ((start_row, row_size, "start_row"), (start_column, column_size, "start_column")):
        if start % size or not 0 <= start <= 128 - size:
            raise UnsupportedOperationError(
                f"tile_position of 'nc_matmul' is {tile_position!r}: {what} {start} must be a multiple of its tile "
                f"size {size} within the 128 PE {'rows' if what == 'start_row' else 'columns'}",
                remedy=f"use one of {', '.join(str(v) for v in range(0, 128, size))}", code="err_unsupported_args")
    return row_size, column_size


@instruction("nc_matmul", Engine.TENSOR, kinds=("matmul",))
def nc_matmul(m, stationary, moving, *, is_stationary_onezero=False, is_moving_onezero=False,
              is_transpose=False, tile_position=(), tile_size=(), mask=None):
    # the checks in their order, with the calls that would only return skipped (one matmul is
    # traced per PSUM accumulation step: tens of thousands per conv2d configuration)
    operand(stationary, "nc_matmul", "stationary", SBUF_ONLY, mask=mask)
    operand(moving, "nc_matmul", "moving", SBUF_ONLY, mask=mask)
    if id(stationary.dtype) not in _MATMUL_TYPES:    # by identity: the common types pass at once
        _matmul_dtype(stationary, "stationary")
    if id(moving.dtype) not in _MATMUL_TYPES:
        _matmul_dtype(moving, "moving")
    limits = m.limits
    s_shape, m_shape = stationary.shape, moving.shape
    k = s_shape[0] if s_shape else 1
    k2 = m_shape[0] if m_shape else 1
    m_size, n_size = math.prod(s_shape[1:]), math.prod(m_shape[1:])
    if k != k2:
        raise ShapeError(
            f"contraction (partition) sizes of 'nc_matmul' differ: stationary{list(stationary.shape)} "
            f"has {k}, moving{list(moving.shape)} has {k2}",
            remedy="both operands must hold the same contraction rows on their partitions",
            code="err_param_shape_incompatible_with_matmul")
    if m_size > limits.gemm_stationary_fmax:
        check_limit(m_size, limits.gemm_stationary_fmax, "free size of stationary", "nc_matmul",
                    "stationary may be at most 128x128: tile its free dimension by "
                    "nl.tile_size.gemm_stationary_fmax")
    if n_size > limits.gemm_moving_fmax:
        check_limit(n_size, limits.gemm_moving_fmax, "free size of moving", "nc_matmul",
                    "moving may be at most 128x512 (one 2 KiB PSUM bank of fp32): tile its free "
                    "dimensions by nl.tile_size.gemm_moving_fmax")
    # attributes only some matmuls carry (the others' records are as before): a tiled one its tile
    # (the profile names them), a hinted one its 0/1 hints (the executor holds the operands to them)
    optional = {"pe_tile": _check_pe_tiling(tile_position, tile_size, k, m_size)} if tile_position or tile_size else {}
    promised = tuple(name for name, hint in (("stationary", is_stationary_onezero), ("moving", is_moving_onezero))
                     if hint)
    if promised and mask is None:      # under a mask, which elements it reads is the mask's: not held
        optional["onezero"] = promised
    out_shape = (m_size,) + m_shape[1:]
    result = m.result_tile(out_shape, dtypes.float32, Buffer.PSUM)
    # what the cost model needs, from the operand regions alone (the executor derives them again
    # from a program's regions, never trusting a claim): their dtypes, k, and the m and n above
    s_region = stationary._region or stationary.region()
    m_region = moving._region or moving.region()
    m.emit("nc_matmul", Engine.TENSOR, "matmul", [stationary, moving], [result], mask=mask,
           dtype=s_region.dtype, moving_dtype=m_region.dtype, k=k, m=m_size, n=n_size,
           is_transpose=bool(is_transpose), **optional)
    return result


@instruction("nc_transpose", Engine.TENSOR, Engine.VECTOR, kinds=("transpose",))
def nc_transpose(m, data, *, mask=None, dtype=None, engine=0):
    operand(data, "nc_transpose", "data", ON_CHIP, mask=mask)
    default = Engine.VECTOR if data.buffer is Buffer.PSUM else Engine.TENSOR
    eng = resolve_engine(engine, default, (Engine.TENSOR, Engine.VECTOR), "nc_transpose")
    p, f = partitions(data), free_size(data)
    if eng is Engine.TENSOR:
        operand(data, "nc_transpose", "data", SBUF_ONLY, mask=mask)
        limit, out_buffer = m.limits.pmax, Buffer.PSUM
        remedy = "the Tensor Engine transposes at most 128x128: transpose in 128x128 blocks"
    else:
        limit, out_buffer = m.limits.vector_transpose_max, Buffer.SBUF
        remedy = "the Vector Engine transposes at most 32x32: use the Tensor Engine for larger tiles"
    check_limit(p, limit, "partition size", "nc_transpose", remedy)
    check_limit(f, limit, "free size", "nc_transpose", remedy)
    result = m.result_tile((f, p), out_dtype(dtype, data.dtype), out_buffer)
    m.emit("nc_transpose", eng, "transpose", [data], [result], mask=mask, dtype=dtypes.name_of(data.dtype),
           p=p, f=f)
    return result
