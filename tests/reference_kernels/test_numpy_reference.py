"""The NumPy conv2d reference (one GEMM per block of output rows) gives the answers the former
one (K*K products per image, each accumulated in turn) gave: the same float32/float16 values on
every shape the grader uses, blocks split anywhere, pooling that drops rows and columns."""
import numpy as np
import pytest

from grader.problems.base import on_threads
from reference_kernels import numpy_reference
from reference_kernels.numpy_reference import conv2d_maxpool_reference


def former_reference(X, W, bias, pool_size=1, accumulate_dtype=np.float64):
    """The reference as it was before (commit 5bc459d), kept to check the new one against."""
    batch, c_in, height, width = X.shape
    c_out, _, k_h, k_w = W.shape
    h_out, w_out = height - k_h + 1, width - k_w + 1
    w_acc = W.astype(accumulate_dtype)
    bias_acc = bias.astype(accumulate_dtype)[:, None]
    hp, wp = h_out // pool_size, w_out // pool_size
    result = np.empty((batch, c_out, hp, wp), dtype=X.dtype)
    for b in range(batch):
        image = X[b].astype(accumulate_dtype)
        acc = np.broadcast_to(bias_acc, (c_out, h_out * w_out)).copy()
        for kh in range(k_h):
            for kw in range(k_w):
                window = np.ascontiguousarray(image[:, kh:kh + h_out, kw:kw + w_out]).reshape(c_in, -1)
                acc += w_acc[:, :, kh, kw] @ window
        conv = acc.reshape(c_out, h_out, w_out)
        if pool_size > 1:
            conv = conv[:, :hp * pool_size, :wp * pool_size]
            conv = conv.reshape(c_out, hp, pool_size, wp, pool_size).max(axis=(2, 4))
        result[b] = conv
    return result


def inputs(batch, c_in, c_out, h, w, k, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((batch, c_in, h, w), dtype=np.float32).astype(dtype)
    wt = rng.random((c_out, c_in, k, k), dtype=np.float32).astype(dtype)
    bias = rng.random(c_out, dtype=np.float32).astype(dtype)
    return x, wt, bias


SHAPES = [  # batch, c_in, c_out, h, w, k, pool, dtype
    (4, 128, 128, 32, 16, 3, 1, "float32"),     # asst4's small correctness images
    (4, 256, 256, 32, 16, 3, 1, "float32"),
    (1, 256, 256, 32, 16, 3, 1, "float16"),     # the extra-credit float16 shape
    (2, 128, 128, 10, 10, 3, 2, "float32"),
    (2, 128, 128, 11, 13, 3, 2, "float32"),     # odd sizes: a row and a column dropped by the pool
    (3, 3, 5, 9, 7, 2, 3, "float32"),           # pool 3, K 2, tiny channel counts
    (1, 4, 4, 5, 5, 5, 1, "float16"),           # the filter as large as the image
    (2, 8, 6, 7, 9, 1, 1, "float32"),           # K 1: a plain channel mix
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:7])) + "-" + s[7])
@pytest.mark.parametrize("blocks", ["one-block", "image-pairs", "row-blocks"])
@pytest.mark.parametrize("threads", [1, 3])
def test_the_gemm_reference_gives_the_former_answers(shape, blocks, threads, monkeypatch):
    """Bit for bit: both accumulate exact products in float64 and round once at the end. The
    whole configuration in one GEMM; two images per GEMM (an odd batch leaves one alone); and
    with a 1-byte budget, every block the fewest rows it can be (a pooling window's). Blocks
    shared by three threads give the same bits."""
    batch, c_in, c_out, h, w, k, pool, dtype = shape
    used_rows = (h - k + 1) // pool * pool
    image_bytes = c_in * k * k * used_rows * (w - k + 1) * 8
    budget = {"one-block": batch * image_bytes, "image-pairs": 2 * image_bytes, "row-blocks": 1}[blocks]
    monkeypatch.setattr(numpy_reference, "COLUMNS_BYTES", budget)
    x, wt, bias = inputs(batch, c_in, c_out, h, w, k, np.dtype(dtype))
    spread = None if threads == 1 else on_threads(threads)
    new, old = conv2d_maxpool_reference(x, wt, bias, pool, spread=spread), former_reference(x, wt, bias, pool)
    assert new.shape == old.shape == (batch, c_out, (h - k + 1) // pool, (w - k + 1) // pool)
    assert new.dtype == old.dtype == np.dtype(dtype)
    assert np.array_equal(new, old)


def test_the_answer_is_a_faithful_rounding_of_the_exact_sum():
    """Against a direct float64 sum over every pixel (no BLAS): within one rounding of the dtype."""
    x, wt, bias = inputs(2, 16, 8, 6, 7, 3, np.float32, seed=3)
    exact = np.zeros((2, 8, 4, 5))
    for i in range(4):
        for j in range(5):
            patch = x[:, None, :, i:i + 3, j:j + 3].astype(np.float64) * wt[None].astype(np.float64)
            exact[:, :, i, j] = patch.sum(axis=(2, 3, 4)) + bias
    got = conv2d_maxpool_reference(x, wt, bias, 1)
    assert np.all(np.abs(got - exact) <= np.spacing(np.abs(exact).astype(np.float32)))


def test_bad_shapes_still_raise_clearly():
    x, wt, bias = inputs(1, 4, 4, 5, 5, 3, np.float32)
    with pytest.raises(ValueError, match="input channels"):
        conv2d_maxpool_reference(x, wt[:, :3], bias)
    with pytest.raises(ValueError, match="bias must have shape"):
        conv2d_maxpool_reference(x, wt, bias[:3])
    with pytest.raises(ValueError, match="larger than the image"):
        conv2d_maxpool_reference(x[:, :, :2, :2], wt, bias)
    with pytest.raises(ValueError, match="pool_size"):
        conv2d_maxpool_reference(x, wt, bias, 0)


def test_work_spread_over_threads_runs_on_each_and_raises_what_a_helper_raised():
    import threading
    seen, lock = [], threading.Lock()

    def work():
        with lock:
            seen.append(threading.current_thread().name)
            if len(seen) == 2:
                raise MemoryError("block buffers")
    with pytest.raises(MemoryError, match="block buffers"):
        on_threads(3)(work)
    assert len(seen) == 3 and threading.current_thread().name in seen


@pytest.mark.parametrize("threads", [2, 3])
def test_an_answer_shared_over_threads_is_the_one_thread_answer(monkeypatch, threads):
    """The grader's way (grader.problems): threads each take their part of the column budget,
    so the blocks differ from one thread's; the bits do not."""
    from grader import problems
    x, wt, bias = inputs(4, 128, 128, 32, 16, 3, np.float32, seed=4)
    monkeypatch.setattr(numpy_reference, "COLUMNS_BYTES", 128 * 9 * 30 * 14 * 8 * 2)    # two images a block
    one = problems.reference("conv2d", [x, wt, bias], {"pool_size": 2}, threads=1)
    shared = problems.reference("conv2d", [x, wt, bias], {"pool_size": 2}, threads=threads)
    assert np.array_equal(one, shared)
    # the grader's answers accumulate in float32 (grader/problems/conv2d.py, ACCUMULATE)
    assert np.allclose(one, former_reference(x, wt, bias, 2), rtol=1e-6, atol=0)
