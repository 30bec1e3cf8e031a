"""Random bits (NKI 0.6's nisa.rng) and the Vector engine's seed (nisa.set_rng_seed); the SDK 2.26
reference has neither.

The bits are nkisim's draw, not the hardware's random stream (the Vector engine's generator is
an XORWOW whose initial state the reference does not give), so no kernel can expect the bits a
Trainium would produce; what the reference promises is kept:
- an rng draws 32 bits per element and keeps the least significant bits that fit dst's integer
  dtype;
- "Using the same seed will generate the same sequence of random numbers" with the Vector
  engine's rng: set_rng_seed writes the machine's "vector rng state" (one small allocation, like
  the accumulator registers: the seed read from the kernel's [1, 1] tensor when the program
  runs, and how many draws followed it), and every Vector rng after a set_rng_seed reads that
  state, draws from (seed, draw count) and writes the count on. So the same seed gives the same
  sequence of draws, another seed another one, and program order, the executor and the cost
  model's dependencies need nothing new;
- a Vector rng before any set_rng_seed, and every GpSimd rng (the seed is documented for the
  Vector engine's generator only), draws from a seed of its own: its place in the program,
  recorded in its params (as dropout does), so a kernel gives the same bits on every run and
  however the executor splits it.
"""
from __future__ import annotations

from .. import dtypes
from ..errors import ShapeError, UnsupportedOperationError
from ..memory import Buffer
from ..platforms import current_rules
from ..registry import instruction
from ..tensor import DeviceTensor
from ..trace import Engine
from .common import ON_CHIP, operand, resolve_engine

RNG_DTYPES = (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.uint8, dtypes.uint16, dtypes.uint32)
SEED_DTYPES = (dtypes.int32, dtypes.uint32)
_DTYPE_CODE = "err_instruction_unsupported_dtypes"


def _state(m) -> dict:
    return m.core_state.setdefault("_vector_rng", {"tile": None, "seeded": False})


def _state_tile(m) -> DeviceTensor:
    """The Vector engine's generator state as nkisim keeps it: [seed, draws since], uint32."""
    state = _state(m)
    if state["tile"] is None:
        state["tile"] = m.allocate((1, 2), dtypes.uint32, Buffer.SBUF, name="vector rng state", site=None)
    return state["tile"]


@instruction("rng", Engine.VECTOR, Engine.GPSIMD, kinds=("random_bits",))
def rng(m, shape, dtype, *, engine=None, mask=None):
    """A tile of `shape` and integer `dtype` holding random bits (see the module docstring for
    whose bits): 32 a element, truncated to dtype's least significant bits."""
    instr = "rng"
    dtype = dtypes.to_dtype(dtype)
    if dtype not in RNG_DTYPES:
        raise UnsupportedOperationError(f"dst of '{instr}' is {dtypes.name_of(dtype)}; random bits go into an "
                                        "integer tile: int8, int16, int32, uint8, uint16 or uint32",
                                        remedy="draw into a uint32 (or narrower) tile, then convert it with "
                                               "nisa.tensor_scalar or nisa.activation", code=_DTYPE_CODE)
    eng = resolve_engine(engine, Engine.VECTOR, (Engine.VECTOR, Engine.GPSIMD), instr)
    if eng is Engine.GPSIMD and current_rules().nc_version < 3:
        raise UnsupportedOperationError("nisa.rng runs on the GpSimd engine from NeuronCore-v3 (Trn2) on; this "
                                        "platform's NeuronCore-v2 draws on the Vector engine only",
                                        remedy="use engine=nisa.engine.vector",
                                        code="err_instruction_unsupported_on_target")
    result = m.result_tile(tuple(shape), dtype, Buffer.SBUF)
    if eng is Engine.VECTOR and _state(m)["seeded"]:
        state = _state_tile(m)
        m.emit("rng", eng, "random_bits", [state], [result, state], mask=mask, params={"seeded": True})
    else:
        m.emit("rng", eng, "random_bits", [], [result], mask=mask, params={"seed": len(m.trace)})
    return result


@instruction("set_rng_seed", Engine.VECTOR, kinds=("rng_seed",))
def set_rng_seed(m, src_seeds, *, mask=None):
    """Seed the Vector engine's generator from a [1, 1] int32 or uint32 tile (its value when the
    program runs): the Vector rng calls after it draw the sequence of that seed."""
    instr = "set_rng_seed"
    if mask is not None:
        raise UnsupportedOperationError(f"'{instr}' takes no mask: it reads one element",
                                        remedy="leave mask unset", code="err_unsupported_args")
    operand(src_seeds, instr, "src_seeds", ON_CHIP)
    if tuple(src_seeds.shape) != (1, 1):
        raise ShapeError(f"src_seeds of '{instr}' must be a [1, 1] tensor, got {src_seeds._label()}",
                         remedy="slice the seed to one element, e.g. seeds[0:1, 0:1]",
                         code="err_param_shape_mismatch")
    if src_seeds.dtype not in SEED_DTYPES:
        raise UnsupportedOperationError(
            f"src_seeds of '{instr}' is {dtypes.name_of(src_seeds.dtype)}: the seed is a 32-bit value, which "
            "nkisim takes from an int32 or uint32 tile (whether a float32 seed counts by its bits or its value "
            "is not documented)", remedy="hold the seed in an int32 or uint32 tile", code=_DTYPE_CODE)
    state = _state_tile(m)
    m.emit("set_rng_seed", Engine.VECTOR, "rng_seed", [src_seeds], [state])
    _state(m)["seeded"] = True
