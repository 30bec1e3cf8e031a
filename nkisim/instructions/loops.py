"""nl.loop_reduce: a reduction carried across loop iterations, lowered onto tensor_tensor.

The NKI documentation defines

    b = nl.loop_reduce(a, op=np.add, loop_indices=[k], dtype=nl.float32)

inside a loop as the same as `b = nisa.tensor_tensor(data1=b, data2=a, op=np.add,
dtype=nl.float32)`: the tile the call is assigned to is also an input of the op. So the
destination is found from the kernel's own assignment statement (the `executing` library
names the call being run, and its parent statement gives the target), its current tile is
read, and one tensor_tensor instruction combines the two.
"""
from __future__ import annotations

import ast
import builtins
import copy
import numbers

import executing

from ..alu import binary_op
from ..errors import ArgumentError, NotSimulatedError, UnsupportedOperationError
from ..source import user_frame
from ..tensor import DeviceTensor
from .common import operand
from .vector import tensor_tensor

# The ops for which "the destination is an input" cannot depend on operand order (the docs
# give b op a in one place and a op b in another).
_ORDER_FREE_OPS = frozenset({"add", "multiply", "maximum", "minimum", "logical_and", "logical_or",
                             "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor"})

_DESTINATION_REMEDY = ("allocate the accumulator before the loop (e.g. b = nl.zeros(shape, nl.float32, "
                       "buffer=nl.sbuf)) and assign the call to it inside the loop: "
                       "b = nl.loop_reduce(a, op=np.add, loop_indices=[k])")


def loop_reduce(x, op, loop_indices, *, dtype=None, mask=None):
    alu = binary_op(op, "loop_reduce")
    if alu.name not in _ORDER_FREE_OPS:
        raise NotSimulatedError(
            f"nl.loop_reduce with op={alu!r} is not simulated: the NKI documentation leaves the "
            "operand order of a non-commutative op unclear",
            remedy="write the step explicitly, e.g. b = nisa.tensor_tensor(b, a, op=nl.subtract)")
    _check_loop_indices(loop_indices)
    if mask is not None:
        raise NotSimulatedError(
            "nl.loop_reduce with mask= is not simulated",
            remedy="reduce a slice of the tile instead: b[0:n] = nl.loop_reduce(a[0:n], ...)")
    operand(x, "loop_reduce", "x")
    destination = _destination(user_frame(2))
    operand(destination, "loop_reduce", "destination")
    return tensor_tensor(destination, x, alu, dtype=dtype)


def _check_loop_indices(loop_indices) -> None:
    indices = loop_indices if isinstance(loop_indices, (list, tuple)) else [loop_indices]
    for index in indices:
        if not isinstance(index, numbers.Integral):
            raise ArgumentError(
                f"loop_indices of nl.loop_reduce must be loop indices (integers), got {index!r}",
                remedy="pass the index of the loop being reduced over, e.g. loop_indices=[k] for "
                       "`for k in nl.affine_range(K)`")


def _destination(frame) -> DeviceTensor:
    """The current value of the target the kernel assigns the loop_reduce call to."""
    node = executing.Source.executing(frame).node if frame is not None else None
    if node is None:
        raise UnsupportedOperationError(
            "nl.loop_reduce needs the kernel's source to find the tile it reduces into, and it "
            "is not available", remedy="run the kernel from a .py file", code="err_loop_reduce_destination")
    statement = getattr(node, "parent", None)
    target = None
    if isinstance(statement, ast.Assign) and statement.value is node and len(statement.targets) == 1:
        target = statement.targets[0]
    elif isinstance(statement, ast.AnnAssign) and statement.value is node:
        target = statement.target
    if not isinstance(target, (ast.Name, ast.Subscript, ast.Attribute)):
        raise UnsupportedOperationError(
            "nl.loop_reduce must be assigned with '=' to the tile it accumulates into: that tile "
            "is also an input of the op", remedy=_DESTINATION_REMEDY, code="err_loop_reduce_destination")
    label = ast.unparse(target)
    try:
        value = _read(target, frame)
    except (NameError, AttributeError, KeyError, IndexError):
        raise UnsupportedOperationError(
            f"nl.loop_reduce accumulates into '{label}', which has no value yet",
            remedy=_DESTINATION_REMEDY, code="err_loop_reduce_destination") from None
    if not isinstance(value, DeviceTensor):
        raise UnsupportedOperationError(
            f"nl.loop_reduce accumulates into '{label}', which is a {type(value).__name__}, not a tile",
            remedy=_DESTINATION_REMEDY, code="err_loop_reduce_destination")
    return value


def _read(target: ast.expr, frame):
    if isinstance(target, ast.Name):
        for space in (frame.f_locals, frame.f_globals, vars(builtins)):
            if target.id in space:
                return space[target.id]
        raise NameError(target.id)
    # b[i] / self.b: evaluate the target expression as a load in the kernel's own frame
    load = copy.deepcopy(target)
    for sub in ast.walk(load):
        if hasattr(sub, "ctx"):
            sub.ctx = ast.Load()
    code = compile(ast.Expression(body=load), frame.f_code.co_filename, "eval")
    return eval(code, frame.f_globals, frame.f_locals)  # noqa: S307 - the kernel's own expression
