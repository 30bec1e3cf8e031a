"""NeuronCore-v4's uniform random values on the Vector engine (nisa.rand2, NKI 0.6 reference):
dst = a draw uniform in [min, max], generated in fp32 and rounded into dst's dtype.

Whose draws: the reference names the generator (XORWOW, four states a lane on NC-v4, Trainium3
architecture guide) but not how its 32 bits become an fp32 value, and nkisim does not model the
Vector engine's generator state (rand_set_state on the Vector engine is refused). So, as an
unseeded nisa.rng does, each rand2 draws nkisim's own bits from a seed of its own, its place in
the program (recorded in its params): the same kernel gives the same values on every run, and a
value is min + (bits / 2**32) * (max - min), in [min, max]."""
from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes
from ..errors import UnsupportedOperationError
from ..memory import Buffer
from ..registry import instruction
from ..tensor import DeviceTensor
from ..trace import Engine
from .common import operand, partitions, scalar_operand
from .mx import require_nc_v4

DST_TYPES = ("float8_e4m3", "float8_e5m2", "float16", "bfloat16", "float32", "tfloat32", "int8", "int16", "int32",
             "uint8", "uint16", "uint32")


@instruction("rand2", Engine.VECTOR, kinds=("rand2",))
def rand2(m, shape, dtype, *, min, max):        # noqa: A002 (the reference's parameter names)
    instr = "rand2"
    require_nc_v4(instr, "before NeuronCore-v4 (on Trainium2) draw bits with nisa.rng and scale them into "
                         "[min, max] with nisa.tensor_scalar")
    dtype = dtypes.to_dtype(dtype)
    if dtypes.name_of(dtype) not in DST_TYPES:
        raise UnsupportedOperationError(f"'dst' of 'nisa.rand2' is {dtypes.name_of(dtype)}; it must be one of "
                                        f"{', '.join(DST_TYPES)}", code="err_instruction_unsupported_dtypes")
    result = m.result_tile(tuple(shape), dtype, Buffer.SBUF)
    reads = []
    parts = partitions(result)
    bounds = {}
    for name, value in (("min", min), ("max", max)):
        if isinstance(value, DeviceTensor):
            operand(value, instr, name)
            if value.dtype != dtypes.float32:
                raise UnsupportedOperationError(f"'{name}' of 'nisa.rand2' is a {dtypes.name_of(value.dtype)} tile; "
                                                "the bounds are float32", code="err_instruction_unsupported_dtypes")
        elif not isinstance(value, (numbers.Real, np.floating, np.integer)) or isinstance(value, bool):
            raise UnsupportedOperationError(f"'{name}' of 'nisa.rand2' must be a number or a (P, 1) float32 tile, got "
                                            f"{value!r}", code="err_unsupported_args")
        bounds[name] = scalar_operand(value, instr, name, parts, reads)
    lo, hi = bounds["min"].get("const"), bounds["max"].get("const")
    if lo is not None and hi is not None and not lo < hi:
        raise UnsupportedOperationError(f"nisa.rand2 needs min < max, got min={lo!r}, max={hi!r}",
                                        code="err_unsupported_args")
    m.emit(instr, Engine.VECTOR, "rand2", reads, [result], params={**bounds, "seed": len(m.trace)})
    return result
