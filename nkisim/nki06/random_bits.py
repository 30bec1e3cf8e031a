"""NKI 0.6's random-number instructions (rng, set_rng_seed, rand_set_state, rand_get_state) and the
DMA engines' arithmetic
(dma_compute), each lowered onto the instruction table's function
(nkisim.instructions.random_bits, nkisim.instructions.dma_compute), which says what they
compute and whose random bits they are."""
from __future__ import annotations

from ..errors import ArgumentError as _ArgumentError
from ..errors import MemorySpaceError as _MemorySpaceError
from ..errors import UnsupportedOperationError as _Unsupported
from ..memory import Buffer as _Buffer
from . import bind as _bind
from .bind import binding as _binding
from .bind import destination as _destination
from .bind import into as _into
from .bind import named as _named
from .bind import semantics as _semantics
from .enums import ENGINE as _ENGINE
from .enums import OOB_MODE as _OOB_MODE
from .enums import TABLE_ENGINE as _TABLE_ENGINE
from .enums import engine, oob_mode

_rng = _semantics("rng")
_set_rng_seed = _semantics("set_rng_seed")
_rand_set_state = _semantics("rand_set_state")
_rand_get_state = _semantics("rand_get_state")
_dma_compute = _semantics("dma_compute")
_RNG_ENGINES = (_ENGINE.vector, _ENGINE.gpsimd)


@_binding
def rng(m, dst, engine=engine.vector, name=None):
    _bind.instruction_name(name, "rng")
    _destination(dst, "rng")
    _named(engine, _ENGINE, "engine", "rng")
    if engine is _ENGINE.unknown:
        raise _Unsupported("nisa.rng(engine=nisa.engine.unknown) leaves the engine to the compiler, and which "
                           "engine draws decides whether nisa.set_rng_seed applies (it seeds the Vector engine's "
                           "generator only)", remedy="pass engine=nisa.engine.vector (the default) or "
                                                     "engine=nisa.engine.gpsimd", code="err_not_simulated")
    if engine not in _RNG_ENGINES:
        raise _Unsupported(f"nisa.rng runs on the Vector or GpSimd engine, not {engine!r}",
                           remedy="pass engine=nisa.engine.vector or engine=nisa.engine.gpsimd",
                           code="err_instruction_engine_unsupported")
    if engine is _ENGINE.gpsimd and dst._alloc.buffer is _Buffer.PSUM:
        raise _MemorySpaceError(f"'dst' of 'nisa.rng' is {dst._label()} in PSUM, which the GpSimd engine cannot "
                                "reach", remedy="draw into an SBUF tile, or use engine=nisa.engine.vector",
                                code="err_unsupported_memory")
    _into(m, dst, "rng", _rng, dst.shape, dst.dtype, engine=_TABLE_ENGINE[engine])


@_binding
def set_rng_seed(m, src_seeds, name=None):
    _bind.instruction_name(name, "set_rng_seed")
    _set_rng_seed(m, src_seeds)


def _state_engine(engine, instr: str) -> int:
    """The table's engine of a generator-state call: engine.unknown (the reference's default, "the
    best engine will be selected": GpSimd, the only one on NeuronCore-v3), gpsimd or vector (which
    the table refuses before NeuronCore-v4)."""
    _named(engine, _ENGINE, "engine", instr)
    if engine not in (_ENGINE.unknown, _ENGINE.gpsimd, _ENGINE.vector):
        raise _Unsupported(f"nisa.{instr} runs on the GpSimd engine (or the Vector engine on NeuronCore-v4), not "
                           f"{engine!r}", remedy="pass engine=nisa.engine.gpsimd or leave engine unset",
                           code="err_instruction_engine_unsupported")
    return _TABLE_ENGINE[engine]


@_binding
def rand_set_state(m, src_seeds, engine=engine.unknown, name=None):
    """The 0.6 reference's signature (latest pages: engine=engine.unknown, not the digest's
    engine.gpsimd; either is GpSimd on NeuronCore-v3). src_seeds: [P, 6] uint32 in SBUF."""
    _bind.instruction_name(name, "rand_set_state")
    _rand_set_state(m, src_seeds, engine=_state_engine(engine, "rand_set_state"))


@_binding
def rand_get_state(m, dst, engine=engine.unknown, name=None):
    """The 0.6 reference's signature (engine=engine.unknown by default, as rand_set_state). dst:
    [P, 6] uint32 in SBUF, receiving the GpSimd state of the lanes it occupies."""
    _bind.instruction_name(name, "rand_get_state")
    _destination(dst, "rand_get_state")
    table_engine = _state_engine(engine, "rand_get_state")
    _into(m, dst, "rand_get_state", _rand_get_state, dst.shape, dst.dtype, engine=table_engine)


@_binding
def dma_compute(m, dst, srcs, reduce_op, scales=None, unique_indices=True, oob_mode=oob_mode.error, name=None):
    """The static form: a source or dst indexed at run time (.ap(vector_offset=...)) is refused
    where the view is made, so unique_indices (about those indices) can only be True, and
    oob_mode only error."""
    _bind.instruction_name(name, "dma_compute")
    _named(oob_mode, _OOB_MODE, "oob_mode", "dma_compute")
    if oob_mode is _OOB_MODE.skip:
        raise _Unsupported("nisa.dma_compute with oob_mode=nisa.oob_mode.skip is valid only with indirect "
                           "(vector_offset) indexing, which nkisim does not simulate",
                           remedy="leave oob_mode unset and keep every access in bounds", code="err_not_simulated")
    if type(unique_indices) is not bool:
        raise _ArgumentError(f"'unique_indices' of 'nisa.dma_compute' must be True or False, got {unique_indices!r}",
                             code="err_unsupported_args")
    if not unique_indices:
        raise _Unsupported("nisa.dma_compute(unique_indices=False) concerns the indices of a read-modify-write "
                           "through .ap(vector_offset=...), which nkisim does not simulate",
                           remedy="leave unique_indices unset for the static form", code="err_not_simulated")
    _dma_compute(m, dst=dst, srcs=srcs, reduce_op=reduce_op, scales=scales)
