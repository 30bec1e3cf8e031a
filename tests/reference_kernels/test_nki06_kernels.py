"""The NKI 0.6 reference kernels and starter files (reference_kernels/nki06, student_template/nki06)
compute what their legacy namesakes compute (against NumPy, and bit for bit against the legacy
kernels) and trace the same program: the same DMAs, matmuls, transposes and copies with the same
operand shapes and DMA sizes, in the same order. The rest differs only where NKI 0.6 lacks the
legacy form (no PSUM zeroing, no broadcasting tensor_tensor; a reduce over non-trailing axes is
one over a permuted view; see the pair tests), and the cost model's latencies agree to within 2%."""
from collections import Counter

import numpy as np
import pytest

import nkisim

nkisim.install()

import neuronxcc.nki as legacy_nki  # noqa: E402
import nki  # noqa: E402

from nkisim import cost  # noqa: E402
from nkisim.dialects import CURRENT  # noqa: E402
from reference_kernels import conv2d_optimized, conv2d_relaxed, transpose, vector_add  # noqa: E402
from reference_kernels.nki06 import conv2d_optimized as conv2d_optimized_06  # noqa: E402
from reference_kernels.nki06 import conv2d_relaxed as conv2d_relaxed_06  # noqa: E402
from reference_kernels.nki06 import transpose as transpose_06  # noqa: E402
from reference_kernels.nki06 import vector_add as vector_add_06  # noqa: E402
from reference_kernels.numpy_reference import (  # noqa: E402
    conv2d_maxpool_reference, transpose_reference, vector_add_reference)
from student_template import conv2d as template_conv2d, kernels as template_kernels  # noqa: E402
from student_template.nki06 import conv2d as template_conv2d_06, kernels as template_kernels_06  # noqa: E402

# name -> (legacy kernel, NKI 0.6 kernel)
CONV_PAIRS = {"relaxed": (conv2d_relaxed.fused_conv2d_maxpool, conv2d_relaxed_06.fused_conv2d_maxpool),
              "optimized": (conv2d_optimized.fused_conv2d_maxpool, conv2d_optimized_06.fused_conv2d_maxpool)}
DTYPES = {"float32": np.float32, "float16": np.float16}
LATENCY_TOLERANCE = 0.02


def make_inputs(c_in, c_out, h, w, batch=2, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((batch, c_in, h, w), dtype=np.float32).astype(dtype)
    wt = rng.random((c_out, c_in, 3, 3), dtype=np.float32).astype(dtype)
    bias = rng.random(c_out, dtype=np.float32).astype(dtype)
    return x, wt, bias


def assert_conv_close(out, expected, dtype):
    assert out.shape == expected.shape and out.dtype == dtype
    if dtype == np.float32:
        assert np.allclose(out, expected)
    else:
        np.testing.assert_allclose(out.astype(np.float32), expected.astype(np.float32), rtol=2e-3, atol=1e-2)


# ----- each NKI 0.6 kernel against NumPy ---------------------------------------------------------

def test_the_kernels_are_nki06_kernels():
    kernels = [k for _, k in CONV_PAIRS.values()] + [
        transpose_06.matrix_transpose, vector_add_06.vector_add_naive, vector_add_06.vector_add_tiled,
        vector_add_06.vector_add_stream, template_conv2d_06.fused_conv2d_maxpool,
        template_kernels_06.vector_add_naive, template_kernels_06.vector_add_tiled,
        template_kernels_06.vector_add_stream, template_kernels_06.matrix_transpose]
    assert {k.dialect for k in kernels} == {CURRENT.name}


@pytest.mark.parametrize("name", list(CONV_PAIRS))
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("pool", [1, 2])
def test_conv2d_small_images(name, dtype, pool):
    x, wt, bias = make_inputs(256, 256, 32, 16, dtype=DTYPES[dtype])
    out = CONV_PAIRS[name][1](x, wt, bias, pool_size=pool)
    assert_conv_close(out, conv2d_maxpool_reference(x, wt, bias, pool), DTYPES[dtype])
    assert out.shape == (2, 256, 30 // pool, 14 // pool)


@pytest.mark.parametrize("name", list(CONV_PAIRS))
@pytest.mark.parametrize("c_in, c_out", [(128, 128), (128, 256), (256, 128)])
def test_conv2d_channel_counts(name, c_in, c_out):
    x, wt, bias = make_inputs(c_in, c_out, 32, 16, batch=1)
    out = nki.simulate(CONV_PAIRS[name][1])(x, wt, bias, pool_size=2)
    assert_conv_close(out, conv2d_maxpool_reference(x, wt, bias, 2), np.float32)


def test_vector_add_family():
    rng = np.random.default_rng(3)
    a, b = rng.random(25600, dtype=np.float32), rng.random(25600, dtype=np.float32)
    np.testing.assert_array_equal(vector_add_06.vector_add_naive(a[:128], b[:128]),
                                  vector_add_reference(a[:128], b[:128]))
    for kernel in (vector_add_06.vector_add_tiled, vector_add_06.vector_add_stream,
                   vector_add_06.make_vector_add_tiled(64), vector_add_06.make_vector_add_stream(2)):
        out = kernel(a, b)
        assert out.shape == (25600,)
        np.testing.assert_array_equal(out, vector_add_reference(a, b))


def test_vector_add_tiled_with_256_rows_is_a_partition_error():
    a = np.ones(25600, np.float32)
    with pytest.raises(nkisim.errors.HardwareLimitError, match="256 exceed architecture limitation of 128"):
        vector_add_06.make_vector_add_tiled(256)(a, a)


@pytest.mark.parametrize("shape", [(128, 128), (256, 384), (1024, 1024)])
def test_matrix_transpose(shape):
    a = np.random.default_rng(4).random(shape, dtype=np.float32)
    run = nkisim.run_kernel(transpose_06.matrix_transpose, (a,), {})
    np.testing.assert_array_equal(run.outputs, transpose_reference(a))
    # the part-1 rule: nc_transpose is the only compute instruction
    compute = {r.opcode for r in run.trace} - {"dma_copy", "tensor_copy"}
    assert compute == {"nc_transpose"}


# ----- each (legacy, NKI 0.6) pair traces the same program --------------------------------------
# What NKI 0.6 does not have, and what the 0.6 kernels write instead (counted so below):
# - a PSUM accumulator zeroed by nl.zeros (a memset into PSUM): none, the first matmul overwrites;
# - a tensor_tensor broadcasting a (128, 1) column (the bias): a tensor_scalar with that column;
# - a tensor_reduce over a 2x2 window (two free axes, not trailing): a reduce over the trailing
#   axis and a tensor_tensor max of the two rows.

CORE = ("dma_copy", "nc_matmul", "nc_transpose", "tensor_copy")


def region(g):
    """What the cost model sees of an operand: memory (HBM of either kind), dtype, shape, run length."""
    return ("hbm" if g.buffer == "shared_hbm" else g.buffer, g.dtype, tuple(g.shape), g.contiguous_bytes)


def signature(r):
    return (r.opcode, r.engine, tuple(map(region, r.reads)), tuple(map(region, r.writes)))


def is_psum_memset(r):
    return r.opcode == "memset" and r.writes[0].buffer == "psum"


def is_broadcast_add(r):
    return r.opcode == "tensor_tensor" and tuple(r.reads[0].shape) != tuple(r.reads[1].shape)


def is_window_reduce(r):
    return r.opcode == "tensor_reduce" and len(r.attrs["axes"]) == 2


def nki06_opcodes(legacy_trace) -> Counter:
    """The opcodes the legacy trace becomes in NKI 0.6 (the substitutions above)."""
    ops = Counter()
    for r in legacy_trace:
        if is_psum_memset(r):
            continue
        if is_broadcast_add(r):
            ops["tensor_scalar"] += 1
        else:
            ops[r.opcode] += 1
    return ops


def assert_same_program(legacy_kernel, kernel, args, kwargs=None):
    """Both kernels on the same inputs: the same outputs, bit for bit; the same DMAs, matmuls,
    transposes and copies in the same order with the same regions (so the same DMA sizes and
    tile shapes); the other instructions as the substitutions above say, each tensor_scalar
    reading and writing what the legacy instruction it stands for did; the same latency to within 2%. Returns the two runs."""
    legacy = nkisim.run_kernel(legacy_kernel, args, kwargs or {})
    current = nkisim.run_kernel(kernel, args, kwargs or {})
    np.testing.assert_array_equal(current.outputs, legacy.outputs)
    assert Counter(r.opcode for r in current.trace) == nki06_opcodes(legacy.trace)
    assert ([signature(r) for r in legacy.trace if r.opcode in CORE]
            == [signature(r) for r in current.trace if r.opcode in CORE])
    # a tensor_scalar of either kernel, or a legacy broadcast add: each reads its data tile and
    # writes its destination as the legacy one does, in the same order
    assert ([(region(r.reads[0]), region(r.writes[0])) for r in legacy.trace
             if r.opcode == "tensor_scalar" or is_broadcast_add(r)]
            == [(region(r.reads[0]), region(r.writes[0])) for r in current.trace if r.opcode == "tensor_scalar"])
    if not any(is_psum_memset(r) or is_broadcast_add(r) or is_window_reduce(r) for r in legacy.trace):
        assert [signature(r) for r in legacy.trace] == [signature(r) for r in current.trace]
    legacy_us, current_us = cost.estimate(legacy).total_us, cost.estimate(current).total_us
    assert legacy_us > 0 and abs(current_us - legacy_us) <= LATENCY_TOLERANCE * legacy_us
    return legacy, current


@pytest.mark.parametrize("name", list(CONV_PAIRS))
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("pool", [1, 2])
def test_conv2d_pairs_trace_the_same_program(name, dtype, pool):
    args = make_inputs(256, 256, 32, 16, dtype=DTYPES[dtype])
    legacy, current = assert_same_program(*CONV_PAIRS[name], args, {"pool_size": pool})
    # the legacy kernel zeroes each PSUM accumulator; in NKI 0.6 each is one accumulation group:
    # its first matmul overwrites, the other 17 (2 ci tiles x 3 x 3) add
    psum_memsets = sum(1 for r in legacy.trace if is_psum_memset(r))
    matmuls = [r for r in current.trace if r.opcode == "nc_matmul"]
    assert psum_memsets > 0 and sum(not r.accumulate for r in matmuls) == psum_memsets
    assert len(matmuls) == 18 * psum_memsets
    assert sum(is_broadcast_add(r) for r in legacy.trace) == psum_memsets
    assert sum(is_window_reduce(r) for r in legacy.trace) == (0 if pool == 1 else
                                                               psum_memsets // (2 if name == "relaxed" else 1))


def test_optimized_conv2d_pair_on_the_graded_image():
    # 224x224 has several row blocks and a tail block (the block sizes only show at this size);
    # both kernels, a few seconds each at batch 1
    x, wt, bias = make_inputs(256, 256, 224, 224, batch=1, seed=5)
    _, current = assert_same_program(*CONV_PAIRS["optimized"], (x, wt, bias), {"pool_size": 2})
    assert_conv_close(current.outputs, conv2d_maxpool_reference(x, wt, bias, 2), np.float32)


@pytest.mark.parametrize("shape", [(128, 128), (256, 384), (1024, 1024)])
def test_transpose_pair_traces_the_same_program(shape):
    a = np.random.default_rng(4).random(shape, dtype=np.float32)
    assert_same_program(transpose.matrix_transpose, transpose_06.matrix_transpose, (a,))


@pytest.mark.parametrize("factory, setting", [("make_vector_add_tiled", 128), ("make_vector_add_tiled", 64),
                                              ("make_vector_add_stream", 200), ("make_vector_add_stream", 2)])
def test_vector_add_pairs_trace_the_same_program(factory, setting):
    rng = np.random.default_rng(6)
    a, b = rng.random(25600, dtype=np.float32), rng.random(25600, dtype=np.float32)
    assert_same_program(getattr(vector_add, factory)(setting), getattr(vector_add_06, factory)(setting), (a, b))


def test_vector_add_module_kernels_trace_the_same_programs():
    rng = np.random.default_rng(7)
    a, b = rng.random(25600, dtype=np.float32), rng.random(25600, dtype=np.float32)
    assert_same_program(vector_add.vector_add_naive, vector_add_06.vector_add_naive, (a[:128], b[:128]))
    assert_same_program(vector_add.vector_add_tiled, vector_add_06.vector_add_tiled, (a, b))
    assert_same_program(vector_add.vector_add_stream, vector_add_06.vector_add_stream, (a, b))


# ----- the starter files behave as the legacy ones --------------------------------------------------

def test_student_template_says_not_implemented_as_the_legacy_one_does():
    x, wt, bias = make_inputs(128, 128, 32, 16, batch=1)
    for conv in (legacy_nki.baremetal(template_conv2d.fused_conv2d_maxpool), template_conv2d_06.fused_conv2d_maxpool):
        with pytest.raises(NotImplementedError, match="fused_conv2d_maxpool is not implemented yet"):
            conv(x, wt, bias, pool_size=1)
    square = np.ones((128, 128), np.float32)
    for transpose_kernel in (legacy_nki.baremetal(template_kernels.matrix_transpose),
                             template_kernels_06.matrix_transpose):
        with pytest.raises(NotImplementedError, match="matrix_transpose is not implemented yet"):
            transpose_kernel(square)


@pytest.mark.parametrize("name", ["vector_add_naive", "vector_add_tiled", "vector_add_stream"])
def test_student_template_vector_adds_work_as_handed_out(name):
    # ROW_CHUNK = 1 and FREE_DIM = 2 are slow but correct, in both dialects alike (a tenth of the
    # course's 25600 elements: ROW_CHUNK = 1 traces one iteration per element)
    rng = np.random.default_rng(8)
    n = 128 if name == "vector_add_naive" else 2560
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    legacy, current = assert_same_program(getattr(template_kernels, name), getattr(template_kernels_06, name), (a, b))
    np.testing.assert_array_equal(current.outputs, vector_add_reference(a, b))
