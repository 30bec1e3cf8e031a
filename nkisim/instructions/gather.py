"""Cross-partition movement and gathers: the Vector engine's quadrant shuffle, GpSimd's
per-partition gather (nc_n_gather, Beta 1's nl.gather_flattened), segment bounds and the
nonzero indices of each GpSimd core's first partition.

Which elements a gather reads are data, known only when the program runs: tracing checks
shapes and dtypes, and the value kinds (nkisim.kinds.gather) check every index against its
bounds as they execute. Out-of-bounds indices are undefined behaviour on the hardware; here
they are an error naming the index, never a read outside the operand."""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import dtypes
from ..errors import ShapeError, UnsupportedOperationError
from ..indexing import IndexExpr
from ..memory import Buffer
from ..platforms import current_rules
from ..registry import instruction
from ..tensor import DeviceTensor
from ..trace import Engine
from .common import ON_CHIP, SBUF_ONLY, free_size, operand, out_dtype, partitions, start_partition

QUADRANT = 32            # nc_stream_shuffle moves partitions within each quadrant of 32
KEEP = 255               # a shuffle_mask entry leaving its dst partition unchanged
# the start partitions nc_stream_shuffle allows, by active partitions (the ISA reference)
_STARTS = {32: (0, 32, 64, 96), 64: (0, 64), 96: (0,), 128: (0,)}
_BOUNDS_DTYPES = ("float32", "int32")


# ----- nc_stream_shuffle (Vector) -------------------------------------------------------------------

def shuffle_entries(shuffle_mask, instr: str) -> list[int]:
    """The 32 entries of a shuffle_mask as ints: a source partition 0..31 within the quadrant, or 255."""
    if isinstance(shuffle_mask, (str, bytes)) or not hasattr(shuffle_mask, "__len__"):
        raise ShapeError(f"shuffle_mask of '{instr}' must be a list of {QUADRANT} ints, got "
                         f"{type(shuffle_mask).__name__}", remedy="pass e.g. list(range(32))[::-1]",
                         code="err_unsupported_args")
    entries = list(shuffle_mask)
    if len(entries) != QUADRANT:
        raise ShapeError(f"shuffle_mask of '{instr}' has {len(entries)} entries; it needs exactly {QUADRANT}, one "
                         "per partition of a quadrant", remedy="give one entry per partition 0..31 (255 leaves "
                                                               "that partition unchanged)",
                         code="err_unsupported_args")
    out = []
    for i, e in enumerate(entries):
        if isinstance(e, IndexExpr):
            raise UnsupportedOperationError(
                f"shuffle_mask[{i}] of '{instr}' is an affine expression, which nkisim does not simulate",
                remedy="give the entries as plain Python ints", code="err_not_simulated")
        if isinstance(e, bool) or not isinstance(e, (numbers.Integral, np.integer)):
            raise ShapeError(f"shuffle_mask[{i}] of '{instr}' must be an int, got {e!r}", code="err_unsupported_args")
        e = int(e)
        if not (0 <= e < QUADRANT or e == KEEP):
            raise ShapeError(f"shuffle_mask[{i}] of '{instr}' is {e}: an entry names a source partition 0..31 "
                             f"within the quadrant, or is {KEEP} to leave dst partition {i} unchanged",
                             code="err_unsupported_args")
        out.append(e)
    return out


def _check_shuffle_partitions(src: DeviceTensor, dst: DeviceTensor, entries: list[int], instr: str) -> None:
    """The start-partition rules of the ISA reference, and every moved partition inside src."""
    sp, dp = partitions(src), partitions(dst)
    active = math.ceil(max(sp, dp) / QUADRANT) * QUADRANT
    allowed = _STARTS[active]
    for name, t in (("src", src), ("dst", dst)):
        first = start_partition(t)
        if first not in allowed:
            raise ShapeError(
                f"'{instr}' touches {active} active partitions, so {name} must start at partition "
                f"{' or '.join(map(str, allowed))}; {name} {t._label()} starts at partition {first}",
                remedy="start both tiles on a quadrant boundary the rule allows (0 with 96 or 128 active "
                       "partitions, 0 or 64 with 64, any multiple of 32 with 32)", code="err_unsupported_args")
    for i in range(dp):
        e = entries[i % QUADRANT]
        if e != KEEP and (i // QUADRANT) * QUADRANT + e >= sp:
            raise ShapeError(
                f"shuffle_mask[{i % QUADRANT}] = {e} makes dst partition {i} of '{instr}' copy src partition "
                f"{(i // QUADRANT) * QUADRANT + e}, but src {src._label()} has {sp} partitions",
                remedy=f"name source partitions src has, or {KEEP} to leave that dst partition unchanged",
                code="err_tensor_access_out_of_bound")


@instruction("nc_stream_shuffle", Engine.VECTOR, kinds=("stream_shuffle",))
def nc_stream_shuffle(m, src, dst, shuffle_mask, *, dtype=None, mask=None):
    """dst partition i <- src partition shuffle_mask[i % 32] of the same quadrant (255: unchanged).
    Writes dst in place (both dialects pass it); the record also reads dst when an entry is 255,
    since those partitions keep what dst held."""
    instr = "nc_stream_shuffle"
    operand(src, instr, "src", ON_CHIP, mask=mask)
    operand(dst, instr, "dst", ON_CHIP, mask=mask)
    m.check_writable(dst, f"the dst of '{instr}'")
    if src.dtype != dst.dtype or (dtype is not None and dtypes.to_dtype(dtype) != src.dtype):
        wanted = dtypes.name_of(dtypes.to_dtype(dtype)) if dtype is not None else dtypes.name_of(dst.dtype)
        raise UnsupportedOperationError(
            f"'{instr}' moves elements unchanged: src is {dtypes.name_of(src.dtype)}, the output {wanted}",
            remedy="give dst the dtype of src (cast afterwards with nisa.tensor_copy)",
            code="err_instruction_unsupported_dtypes")
    if free_size(src) != free_size(dst):
        raise ShapeError(f"'{instr}' needs as many elements per partition in dst {dst._label()} as in src "
                         f"{src._label()}", remedy="slice both to the same free size",
                         code="err_param_shape_mismatch")
    entries = shuffle_entries(shuffle_mask, instr)
    _check_shuffle_partitions(src, dst, entries, instr)
    keeps = any(entries[i % QUADRANT] == KEEP for i in range(partitions(dst)))
    reads = [src, dst] if keeps else [src]
    m.emit(instr, Engine.VECTOR, "stream_shuffle", reads, [dst], mask=mask, params={"mask": entries})


# ----- nc_n_gather / nl.gather_flattened (GpSimd) -----------------------------------------------------

@instruction("nc_n_gather", Engine.GPSIMD, kinds=("n_gather",))
def gather_flattened(m, data, indices, *, mask=None, dtype=None):
    """out[p, j] = data_flat[p, indices_flat[p, j]]: a gather within each partition over data's
    flattened free dimensions; the result has indices' shape (nl.gather_flattened of SDK 2.26,
    nisa.nc_n_gather of NKI 0.6)."""
    instr = "nc_n_gather"
    operand(data, instr, "data", SBUF_ONLY, mask=mask)
    operand(indices, instr, "indices", SBUF_ONLY, mask=mask)
    for name, t in (("data", data), ("indices", indices)):
        if not 2 <= t.ndim <= 4:
            raise ShapeError(f"'{name}' of '{instr}' must be 2-, 3- or 4-dimensional, got {t._label()}",
                             remedy="reshape it to (partitions, free...) with at most three free dimensions")
    if indices.dtype != dtypes.uint32:
        raise UnsupportedOperationError(f"indices of '{instr}' must be uint32, got {indices._label()}",
                                        remedy="compute or cast the indices into a uint32 tile",
                                        code="err_instruction_unsupported_dtypes")
    if partitions(data) != partitions(indices):
        raise ShapeError(f"data {data._label()} and indices {indices._label()} of '{instr}' must span the same "
                         "partitions: each partition gathers from its own row", code="err_partition_mismatch")
    if free_size(data) == 0:
        raise ShapeError(f"data {data._label()} of '{instr}' has no elements to gather from")
    result = m.new_tile(indices.shape, out_dtype(dtype, data.dtype), Buffer.SBUF)
    m.emit(instr, Engine.GPSIMD, "n_gather", [data, indices], [result], mask=mask)
    return result


# ----- sequence_bounds (GpSimd) -----------------------------------------------------------------------

@instruction("sequence_bounds", Engine.GPSIMD, kinds=("sequence_bounds",))
def sequence_bounds(m, *, segment_ids, dtype=None):
    """For each element of a (1, n) tile of segment ids: [start, end) of its run of equal ids,
    as a (1, 2, n) tile (starts, then ends); padding (id 0) gets start n and end -1."""
    instr = "sequence_bounds"
    operand(segment_ids, instr, "segment_ids", SBUF_ONLY)
    if segment_ids.ndim != 2 or segment_ids.shape[0] != 1:
        raise ShapeError(f"segment_ids of '{instr}' must be a (1, n) tile (partition dimension 1), got "
                         f"{segment_ids._label()}", remedy="put the ids in one partition, one free dimension",
                         code="err_param_shape_mismatch")
    result_dtype = out_dtype(dtype, segment_ids.dtype)
    for name, dt in (("segment_ids", segment_ids.dtype), ("the output", result_dtype)):
        if dtypes.name_of(dt) not in _BOUNDS_DTYPES:
            raise UnsupportedOperationError(f"{name} of '{instr}' must be float32 or int32, got {dtypes.name_of(dt)}",
                                            code="err_instruction_unsupported_dtypes")
    n = segment_ids.shape[1]
    result = m.new_tile((1, 2, n), result_dtype, Buffer.SBUF)
    m.emit(instr, Engine.GPSIMD, "sequence_bounds", [segment_ids], [result])
    return result



# ----- nonzero_with_count (GpSimd, NeuronCore-v3+) ----------------------------------------------------

CORE_PARTITIONS = 16     # each GpSimd core reaches 16 partitions and works on its first


@instruction("nonzero_with_count", Engine.GPSIMD, kinds=("nonzero_with_count",))
def nonzero_with_count(m, src, dst, *, index_offset=0, padding_val=-1):
    """In partitions 0, 16, ..., 112 only: dst row = the indices of src's nonzero elements (plus
    index_offset), padding_val for the rest, then their count. dst's other partitions keep what
    they held, so the record reads dst too. Writes dst in place (NKI 0.6 passes it)."""
    instr = "nonzero_with_count"
    if current_rules().nc_version < 3:
        raise UnsupportedOperationError(f"'{instr}' runs on NeuronCore-v3 (Trainium2) and newer",
                                        remedy="trace for trn2", code="err_instruction_engine_unsupported")
    operand(src, instr, "src", SBUF_ONLY)
    operand(dst, instr, "dst", SBUF_ONLY)
    m.check_writable(dst, f"the dst of '{instr}'")
    if dtypes.name_of(src.dtype) not in _BOUNDS_DTYPES or dst.dtype != dtypes.int32:
        raise UnsupportedOperationError(f"'{instr}' reads a float32 or int32 src and writes an int32 dst, got src "
                                        f"{src._label()} and dst {dst._label()}",
                                        code="err_instruction_unsupported_dtypes")
    for name, value in (("index_offset", index_offset), ("padding_val", padding_val)):
        if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)) or \
                not -2**31 <= int(value) < 2**31:
            raise UnsupportedOperationError(f"{name} of '{instr}' must be an int32 number, got {value!r}",
                                            code="err_unsupported_args")
    if src.ndim != 2 or dst.ndim != 2 or partitions(src) != partitions(dst) or dst.shape[1] != src.shape[1] + 1:
        raise ShapeError(f"'{instr}' takes a 2-D src and a dst of the same partitions with one more element, "
                         f"got src {src._label()} and dst {dst._label()}",
                         remedy="allocate dst as (src.shape[0], src.shape[1] + 1) int32",
                         code="err_param_shape_mismatch")
    first = start_partition(src)
    if start_partition(dst) != first:
        raise UnsupportedOperationError(
            f"src and dst of '{instr}' start on different partitions ({first} and {start_partition(dst)}): "
            "which of src's rows a core's dst row receives is not documented", remedy="start both on one partition",
            code="err_not_simulated")
    rows = [p for p in range(partitions(src)) if (first + p) % CORE_PARTITIONS == 0]
    m.emit(instr, Engine.GPSIMD, "nonzero_with_count", [src, dst], [dst],
           params={"rows": rows, "offset": int(index_offset), "padding": int(padding_val)})
