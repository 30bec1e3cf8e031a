"""NKI 0.6's bindings of the meeting points of an LNC=2 launch (nkisim.instructions.collectives)."""
from __future__ import annotations

from . import bind as _bind
from .bind import binding as _binding
from .bind import named as _named
from .bind import semantics as _semantics
from .enums import ENGINE as _ENGINE
from .enums import TABLE_ENGINE as _TABLE_ENGINE
from .enums import dma_engine, engine

_DMA_ENGINE = dma_engine
_core_barrier = _semantics("core_barrier")
_sendrecv = _semantics("sendrecv")


@_binding
def core_barrier(m, data, cores, engine=engine.gpsimd, name=None):
    _bind.instruction_name(name, "core_barrier")
    _named(engine, _ENGINE, "engine", "core_barrier")
    _core_barrier(m, data, cores, engine=_TABLE_ENGINE[engine])


@_binding
def sendrecv(m, src, dst, send_to_rank, recv_from_rank, pipe_id, dma_engine=dma_engine.dma, name=None):
    _bind.instruction_name(name, "sendrecv")
    _named(dma_engine, _DMA_ENGINE, "dma_engine", "sendrecv")
    _sendrecv(m, src, dst, send_to_rank, recv_from_rank, pipe_id, gpsimd_dma=dma_engine is _DMA_ENGINE.gpsimd_dma)
