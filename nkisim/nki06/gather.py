"""NKI 0.6 bindings of the cross-partition movement and gather instructions (nisa.nc_stream_shuffle,
nc_n_gather, sequence_bounds, nonzero_with_count), lowered onto the table's functions
(nkisim.instructions.gather).

nc_stream_shuffle and nonzero_with_count write their dst in place (each leaves some of dst's
partitions as they were), so their records are the table's own; the others deliver their
result to dst."""
from __future__ import annotations

from .. import dtypes as _dt
from ..errors import MemorySpaceError as _MemorySpaceError
from ..errors import ShapeError as _ShapeError
from ..errors import UnsupportedOperationError as _Unsupported
from ..memory import Buffer as _Buffer
from ..tensor import DeviceTensor as _DeviceTensor
from . import bind as _bind
from .bind import binding as _binding
from .bind import deliver as _deliver
from .bind import destination as _destination
from .bind import semantics as _semantics

_nc_stream_shuffle = _semantics("nc_stream_shuffle")
_nc_n_gather = _semantics("nc_n_gather")
_sequence_bounds = _semantics("sequence_bounds")
_nonzero_with_count = _semantics("nonzero_with_count")


@_binding
def nc_stream_shuffle(m, dst, src, shuffle_mask, name=None):
    _bind.instruction_name(name, "nc_stream_shuffle")
    _destination(dst, "nc_stream_shuffle")
    _nc_stream_shuffle(m, src, dst, shuffle_mask)


def _sbuf_dst(dst, instr: str) -> None:
    if dst._alloc.buffer is not _Buffer.SBUF:
        raise _MemorySpaceError(f"'dst' of 'nisa.{instr}' must be in SBUF (the GpSimd engine cannot reach PSUM), "
                                f"got {dst._label()}", remedy="write an SBUF tile", code="err_unsupported_memory")


@_binding
def nc_n_gather(m, dst, data, indices, name=None):
    """dst[p, j] = data_flat[p, indices_flat[p, j]]; dst has data's dtype and indices' elements
    per partition (any free shape of that size)."""
    _bind.instruction_name(name, "nc_n_gather")
    _destination(dst, "nc_n_gather")
    _sbuf_dst(dst, "nc_n_gather")
    if type(data) is _DeviceTensor and data.dtype != dst.dtype:
        raise _Unsupported(f"nisa.nc_n_gather moves elements unchanged: data is {_dt.name_of(data.dtype)}, dst "
                           f"{_dt.name_of(dst.dtype)}", remedy="give dst the dtype of data",
                           code="err_instruction_unsupported_dtypes")
    if type(indices) is _DeviceTensor and indices.shape != dst.shape:
        if indices.shape[:1] != dst.shape[:1] or indices.size != dst.size:
            raise _ShapeError(f"'dst' of 'nisa.nc_n_gather' {dst._label()} must span the partitions of indices "
                              f"{indices._label()} and hold as many elements per partition",
                              remedy="allocate dst with the shape of indices", code="err_param_shape_mismatch")
        indices = indices.reshape(dst.shape)       # the same elements in dst's free shape
    _deliver(m, dst, _nc_n_gather(m, data, indices), "nc_n_gather")


@_binding
def sequence_bounds(m, dst, segment_ids, name=None):
    _bind.instruction_name(name, "sequence_bounds")
    _destination(dst, "sequence_bounds")
    _sbuf_dst(dst, "sequence_bounds")
    _deliver(m, dst, _sequence_bounds(m, segment_ids=segment_ids, dtype=dst.dtype), "sequence_bounds")


@_binding
def nonzero_with_count(m, dst, src, index_offset=0, padding_val=-1, name=None):
    _bind.instruction_name(name, "nonzero_with_count")
    _destination(dst, "nonzero_with_count")
    _nonzero_with_count(m, src, dst, index_offset=index_offset, padding_val=padding_val)
