"""Random bits (NKI 0.6's nisa.rng), the Vector engine's seed (nisa.set_rng_seed) and the GpSimd
engine's generator state (nisa.rand_set_state / rand_get_state); the SDK 2.26 reference has none.

Whose bits: the reference names the generators (XORWOW) but not the layout of their state, their
initial state or their output function, so no kernel can expect the bits a Trainium would produce.
What the reference promises is kept:
- an rng draws 32 bits per element and keeps the least significant bits that fit dst's integer
  dtype;
- "Using the same seed will generate the same sequence of random numbers" with the Vector
  engine's rng: set_rng_seed writes the machine's "vector rng state" (one small allocation, like
  the accumulator registers: the seed read from the kernel's [1, 1] tensor when the program
  runs, and how many draws followed it), and every Vector rng after a set_rng_seed reads that
  state, draws nkisim's own bits from (seed, draw count) and writes the count on. So the same
  seed gives the same sequence of draws, another seed another one, and program order, the
  executor and the cost model's dependencies need nothing new;
- rand_set_state seeds "the PRNG states for the corresponding compute lane" from each partition
  of src_seeds, and the state "persists" (NKI 0.6 reference, nki.isa.rand_set_state): on
  NeuronCore-v3 the GpSimd engine's, 6 uint32 words a lane. nkisim keeps it as the machine's
  "gpsimd rng state", a [128, 6] uint32 allocation, one row a lane (a lane is the partition a
  tile occupies: a tile on partitions 32..63 seeds, reads or draws with lanes 32..63, as the
  accumulator registers do). nkisim's reading, not the hardware's documented one: the words are
  Marsaglia's (2003) XORWOW state x0..x4 then the Weyl counter d, and a step is
  t = x0 ^ (x0 >> 2); x0..x3 = x1..x4; x4 = (x4 ^ (x4 << 4)) ^ (t ^ (t << 1)); d += 362437;
  output x4 + d (mod 2**32). rand_get_state stores the rows back, so what a set wrote a get
  returns, and restoring a state saved by a get replays the same draws. A GpSimd rng on lanes a
  rand_set_state seeded steps each lane's generator once per element of its partition (in
  row-major order) and writes the state on; each lane draws its own stream. An all-zero x0..x4 is
  not refused: the formula is defined there (x stays 0, the output is the Weyl sequence d), as
  on any generator that computes it, poor bits being the kernel's choice of seeds;
- a Vector rng before any set_rng_seed, and a GpSimd rng on lanes no rand_set_state seeded (the
  hardware's state there is whatever it last held), draws from a seed of its own: its place in
  the program, recorded in its params (as dropout does), so a kernel gives the same bits on every
  run and however the executor splits it.
"""
from __future__ import annotations

from .. import dtypes
from ..errors import KernelContractError, MemorySpaceError, ShapeError, UnsupportedOperationError
from ..memory import Buffer
from ..platforms import current_rules
from ..registry import instruction
from ..tensor import DeviceTensor
from ..trace import Engine
from .common import ON_CHIP, SBUF_ONLY, operand, partitions, resolve_engine, start_partition

RNG_DTYPES = (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.uint8, dtypes.uint16, dtypes.uint32)
SEED_DTYPES = (dtypes.int32, dtypes.uint32)
_DTYPE_CODE = "err_instruction_unsupported_dtypes"


def _state(m) -> dict:
    return m.core_state.setdefault("_vector_rng", {"seeded": False})


def _state_tile(m) -> DeviceTensor:
    """The Vector engine's generator state as nkisim keeps it: [seed, draws since], uint32."""
    return m.engine_state("_vector_rng_tile", (1, 2), dtypes.uint32, "vector rng state")


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
    elif eng is Engine.GPSIMD and _gpsimd_lanes_seeded(m, result, instr):
        if mask is not None:
            raise UnsupportedOperationError(f"'{instr}' on the GpSimd engine's seeded generator takes no mask: which "
                                            "lanes step for the elements a mask leaves out is not documented",
                                            remedy="leave mask unset", code="err_not_simulated")
        state = _gpsimd_rows(m, result)
        m.emit("rng", eng, "random_bits", [state], [result, state], params={"xorwow": True})
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


# ----- the GpSimd engine's generator state (NeuronCore-v3+) -------------------------------------------

LANES = 128
XORWOW_WORDS = 6          # per lane on the GpSimd engine (the Vector engine's 24 are NeuronCore-v4's)


def _gpsimd(m) -> dict:
    """The GpSimd generator's state tile and which lanes a rand_set_state seeded (a bit a lane)."""
    return m.core_state.setdefault("_gpsimd_rng", {"lanes": 0})


def _gpsimd_rows(m, t: DeviceTensor) -> DeviceTensor:
    """The state rows of the lanes `t` occupies."""
    tile = m.engine_state("_gpsimd_rng_tile", (LANES, XORWOW_WORDS), dtypes.uint32, "gpsimd rng state")
    first = start_partition(t)
    return tile[first:first + partitions(t), 0:XORWOW_WORDS]


def _lane_bits(t: DeviceTensor) -> int:
    return ((1 << partitions(t)) - 1) << start_partition(t)


def _gpsimd_lanes_seeded(m, t: DeviceTensor, instr: str) -> bool:
    """Whether every lane of `t` was seeded by a rand_set_state (True) or none was (False); a
    draw over both kinds of lane is refused: the hardware's state of the others is unknown."""
    seeded, wanted = _gpsimd(m)["lanes"], _lane_bits(t)
    if seeded & wanted == wanted:
        return True
    if seeded & wanted:
        raise KernelContractError(
            f"'nisa.{instr}' on the GpSimd engine uses lanes {_span(t)}, only some of which a nisa.rand_set_state "
            "seeded on this core: the others hold whatever state the hardware last had",
            remedy="seed every lane it uses (nisa.rand_set_state with a [128, 6] uint32 tile seeds them all), "
                   "or use the seeded partitions only", code="err_rng_state_uninitialized")
    return False


def _span(t: DeviceTensor) -> str:
    first = start_partition(t)
    return f"{first}..{first + partitions(t) - 1}"


def _state_engine(engine, instr: str) -> Engine:
    """The engine of rand_set_state / rand_get_state: GpSimd on NeuronCore-v3 (0: the best
    engine, which there is GpSimd); the Vector engine's generator is NeuronCore-v4's."""
    version = current_rules().nc_version
    if version < 3:
        raise UnsupportedOperationError(f"nisa.{instr} runs from NeuronCore-v3 (Trn2) on; this platform is "
                                        f"NeuronCore-v{version}", remedy="draw with nisa.rng on the Vector engine, "
                                        "seeded by nisa.set_rng_seed", code="err_instruction_unsupported_on_target")
    if engine is not None and int(engine) == Engine.VECTOR:
        raise UnsupportedOperationError(f"nisa.{instr} on the Vector engine needs NeuronCore-v4 (Trn3); on "
                                        f"NeuronCore-v{version} (Trn2) only the GpSimd engine's generator state is "
                                        "reachable", remedy="pass engine=nisa.engine.gpsimd (or leave it unset)",
                                        code="err_instruction_unsupported_on_target")
    return resolve_engine(engine, Engine.GPSIMD, (Engine.GPSIMD,), instr)


def _state_tile_operand(t: DeviceTensor, instr: str, param: str) -> None:
    """A [P, 6] uint32 SBUF tile: one lane's XORWOW state a partition."""
    if isinstance(t, DeviceTensor) and t._alloc.buffer is Buffer.PSUM:
        remedy = "write the state into an SBUF tile" if param == "dst" else \
            "copy the seeds into an SBUF tile first with nisa.tensor_copy"
        raise MemorySpaceError(f"'{param}' of 'nisa.{instr}' is {t._label()}: the GpSimd engine cannot reach PSUM",
                               remedy=remedy, code="err_unsupported_memory")
    operand(t, instr, param, SBUF_ONLY)
    if t.dtype != dtypes.uint32:
        raise UnsupportedOperationError(f"'{param}' of 'nisa.{instr}' is {dtypes.name_of(t.dtype)}; the generator "
                                        "state is uint32", remedy="hold the state in a uint32 tile", code=_DTYPE_CODE)
    if len(t.shape) != 2 or t.shape[1] != XORWOW_WORDS:
        raise ShapeError(f"'{param}' of 'nisa.{instr}' is {t._label()}: the GpSimd "
                         f"engine's XORWOW state is {XORWOW_WORDS} uint32 words a lane, a 2-D [partitions, "
                         f"{XORWOW_WORDS}] tile", remedy=f"pass a [P, {XORWOW_WORDS}] uint32 tile, e.g. "
                                                     f"nl.ndarray((128, {XORWOW_WORDS}), nl.uint32, buffer=nl.sbuf)",
                         code="err_param_shape_mismatch")


def _no_mask(mask, instr: str) -> None:
    if mask is not None:
        raise UnsupportedOperationError(f"'{instr}' takes no mask: it moves whole generator states",
                                        remedy="leave mask unset", code="err_unsupported_args")


@instruction("rand_set_state", Engine.GPSIMD, kinds=("rng_state_set",))
def rand_set_state(m, src_seeds, *, engine=None, mask=None):
    """Seed the GpSimd generator of each lane src_seeds occupies from its partition's 6 uint32
    words (their values when the program runs); later GpSimd rng calls on those lanes draw
    XORWOW from them (see the module docstring for nkisim's reading of the words)."""
    instr = "rand_set_state"
    _no_mask(mask, instr)
    eng = _state_engine(engine, instr)
    _state_tile_operand(src_seeds, instr, "src_seeds")
    rows = _gpsimd_rows(m, src_seeds)
    m.emit(instr, eng, "rng_state_set", [src_seeds], [rows])
    _gpsimd(m)["lanes"] |= _lane_bits(src_seeds)


@instruction("rand_get_state", Engine.GPSIMD, kinds=("rng_state_get",))
def rand_get_state(m, shape, dtype=dtypes.uint32, *, engine=None, mask=None):
    """A [P, 6] uint32 tile holding the GpSimd generator state of the lanes it occupies: what the
    last rand_set_state wrote there, stepped on by the GpSimd draws since. Refused on lanes no
    rand_set_state seeded (the hardware's state there is unknown)."""
    instr = "rand_get_state"
    _no_mask(mask, instr)
    eng = _state_engine(engine, instr)
    result = m.result_tile(tuple(shape), dtypes.to_dtype(dtype), Buffer.SBUF)
    _state_tile_operand(result, instr, "dst")
    if not _gpsimd_lanes_seeded(m, result, instr):
        raise KernelContractError(
            f"'nisa.{instr}' reads the GpSimd generator state of lanes {_span(result)}, which no nisa.rand_set_state "
            "has seeded on this core: it holds whatever state the hardware last had",
            remedy="seed those lanes first with nisa.rand_set_state (the state is then what you set, stepped on by "
                   "the GpSimd nisa.rng draws since)", code="err_rng_state_uninitialized")
    rows = _gpsimd_rows(m, result)
    m.emit(instr, eng, "rng_state_get", [rows], [result])
    return result
