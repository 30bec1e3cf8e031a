"""dma_compute: the DMA engines' own arithmetic, dst = srcs[0] + srcs[1] + ... in fp32
(NKI 0.6; the SDK 2.26 reference has no such instruction).

The static form only: every operand at an address known when the kernel is traced. The
read-modify-write forms (a source with `.ap(vector_offset=...)`, a scatter into HBM or a gather
from it) read their indices at run time, which nkisim's static programs cannot express; the 0.6
front end refuses them where the view is made (nkisim.nki06.views.ap).

Readings taken where the reference is silent: the sources are added left to right, each cast
to fp32 first, and the fp32 sum is rounded once into dst's dtype (as a DMA's cast is: floats to
integers saturate)."""
from __future__ import annotations

import numbers

import numpy as np

from ..alu import binary_op
from ..errors import ArgumentError, MemorySpaceError, ShapeError, UnsupportedOperationError
from ..memory import Buffer
from ..registry import instruction
from ..tensor import DeviceTensor
from ..trace import Engine
from .common import DMA_ENDPOINTS, operand

MAX_SOURCES = 16        # "The max number of source tensors in srcs is 16" (NKI 0.6 reference)
_DGE_NONE = 0           # the static form's descriptors are prebuilt (DGE mode none, the compiler's choice)


@instruction("dma_compute", Engine.DMA, kinds=("dma_sum",))
def dma_compute(m, *, dst, srcs, reduce_op=np.add, scales=None, mask=None):
    """dst = the sum of `srcs` (1 to 16 tensors in HBM or SBUF, each with dst's element count),
    computed in fp32 by the DMA engines. Only nl.add reduces and every scale is 1.0, as the
    hardware supports. Writes dst in place and returns nothing."""
    instr = "dma_compute"
    sources = _sources(srcs, instr, mask)
    _no_psum(dst, instr, "dst")
    operand(dst, instr, "dst", DMA_ENDPOINTS, tile=False, mask=mask)
    m.check_writable(dst, "dma_compute destination")
    _adds(reduce_op, instr)
    _unit_scales(scales, len(sources), instr)
    for i, src in enumerate(sources):
        if src.size != dst.size:
            raise ShapeError(f"srcs[{i}] {src._label()} of '{instr}' has {src.size} elements and dst "
                             f"{dst._label()} {dst.size}: every source must hold as many as dst",
                             remedy="slice the sources and dst to the same number of elements",
                             code="err_dma_shape_mismatch")
    m.emit("dma_compute", Engine.DMA, "dma_sum", sources, [dst], mask=mask, dge_mode=_DGE_NONE)


def _sources(srcs, instr: str, mask) -> list:
    if isinstance(srcs, DeviceTensor) or not isinstance(srcs, (list, tuple)):
        raise ArgumentError(f"srcs of '{instr}' must be a list of tensors, got {type(srcs).__name__}",
                            remedy="pass the sources as a list, e.g. srcs=[a, b]")
    if not 1 <= len(srcs) <= MAX_SOURCES:
        raise UnsupportedOperationError(f"'{instr}' takes 1 to {MAX_SOURCES} sources, got {len(srcs)}",
                                        remedy=f"add at most {MAX_SOURCES} tensors per call; chain calls for more",
                                        code="err_unsupported_args")
    for i, src in enumerate(srcs):
        _no_psum(src, instr, f"srcs[{i}]")
        operand(src, instr, f"srcs[{i}]", DMA_ENDPOINTS, tile=False, mask=mask)
    return list(srcs)


def _no_psum(t, instr: str, param: str) -> None:
    if isinstance(t, DeviceTensor) and t._alloc.buffer is Buffer.PSUM:
        raise MemorySpaceError(f"{param} of '{instr}' is {t._label()} in PSUM; the DMA engines reach HBM and "
                               "SBUF only", remedy="copy the PSUM tile to SBUF with nisa.tensor_copy first",
                               code="err_unsupported_memory")


def _adds(op, instr: str) -> None:
    if binary_op(op, instr).name != "add":
        raise UnsupportedOperationError(f"reduce_op of '{instr}' must be nl.add, the only reduction the DMA "
                                        f"engines support, got {op!r}", remedy="pass reduce_op=nl.add",
                                        code="err_unsupported_args")


def _unit_scales(scales, n: int, instr: str) -> None:
    """None (all ones) or one 1.0 per source: the hardware supports no other scale."""
    if scales is None:
        return
    if not isinstance(scales, (list, tuple)) or len(scales) != n:
        raise ArgumentError(f"scales of '{instr}' must be a list of one number per source ({n}), got {scales!r}",
                            remedy="leave scales unset (all 1.0)")
    for s in scales:
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, (numbers.Real, np.number)) or float(s) != 1.0:
            raise UnsupportedOperationError(f"scales of '{instr}' are {list(scales)!r}: the DMA engines support "
                                            "a scale of 1.0 only", remedy="leave scales unset and scale the "
                                                                          "operands on an engine first "
                                                                          "(nisa.tensor_scalar)",
                                            code="err_unsupported_args")
