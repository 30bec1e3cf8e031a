"""A kernel that computes a float32 test at a lower precision fails, whatever the spec's
tolerance: its output is compared also with the answers from inputs rounded to bfloat16 and
float16 (grader/downgrade.py). Honest float32 kernels are never caught by it."""
from __future__ import annotations

from pathlib import Path

import pytest

import grader

ROOT = Path(__file__).resolve().parents[2]
TINY = (ROOT / "tests" / "workers" / "specs" / "tiny.toml").read_text()
RELAXED = (ROOT / "reference_kernels" / "conv2d_relaxed.py").read_text()
OPTIMIZED = (ROOT / "reference_kernels" / "conv2d_optimized.py").read_text()


def loose_spec(tmp_path) -> grader.AssignmentSpec:
    """The tiny assignment with a float32 tolerance a bfloat16 result passes (a course's own choice)."""
    text = TINY.replace("float32 = { rtol = 1e-4, atol = 1e-4 }", "float32 = { rtol = 5e-2, atol = 5e-2 }")
    text = text.replace("float16 = { rtol = 1e-2, atol = 1e-1 }", "float16 = { rtol = 0.5, atol = 0.5 }")
    assert text != TINY
    path = tmp_path / "loose.toml"
    path.write_text(text)
    return grader.load_spec(str(path))


def low_precision_kernel(dtype: str = "bfloat16") -> str:
    """The relaxed reference with both matmul operands cast to `dtype` on chip."""
    source = RELAXED.replace(
        "    w_t = load_transposed_weights(W, X.dtype)\n",
        f"    w_t = nisa.tensor_copy(load_transposed_weights(W, X.dtype), dtype=nl.{dtype})\n")
    source = source.replace(
        "                    # sum over",
        f"                    x_low = nisa.tensor_copy(x_rows, dtype=nl.{dtype})\n"
        "                    # sum over")
    source = source.replace("x_rows[:, ci, kh, kw:kw + out_width],", "x_low[:, ci, kh, kw:kw + out_width],")
    assert source.count("x_low") == 2 and f"nl.{dtype})\n" in source
    return source


def grade(source: str, spec) -> grader.Report:
    sub = grader.submission_from_bytes("conv2d.py", source.encode(), spec)
    return grader.grade(sub, spec, grader.GradeOptions(backend="sim", seed=11))


def test_a_bfloat16_kernel_fails_a_float32_test_under_a_loose_tolerance(tmp_path):
    report = grade(low_precision_kernel(), loose_spec(tmp_path))
    conv = next(t for t in report.tests if t.name == "conv_tiny")
    assert conv.status == "failed", conv.message
    assert "computed at bfloat16 precision, not float32" in conv.message


def test_a_float8_kernel_fails_a_float16_timed_test_under_a_loose_tolerance(tmp_path):
    report = grade(low_precision_kernel("float8_e4m3"), loose_spec(tmp_path))
    perf = next(t for t in report.tests if t.name == "perf_tiny")
    assert perf.status == "failed" and "computed at float8_e4m3 precision, not float16" in perf.message, perf.message


@pytest.mark.parametrize("name, source", [("relaxed", RELAXED), ("optimized", OPTIMIZED)])
def test_honest_float32_kernels_are_not_taken_for_a_downgrade(tmp_path, name, source):
    report = grade(source, loose_spec(tmp_path))
    conv = next(t for t in report.tests if t.name == "conv_tiny")
    assert conv.status == "passed", conv.message
    assert report.flags == []


def test_a_spec_whose_tolerance_accepts_a_lower_precision_is_warned_about(tmp_path):
    loose = loose_spec(tmp_path)
    assert any("bfloat16" in w for w in loose.tolerance_warnings())
    assert any("float8_e4m3" in w for w in loose.tolerance_warnings())
    assert grader.load_spec("asst4-trainium2").tolerance_warnings() == []


@pytest.mark.parametrize("dtype, test, caught", [("bfloat16", "conv_tiny", "bfloat16 precision, not float32"),
                                                 ("float8_e4m3", "perf_tiny", "float8_e4m3 precision, not float16")])
def test_a_downgrade_is_caught_with_answers_made_ahead_as_with_fresh_ones(tmp_path, dtype, test, caught):
    """A grade drawing an answer set (grader/answer_pool.py) checks with the lower-precision
    answers stored in it, and says what a grade with fresh answers for the set's seed says."""
    spec = loose_spec(tmp_path)
    pool = grader.AnswerPool(tmp_path / "answers", size=1, uses=1)
    pool.fill(spec)
    drawn = pool.draw(spec)
    assert {key for key in drawn.lower} == {(0, 0), (1, 0)}
    sub = grader.submission_from_bytes("conv2d.py", low_precision_kernel(dtype).encode(), spec)
    pooled = grader.grade(sub, spec, grader.GradeOptions(backend="sim", answers=drawn))
    fresh = grader.grade(sub, spec, grader.GradeOptions(backend="sim", seed=drawn.seed))
    got = next(t for t in pooled.tests if t.name == test)
    assert got.status == "failed" and caught in got.message, got.message
    assert [(t.name, t.status, t.message) for t in pooled.tests] == [(t.name, t.status, t.message) for t in fresh.tests]


@pytest.mark.parametrize("dtype, low", [("float32", "bfloat16"), ("float16", "float8_e4m3fn"), ("float32", None)])
@pytest.mark.parametrize("pool, height, width", [(1, 11, 9), (2, 12, 10), (2, 13, 7)])
@pytest.mark.parametrize("block_bytes", [1, 20_000, 1 << 22])
def test_the_sampled_reference_is_the_whole_reference_on_the_sampled_channels(dtype, low, pool, height, width,
                                                                               block_bytes):
    """The downgrade check's few channels, taps multiplied with blocks of whole rows, give the
    bits of the whole (columns) reference on the rounded inputs: any block height, pool size,
    odd sizes, bias."""
    import ml_dtypes
    import numpy as np

    from grader import problems
    from grader.problems import conv2d
    from reference_kernels.numpy_reference import conv2d_maxpool_reference
    config = dict(batch=3, c_in=20, c_out=12, height=height, width=width, k=3, bias=True, pool=pool, dtype=dtype)
    args, kwargs = problems.make_inputs("conv2d", config, np.random.default_rng(height * width + pool))
    channels = np.array([0, 5, 6, 11])
    rounding = None
    if low is not None:
        low_dtype = np.dtype(getattr(ml_dtypes, low))
        rounding = lambda a: a.astype(low_dtype).astype(a.dtype)      # noqa: E731
    x, w, bias = [rounding(a) if rounding else a for a in args]
    expected = conv2d_maxpool_reference(x, w[channels], bias[channels], **kwargs)
    got = conv2d.sampled_reference(args, kwargs, channels, rounding, block_bytes=block_bytes)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert got.tobytes() == expected.tobytes()


def _float16_patterns():
    """float32 bit patterns where rounding to float16 can go wrong: every pattern near float16's
    normal range's edge, its overflow edge, the powers of two and infinity, each sign; every
    rounding tie at a few exponents; and a strided sweep over all 2**32 patterns."""
    import numpy as np
    near = []
    for edge in (0x38800000, 0x38000000, 0x33000000, 0x477FE000, 0x477FF000, 0x47800000, 0x7F800000,
                 0x3F800000, 0x00000000):
        near.append(np.arange(max(edge - 0x3000, 0), min(edge + 0x3000, 1 << 32), dtype=np.uint64))
    ties = [(np.uint64(exponent) << 23) | (np.arange(1 << 10, dtype=np.uint64) << 13) | 0x1000
            for exponent in (113, 127, 142)]
    sweep = np.arange(0, 1 << 32, 1009, dtype=np.uint64)
    patterns = np.concatenate(near + ties + [sweep]).astype(np.uint32)
    return np.concatenate([patterns, patterns | np.uint32(0x80000000)])


def test_float16_rounding_gives_numpys_bits():
    """The downgrade check rounds float32 inputs to float16 with integer arithmetic where float16
    is normal (NumPy's conversion is an element at a time): the same bits as NumPy's, NaNs
    aside (any NaN stays a NaN)."""
    import numpy as np

    from grader import downgrade
    values = _float16_patterns().view(np.float32)
    with np.errstate(all="ignore"):
        expected = values.astype(np.float16).astype(np.float32)
        got = downgrade.rounded(values, np.dtype(np.float16))
    same = (got.view(np.uint32) == expected.view(np.uint32)) | (np.isnan(got) & np.isnan(expected))
    assert same.all(), [(hex(int(b)), float(g), float(e)) for b, g, e in
                        zip(values.view(np.uint32)[~same][:5], got[~same][:5], expected[~same][:5])]
    shaped = values[:600].reshape(4, 6, 25)                  # any shape, and a non-contiguous view
    assert np.array_equal(downgrade.rounded(shaped[:, ::2], np.dtype(np.float16)).view(np.uint32),
                          shaped[:, ::2].astype(np.float16).astype(np.float32).view(np.uint32))
    assert downgrade.rounded(values[:10], np.dtype(np.float16)).dtype == np.float32


@pytest.mark.parametrize("low", ["float8_e5m2", "float8_e4m3fn"])
def test_float8_rounding_gives_ml_dtypes_bits_on_every_float16(low):
    """float16 inputs are rounded to each float8 format with integer arithmetic where the float8
    value is normal and finite: on every one of the 65536 float16 patterns, the bits ml_dtypes'
    conversion gives (NaNs aside: any NaN stays a NaN)."""
    import ml_dtypes
    import numpy as np

    from grader import downgrade
    low_dtype = np.dtype(getattr(ml_dtypes, low))
    values = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    with np.errstate(all="ignore"):          # infinities and NaNs among the patterns
        expected = values.astype(low_dtype).astype(np.float16)
        got = downgrade.rounded(values, low_dtype)
    same = (got.view(np.uint16) == expected.view(np.uint16)) | (np.isnan(got) & np.isnan(expected))
    assert same.all(), [hex(int(b)) for b in values.view(np.uint16)[~same][:5]]
    finite = values[np.isfinite(values) & (np.abs(values) < 256)][:30000].reshape(200, 150)[:, ::3]
    assert np.array_equal(downgrade.rounded(finite, low_dtype).view(np.uint16),      # a strided view
                          finite.astype(low_dtype).astype(np.float16).view(np.uint16))
