"""NKI 0.6's fused arithmetic and scans on the Vector engine, destination first, each lowered
onto the table's function (nkisim.instructions.vector_fused): scalar_tensor_tensor,
tensor_tensor_scan, tensor_scalar_reduce, tensor_scalar_cumulative, reciprocal."""
from __future__ import annotations

from . import bind as _bind
from .bind import binding as _binding
from .bind import deliver as _deliver
from .bind import destination as _destination
from .bind import named as _named
from .bind import semantics as _semantics
from .enums import REDUCE_CMD as _REDUCE_CMD
from .enums import TABLE_REDUCE_CMD as _TABLE_REDUCE_CMD
from .enums import reduce_cmd

_scalar_tensor_tensor = _semantics("scalar_tensor_tensor")
_tensor_tensor_scan = _semantics("tensor_tensor_scan")
_tensor_scalar_reduce = _semantics("tensor_scalar_reduce")
_tensor_scalar_cumulative = _semantics("tensor_scalar_cumulative")
_reciprocal = _semantics("reciprocal")


def _begin(dst, name, instr: str) -> None:
    _bind.instruction_name(name, instr)
    _destination(dst, instr)


@_binding
def scalar_tensor_tensor(m, dst, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, name=None):
    _begin(dst, name, "scalar_tensor_tensor")
    result = _scalar_tensor_tensor(m, data=data, op0=op0, operand0=operand0, op1=op1, operand1=operand1,
                                   reverse0=reverse0, reverse1=reverse1, dtype=dst.dtype)
    _deliver(m, dst, result, "scalar_tensor_tensor")


@_binding
def tensor_tensor_scan(m, dst, data0, data1, initial, op0, op1, reverse0=False, reverse1=False, name=None):
    _begin(dst, name, "tensor_tensor_scan")
    result = _tensor_tensor_scan(m, data0, data1, initial, op0, op1, reverse0, reverse1, dtype=dst.dtype)
    _deliver(m, dst, result, "tensor_tensor_scan")


@_binding
def tensor_scalar_reduce(m, dst, data, op0, operand0, reduce_op, reduce_res=None, reverse0=False,
                         reduce_cmd=reduce_cmd.reset_reduce, reduce_init=None, reduce_res_negate=False, name=None):
    """reduce_res=None leaves the reduction in the accumulator for the next call of a chain
    (reduce_cmd=reduce) to continue; the chain's last call passes reduce_res."""
    _begin(dst, name, "tensor_scalar_reduce")
    _named(reduce_cmd, _REDUCE_CMD, "reduce_cmd", "tensor_scalar_reduce")
    result = _tensor_scalar_reduce(m, data=data, op0=op0, operand0=operand0, reduce_op=reduce_op,
                                   reduce_res=reduce_res, reverse0=reverse0,
                                   reduce_cmd=_TABLE_REDUCE_CMD[reduce_cmd], reduce_init=reduce_init,
                                   reduce_res_negate=reduce_res_negate, dtype=dst.dtype)
    _deliver(m, dst, result, "tensor_scalar_reduce")


@_binding
def tensor_scalar_cumulative(m, dst, src, op0, op1, imm0, imm1=None, reduce_cmd=reduce_cmd.reset_reduce,
                             name=None):
    _begin(dst, name, "tensor_scalar_cumulative")
    _named(reduce_cmd, _REDUCE_CMD, "reduce_cmd", "tensor_scalar_cumulative")
    result = _tensor_scalar_cumulative(m, src, op0, op1, imm0, imm1, reduce_cmd=_TABLE_REDUCE_CMD[reduce_cmd],
                                       dtype=dst.dtype)
    _deliver(m, dst, result, "tensor_scalar_cumulative")


@_binding
def reciprocal(m, dst, data, name=None):
    _begin(dst, name, "reciprocal")
    result = _reciprocal(m, data, dtype=dst.dtype)
    _deliver(m, dst, result, "reciprocal")
