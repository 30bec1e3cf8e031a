"""grader.wire: reading a child's result that may be forged byte for byte. Every malformed or
oversized field is a BadResult naming what is wrong, never a crash or a huge allocation."""
from __future__ import annotations

import io
import json
import struct

import numpy as np
import pytest

from grader.wire import (ERROR_TEXT_LIMIT, HEADER_MAGIC, BadResult, bounded_int, bounded_text, header_frame,
                         read_header_line,
                         read_npy_at)


def npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


def forged_npy(shape, descr: str = "<f4", data: bytes = bytes(64), fortran: bool = False) -> bytes:
    """A .npy stream whose header says anything (NumPy's writer checks nothing we rely on)."""
    body = repr({"descr": descr, "fortran_order": fortran, "shape": shape}).encode()
    body += b" " * (-(len(body) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(body).to_bytes(2, "little") + body + data


def test_arrays_are_read_in_place_one_after_another():
    a, b = np.arange(12, dtype=np.float32).reshape(3, 4), np.asfortranarray(np.eye(3, dtype=np.float16))
    data = b"junk" + npy(a) + npy(b)
    view = memoryview(data)
    first, end = read_npy_at(view, 4, max_bytes=1 << 20)
    second, end2 = read_npy_at(view, end, max_bytes=1 << 20)
    assert np.array_equal(first, a) and first.dtype == a.dtype
    assert np.array_equal(second, b) and end2 == len(data)
    assert np.shares_memory(first, np.frombuffer(data, np.uint8))        # a view, not a copy


@pytest.mark.parametrize("data, why", [
    (forged_npy((2 ** 32, 2 ** 32)), "over the"),                       # wraps to 0 in int64
    (forged_npy((2 ** 62, 4)), "over the"),
    (forged_npy((-1, 4)), "non-negative"),
    (forged_npy((4.0, 4)), "valid"),
    (forged_npy((True, 1)), "non-negative integers"),
    (forged_npy((1,) * 40), "dimensions"),
    (forged_npy((100, 100)), "past the end"),
    (forged_npy((2,), descr="|O"), "cannot be received"),
    (forged_npy((2,), descr="|V0"), "cannot be received"),
    (forged_npy((2,), descr="<q8"), "not a valid .npy"),
    (b"\x93NUMPY\x01\x00\xff\xff" + b"{" * 65535, "not a valid .npy"),
    (b"\x93NUMPY\x09\x00", "not supported"),
    (b"not an array at all", "not a valid .npy"),
    (b"", "not a valid .npy"),
])
def test_a_forged_array_is_a_bad_result(data, why):
    with pytest.raises(BadResult, match=why):
        read_npy_at(memoryview(data), 0, max_bytes=1 << 30)


def test_the_size_cap_and_the_offset_are_checked():
    data = npy(np.zeros(1024, np.float32))
    with pytest.raises(BadResult, match="over the 100 allowed"):
        read_npy_at(memoryview(data), 0, max_bytes=100)
    with pytest.raises(BadResult, match="outside"):
        read_npy_at(memoryview(data), len(data) + 1, max_bytes=1 << 20)


def test_bounded_text_cuts_and_says_so():
    assert bounded_text("short") == "short"
    long = "A" * 50_000_000
    cut = bounded_text(long)
    assert len(cut) < ERROR_TEXT_LIMIT + 100 and cut.endswith(f"[{50_000_000 - ERROR_TEXT_LIMIT} more characters cut]")
    assert len(bounded_text(["x" * 10_000] * 10_000, 100)) < 200        # not text: its repr, bounded too


def test_the_header_frame_is_a_bounded_json_object():
    header, pos = read_header_line(header_frame({"status": "ok", "arrays": 1}) + b"rest")
    assert header == {"status": "ok", "arrays": 1} and pos == 12 + len(b'{"status":"ok","arrays":1}')

    def framed(body: bytes, size: int | None = None) -> bytes:
        return HEADER_MAGIC + struct.pack("<Q", len(body) if size is None else size) + body
    for data, why in [(b'{"status": "ok"}\n', "no header frame"), (framed(b"x" * 2000), "over the 1000 allowed"),
                      (framed(b"{}", size=1 << 62), "over the"), (framed(b"{}", size=50), "runs past the end"),
                      (framed(b"[1, 2]"), "not a JSON object"), (framed(b"{bad json}"), "not JSON"),
                      (framed(b"[" * 100_000), "not JSON")]:
        with pytest.raises(BadResult, match=why):
            read_header_line(data, max_bytes=1000 if why == "over the 1000 allowed" else 1 << 20)


def test_a_header_over_a_megabyte_is_not_malformed():
    """Size is not suspicion: a long profile or print-out in an honest header is read whole."""
    header = {"status": "ok", "printed": "p" * 3_000_000, "profile": {"svg": "<svg>" + "r" * 2_000_000}}
    assert read_header_line(header_frame(header))[0] == header


def test_bounded_int_refuses_bools_floats_and_out_of_range():
    assert bounded_int(3, 0, 16, "arrays") == 3
    for value in (True, 3.0, "3", -1, 17, 2 ** 70, None):
        with pytest.raises(BadResult, match="arrays must be an integer"):
            bounded_int(value, 0, 16, "arrays")
    assert json.loads("1e999") == float("inf")             # what a forged count may decode to
    with pytest.raises(BadResult):
        bounded_int(json.loads("1e999"), 0, 16, "arrays")
