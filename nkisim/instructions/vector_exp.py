"""NeuronCore-v4's fast exponential on the Vector engine (nisa.exponential, NKI 0.6 reference;
Trainium3 architecture guide, "Fast Exponential Evaluation"): dst = exp(src - max_value) in fp32,
and optionally the sum of the results into the Vector engine's accumulator registers, which it
shares with tensor_scalar_reduce, tensor_scalar_cumulative, range_select and select_reduce
(nkisim.instructions.accumulator)."""
from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes
from ..errors import UnsupportedOperationError
from ..memory import Buffer
from ..registry import instruction
from ..trace import Engine
from . import accumulator
from .common import operand, partitions, scalar_operand
from .mx import require_nc_v4

# the reference's dtype lists (dst: no uint32; src: no tfloat32)
DST_TYPES = ("float8_e4m3", "float8_e5m2", "float16", "bfloat16", "float32", "tfloat32", "int8", "int16", "int32",
             "uint8", "uint16")
SRC_TYPES = ("float8_e4m3", "float8_e5m2", "float16", "bfloat16", "float32", "int8", "int16", "int32", "uint8",
             "uint16", "uint32")
_DTYPE_CODE = "err_instruction_unsupported_dtypes"


def _dtype_in(dtype, allowed: tuple, param: str) -> None:
    name = dtypes.name_of(dtype)
    if name not in allowed:
        raise UnsupportedOperationError(f"'{param}' of 'nisa.exponential' is {name}; it must be one of "
                                        f"{', '.join(allowed)}", code=_DTYPE_CODE)


@instruction("exponential", Engine.VECTOR, kinds=("exponential",))
def exponential(m, src, *, max_value=0.0, reduce_res=None, reduce_cmd=accumulator.IDLE, reduce_init=None,
                dtype=None):
    """exp(src - max_value) (max_value a number or a (P, 1) float32 tile); with reduce_cmd
    reset_reduce, reduce or load_reduce the free-axis sum of the fp32 results joins the
    registers (reduce_init: load_reduce's start) and reduce_res, when given, receives it."""
    instr = "exponential"
    require_nc_v4(instr, "before NeuronCore-v4 (on Trainium2) use nisa.activation(dst, op=nl.exp, data=src, "
                         "bias=negated_max) for exp(src - max), with reduce_op=nl.add and reduce_res= for its sum")
    operand(src, instr, "src")
    _dtype_in(src.dtype, SRC_TYPES, "src")
    out = dtypes.to_dtype(dtype) if dtype is not None else src.dtype
    _dtype_in(out, DST_TYPES, "dst")
    if len(src.shape) > 4:
        raise UnsupportedOperationError(f"'src' of 'nisa.exponential' is {len(src.shape)}-D; it may be up to 4-D",
                                        code="err_param_shape_mismatch")
    parts = partitions(src)
    if not isinstance(max_value, (numbers.Real, np.floating, np.integer)) and getattr(max_value, "dtype", None) \
            != dtypes.float32:
        raise UnsupportedOperationError(f"'max_value' of 'nisa.exponential' must be a number or a float32 (P, 1) tile, "
                                        f"got {getattr(max_value, '_label', lambda: repr(max_value))()}",
                                        code=_DTYPE_CODE)
    reads = [src]
    params = {"max": scalar_operand(max_value, instr, "max_value", parts, reads)}
    cmd = accumulator.command(reduce_cmd, instr)
    if reduce_res is not None and dtypes.name_of(reduce_res.dtype) not in DST_TYPES[:6]:
        raise UnsupportedOperationError(f"'reduce_res' of 'nisa.exponential' is {dtypes.name_of(reduce_res.dtype)}; "
                                        f"it must be one of {', '.join(DST_TYPES[:6])}", code=_DTYPE_CODE)
    result = m.result_tile(src.shape, out, Buffer.SBUF)
    writes = [result]
    accumulator.reduction(m, instr, src, "add", cmd, reduce_res, reads, writes, params, init=reduce_init)
    m.emit(instr, Engine.VECTOR, "exponential", reads, writes, params=params)
    return result
