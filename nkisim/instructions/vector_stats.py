"""Statistics and top-8 instructions of the Vector engine: bn_stats / bn_aggr (mean and
variance per partition) and max8 / nc_find_index8 / nc_match_replace8 (the 8 largest values,
where given values are, and replacing them). Each checks its operands and emits one record;
nkisim.kinds.stats does the math (fp32, rounded once into the destination dtype).

Signatures are the SDK 2.26 reference's (results returned; dtype=, mask=). Where the 2.26 and
NKI 0.6 references document different behaviour for the same instruction, the table function
takes a keyword saying which, and each dialect passes its own (`absent=` of nc_find_index8,
`order=` of nc_match_replace8); their defaults are the 2.26 behaviour.

mask= is refused on all five: the 2.26 reference applies it "to the data tensor" (nc_find_index8,
nc_match_replace8), not to the result the executor masks, and says nothing of the others."""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import dtypes
from ..errors import HardwareLimitError, ShapeError, UnsupportedOperationError
from ..memory import Buffer
from ..registry import INSTRUCTIONS, instruction, machine_call
from ..trace import Engine
from .common import free_size, operand, out_dtype, partitions, same_partitions

BN_STATS_FMAX = 512            # nl.tile_size.bn_stats_fmax ("due to hardware limitation")
TOP8_MIN, TOP8_MAX = 8, 16384  # elements per partition max8 / nc_find_index8 read
MATCH_MAX = 16384              # nc_match_replace8's data ("no more than 16,384")
INDEX_DTYPES = (dtypes.uint16, dtypes.uint32)
# what a value absent from the data gives nc_find_index8: undefined (2.26: refused when it
# happens, at execution) or an all-ones index (NKI 0.6)
ABSENT = ("undefined", "all_ones")
# the order nc_match_replace8 pairs duplicate vals with their matches: forward (2.26's NumPy
# equivalent, vals[0] first) or reverse (NKI 0.6: vals[7] first)
ORDERS = ("forward", "reverse")


def _no_mask(mask, instr: str) -> None:
    if mask is not None:
        raise UnsupportedOperationError(
            f"mask= of '{instr}' is not simulated: the reference does not say which elements of the data and "
            "the result it keeps", remedy="slice the operands to the valid region instead of masking",
            code="err_not_simulated")


def _rank(t, most: int, instr: str, param: str) -> None:
    if t.ndim > most:
        raise ShapeError(f"'{param}' of '{instr}' is {t.ndim}-D ({list(t.shape)}); it may have at most {most} "
                         "dimensions, the partition dimension included",
                         remedy="fold free dimensions together with reshape", code="err_unsupported_tile_rank")


def _elements(t, low: int, high: int, instr: str, param: str) -> int:
    n = free_size(t)
    if not low <= n <= high:
        raise HardwareLimitError(f"'{param}' of '{instr}' has {n} elements per partition; it must have "
                                 f"{low} to {high}", remedy="split the data along its free dimension",
                                 code="err_size_of_dimension_exceed_arch_limit")
    return n


def _eight_vals(vals, data, instr: str) -> None:
    operand(vals, instr, "vals")
    _rank(vals, 3, instr, "vals")
    if free_size(vals) != 8:
        raise ShapeError(f"'vals' of '{instr}' must hold exactly 8 values per partition, got {list(vals.shape)}",
                         remedy="pass a (P, 8) tile, e.g. what nisa.max8 gives",
                         code="err_param_shape_mismatch")
    same_partitions(instr, data=data, vals=vals)


def _index_dtype(dtype, instr: str, param: str) -> np.dtype:
    chosen = dtypes.to_dtype(dtype)
    if chosen not in INDEX_DTYPES:
        raise UnsupportedOperationError(f"'{param}' of '{instr}' holds indices: uint16 or uint32, got "
                                        f"{dtypes.name_of(chosen)}", remedy="use nl.uint32 (or nl.uint16)",
                                        code="err_instruction_unsupported_dtypes")
    return chosen


@instruction("bn_stats", Engine.VECTOR, kinds=("bn_stats",))
def bn_stats(m, data, *, mask=None, dtype=None):
    """Per partition: [count, mean, variance * count] of the even-position elements of the
    flattened free dimensions, then the same of the odd-position ones (6 values). At least 2
    elements, so neither half is empty: what an empty half's mean would be is not documented."""
    _no_mask(mask, "bn_stats")
    operand(data, "bn_stats", "data")
    _rank(data, 5, "bn_stats", "data")
    _elements(data, 2, BN_STATS_FMAX, "bn_stats", "data")
    result = m.new_tile((partitions(data), 6), out_dtype(dtype, data.dtype), Buffer.SBUF)
    m.emit("bn_stats", Engine.VECTOR, "bn_stats", [data], [result])
    return result


@instruction("bn_aggr", Engine.VECTOR, kinds=("bn_aggr",))
def bn_aggr(m, data, *, mask=None, dtype=None):
    """Per partition: [mean, variance] of all the (count, mean, variance * count) triples in
    `data` (bn_stats results side by side). The variance is the population variance (divided
    by the total count, as np.var), the reading the reference's "variance * count" implies."""
    _no_mask(mask, "bn_aggr")
    operand(data, "bn_aggr", "data")
    _rank(data, 5, "bn_aggr", "data")
    n = free_size(data)
    if n == 0 or n % 3:
        raise ShapeError(f"'data' of 'bn_aggr' holds (count, mean, variance * count) triples: its {n} elements "
                         "per partition are not a multiple of 3", remedy="pass the bn_stats results (6 values "
                                                                          "each) side by side",
                         code="err_param_shape_mismatch")
    result = m.new_tile((partitions(data), 2), out_dtype(dtype, data.dtype), Buffer.SBUF)
    m.emit("bn_aggr", Engine.VECTOR, "bn_aggr", [data], [result])
    return result


@instruction("max8", Engine.VECTOR, kinds=("max8",))
def max8(m, *, src, mask=None, dtype=None):
    """The 8 largest values of each partition, in descending order, compared in fp32. NaN
    (what nkisim's never-written memory holds) ranks above every number, so a read of unwritten
    memory shows; the hardware's NaN order is not documented."""
    _no_mask(mask, "max8")
    operand(src, "max8", "src")
    _rank(src, 5, "max8", "src")
    _elements(src, TOP8_MIN, TOP8_MAX, "max8", "src")
    result = m.new_tile((partitions(src), 8), out_dtype(dtype, src.dtype), Buffer.SBUF)
    m.emit("max8", Engine.VECTOR, "max8", [src], [result])
    return result


@instruction("nc_find_index8", Engine.VECTOR, kinds=("find_index8",))
def nc_find_index8(m, *, data, vals, mask=None, dtype=None, absent="undefined"):
    """The index (in the flattened free dimensions) of each of the 8 vals in `data`, per
    partition, compared in fp32. Duplicate vals take successive occurrences in ascending order
    (the NKI 0.6 reference; 2.26 only says "first occurrence", and it is the same hardware).
    A value `data` does not hold: `absent="undefined"` (2.26, "behavior is undefined") stops
    execution there; `absent="all_ones"` (NKI 0.6) gives 0xFFFFFFFF (uint32) or 0xFFFF (uint16)."""
    _no_mask(mask, "nc_find_index8")
    if absent not in ABSENT:
        raise UnsupportedOperationError(f"absent= of 'nc_find_index8' is one of {ABSENT}, got {absent!r}",
                                        code="err_unsupported_args")
    operand(data, "nc_find_index8", "data")
    _rank(data, 5, "nc_find_index8", "data")
    _elements(data, TOP8_MIN, TOP8_MAX, "nc_find_index8", "data")
    _eight_vals(vals, data, "nc_find_index8")
    chosen = _index_dtype(dtypes.uint32 if dtype is None else dtype, "nc_find_index8", "dtype")
    result = m.new_tile((partitions(data), 8), chosen, Buffer.SBUF)
    m.emit("nc_find_index8", Engine.VECTOR, "find_index8", [data, vals], [result], params={"absent": absent})
    return result


@instruction("nc_match_replace8", Engine.VECTOR, kinds=("match_replace8",))
def nc_match_replace8(m, *, data, vals, imm, dst_idx=None, mask=None, dtype=None, order="forward"):
    """`data` with the first occurrence of each of the 8 vals replaced by `imm` (compared in
    fp32, each position matched once), and optionally the matched indices written to `dst_idx`
    (a second write of the record). Duplicate vals take successive occurrences: in `order`
    "forward" vals[0] takes the first (2.26's NumPy equivalent), in "reverse" vals[7] does
    (NKI 0.6). A value `data` does not hold is undefined in both references, and a val equal to
    imm leaves open whether a replaced element matches again: execution stops at either."""
    _no_mask(mask, "nc_match_replace8")
    if order not in ORDERS:
        raise UnsupportedOperationError(f"order= of 'nc_match_replace8' is one of {ORDERS}, got {order!r}",
                                        code="err_unsupported_args")
    if isinstance(imm, bool) or not isinstance(imm, (numbers.Real, np.floating, np.integer)) \
            or math.isnan(float(imm)):
        raise UnsupportedOperationError(f"imm of 'nc_match_replace8' must be a number (a float32 constant), got "
                                        f"{imm!r}", code="err_expected_constant_value")
    operand(data, "nc_match_replace8", "data")
    _rank(data, 5, "nc_match_replace8", "data")
    _elements(data, 1, MATCH_MAX, "nc_match_replace8", "data")
    _eight_vals(vals, data, "nc_match_replace8")
    writes = []
    result = m.new_tile(data.shape, out_dtype(dtype, data.dtype), Buffer.SBUF)
    writes.append(result)
    if dst_idx is not None:
        operand(dst_idx, "nc_match_replace8", "dst_idx")
        m.check_writable(dst_idx, "dst_idx of 'nc_match_replace8'")
        if free_size(dst_idx) != 8:
            raise ShapeError(f"'dst_idx' of 'nc_match_replace8' holds the 8 matched indices per partition, got "
                             f"{list(dst_idx.shape)}", remedy="pass a tile shaped like vals, e.g. (P, 8)",
                             code="err_param_shape_mismatch")
        same_partitions("nc_match_replace8", data=data, dst_idx=dst_idx)
        _index_dtype(dst_idx.dtype, "nc_match_replace8", "dst_idx")
        writes.append(dst_idx)
    m.emit("nc_match_replace8", Engine.VECTOR, "match_replace8", [data, vals], writes,
           params={"imm": float(imm), "order": order})
    return result


# the legacy dialect's functions: SDK 2.26's signatures, without the keywords that say which
# reference's behaviour the table follows (the 0.6 bindings pass their own)
def _legacy_nc_find_index8(m, *, data, vals, mask=None, dtype=None):
    return INSTRUCTIONS["nc_find_index8"].semantics(m, data=data, vals=vals, mask=mask, dtype=dtype)


def _legacy_nc_match_replace8(m, *, data, vals, imm, dst_idx=None, mask=None, dtype=None):
    return INSTRUCTIONS["nc_match_replace8"].semantics(m, data=data, vals=vals, imm=imm, dst_idx=dst_idx,
                                                       mask=mask, dtype=dtype)


legacy_nc_find_index8 = machine_call(_legacy_nc_find_index8, "nisa.nc_find_index8")
legacy_nc_find_index8.__name__ = legacy_nc_find_index8.__qualname__ = "nc_find_index8"
legacy_nc_match_replace8 = machine_call(_legacy_nc_match_replace8, "nisa.nc_match_replace8")
legacy_nc_match_replace8.__name__ = legacy_nc_match_replace8.__qualname__ = "nc_match_replace8"
