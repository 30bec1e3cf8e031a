"""`neuronxcc.nki.isa` (nisa), simulated."""
import enum as _enum
from types import SimpleNamespace as _NS

import numpy as _np

from ..instructions.dma import dma_copy, dma_transpose
from ..instructions.gather import nc_stream_shuffle, sequence_bounds
from ..instructions.gpsimd import affine_select, iota, tensor_partition_reduce
from ..instructions.scalar import activation
from ..instructions.scalar import legacy_activation_reduce as activation_reduce
from ..instructions.select import dropout, select_reduce, tensor_copy_predicated
from ..instructions.select import legacy_range_select as range_select
from ..instructions.tensor_engine import nc_matmul, nc_transpose
from ..instructions.vector import memset, tensor_copy, tensor_reduce, tensor_scalar, tensor_tensor
from ..instructions.vector_fused import reciprocal, scalar_tensor_tensor, tensor_tensor_scan
from ..instructions.vector_fused import legacy_tensor_scalar_reduce as tensor_scalar_reduce
from ..instructions.vector_stats import bn_aggr, bn_stats, max8
from ..instructions.vector_stats import legacy_nc_find_index8 as nc_find_index8
from ..instructions.vector_stats import legacy_nc_match_replace8 as nc_match_replace8
from ..platforms import current_rules as _current_rules
from ..trace import Engine as _Engine
from . import names as _names


class engine(_enum.IntEnum):
    unknown = 0
    tensor = 1
    scalar = 2
    gpsimd = 3
    vector = 5
    sync = 6
    dma = _Engine.DMA.value


unknown_engine = engine.unknown
tensor_engine = engine.tensor
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
vector_engine = engine.vector
dma_engine = engine.dma


class reduce_cmd(_enum.IntEnum):
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3


class dge_mode(_enum.IntEnum):
    none = 0
    swdge = 1
    hwdge = 2
    unknown = 3


class oob_mode(_enum.IntEnum):
    error = 0
    skip = 1


class nc_version(_enum.IntEnum):
    gen2 = 2
    gen3 = 3


def get_nc_version():
    """gen3 on Trn2, gen2 on Trn1: the platform of the run (see nkisim.platforms)."""
    return nc_version(_current_rules().nc_version)


fp32 = _NS(min=float(_np.finfo(_np.float32).min))
constants = _NS(engine=engine)


def _simulated() -> str:
    public = _names.public_names(globals())
    instructions = [n for n in public if callable(globals()[n]) and not isinstance(globals()[n], type)
                    and n != "get_nc_version"]
    return f"nisa.{', nisa.'.join(instructions)}"


# documented NKI instructions nkisim does not simulate, and names that are not NKI at all
_names.NAMESPACES["nisa."] = globals()
__getattr__ = _names.make_getattr("nisa.", globals(), _names.ISA_NOT_SIMULATED, _simulated,
                                  elsewhere=_names.elsewhere("nisa."))
