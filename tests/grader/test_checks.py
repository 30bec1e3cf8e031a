"""The output check counts, locates and measures what is wrong the same way whatever the chunk
size it compares in: against np.isclose on the whole arrays at once."""
from __future__ import annotations

import numpy as np
import pytest

from grader import checks


def near(dtype, n, seed=0):
    rng = np.random.default_rng(seed)
    expected = (rng.random(n) * 4 - 2).astype(dtype)
    out = (expected.astype(np.float64) + rng.normal(0, 3e-6, n)).astype(dtype)
    return out, expected


@pytest.mark.parametrize("chunk", [7, 64, checks.CHUNK])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_mismatches_are_counted_and_located_as_isclose_finds_them(monkeypatch, chunk, dtype):
    monkeypatch.setattr(checks, "CHUNK", chunk)
    out, expected = near(dtype, 1000)
    out[[5, 63, 64, 700]] += dtype(0.5)
    rtol, atol = 1e-5, 1e-8
    got = checks.check_output(out.reshape(10, 100), expected.reshape(10, 100), rtol, atol)
    o, e = out.astype(np.float64), expected.astype(np.float64)
    close = np.isclose(o, e, rtol=rtol, atol=atol)
    first = int(np.argmin(close))
    assert not got.ok and got.mismatched == np.count_nonzero(~close) >= 4
    assert f"{got.mismatched} of 1000 output values differ" in got.message
    assert f"first at index {(first // 100, first % 100)}" in got.message
    assert got.max_abs_error == np.abs(o - e).max()


@pytest.mark.parametrize("chunk", [7, checks.CHUNK])
def test_non_finite_outputs_are_counted_and_the_first_located(monkeypatch, chunk):
    monkeypatch.setattr(checks, "CHUNK", chunk)
    out, expected = near(np.float32, 500, seed=1)
    out[3] += 1                                   # a wrong value before them: the NaNs are what is reported
    out[[40, 41, 499]] = [np.nan, np.inf, -np.inf]
    got = checks.check_output(out, expected, 1e-5, 1e-8)
    assert not got.ok and got.mismatched == 3
    assert got.message.startswith("3 output values are NaN or infinite (first at index (40,))")
    # both usual causes are named: a softmax without its max subtracted overflows, it wrote everything
    assert "an overflow" in got.message and "never wrote" in got.message


def test_outputs_within_the_tolerance_pass_with_their_largest_error():
    out, expected = near(np.float32, 3 * checks.CHUNK + 11, seed=2)
    got = checks.check_output(out, expected, 1e-3, 1e-4)
    assert got.ok and got.message == "output matches"
    assert got.max_abs_error == np.abs(out.astype(np.float64) - expected).max() > 0
