"""The Vector engine's accumulator registers in values: how a reducing instruction's own
per-partition reduction combines with the running value a chain of such instructions carries
(nkisim.instructions.accumulator says which records read and write the registers)."""
from __future__ import annotations

import numpy as np

from .. import alu
from .values import f32

# the register's starting value for each reduction (the Vector engine's reset values)
IDENTITY = {"add": 0.0, "subtract": 0.0, "multiply": 1.0, "maximum": -np.inf, "minimum": np.inf}


def start_value(reduction: dict, values: list, parts: int) -> np.ndarray:
    """The register's value before this instruction reduces into it: the identity (reset), the
    loaded constant (load) or what the chain carried in (continue: one of the record's reads)."""
    how = reduction["how"]
    if how == "reset":
        return np.full(parts, IDENTITY[alu.reduce_op(reduction["op"]).name], dtype=np.float32)
    if how == "load" and "init_read" in reduction:
        return f32(values[reduction["init_read"]]).reshape(parts)
    if how == "load":
        return np.full(parts, np.float32(reduction["init"]), dtype=np.float32)
    if how == "continue":
        return f32(values[reduction["read"]]).reshape(parts)
    raise ValueError(f"unknown accumulator start {how!r}")


def reduce_into(reduction: dict, values: list, partial: np.ndarray) -> list[np.ndarray]:
    """[the register's new value, and reduce_res's if the record writes it]: `partial` is this
    instruction's own reduction, one fp32 value per partition."""
    parts = partial.shape[0]
    op = alu.reduce_op(reduction["op"])
    register = start_value(reduction, values, parts)
    if reduction.get("partial", True):
        register = op.fn(register, f32(partial).reshape(parts)).astype(np.float32)
    out = [register.reshape(parts, 1)]
    if reduction.get("result"):
        out.append(-register.reshape(parts, 1) if reduction.get("negate") else register.reshape(parts, 1))
    return out
