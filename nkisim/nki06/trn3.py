"""NKI 0.6's NeuronCore-v4 (Trainium3) instructions, destination first, each lowered onto the
table's function: quantize_mx (nkisim.instructions.mx), exponential (vector_exp), rand2 (rand2),
activate2 (activate2). nc_matmul_mx is bound beside nc_matmul in nkisim.nki06.isa, whose PSUM
accumulation rules it shares. Each table function refuses a platform before NeuronCore-v4."""
from __future__ import annotations

import numbers as _numbers

from ..errors import UnsupportedOperationError as _Unsupported
from . import bind as _bind
from .bind import binding as _binding
from .bind import destination as _destination
from .bind import into as _into
from .bind import named as _named
from .bind import semantics as _semantics
from .enums import REDUCE_CMD as _REDUCE_CMD
from .enums import TABLE_REDUCE_CMD as _TABLE_REDUCE_CMD
from .enums import reduce_cmd

_quantize_mx = _semantics("quantize_mx")
_exponential = _semantics("exponential")
_rand2 = _semantics("rand2")
_activate2 = _semantics("activate2")


@_binding
def quantize_mx(m, dst, src, dst_scale, name=None):
    _bind.instruction_name(name, "quantize_mx")
    _destination(dst, "quantize_mx")
    _destination(dst_scale, "quantize_mx")
    _quantize_mx(m, src, dst, dst_scale)


@_binding
def exponential(m, dst, src, max_value=0.0, reduce_res=None, reduce_cmd=reduce_cmd.idle, reduce_init=0.0,
                name=None):
    _bind.instruction_name(name, "exponential")
    _destination(dst, "exponential")
    _named(reduce_cmd, _REDUCE_CMD, "reduce_cmd", "exponential")
    loading = reduce_cmd is _REDUCE_CMD.load_reduce
    if not loading and not (isinstance(reduce_init, _numbers.Real) and float(reduce_init) == 0.0):
        raise _Unsupported("reduce_init of 'nisa.exponential' should be unset or 0.0 unless reduce_cmd is "
                           "nisa.reduce_cmd.load_reduce (0.6 reference)", remedy="leave reduce_init unset, or pass "
                                                                                 "reduce_cmd=nisa.reduce_cmd.load_reduce",
                           code="err_unsupported_args")
    _into(m, dst, "exponential", _exponential, src, max_value=max_value, reduce_res=reduce_res,
          reduce_cmd=_TABLE_REDUCE_CMD[reduce_cmd], reduce_init=reduce_init if loading else None, dtype=dst.dtype)


@_binding
def rand2(m, dst, min, max, name=None):      # noqa: A002 (the reference's parameter names)
    _bind.instruction_name(name, "rand2")
    _destination(dst, "rand2")
    _into(m, dst, "rand2", _rand2, dst.shape, dst.dtype, min=min, max=max)


@_binding
def activate2(m, dst, op, data, imm0, imm1, op0, op1, relu_param=0.0, reverse0=False, reverse1=False,
              reduce_op=None, reduce_res=None, reduce_cmd=reduce_cmd.idle, name=None):
    _bind.instruction_name(name, "activate2")
    _destination(dst, "activate2")
    _named(reduce_cmd, _REDUCE_CMD, "reduce_cmd", "activate2")
    _into(m, dst, "activate2", _activate2, op, data, imm0, imm1, op0, op1, relu_param=relu_param,
          reverse0=reverse0, reverse1=reverse1, reduce_op=reduce_op, reduce_res=reduce_res,
          reduce_cmd=_TABLE_REDUCE_CMD[reduce_cmd], dtype=dst.dtype)
