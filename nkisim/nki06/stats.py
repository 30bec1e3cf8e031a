"""NKI 0.6 bindings of the Vector engine's statistics and top-8 instructions (nisa.bn_stats,
bn_aggr, max8, nc_find_index8, nc_match_replace8), lowered onto the table's functions
(nkisim.instructions.vector_stats) with 0.6's documented behaviour where it differs from 2.26:
an absent value gives nc_find_index8 an all-ones index, and nc_match_replace8 pairs duplicate
vals with their matches from vals[7] down."""
from __future__ import annotations

from . import bind as _bind
from .bind import binding as _binding
from .bind import deliver as _deliver
from .bind import destination as _destination
from .bind import semantics as _semantics

_bn_stats = _semantics("bn_stats")
_bn_aggr = _semantics("bn_aggr")
_max8 = _semantics("max8")
_nc_find_index8 = _semantics("nc_find_index8")
_nc_match_replace8 = _semantics("nc_match_replace8")


@_binding
def bn_stats(m, dst, data, name=None):
    _bind.instruction_name(name, "bn_stats")
    _destination(dst, "bn_stats")
    _deliver(m, dst, _bn_stats(m, data, dtype=dst.dtype), "bn_stats")


@_binding
def bn_aggr(m, dst, data, name=None):
    _bind.instruction_name(name, "bn_aggr")
    _destination(dst, "bn_aggr")
    _deliver(m, dst, _bn_aggr(m, data, dtype=dst.dtype), "bn_aggr")


@_binding
def max8(m, dst, src, name=None):
    _bind.instruction_name(name, "max8")
    _destination(dst, "max8")
    _deliver(m, dst, _max8(m, src=src, dtype=dst.dtype), "max8")


@_binding
def nc_find_index8(m, dst, data, vals, name=None):
    _bind.instruction_name(name, "nc_find_index8")
    _destination(dst, "nc_find_index8")
    result = _nc_find_index8(m, data=data, vals=vals, dtype=dst.dtype, absent="all_ones")
    _deliver(m, dst, result, "nc_find_index8")


@_binding
def nc_match_replace8(m, dst, data, vals, imm, dst_idx=None, name=None):
    _bind.instruction_name(name, "nc_match_replace8")
    _destination(dst, "nc_match_replace8")
    # dst_idx (checked by the table: on chip, writable, 8 indices a partition) is the record's second write
    result = _nc_match_replace8(m, data=data, vals=vals, imm=imm, dst_idx=dst_idx, dtype=dst.dtype,
                                order="reverse")
    _deliver(m, dst, result, "nc_match_replace8")
