"""Reading what a sandboxed child sent back, which may be forged byte for byte.

Pure helpers, no I/O: every size is checked with Python integers (never NumPy's fixed-width
ones, which wrap), every read stays inside the bytes received, and every text is cut to a
bound before it can reach a report. Anything malformed is a `BadResult` naming what was wrong,
which the caller turns into an error verdict for that run, never a crashed grade.
"""
from __future__ import annotations

import io
import json
import math
import struct

import numpy as np

MAX_DIMS = 32                 # NumPy's own limit is 64; no kernel output has more than a few
MAX_NPY_HEADER = 10_000       # NumPy's default max_header_size
HEADER_MAGIC = b"GRH1"        # a result starts with it, then the header's length (u64 LE), then the JSON
MAX_HEADER_BYTES = 256 << 20  # counts, texts and a profile picture; far above any honest header
ERROR_TEXT_LIMIT = 8 * 1024   # a child's error message, as shown in a report


class BadResult(ValueError):
    """The child's result is malformed or larger than allowed."""


def bounded_text(value: object, limit: int = ERROR_TEXT_LIMIT) -> str:
    """`value` as text of at most about `limit` characters, saying how much was cut."""
    text = value if isinstance(value, str) else repr(value)[: limit + 1]
    if len(text) <= limit:
        return text
    return text[:limit] + f"... [{len(text) - limit} more characters cut]"


def header_frame(header: dict) -> bytes:
    """What a child writes first: the magic, the JSON header's length, the JSON. Length-prefixed,
    so a header's size is never mistaken for a malformed line (a profile of a million
    instructions is long), and the reader knows before it parses whether it is within bounds."""
    body = json.dumps(header, separators=(",", ":")).encode()
    return HEADER_MAGIC + struct.pack("<Q", len(body)) + body


def read_header_line(data: bytes | bytearray | memoryview, max_bytes: int = MAX_HEADER_BYTES) -> tuple[dict, int]:
    """The JSON object of the header frame at the start of `data` (see header_frame) and the
    offset just past it. A header over `max_bytes` is refused before it is parsed."""
    view = memoryview(data)
    prefix = len(HEADER_MAGIC) + 8
    if len(view) < prefix or bytes(view[:len(HEADER_MAGIC)]) != HEADER_MAGIC:
        raise BadResult("no header frame")
    (size,) = struct.unpack("<Q", view[len(HEADER_MAGIC):prefix])
    if size > max_bytes:
        raise BadResult(f"header of {size} bytes is over the {max_bytes} allowed")
    if prefix + size > len(view):
        raise BadResult(f"header runs past the end of the result ({prefix + size} > {len(view)} bytes)")
    try:
        header = json.loads(view[prefix:prefix + size].tobytes())
    except (ValueError, RecursionError) as err:
        raise BadResult(f"header is not JSON ({bounded_text(str(err), 200)})") from None
    if not isinstance(header, dict):
        raise BadResult("header is not a JSON object")
    return header, prefix + size


def bounded_int(value: object, low: int, high: int, what: str) -> int:
    """`value` if it is a plain int (not a bool) within [low, high], else BadResult."""
    if type(value) is not int or not low <= value <= high:
        raise BadResult(f"{what} must be an integer from {low} to {high}, got {bounded_text(value, 40)}")
    return value


def read_npy_at(view: memoryview, pos: int, max_bytes: int) -> tuple[np.ndarray, int]:
    """The .npy array starting at `pos` in `view` (a view of it, not a copy) and the offset
    where it ends. Refuses object and zero-size dtypes (never unpickles), more than MAX_DIMS
    dimensions, negative or non-integer dimensions, data over `max_bytes`, and data running
    past the end of `view`."""
    if not 0 <= pos <= len(view):
        raise BadResult(f"array offset {pos} outside the {len(view)} bytes received")
    head = io.BytesIO(view[pos:pos + 12 + MAX_NPY_HEADER])
    try:
        version = np.lib.format.read_magic(head)
        read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                       (2, 0): np.lib.format.read_array_header_2_0}.get(version)
        if read_header is None:
            raise BadResult(f".npy format version {version} is not supported")
        shape, fortran_order, dtype = read_header(head, max_header_size=MAX_NPY_HEADER)
    except BadResult:
        raise
    except (ValueError, KeyError, OSError, EOFError, SyntaxError, TypeError, OverflowError) as err:
        raise BadResult(f"not a valid .npy array ({bounded_text(str(err), 200)})") from None
    if not isinstance(shape, tuple) or len(shape) > MAX_DIMS:
        raise BadResult(f"array has more than {MAX_DIMS} dimensions")
    if not all(type(n) is int and n >= 0 for n in shape):
        raise BadResult(f"array shape {bounded_text(shape, 200)} is not a tuple of non-negative integers")
    if dtype.hasobject or dtype.itemsize == 0:
        raise BadResult(f"array dtype {dtype} cannot be received (objects or zero-sized items)")
    count = math.prod(shape)                      # a Python int: no wrap-around
    size = count * dtype.itemsize
    if size > max_bytes:
        raise BadResult(f"array of shape {bounded_text(shape, 200)} holds {size} bytes, over the {max_bytes} allowed")
    start = pos + head.tell()
    end = start + size
    if end > len(view):
        raise BadResult(f"array data runs past the end of the result ({end} > {len(view)} bytes)")
    arr = np.frombuffer(view, dtype=dtype, count=count, offset=start)
    return arr.reshape(shape, order="F" if fortran_order else "C"), end
