"""nisa.register_store (NKI 0.6): a sequencer register's value written to a one-element tensor in
HBM or SBUF. nkisim traces registers whose values are known when the kernel is traced
(nkisim.nki06.registers), so the record is a fill of that value. It is issued as a DMA of the
element (assumed: the reference gives no engine or cost; a register reaches memory only
through a transfer)."""
from __future__ import annotations

import math

from .. import dtypes
from ..errors import NotSimulatedError, ShapeError
from ..registry import instruction
from ..tensor import DeviceTensor
from ..trace import Engine
from .common import DMA_ENDPOINTS, operand

# what a 32-bit register value is stored as; the reference allows any dtype but does not say
# whether a float dst receives the register's bits or its value converted
STORE_DTYPES = {dtypes.int32: (-2 ** 31, 2 ** 31), dtypes.uint32: (0, 2 ** 32)}


@instruction("register_store", Engine.DMA, kinds=("fill",))
def register_store(m, dst: DeviceTensor, value: int) -> None:
    instr = "nisa.register_store"
    operand(dst, instr, "dst", DMA_ENDPOINTS, tile=False)
    m.check_writable(dst, f"the dst of '{instr}'")
    if math.prod(dst.shape) != 1 or dst.ndim > 2:
        raise ShapeError(f"'dst' of '{instr}' must hold exactly one element (shape [1] or [1, 1]), got "
                         f"{dst._label()}", remedy="slice one element, e.g. t[0:1, 0:1]",
                         code="err_param_shape_mismatch")
    if dst.dtype not in STORE_DTYPES:
        raise NotSimulatedError(f"'dst' of '{instr}' is {dtypes.name_of(dst.dtype)}: whether a register stored "
                                "into a non-32-bit-integer tensor gives its bits or its value converted is not "
                                "documented", remedy="store into an int32 or uint32 element, then convert it "
                                                     "with nisa.tensor_copy")
    low = STORE_DTYPES[dst.dtype][0]
    bits = value & 0xFFFFFFFF                  # the register holds 32 bits
    stored = bits - 2 ** 32 if low < 0 and bits >= 2 ** 31 else bits
    m.emit("register_store", Engine.DMA, "fill", [], [dst], params={"value": stored})
