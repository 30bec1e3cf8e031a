"""nl.rand and nl.random_seed, in both dialects, lowered onto the random-bit instructions
(nkisim.instructions.random_bits): a tile of uniform values in [0, 1) from the Vector engine's
generator, and its seed. The values are nkisim's own draw (the hardware's bits and how it turns
them into floats are not documented): only their distribution is NKI's. Each value takes as many
top bits of a 32-bit draw as the dtype's significand holds, so it is exact there and below 1."""
from __future__ import annotations

from .. import dtypes
from ..alu import OPS
from ..errors import UnsupportedOperationError
from ..memory import Buffer
from ..running import current_machine
from ..tensor import checked_shape
from ..trace import Engine
from .random_bits import rng, set_rng_seed
from .vector import tensor_scalar

# significand bits (the implicit one included) of each float dtype nl.rand fills
_BITS = {dtypes.float32: 24, dtypes.float16: 11, dtypes.bfloat16: 8}


def rand(shape, dtype=dtypes.float32, *, buffer=Buffer.SBUF, name=""):
    dt = dtypes.to_dtype(dtype)
    bits = _BITS.get(dt)
    if bits is None:
        raise UnsupportedOperationError(f"nl.rand fills float32, float16 or bfloat16 tiles, got {dtypes.name_of(dt)}",
                                        remedy="draw float32 values, or integer bits with nisa.rng",
                                        code="err_instruction_unsupported_dtypes")
    if buffer is not Buffer.SBUF:
        raise UnsupportedOperationError("nl.rand makes an SBUF tile (the Vector engine draws it)",
                                        remedy="draw into SBUF, then copy it where it is needed")
    shape = checked_shape(tuple(shape) if isinstance(shape, (tuple, list)) else (shape,))
    drawn = rng(shape, dtypes.uint32, engine=Engine.VECTOR)
    top = tensor_scalar(drawn, OPS["right_shift"], 32 - bits)
    values = tensor_scalar(top, OPS["multiply"], 2.0 ** -bits, dtype=dt)
    if name:
        values.name = name
    return values


def random_seed(seed):
    """Seed the generator nl.rand and nisa.rng draw from with a [1, 1] int32/uint32 tile's value."""
    current_machine()                          # outside a kernel: its error
    set_rng_seed(seed)
