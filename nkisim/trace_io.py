"""A trace on the wire: compact JSON a sandboxed child sends its parent, and a validating
decoder, so the parent computes latency from the trace with its own cost model and never
unpickles anything the child wrote."""
from __future__ import annotations

import json

from .registry import INSTRUCTIONS
from .source import SourceSite
from .trace import Engine, Region, TraceRecord

_ATTR_TYPES = (str, int, float, bool, type(None))


class TraceFormatError(ValueError):
    pass


def _region(r: Region) -> list:
    return [r.alloc_id, r.buffer, r.start, list(r.shape), list(r.strides) if r.strides is not None else None,
            r.itemsize, r.dtype, r.partitions, list(r._bounds) if r.strides is None else None]


def encode(records: list[TraceRecord]) -> bytes:
    rows = []
    for rec in records:
        attrs = {k: (list(v) if isinstance(v, tuple) else v) for k, v in rec.attrs.items()}
        site = [rec.site.filename, rec.site.lineno] if rec.site else None
        rows.append([rec.opcode, int(rec.engine), rec.accumulate, attrs,
                     [_region(r) for r in rec.reads], [_region(r) for r in rec.writes], site])
    return json.dumps(rows, separators=(",", ":")).encode()


def _int(v, what):
    if type(v) is not int:      # what json.loads makes of an integer, and nothing else (not bool)
        raise TraceFormatError(f"{what} must be an integer")
    return v


def _ints(values, what) -> tuple:
    if type(values) is not list or not all(type(v) is int for v in values):
        raise TraceFormatError(f"{what} must be a list of integers")
    return tuple(values)


def _decode_region(raw) -> Region:
    if not isinstance(raw, list) or len(raw) != 9:
        raise TraceFormatError("bad region")
    alloc_id, buffer, start, shape, strides, itemsize, dtype, parts, bounds = raw
    if buffer not in ("hbm", "shared_hbm", "sbuf", "psum") or not isinstance(dtype, str):
        raise TraceFormatError("bad region buffer or dtype")
    shape = _ints(shape, "shape")
    if any(s < 0 for s in shape):
        raise TraceFormatError("negative shape")
    strides = _ints(strides, "strides") if strides is not None else None
    if strides is not None and len(strides) != len(shape):
        raise TraceFormatError("strides do not match shape")
    if (strides is None) == (bounds is None):
        raise TraceFormatError("a region has strides or bounds")
    bounds = _ints(bounds, "bounds") if bounds is not None else None
    item = _int(itemsize, "itemsize")
    if item not in (1, 2, 4, 8):
        raise TraceFormatError("bad itemsize")
    return Region(_int(alloc_id, "alloc id"), buffer, _int(start, "start"), shape, strides, item, dtype,
                  max(1, _int(parts, "partitions")), bounds)


def decode(data: bytes, max_records: int = 5_000_000) -> list[TraceRecord]:
    try:
        rows = json.loads(data)
    except (ValueError, UnicodeDecodeError) as err:
        raise TraceFormatError(f"trace is not JSON: {err}") from None
    if not isinstance(rows, list) or len(rows) > max_records:
        raise TraceFormatError("trace must be a list of at most %d records" % max_records)
    records = []
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != 7:
            raise TraceFormatError(f"record {i} is malformed")
        opcode, engine, accumulate, attrs, reads, writes, site = row
        if opcode not in INSTRUCTIONS:
            raise TraceFormatError(f"record {i}: unknown opcode {opcode!r}")
        try:
            engine = Engine(_int(engine, "engine"))
        except ValueError:
            raise TraceFormatError(f"record {i}: unknown engine") from None
        if not isinstance(attrs, dict) or not all(isinstance(k, str) for k in attrs):
            raise TraceFormatError(f"record {i}: bad attrs")
        for k, v in attrs.items():
            if isinstance(v, list):
                attrs[k] = tuple(v)
            elif not isinstance(v, _ATTR_TYPES):
                raise TraceFormatError(f"record {i}: bad attr {k}")
        site_obj = SourceSite(str(site[0]), _int(site[1], "line")) if isinstance(site, list) and len(site) == 2 else None
        records.append(TraceRecord(i, opcode, engine, [_decode_region(r) for r in reads],
                                   [_decode_region(r) for r in writes], site_obj, bool(accumulate), attrs))
    return records
