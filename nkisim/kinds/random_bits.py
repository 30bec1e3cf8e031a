"""Values of the random-bit instructions (nkisim.instructions.random_bits says which records read
and write the Vector engine's generator state, and why the bits are nkisim's own draw)."""
from __future__ import annotations

import numpy as np

from .values import value_kind

_RNG_STREAM = 0x6E6B_726E      # keeps rng's draws apart from dropout's and any other seeded use
_MAX_SEED = 2 ** 63
_INTEGERS = {name: np.dtype(name) for name in ("int8", "int16", "int32", "uint8", "uint16", "uint32")}
_UNSEEDED, _SEEDED = 0, 1


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
    draw count written on."""
    p = rec.params
    dst = rec.writes[0] if rec.writes else None
    if dst is None:
        raise ValueError("an rng record writes its destination")
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
