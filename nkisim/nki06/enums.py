"""The enums of NKI 0.6's nki.isa, with 0.6's members and values, and the instruction table's
code for each: since NKI 0.3 a kernel passes the named members only (`nisa.engine.vector`,
never 5), and every binding maps them onto the table's codes here."""
from __future__ import annotations

import enum as _enum

from ..trace import Engine as _Engine
from .bind import named as _named


class engine(_enum.Enum):
    unknown = 0
    tensor = 1
    scalar = 2
    gpsimd = 3
    dma = 4
    vector = 5
    sync = 6


class dge_mode(_enum.Enum):
    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


class oob_mode(_enum.Enum):
    error = 0
    skip = 1


class reduce_cmd(_enum.Enum):
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


class matmul_perf_mode(_enum.Enum):
    none = "none"
    double_row = "double_row"


class nc_version(_enum.Enum):
    gen2 = 2
    gen3 = 3
    gen4 = 4


class dma_engine(_enum.Enum):
    dma = 1
    gpsimd_dma = 2


# NKI 0.6's enum values -> the instruction table's codes (reduce_cmd: the legacy codes, and
# load_reduce, which 0.6 added, as 4) (the table numbers engines as
# nkisim.trace.Engine does, and DGE modes as the legacy dialect did: none 0 ... unknown 3)
TABLE_ENGINE = {engine.unknown: 0, engine.tensor: _Engine.TENSOR.value, engine.scalar: _Engine.SCALAR.value,
                 engine.gpsimd: _Engine.GPSIMD.value, engine.dma: _Engine.DMA.value,
                 engine.vector: _Engine.VECTOR.value, engine.sync: _Engine.SYNC.value}
TABLE_DGE_MODE = {dge_mode.unknown: 3, dge_mode.swdge: 1, dge_mode.hwdge: 2, dge_mode.none: 0}
TABLE_REDUCE_CMD = {reduce_cmd.idle: 0, reduce_cmd.reset: 1, reduce_cmd.reduce: 2, reduce_cmd.reset_reduce: 3,
                    reduce_cmd.load_reduce: 4}


# the enum types under names that the instructions' own parameters (dge_mode=, ...) do not shadow
ENGINE, DGE_MODE, OOB_MODE, REDUCE_CMD, PERF_MODE = engine, dge_mode, oob_mode, reduce_cmd, matmul_perf_mode


def table_engine(value, instr: str) -> int:
    """The table's engine code of an `engine=` argument (0: the table picks)."""
    if value is UNKNOWN_ENGINE:       # the default: no enum lookup on tracing's hot path
        return 0
    _named(value, ENGINE, "engine", instr)
    return TABLE_ENGINE[value]


UNKNOWN_ENGINE = engine.unknown
