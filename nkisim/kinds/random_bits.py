"""Values of the random-bit instructions (nkisim.instructions.random_bits says which records read
and write the Vector and GpSimd engines' generator states, and why the bits are nkisim's own
reading of the hardware's)."""
from __future__ import annotations

import numpy as np

from .values import value_kind

_RNG_STREAM = 0x6E6B_726E      # keeps rng's draws apart from dropout's and any other seeded use
_MAX_SEED = 2 ** 63
_INTEGERS = {name: np.dtype(name) for name in ("int8", "int16", "int32", "uint8", "uint16", "uint32")}
_UNSEEDED, _SEEDED = 0, 1
_XORWOW_WORDS = 6
_WEYL = 362437                 # Marsaglia's (2003) XORWOW increment of the counter d
_MAX_DRAWS = 1 << 18           # elements a lane: more than an SBUF partition holds of any dtype


def _bits(key: list, shape: tuple) -> np.ndarray:
    return np.random.default_rng(key).integers(0, 2 ** 32, size=shape, dtype=np.uint32)


def _truncated(bits: np.ndarray, dtype_name: str) -> np.ndarray:
    """The least significant bits that fit the destination's integer dtype (two's complement for
    the signed ones), as the reference says the hardware keeps them."""
    dtype = _INTEGERS.get(dtype_name)
    if dtype is None:
        raise ValueError(f"random bits go into an integer tile, not {dtype_name}")
    return bits.astype(dtype)          # an integer narrowing keeps the low bits


def _state(value) -> tuple[int, int]:
    state = np.asarray(value)
    if state.dtype != np.uint32 or state.size != 2:
        raise ValueError("the Vector engine's rng state is two uint32 values")
    seed, count = state.reshape(2)
    return int(seed), int(count)


@value_kind("random_bits", reads=None, writes=None)
def random_bits(rec, values):
    """Unseeded (reads nothing; writes dst): bits from the record's own seed. Seeded (reads the
    Vector engine's state; writes dst and the state): bits from (seed, draws since the seed), the
    draw count written on. XORWOW (reads the GpSimd state rows of dst's lanes; writes dst and
    them): each lane's generator stepped once per element of its partition."""
    p = rec.params
    dst = rec.writes[0] if rec.writes else None
    if dst is None:
        raise ValueError("an rng record writes its destination")
    if "xorwow" in p:
        return _xorwow_draw(rec, values)
    if not values:
        seed = p.get("seed")
        if len(rec.writes) != 1 or type(seed) is not int or not 0 <= seed < _MAX_SEED:
            raise ValueError(f"an unseeded rng writes dst only and has a seed in [0, 2**63), got {seed!r}")
        return [_truncated(_bits([_RNG_STREAM, _UNSEEDED, seed], dst.shape), dst.dtype)]
    if len(values) != 1 or len(rec.writes) != 2 or p.get("seeded") is not True:
        raise ValueError("a seeded rng reads the generator state and writes dst and the state")
    seed, count = _state(values[0])
    bits = _truncated(_bits([_RNG_STREAM, _SEEDED, seed, count], dst.shape), dst.dtype)
    after = np.array([[seed, (count + 1) % 2 ** 32]], dtype=np.uint32)
    return [bits, after.reshape(rec.writes[1].shape)]


@value_kind("rng_seed", reads=1, writes=1)
def rng_seed(rec, values):
    """reads: the [1, 1] seed (int32 or uint32, taken as its 32 bits); writes: the Vector engine's
    state, [seed, 0 draws]."""
    seed = np.asarray(values[0])
    if seed.size != 1 or seed.dtype not in (np.int32, np.uint32):
        raise ValueError("set_rng_seed reads one int32 or uint32 seed")
    bits = int(np.ascontiguousarray(seed).reshape(1).view(np.uint32)[0])
    return [np.array([bits, 0], dtype=np.uint32).reshape(rec.writes[0].shape)]


# ----- the GpSimd engine's XORWOW state: [lanes, 6] uint32, x0..x4 then d ---------------------------

def _xorwow_rows(value) -> np.ndarray:
    state = np.asarray(value)
    if state.dtype != np.uint32 or state.ndim != 2 or state.shape[1] != _XORWOW_WORDS or state.shape[0] < 1:
        raise ValueError(f"a GpSimd generator state is [lanes, {_XORWOW_WORDS}] uint32, got "
                         f"{list(state.shape)} {state.dtype}")
    return state


def xorwow(state: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """n XORWOW outputs of each lane's generator ([lanes, n] uint32) and the state after them;
    the lanes step together (one NumPy step an output, over every lane at once)."""
    x = np.array(state[:, :5].T, dtype=np.uint32)            # a ring of x0..x4, oldest at `first`
    out = np.empty((n, state.shape[0]), dtype=np.uint32)
    two, one, four = np.uint32(2), np.uint32(1), np.uint32(4)
    first, last = 0, 4
    for k in range(n):
        t = x[first] ^ (x[first] >> two)
        v = x[last]
        v = (v ^ (v << four)) ^ (t ^ (t << one))
        x[first] = v                                          # x0 leaves, the new x4 takes its place
        out[k] = v
        first, last = (first + 1) % 5, first
    # the output adds the counter after k steps, d + k * 362437: uint32 arrays wrap mod 2**32
    d = np.array(state[:, 5], dtype=np.uint32)
    out += d
    out += (np.arange(1, n + 1, dtype=np.uint32) * np.uint32(_WEYL))[:, None]
    after = np.empty(state.shape, dtype=np.uint32)
    for j in range(5):
        after[:, j] = x[(first + j) % 5]
    after[:, 5] = (d.astype(np.uint64) + n * _WEYL) % (1 << 32)
    return out.T, after


def _xorwow_draw(rec, values):
    dst = rec.writes[0]
    if rec.params.get("xorwow") is not True or len(values) != 1 or len(rec.writes) != 2:
        raise ValueError("a GpSimd XORWOW rng reads its lanes' generator state and writes dst and the state")
    state = _xorwow_rows(values[0])
    shape = tuple(dst.shape)
    lanes = state.shape[0]
    if not shape or shape[0] != lanes or tuple(rec.writes[1].shape) != state.shape:
        raise ValueError(f"dst {list(shape)} of a GpSimd XORWOW rng must span the {lanes} lanes whose state it "
                         "reads and writes")
    n = int(np.prod(shape[1:], dtype=np.int64))
    if not 0 <= n <= _MAX_DRAWS:
        raise ValueError(f"a GpSimd rng draws at most {_MAX_DRAWS} elements a lane, not {n}")
    bits, after = xorwow(state, n)
    return [_truncated(bits.reshape(shape), dst.dtype), after]


def _state_copy(rec, values, what: str):
    state = _xorwow_rows(values[0])
    if tuple(rec.writes[0].shape) != state.shape:
        raise ValueError(f"{what} moves {list(state.shape)} state words into {list(rec.writes[0].shape)}")
    return [state.copy()]


@value_kind("rng_state_set", reads=1, writes=1)
def rng_state_set(rec, values):
    """reads: src_seeds, [P, 6] uint32; writes: the GpSimd state rows of its lanes, the same words."""
    return _state_copy(rec, values, "rand_set_state")


@value_kind("rng_state_get", reads=1, writes=1)
def rng_state_get(rec, values):
    """reads: the GpSimd state rows of dst's lanes; writes: dst, [P, 6] uint32, the same words."""
    return _state_copy(rec, values, "rand_get_state")
