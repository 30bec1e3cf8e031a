"""Tensor Engine (PE array) instructions: matmul into PSUM and PE transposes."""
from __future__ import annotations

import math

from .. import dtypes
from ..errors import DtypeError, ShapeError, UnsupportedOperationError
from ..memory import Buffer
from ..registry import instruction
from ..trace import Engine
from .common import ON_CHIP, SBUF_ONLY, check_limit, free_size, operand, out_dtype, partitions, resolve_engine


def _matmul_dtype(t, param: str) -> None:
    if t.dtype not in dtypes.MATMUL_INPUT_TYPES and not dtypes.is_tf32(t.dtype):
        raise DtypeError(f"operand '{param}' of 'nc_matmul' has dtype {dtypes.name_of(t.dtype)}",
                         remedy="the Tensor Engine multiplies fp8, bf16, fp16, tf32 or fp32 tiles; "
                                "cast with nisa.tensor_copy(..., dtype=...)",
                         code="err_instruction_unsupported_dtypes")


# the Tensor Engine's input types as their canonical dtype objects (a tile's dtype is one of these
# unless it carries metadata, as tf32 does); anything else is checked by _matmul_dtype
_MATMUL_TYPES = frozenset(id(d) for d in dtypes.MATMUL_INPUT_TYPES)


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
    if bool(tile_position) != bool(tile_size):
        raise UnsupportedOperationError("tile_position and tile_size of 'nc_matmul' must be given together")
    out_shape = (m_size,) + m_shape[1:]
    result = m.result_tile(out_shape, dtypes.float32, Buffer.PSUM)
    # what the cost model needs, from the operand regions alone (the executor derives them again
    # from a program's regions, never trusting a claim): their dtypes, k, and the m and n above
    s_region = stationary._region or stationary.region()
    m_region = moving._region or moving.region()
    m.emit("nc_matmul", Engine.TENSOR, "matmul", [stationary, moving], [result], mask=mask,
           dtype=s_region.dtype, moving_dtype=m_region.dtype, k=k, m=m_size, n=n_size,
           is_transpose=bool(is_transpose))
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
