"""The ALU and activation op codes (nl.add, nl.max, nl.exp, ...), each registered once.

An op object is both the code an instruction takes (`op=nl.add`) and, when called, the
nki.language function of the same name applied to tiles (`nl.add(a, b)`). NumPy's own
functions are accepted as codes too (np.add, np.maximum, np.max), as the docs' examples do.

The table is the machine model's (pure NumPy functions; the executor applies them), below the
instructions: what calling an op traces is registered from above, by
nkisim.instructions.language_ops at its import (register_op_call).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .errors import UnsupportedOperationError

_erf = np.frompyfunc(math.erf, 1, 1)


def _erf32(x):
    return _erf(x).astype(np.float32)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _softplus(x):
    return np.logaddexp(0.0, x)


def _gelu(x):
    return 0.5 * x * (1.0 + _erf32(x / np.float32(math.sqrt(2.0))))


def _gelu_dx(x):
    cdf = 0.5 * (1.0 + _erf32(x / np.float32(math.sqrt(2.0))))
    return cdf + x * np.exp(-0.5 * x * x) / np.float32(math.sqrt(2 * math.pi))


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.float32(math.sqrt(2 / math.pi)) * (x + 0.044715 * x ** 3)))


@dataclass(frozen=True, eq=False)
class NkiOp:
    name: str
    kind: str                     # "binary" | "unary" | "reduce"
    fn: object = None             # NumPy implementation on float32 (or integer) arrays
    reduce_ufunc: object = None   # for ops legal as a reduction
    bitvec: bool = False          # integer-only bitwise op
    activation: bool = False      # usable as nisa.activation's op
    alias_of: str = ""            # reduction functions name their ALU op (nl.max -> maximum)
    numpy_names: tuple = field(default=())

    def apply(self, a, b=None):
        return self.fn(a) if self.kind == "unary" else self.fn(a, b)

    def __call__(self, *args, **kwargs):
        return _call_op(self, *args, **kwargs)

    def __repr__(self) -> str:
        return f"nl.{self.name}"


def _unregistered(op, *args, **kwargs):
    raise RuntimeError(f"nkisim bug: calling {op!r} traces nothing: nkisim.instructions.language_ops "
                       "registers what an op call does at its import")


_call_op = _unregistered


def register_op_call(call_op) -> None:
    """`call_op(op, *args, **kwargs)` is what `op(*args, **kwargs)` does (nl.add(a, b), nl.exp(t))."""
    global _call_op
    _call_op = call_op


def _b(name, fn, reduce_ufunc=None, bitvec=False, numpy=()):
    return NkiOp(name, "binary", fn, reduce_ufunc, bitvec, numpy_names=numpy)


def _u(name, fn, activation=True, bitvec=False, numpy=()):
    return NkiOp(name, "unary", fn, None, bitvec, activation, numpy_names=numpy)


def _r(name, alias, numpy=()):
    return NkiOp(name, "reduce", None, None, alias_of=alias, numpy_names=numpy)


OPS: dict[str, NkiOp] = {op.name: op for op in [
    _b("add", np.add, np.add, numpy=("add",)),
    _b("subtract", np.subtract, np.subtract, numpy=("subtract",)),
    _b("multiply", np.multiply, np.multiply, numpy=("multiply",)),
    _b("divide", np.divide, numpy=("divide", "true_divide")),
    _b("power", np.power, numpy=("power",)),
    _b("maximum", np.maximum, np.maximum, numpy=("maximum", "fmax")),
    _b("minimum", np.minimum, np.minimum, numpy=("minimum", "fmin")),
    _b("fmod", np.fmod, numpy=("fmod",)),
    _b("mod", np.mod, numpy=("mod", "remainder")),
    _b("equal", np.equal, numpy=("equal",)),
    _b("not_equal", np.not_equal, numpy=("not_equal",)),
    _b("greater", np.greater, numpy=("greater",)),
    _b("greater_equal", np.greater_equal, numpy=("greater_equal",)),
    _b("less", np.less, numpy=("less",)),
    _b("less_equal", np.less_equal, numpy=("less_equal",)),
    _b("logical_and", np.logical_and, np.logical_and, numpy=("logical_and",)),
    _b("logical_or", np.logical_or, np.logical_or, numpy=("logical_or",)),
    _b("logical_xor", np.logical_xor, np.logical_xor, numpy=("logical_xor",)),
    _b("bitwise_and", np.bitwise_and, np.bitwise_and, True, numpy=("bitwise_and",)),
    _b("bitwise_or", np.bitwise_or, np.bitwise_or, True, numpy=("bitwise_or",)),
    _b("bitwise_xor", np.bitwise_xor, np.bitwise_xor, True, numpy=("bitwise_xor",)),
    _b("left_shift", np.left_shift, bitvec=True, numpy=("left_shift",)),
    _b("right_shift", np.right_shift, bitvec=True, numpy=("right_shift",)),
    _u("abs", np.abs, numpy=("abs", "absolute")),
    _u("negative", np.negative, numpy=("negative",)),
    _u("sign", np.sign, numpy=("sign",)),
    _u("trunc", np.trunc, numpy=("trunc",)),
    _u("floor", np.floor, numpy=("floor",)),
    _u("ceil", np.ceil, numpy=("ceil",)),
    _u("exp", np.exp, numpy=("exp",)),
    _u("log", np.log, numpy=("log",)),
    _u("cos", np.cos, numpy=("cos",)),
    _u("sin", np.sin, numpy=("sin",)),
    _u("tan", np.tan, numpy=("tan",)),
    _u("tanh", np.tanh, numpy=("tanh",)),
    _u("arctan", np.arctan, numpy=("arctan",)),
    _u("sqrt", np.sqrt, numpy=("sqrt",)),
    _u("rsqrt", lambda x: 1.0 / np.sqrt(x)),
    _u("sigmoid", _sigmoid),
    _u("relu", lambda x: np.maximum(x, 0)),
    _u("gelu", _gelu),
    _u("gelu_dx", _gelu_dx),
    _u("gelu_apprx_tanh", _gelu_tanh),
    _u("gelu_apprx_sigmoid", lambda x: x * _sigmoid(1.702 * x)),
    _u("silu", lambda x: x * _sigmoid(x)),
    _u("silu_dx", lambda x: _sigmoid(x) * (1 + x * (1 - _sigmoid(x)))),
    _u("erf", _erf32),
    _u("erf_dx", lambda x: np.float32(2 / math.sqrt(math.pi)) * np.exp(-x * x)),
    _u("softplus", _softplus),
    _u("mish", lambda x: x * np.tanh(_softplus(x))),
    _u("square", np.square, numpy=("square",)),
    _u("reciprocal", np.reciprocal, numpy=("reciprocal",)),
    _u("copy", lambda x: x, numpy=("copy",)),
    _u("invert", np.invert, activation=False, bitvec=True, numpy=("invert", "bitwise_not")),
    _u("logical_not", np.logical_not, activation=False, numpy=("logical_not",)),
    _r("max", "maximum", numpy=("max", "amax")),
    _r("min", "minimum", numpy=("min", "amin")),
    _r("sum", "add", numpy=("sum",)),
    _r("prod", "multiply", numpy=("prod",)),
    _r("all", "logical_and", numpy=("all",)),
    _r("mean", ""),
    _r("var", ""),
]}

_BY_NUMPY = {}
for _op in OPS.values():
    for _n in _op.numpy_names:
        _BY_NUMPY.setdefault(id(getattr(np, _n)), _op)


def lookup_op(op) -> NkiOp | None:
    """The op an op code names (an NkiOp, its name, or NumPy's function of it), else None."""
    if isinstance(op, NkiOp):
        return op
    if isinstance(op, str):
        return OPS.get(op)
    return _BY_NUMPY.get(id(op))


def _unsupported(op, where: str, allowed: str) -> UnsupportedOperationError:
    label = getattr(op, "__name__", repr(op))
    return UnsupportedOperationError(
        f"{label} is not supported in '{where}'", remedy=f"pass one of the nki.language op codes: {allowed}")


def binary_op(op, where: str = "instruction") -> NkiOp:
    """Resolve an ALU op code; reduction functions (nl.max) name their ALU op (maximum)."""
    found = lookup_op(op)
    if found is not None and found.kind == "reduce" and found.alias_of:
        found = OPS[found.alias_of]
    if found is None or found.kind != "binary":
        raise _unsupported(op, where, "nl.add, nl.subtract, nl.multiply, nl.maximum, nl.minimum, ...")
    return found


def reduce_op(op, where: str = "tensor_reduce") -> NkiOp:
    found = binary_op(op, where)
    if found.reduce_ufunc is None:
        raise UnsupportedOperationError(f"{found!r} cannot be used as a reduction in '{where}'",
                                        remedy="reduce with nl.add, nl.multiply, nl.maximum, nl.minimum or a "
                                               "logical/bitwise and/or/xor")
    return found


def activation_op(op, where: str = "activation") -> NkiOp:
    found = lookup_op(op)
    if found is None or found.kind != "unary" or not found.activation:
        raise _unsupported(op, where, "nl.exp, nl.relu, nl.sigmoid, nl.tanh, nl.copy, nl.square, ...")
    return found


def unary_op(op, where: str) -> NkiOp:
    found = lookup_op(op)
    if found is None or found.kind != "unary":
        raise _unsupported(op, where, "a unary nki.language function")
    return found
