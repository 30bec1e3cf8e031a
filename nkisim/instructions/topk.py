"""GpSimd's top-k (NKI 0.6's nisa.topk; SDK 2.26 has no such instruction).

Each of the GpSimd engine's eight cores reaches 16 contiguous partitions, and each group of 16
partitions is one problem: its source is read as a 16-partition snake (element s at partition
s % 16 of the group, free position s // 16), of which the first n elements take part. The k
largest (k = val_dst's free size) are written in the same snake layout, result j at partition
j % 16, position j // 16, with their snake indices in idx_dst.

What nkisim reads where the 0.6 reference is loose (its v2.33 successor, which describes the
same instruction, settles the group and snake layout):
- the results are in ascending order of value (0.6: "the K largest values in ascending order");
  equal values keep ascending index order, and where equal values straddle the k-th place the
  lower indices are kept; NaN (what never-written memory holds) ranks above every number, as in
  max8, so a read of unwritten memory shows;
- only positions 0 .. ceil(k/16) - 1 are written (the later reference says so); when k is not a
  multiple of 16 the slots past result k - 1 in the last written position are written by the
  hardware with values the reference does not give: nkisim writes NaN and 0xFFFFFFFF there, so
  a kernel that reads them shows it. The later positions keep what they held (the record reads
  both destinations as they were)."""
from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes
from ..errors import NotSimulatedError, ShapeError, UnsupportedOperationError
from ..platforms import current_rules
from ..registry import instruction
from ..trace import Engine
from .common import SBUF_ONLY, operand, partitions, start_partition

GROUP = 16                       # partitions a GpSimd core reaches: one top-k problem
N_RANGE = (8, 65536)             # 8 <= n < 65536
K_RANGE = (1, 32768)             # 1 <= k < 32768 (and k <= n)
_INSTR = "topk"


def _integer(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
        raise UnsupportedOperationError(f"{what} of '{_INSTR}' must be an int known when the kernel is traced, "
                                        f"got {value!r}", code="err_unsupported_args")
    return int(value)


def _check_dtypes(src, val_dst, idx_dst) -> None:
    wrong = [(name, t, want) for name, t, want in (("src", src, dtypes.bfloat16), ("val_dst", val_dst, dtypes.bfloat16),
                                                   ("idx_dst", idx_dst, dtypes.uint32)) if t.dtype != want]
    if wrong:
        name, t, want = wrong[0]
        raise UnsupportedOperationError(f"{name} of '{_INSTR}' is {t._label()}; topk takes a bfloat16 src and "
                                        "writes bfloat16 values and uint32 indices",
                                        remedy=f"hold {name} in a {dtypes.name_of(want)} tile",
                                        code="err_instruction_unsupported_dtypes")


def _check_shapes(src, val_dst, idx_dst, n: int) -> int:
    """k, after the reference's shape rules: 2-D tiles of one partition count, a multiple of 16
    starting on a group's first partition, dsts [P, k], src holding ceil(n/16) positions."""
    for name, t in (("src", src), ("val_dst", val_dst), ("idx_dst", idx_dst)):
        if t.ndim != 2:
            raise ShapeError(f"{name} of '{_INSTR}' must be 2-D [partitions, free], got {t._label()}",
                             code="err_param_shape_mismatch")
    p = partitions(src)
    if p % GROUP or partitions(val_dst) != p or partitions(idx_dst) != p:
        raise ShapeError(f"'{_INSTR}' works on groups of {GROUP} partitions: src, val_dst and idx_dst need the same "
                         f"partition count, a multiple of {GROUP}; got {src._label()}, {val_dst._label()} and "
                         f"{idx_dst._label()}", remedy="give every operand 16, 32, ... or 128 partitions",
                         code="err_param_shape_mismatch")
    for name, t in (("src", src), ("val_dst", val_dst), ("idx_dst", idx_dst)):
        if start_partition(t) % GROUP:
            raise NotSimulatedError(
                f"{name} of '{_INSTR}' starts on partition {start_partition(t)}: a GpSimd core reaches the 16 "
                "partitions of its group from the group's first, and a problem split across two groups is not "
                "documented", remedy="start every operand on partition 0, 16, 32, ...", code="err_not_simulated")
    k = val_dst.shape[1]
    if idx_dst.shape[1] != k:
        raise ShapeError(f"val_dst and idx_dst of '{_INSTR}' need the same free size k, got {val_dst._label()} and "
                         f"{idx_dst._label()}", code="err_param_shape_mismatch")
    if not N_RANGE[0] <= n < N_RANGE[1]:
        raise ShapeError(f"n of '{_INSTR}' is {n}; it must be in [{N_RANGE[0]}, {N_RANGE[1]})",
                         code="err_param_out_of_range")
    if not K_RANGE[0] <= k < K_RANGE[1] or k > n:
        raise ShapeError(f"k of '{_INSTR}' (val_dst's free size) is {k}; it must be in [{K_RANGE[0]}, {K_RANGE[1]}) "
                         f"and at most n = {n}", remedy="size val_dst and idx_dst [partitions, k]",
                         code="err_param_out_of_range")
    if src.shape[1] * GROUP < n:
        raise ShapeError(f"src of '{_INSTR}' holds {src.shape[1] * GROUP} snake elements a group "
                         f"({src.shape[1]} positions x {GROUP} partitions), fewer than n = {n}",
                         remedy=f"give src at least ceil(n / 16) = {-(-n // GROUP)} free positions",
                         code="err_param_shape_mismatch")
    return k


@instruction(_INSTR, Engine.GPSIMD, kinds=("topk",))
def topk(m, val_dst, idx_dst, src, n):
    """Per 16-partition group, the k largest of the first n snake elements of src into val_dst
    and their indices into idx_dst (in place; see the module docstring for the layout)."""
    if current_rules().nc_version < 3:
        raise UnsupportedOperationError(f"'{_INSTR}' runs on NeuronCore-v3 (Trainium2) and newer",
                                        remedy="trace for trn2", code="err_instruction_unsupported_on_target")
    operand(src, _INSTR, "src", SBUF_ONLY)
    operand(val_dst, _INSTR, "val_dst", SBUF_ONLY)
    operand(idx_dst, _INSTR, "idx_dst", SBUF_ONLY)
    m.check_writable(val_dst, f"the val_dst of '{_INSTR}'")
    m.check_writable(idx_dst, f"the idx_dst of '{_INSTR}'")
    _check_dtypes(src, val_dst, idx_dst)
    n = _integer(n, "n")
    k = _check_shapes(src, val_dst, idx_dst, n)
    m.emit(_INSTR, Engine.GPSIMD, "topk", [src, val_dst, idx_dst], [val_dst, idx_dst], params={"n": n, "k": k})
