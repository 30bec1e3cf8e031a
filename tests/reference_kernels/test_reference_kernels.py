"""Our reference kernels pass the course's correctness tests in nkisim, and the student
template fails them with a clear message."""
import numpy as np
import pytest

import nkisim

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402

from reference_kernels import conv2d_optimized, conv2d_relaxed, transpose, vector_add  # noqa: E402
from reference_kernels.numpy_reference import (  # noqa: E402
    conv2d_maxpool_reference, transpose_reference, vector_add_reference)
from student_template import conv2d as template_conv2d, kernels as template_kernels  # noqa: E402

CONV_KERNELS = {"relaxed": conv2d_relaxed.fused_conv2d_maxpool,
                "optimized": conv2d_optimized.fused_conv2d_maxpool}

# The four correctness tests of asst4-trainium2 (shared/docs/asst4-grading.md): batch 4, K=3,
# float32 uniform [0, 1) inputs, np.allclose with default tolerances.
SMALL = [(ci, co, 32, 16, False, 1) for ci in (128, 256) for co in (128, 256)]
LARGE = {"large": (256, 256, 224, 224, False, 1),
         "large_bias": (256, 256, 224, 224, True, 1),
         "large_bias_maxpool": (256, 256, 224, 224, True, 2)}


def make_inputs(c_in, c_out, h, w, with_bias, batch=4, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((batch, c_in, h, w), dtype=np.float32).astype(dtype)
    wt = rng.random((c_out, c_in, 3, 3), dtype=np.float32).astype(dtype)
    bias = rng.random(c_out, dtype=np.float32).astype(dtype) if with_bias else np.zeros(c_out, dtype)
    return x, wt, bias


@pytest.fixture(scope="module", params=list(LARGE))
def large_case(request):
    # two images, not the course's four: the kernels' batch loop still runs more than once, at
    # half the cost; the full grades of tests/grader/test_grade.py run these configurations at batch 4
    c_in, c_out, h, w, with_bias, pool = LARGE[request.param]
    x, wt, bias = make_inputs(c_in, c_out, h, w, with_bias, batch=2)
    return x, wt, bias, pool, conv2d_maxpool_reference(x, wt, bias, pool)


@pytest.mark.parametrize("name", list(CONV_KERNELS))
def test_conv2d_small_images(name):
    for c_in, c_out, h, w, with_bias, pool in SMALL:
        x, wt, bias = make_inputs(c_in, c_out, h, w, with_bias)
        out = nki.baremetal(CONV_KERNELS[name])(x, wt, bias, pool_size=pool)
        expected = conv2d_maxpool_reference(x, wt, bias, pool)
        assert out.shape == expected.shape == (4, c_out, 30, 14) and out.dtype == np.float32
        assert np.allclose(out, expected), f"{name} wrong for C_in={c_in} C_out={c_out}"


@pytest.mark.parametrize("name", list(CONV_KERNELS))
def test_conv2d_large_images(name, large_case):
    x, wt, bias, pool, expected = large_case
    out = nki.baremetal(CONV_KERNELS[name])(x, wt, bias, pool_size=pool)
    assert out.shape == expected.shape and out.dtype == np.float32
    assert np.allclose(out, expected)


@pytest.mark.parametrize("name", list(CONV_KERNELS))
@pytest.mark.parametrize("pool", [1, 2])
def test_conv2d_float16_performance_inputs(name, pool):
    # the performance tests use fp16 too; the output must still be right (to fp16 precision)
    x, wt, bias = make_inputs(256, 256, 32, 16, True, batch=1, dtype=np.float16)
    out = nki.baremetal(CONV_KERNELS[name])(x, wt, bias, pool_size=pool)
    expected = conv2d_maxpool_reference(x, wt, bias, pool)
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.astype(np.float32), expected.astype(np.float32), rtol=2e-3, atol=1e-2)


def test_vector_add_family():
    rng = np.random.default_rng(3)
    a, b = rng.random(25600, dtype=np.float32), rng.random(25600, dtype=np.float32)
    np.testing.assert_array_equal(nki.baremetal(vector_add.vector_add_naive)(a[:128], b[:128]),
                                  vector_add_reference(a[:128], b[:128]))
    for kernel in (vector_add.vector_add_tiled, vector_add.vector_add_stream,
                   vector_add.make_vector_add_tiled(64), vector_add.make_vector_add_stream(2)):
        np.testing.assert_array_equal(nki.baremetal(kernel)(a, b), vector_add_reference(a, b))


def test_vector_add_tiled_with_256_rows_is_a_partition_error():
    a = np.ones(25600, np.float32)
    with pytest.raises(nkisim.errors.HardwareLimitError, match="256 exceed architecture limitation of 128"):
        nki.baremetal(vector_add.make_vector_add_tiled(256))(a, a)


@pytest.mark.parametrize("shape", [(128, 128), (256, 384), (1024, 1024)])
def test_matrix_transpose(shape):
    a = np.random.default_rng(4).random(shape, dtype=np.float32)
    run = nkisim.run_kernel(transpose.matrix_transpose, (a,), {})
    np.testing.assert_array_equal(run.outputs, transpose_reference(a))
    # the part-1 rule: nc_transpose is the only compute instruction
    compute = {r.opcode for r in run.trace} - {"dma_copy", "tensor_copy"}
    assert compute == {"nc_transpose"}


def test_student_template_says_not_implemented():
    x, wt, bias = make_inputs(128, 128, 32, 16, False, batch=1)
    with pytest.raises(NotImplementedError, match="fused_conv2d_maxpool"):
        nki.baremetal(template_conv2d.fused_conv2d_maxpool)(x, wt, bias, pool_size=1)
    with pytest.raises(NotImplementedError, match="matrix_transpose"):
        nki.baremetal(template_kernels.matrix_transpose)(np.ones((128, 128), np.float32))
    a = np.ones(25600, np.float32)
    # the given vector-add kernels work as handed out (ROW_CHUNK = 1 is slow but correct)
    np.testing.assert_array_equal(nki.baremetal(template_kernels.vector_add_stream)(a, a), a + a)
