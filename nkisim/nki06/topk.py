"""NKI 0.6's nisa.topk, lowered onto the table's function (nkisim.instructions.topk, which says
the layout and what nkisim reads where the reference is loose): both destinations are written in
place, so the record is the table's own."""
from __future__ import annotations

from . import bind as _bind
from .bind import binding as _binding
from .bind import destination as _destination
from .bind import semantics as _semantics

_topk = _semantics("topk")


@_binding
def topk(m, val_dst, idx_dst, src, n, name=None):
    _bind.instruction_name(name, "topk")
    _destination(val_dst, "topk")
    _destination(idx_dst, "topk")
    _topk(m, val_dst, idx_dst, src, n)
