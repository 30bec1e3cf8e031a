"""NKI 0.6's selections on the Vector engine (tensor_copy_predicated, range_select,
select_reduce, dropout), each lowered onto the instruction table's function
(nkisim.instructions.select), which says what they compute."""
from __future__ import annotations

from .. import dtypes as _dt
from ..alu import OPS as _OPS
from ..errors import UnsupportedOperationError as _Unsupported
from ..instructions.select import FP32_MIN as _FP32_MIN
from . import bind as _bind
from .bind import binding as _binding
from .bind import deliver as _deliver
from .bind import destination as _destination
from .bind import named as _named
from .bind import semantics as _semantics
from .enums import REDUCE_CMD as _REDUCE_CMD
from .enums import TABLE_REDUCE_CMD as _TABLE_REDUCE_CMD
from .enums import reduce_cmd

_tensor_copy_predicated = _semantics("tensor_copy_predicated")
_range_select = _semantics("range_select")
_select_reduce = _semantics("select_reduce")
_dropout = _semantics("dropout")


@_binding
def tensor_copy_predicated(m, dst, src, predicate, reverse_pred=False, name=None):
    _bind.instruction_name(name, "tensor_copy_predicated")
    _destination(dst, "tensor_copy_predicated")
    _tensor_copy_predicated(m, src=src, dst=dst, predicate=predicate, reverse_pred=reverse_pred)


@_binding
def range_select(m, dst, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd=reduce_cmd.reset_reduce,
                 reduce_res=None, reduce_op=_OPS["maximum"], range_start=0, on_false_value=..., name=None):
    """on_false_value=... (the 0.6 default) is FP32_MIN, the only fill the hardware has."""
    _bind.instruction_name(name, "range_select")
    _destination(dst, "range_select")
    _named(reduce_cmd, _REDUCE_CMD, "reduce_cmd", "range_select")
    fill = _FP32_MIN if on_false_value is ... else on_false_value
    result = _range_select(m, on_true_tile=on_true_tile, comp_op0=comp_op0, comp_op1=comp_op1, bound0=bound0,
                           bound1=bound1, reduce_cmd=_TABLE_REDUCE_CMD[reduce_cmd], reduce_res=reduce_res,
                           reduce_op=reduce_op, range_start=range_start, on_false_value=fill, dtype=dst.dtype)
    _deliver(m, dst, result, "range_select")


@_binding
def select_reduce(m, dst, predicate, on_true, on_false, reduce_res=None, reduce_cmd=reduce_cmd.idle,
                  reduce_op=_OPS["maximum"], reverse_pred=False, name=None):
    _bind.instruction_name(name, "select_reduce")
    _destination(dst, "select_reduce")
    _named(reduce_cmd, _REDUCE_CMD, "reduce_cmd", "select_reduce")
    _select_reduce(m, dst=dst, predicate=predicate, on_true=on_true, on_false=on_false, reduce_res=reduce_res,
                   reduce_cmd=_TABLE_REDUCE_CMD[reduce_cmd], reduce_op=reduce_op, reverse_pred=reverse_pred)


@_binding
def dropout(m, dst, data, prob, name=None):
    _bind.instruction_name(name, "dropout")
    _destination(dst, "dropout")
    if getattr(data, "dtype", dst.dtype) != dst.dtype:
        raise _Unsupported(f"'dst' of 'nisa.dropout' must have data's dtype: dst is {_dt.name_of(dst.dtype)}, "
                           f"data {_dt.name_of(data.dtype)}", remedy="give dst the dtype of data (cast afterwards with "
                                                   "nisa.tensor_copy)", code="err_instruction_unsupported_dtypes")
    result = _dropout(m, data, prob, dtype=dst.dtype)
    _deliver(m, dst, result, "dropout")
