"""Selection on the Vector engine: a predicated copy into an existing tile, a select by the free
index's range (range_select) or by a predicate tile (select_reduce), both reducing into the
accumulator registers (nkisim.instructions.accumulator), and dropout.

Readings the reference leaves open, chosen here and used by nkisim.kinds.select:
- a predicate element is true when it is nonzero (the documented NumPy form,
  `np.where(predicate, ...)`), and reverse_pred negates that truth: the documented
  `~predicate` taken bitwise would leave every 0/1 predicate true;
- a reducing instruction reduces the fp32 values it selected, before they are rounded into dst
  (why the range_select reference keeps reduce_res fp32: FP32_MIN, not -inf, reaches it).
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes
from ..alu import binary_op, reduce_op
from ..errors import ArgumentError, MemorySpaceError, NotSimulatedError, ShapeError, UnsupportedOperationError
from ..memory import Buffer
from ..platforms import current_rules
from ..registry import INSTRUCTIONS, instruction, machine_call
from ..tensor import DeviceTensor
from ..trace import Engine
from .accumulator import IDLE, LOAD_REDUCE, RESET_REDUCE, command, reduction
from .common import ON_CHIP, free_size, number, operand, out_dtype, partitions, same_partitions, scalar_operand

FP32_MIN = float(np.finfo(np.float32).min)     # range_select's only fill value (a hardware constraint)
COMPARISONS = ("equal", "less", "less_equal", "greater", "greater_equal")
_COPY_PREDICATES = (dtypes.uint8, dtypes.uint16, dtypes.uint32)
_SELECT_PREDICATES = (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16)
_DTYPE_CODE = "err_instruction_unsupported_dtypes"


# ----- checks the four share -----------------------------------------------------------------------

def _flag(value, instr: str, param: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentError(f"'{param}' of '{instr}' must be True or False, got {value!r}",
                            remedy=f"pass {param}=True or {param}=False")
    return bool(value)


def _same_elements(instr: str, **tiles) -> None:
    """Equal partitions and equal elements per partition (ranks may differ, as documented)."""
    same_partitions(instr, **tiles)
    sizes = {name: free_size(t) for name, t in tiles.items()}
    if len(set(sizes.values())) > 1:
        listing = ", ".join(f"{name}{list(t.shape)}" for name, t in tiles.items())
        raise ShapeError(f"{listing} of '{instr}' must hold as many elements per partition",
                         remedy="slice the operands to the same number of elements per partition")


def _predicate(t, instr: str, allowed: tuple) -> None:
    if t.dtype not in allowed:
        names = ", ".join(dtypes.name_of(d) for d in allowed)
        raise UnsupportedOperationError(f"predicate of '{instr}' is {dtypes.name_of(t.dtype)}; it must be one "
                                        f"of {names}", remedy="make the predicate tile one of those integer "
                                                              "dtypes (e.g. nisa.tensor_copy into a uint8 tile)",
                                        code=_DTYPE_CODE)


def _not_both_psum(instr: str, a, a_name: str, b, b_name: str) -> None:
    if getattr(a, "buffer", None) is Buffer.PSUM and b.buffer is Buffer.PSUM:
        raise MemorySpaceError(f"'{a_name}' and '{b_name}' of '{instr}' are both in PSUM; at most one may be",
                               remedy="copy one of them to SBUF with nisa.tensor_copy first")


def _writes_dst(m, dst, instr: str, mask):
    operand(dst, instr, "dst", ON_CHIP, mask=mask)
    m.check_writable(dst, f"'{instr}' writes dst")
    return dst


def _dtype_is_dst(dtype, dst, instr: str) -> None:
    """dtype= of an instruction that writes a given dst can only repeat dst's dtype."""
    if dtype is not None and dtypes.to_dtype(dtype) != dst.dtype:
        raise UnsupportedOperationError(f"dtype={dtypes.name_of(dtypes.to_dtype(dtype))} of '{instr}' differs "
                                        f"from dst's {dtypes.name_of(dst.dtype)}: the result is written into dst",
                                        remedy="leave dtype unset", code=_DTYPE_CODE)


def _maximum(op, instr: str) -> str:
    alu = reduce_op(op, instr)
    if alu.name != "maximum":
        raise UnsupportedOperationError(f"reduce_op of '{instr}' must be a maximum (the only reduction it "
                                        f"supports), got {alu!r}", remedy="pass reduce_op=nl.maximum")
    return alu.name


def _reduction_command(reduce_cmd, mask, instr: str) -> int:
    """The reduce_cmd of range_select / select_reduce: no load_reduce (neither has a reduce_init),
    and no reduction of a masked instruction."""
    cmd = command(reduce_cmd, instr)
    if cmd == LOAD_REDUCE:
        raise UnsupportedOperationError(f"'{instr}' has no reduce_init to load: reduce_cmd=load_reduce is not "
                                        "documented for it", remedy="use reset_reduce or reduce",
                                        code="err_not_simulated")
    if mask is not None and cmd != IDLE:
        raise UnsupportedOperationError(f"'{instr}' with a mask= and a reduction: which elements a masked "
                                        "instruction reduces is not documented",
                                        remedy="slice the operands instead of masking them",
                                        code="err_not_simulated")
    return cmd


# ----- tensor_copy_predicated ---------------------------------------------------------------------

@instruction("tensor_copy_predicated", Engine.VECTOR, kinds=("copy_predicated",))
def tensor_copy_predicated(m, *, src, dst, predicate, reverse_pred=False, mask=None, dtype=None):
    """dst = src where the predicate is true; elsewhere dst keeps what it held, so the record
    reads dst as well as writing it. Writes dst in place and returns nothing."""
    instr = "tensor_copy_predicated"
    _writes_dst(m, dst, instr, mask)
    operand(predicate, instr, "predicate", ON_CHIP, mask=mask)
    _predicate(predicate, instr, _COPY_PREDICATES)
    _dtype_is_dst(dtype, dst, instr)
    reads = [predicate, dst]
    if isinstance(src, (numbers.Number, np.number)) and not isinstance(src, (bool, np.bool_)):
        _same_elements(instr, dst=dst, predicate=predicate)
        spec = {"const": _scalar_in(src, dst, instr)}
    else:
        operand(src, instr, "src", ON_CHIP, mask=mask)
        if src.dtype != dst.dtype:
            raise UnsupportedOperationError(f"src ({dtypes.name_of(src.dtype)}) and dst ({dtypes.name_of(dst.dtype)}) "
                                            f"of '{instr}' must share a dtype",
                                            remedy="cast src first with nisa.tensor_copy", code=_DTYPE_CODE)
        _not_both_psum(instr, src, "src", predicate, "predicate")
        _same_elements(instr, src=src, dst=dst, predicate=predicate)
        reads.append(src)
        spec = {"read": 2}
    m.emit("tensor_copy_predicated", Engine.VECTOR, "copy_predicated", reads, [dst], mask=mask,
           params={"src": spec, "reverse": _flag(reverse_pred, instr, "reverse_pred")})


def _scalar_in(value, dst, instr: str):
    """A scalar src, as a plain number dst's dtype holds."""
    value = number(value)
    if dst.dtype.kind in "iu":
        if not float(value).is_integer():
            raise UnsupportedOperationError(f"src {value!r} of '{instr}' is not an integer, and dst is "
                                            f"{dtypes.name_of(dst.dtype)}", remedy="pass an integer",
                                            code=_DTYPE_CODE)
        info = np.iinfo(dst.dtype)
        if not info.min <= value <= info.max:
            raise UnsupportedOperationError(f"src {value!r} of '{instr}' does not fit dst's "
                                            f"{dtypes.name_of(dst.dtype)}", remedy="pass a value in dst's range",
                                            code=_DTYPE_CODE)
        return int(value)
    return float(value)


# ----- range_select -------------------------------------------------------------------------------

@instruction("range_select", Engine.VECTOR, kinds=("range_select",))
def range_select(m, *, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd=RESET_REDUCE, reduce_res=None,
                 reduce_op=np.amax, range_start=0, on_false_value=FP32_MIN, mask=None, dtype=None):
    """dst = on_true_tile where comp_op0(i, bound0) and comp_op1(i, bound1), i = range_start +
    the free index (fp32), else FP32_MIN; the selected row's maximum reduces into the
    accumulator registers as reduce_cmd says. This function honours reduce_cmd (NKI 0.3+);
    the legacy dialect's `legacy_range_select` gives SDK 2.26's behaviour."""
    instr = "range_select"
    if current_rules().nc_version < 3:
        raise UnsupportedOperationError("nisa.range_select runs on NeuronCore-v3 and newer (Trn2), not on this "
                                        "platform's NeuronCore-v2", remedy="use nisa.affine_select on Trn1",
                                        code="err_instruction_unsupported_on_target")
    operand(on_true_tile, instr, "on_true_tile", ON_CHIP, mask=mask)
    if not dtypes.is_float(on_true_tile.dtype) or on_true_tile.ndim != 2:
        raise UnsupportedOperationError(f"on_true_tile of '{instr}' must be a 2-D float tile (partitions, free "
                                        f"index), got {on_true_tile._label()}: which index a tile of several "
                                        "free dimensions compares is not documented",
                                        remedy="reshape it to (partitions, elements)", code="err_not_simulated")
    _fill_is_fp32_min(on_false_value)
    ops = [_comparison(op, instr, name) for op, name in ((comp_op0, "comp_op0"), (comp_op1, "comp_op1"))]
    reads = [on_true_tile]
    for bound, name in ((bound0, "bound0"), (bound1, "bound1")):
        operand(bound, instr, name, ON_CHIP)
        if bound.dtype != dtypes.float32 or partitions(bound) != partitions(on_true_tile) or free_size(bound) != 1:
            raise ShapeError(f"{name} of '{instr}' must be a float32 tile of one element per partition "
                             f"({partitions(on_true_tile)}, 1), got {bound._label()}",
                             code="err_tensor_scalar_operand_shape")
        reads.append(bound)
    if isinstance(range_start, (bool, np.bool_)) or not isinstance(range_start, (numbers.Real, np.number)):
        raise ArgumentError(f"range_start of '{instr}' must be a number, got {range_start!r}",
                            remedy="pass the index the first column compares as, e.g. range_start=0")
    cmd = _reduction_command(reduce_cmd, mask, instr)
    params = {"cmp0": ops[0], "cmp1": ops[1], "start": float(np.float32(range_start))}
    result = m.new_tile(on_true_tile.shape, out_dtype(dtype, on_true_tile.dtype), Buffer.SBUF)
    writes = [result]
    reduction(m, instr, on_true_tile, _maximum(reduce_op, instr), cmd, reduce_res, reads, writes, params)
    m.emit("range_select", Engine.VECTOR, "range_select", reads, writes, params=params, mask=mask)
    return result


def _fill_is_fp32_min(value) -> None:
    if (isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.number))
            or np.float32(value) != np.float32(FP32_MIN)):
        raise UnsupportedOperationError(
            f"on_false_value of 'range_select' is {value!r}: the hardware fills with FP32_MIN "
            "(-3.4028235e+38) only", remedy="leave on_false_value unset, or pass nl.fp32.min; to fill with another "
                                            "value, follow with nisa.affine_select or a tensor_tensor select",
            code="err_unsupported_args")


def _comparison(op, instr: str, param: str) -> str:
    alu = binary_op(op, instr)
    if alu.name not in COMPARISONS:
        raise UnsupportedOperationError(f"{param} of '{instr}' must be one of nl.{', nl.'.join(COMPARISONS)}, got "
                                        f"{alu!r}", remedy="compare with one of those")
    return alu.name


def _legacy_range_select(m, *, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd=IDLE, reduce_res=None,
                         reduce_op=np.amax, range_start=0, on_false_value=FP32_MIN, mask=None, dtype=None):
    """SDK 2.26's range_select: its compiler resets the accumulator and reduces this instruction
    whatever reduce_cmd says (the NKI 0.3 release notes: "range_select now honours
    reduce_cmd"), so idle and reset_reduce both mean reset_reduce and the others are refused."""
    if command(reduce_cmd, "range_select") not in (IDLE, RESET_REDUCE):
        raise UnsupportedOperationError(
            "SDK 2.26's range_select does not honour reduce_cmd: it resets the accumulator and reduces this "
            "instruction only (honoured since NKI 0.3)", remedy="leave reduce_cmd unset; combine the maxima of "
                                                                "several calls with nisa.tensor_tensor(op=np.maximum)",
            code="err_not_simulated")
    return INSTRUCTIONS["range_select"].semantics(
        m, on_true_tile=on_true_tile, comp_op0=comp_op0, comp_op1=comp_op1, bound0=bound0,
        bound1=bound1, reduce_cmd=RESET_REDUCE, reduce_res=reduce_res, reduce_op=reduce_op, range_start=range_start,
        on_false_value=on_false_value, mask=mask, dtype=dtype)


legacy_range_select = machine_call(_legacy_range_select, "nisa.range_select")
legacy_range_select.__name__ = legacy_range_select.__qualname__ = "range_select"


# ----- select_reduce ------------------------------------------------------------------------------

@instruction("select_reduce", Engine.VECTOR, kinds=("select_reduce",))
def select_reduce(m, *, dst, predicate, on_true, on_false, reduce_res=None, reduce_cmd=IDLE, reduce_op=np.amax,
                  reverse_pred=False, mask=None, dtype=None):
    """dst = on_true where the predicate is true (xor reverse_pred), else on_false (a number or
    one value per partition); the result's maximum per partition reduces into the accumulator
    registers as reduce_cmd says. Writes dst in place and returns nothing."""
    instr = "select_reduce"
    _writes_dst(m, dst, instr, mask)
    operand(predicate, instr, "predicate", ON_CHIP, mask=mask)
    operand(on_true, instr, "on_true", ON_CHIP, mask=mask)
    _predicate(predicate, instr, _SELECT_PREDICATES)
    if on_true.dtype in (dtypes.int32, dtypes.uint32) or dtypes.is_tf32(on_true.dtype):
        raise UnsupportedOperationError(f"on_true of '{instr}' may not be {dtypes.name_of(on_true.dtype)}",
                                        remedy="copy it into a float32 tile first", code=_DTYPE_CODE)
    _not_both_psum(instr, on_true, "on_true", predicate, "predicate")
    _same_elements(instr, on_true=on_true, dst=dst, predicate=predicate)
    _dtype_is_dst(dtype, dst, instr)
    reads = [predicate, on_true]
    if isinstance(on_false, (bool, np.bool_)):
        raise ArgumentError(f"on_false of '{instr}' must be a float32 number or a (P, 1) tile, got {on_false!r}",
                            remedy="pass a float, e.g. on_false=0.0")
    on_false_spec = scalar_operand(on_false, instr, "on_false", partitions(on_true), reads)
    if "const" in on_false_spec:
        on_false_spec = {"const": float(np.float32(on_false_spec["const"]))}
    cmd = _reduction_command(reduce_cmd, mask, instr)
    params = {"on_false": on_false_spec, "reverse": _flag(reverse_pred, instr, "reverse_pred")}
    writes = [dst]
    reduction(m, instr, on_true, _maximum(reduce_op, instr), cmd, reduce_res, reads, writes, params)
    m.emit("select_reduce", Engine.VECTOR, "select_reduce", reads, writes, params=params, mask=mask)


# ----- dropout ------------------------------------------------------------------------------------

@instruction("dropout", Engine.VECTOR, kinds=("dropout",))
def dropout(m, data, prob, *, mask=None, dtype=None):
    """Zero each element with probability `prob` (a number, or a (P, 1) tile of one per
    partition); the survivors keep their values, unscaled.

    The draw is nkisim's, not the hardware's random stream: each dropout gets a seed of its own,
    its place in the program, recorded in its params, so the same kernel keeps the same
    elements on every run and however the executor splits the program. prob 0 keeps every
    element and prob 1 zeroes every one, as on hardware."""
    instr = "dropout"
    operand(data, instr, "data", ON_CHIP, mask=mask)
    result_dtype = out_dtype(dtype, data.dtype)
    integer = data.dtype.kind in "iub"
    if integer and result_dtype != data.dtype:
        raise UnsupportedOperationError(f"'{instr}' of {dtypes.name_of(data.dtype)} data must keep its dtype, got "
                                        f"dtype={dtypes.name_of(result_dtype)}", remedy="leave dtype unset",
                                        code=_DTYPE_CODE)
    reads = [data]
    if isinstance(prob, (bool, np.bool_)):
        raise ArgumentError(f"prob of '{instr}' must be a number or a (P, 1) tile, got {prob!r}",
                            remedy="pass the drop probability as a float, e.g. prob=0.1")
    spec = scalar_operand(prob, instr, "prob", partitions(data), reads)
    if "const" in spec and not 0.0 <= spec["const"] <= 1.0:
        raise UnsupportedOperationError(f"prob of '{instr}' is {spec['const']!r}: a probability is between 0 and 1",
                                        remedy="pass the drop probability, 0.0 to 1.0", code="err_unsupported_args")
    if "read" in spec and integer and prob.dtype != dtypes.float32:
        raise UnsupportedOperationError(f"prob of '{instr}' on {dtypes.name_of(data.dtype)} data must be float32, "
                                        f"got {dtypes.name_of(prob.dtype)}", remedy="keep the probabilities in a "
                                                                                  "float32 tile", code=_DTYPE_CODE)
    if "read" in spec and not dtypes.is_float(prob.dtype):
        raise UnsupportedOperationError(f"prob of '{instr}' must be a float tile, got {dtypes.name_of(prob.dtype)}",
                                        remedy="keep the probabilities in a float32 tile", code=_DTYPE_CODE)
    result = m.new_tile(data.shape, result_dtype, Buffer.SBUF)
    m.emit("dropout", Engine.VECTOR, "dropout", reads, [result], mask=mask,
           params={"prob": spec, "seed": len(m.trace)})
    return result


def _legacy_dropout(m, x, rate, *, dtype=None, mask=None):
    """SDK 2.26's nl.dropout: nisa.dropout with `rate` "a scalar value or a tile with 1 element".
    A one-element tile is the per-partition probability of a one-partition x; for x of more
    partitions how the compiler spreads it is not documented, so that case is refused."""
    if isinstance(rate, (bool, np.bool_)) or not isinstance(rate, (numbers.Number, np.number, DeviceTensor)):
        raise ArgumentError(f"rate of nl.dropout must be a number or a tile with 1 element, got {rate!r}",
                            remedy="pass the drop probability as a float, e.g. rate=0.1")
    if not isinstance(rate, DeviceTensor) and not 0.0 <= float(rate) <= 1.0:
        raise UnsupportedOperationError(f"rate of nl.dropout is {rate!r}: a probability is between 0 and 1",
                                        remedy="pass the drop probability, 0.0 to 1.0", code="err_unsupported_args")
    if isinstance(rate, DeviceTensor):
        if rate.size != 1:
            raise ShapeError(f"rate of nl.dropout must be a tile with 1 element, got {rate._label()}",
                             remedy="pass one probability: a number, or a [1, 1] tile",
                             code="err_unsupported_args")
        if isinstance(x, DeviceTensor) and partitions(x) != 1:
            raise NotSimulatedError(f"nl.dropout of a {partitions(x)}-partition tile with a one-element rate tile: "
                                    "how the rate reaches every partition is not documented",
                                    remedy="pass the rate as a number, or one probability per partition with "
                                           "nisa.dropout(data, prob=<(P, 1) tile>)")
    return INSTRUCTIONS["dropout"].semantics(m, x, rate, mask=mask, dtype=dtype)


legacy_dropout = machine_call(_legacy_dropout, "nl.dropout")
legacy_dropout.__name__ = legacy_dropout.__qualname__ = "dropout"
