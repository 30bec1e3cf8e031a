"""Negative tests: one per hardware limit / usage rule nkisim enforces.

Each test runs a small kernel that breaks one rule and checks the typed error: its class, its
`code`, the key parts of the message (the limit and the offending value), that a remedy is
given, and that `err.site` is the kernel author's own line (marked below with `# <tag>`).
A few positive tests pin down what must *not* be an error (tiles rebound in a loop,
`psum += nc_matmul(...)` with all 8 banks live, legal strides and sizes at the limit).
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import nkisim
from marker_lines import marker_lines
from nkisim import errors

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402
from nkisim.instructions.language_ops import BlockDimensionWarning  # noqa: E402

THIS_FILE = os.path.abspath(__file__)
line_of = marker_lines(THIS_FILE)
DEFAULT_USABLE_SBUF = 224 * 1024 - 8   # 229368 bytes per partition (Trn2 keeps 8 B for the runtime)



def run(kernel, *args, settings=None, **kwargs):
    return nkisim.run_kernel(kernel, args, kwargs, settings=settings)


def expect_error(exc_type, code, tag, kernel, *args, fragments=(), settings=None, **kwargs):
    """Run `kernel`, expect `exc_type` with `code`, every message fragment, a remedy, and a
    site at this file's line marked `# <tag>`. Returns the error for further checks."""
    with pytest.raises(exc_type) as info:
        run(kernel, *args, settings=settings, **kwargs)
    err = info.value
    assert isinstance(err, errors.NKISimError)
    assert err.code == code, str(err)
    for fragment in fragments:
        assert fragment in err.detail, f"{fragment!r} not in {err.detail!r}"
    assert err.remedy and len(err.remedy) > 10, f"no remedy: {err}"
    assert err.site is not None, str(err)
    assert os.path.abspath(err.site.filename) == THIS_FILE, str(err.site)
    assert err.site.lineno == line_of(tag), f"site {err.site} is not the line of <{tag}>"
    rendered = str(err)
    assert rendered.startswith(f"[{code}]") and "fix:" in rendered and f":{err.site.lineno}" in rendered
    return err


def f32(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ----- partitions ---------------------------------------------------------------------------------

def k_sbuf_256_partitions(x):
    t = nl.ndarray((256, 4), dtype=nl.float32, buffer=nl.sbuf)  # <pmax-sbuf>
    nisa.dma_copy(dst=t, src=x)


def k_psum_129_partitions(x):
    acc = nl.zeros((129, 4), nl.float32, buffer=nl.psum)  # <pmax-psum>
    return acc


def k_load_256_partitions(x):
    t = nl.load(x)  # <pmax-load>
    return t


def k_sbuf_128_partitions(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    t = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_partition_dim_over_128_on_sbuf():
    err = expect_error(errors.HardwareLimitError, "err_num_partition_exceed_arch_limit", "pmax-sbuf",
                       k_sbuf_256_partitions, f32(256, 4),
                       fragments=("number of partitions 256 exceed architecture limitation of 128",))
    assert "128" in err.remedy
    assert isinstance(err, ValueError)      # the class the real compiler raises


def test_partition_dim_over_128_on_psum():
    expect_error(errors.HardwareLimitError, "err_num_partition_exceed_arch_limit", "pmax-psum",
                 k_psum_129_partitions, f32(128, 4),
                 fragments=("number of partitions 129 exceed architecture limitation of 128",))


def test_partition_dim_over_128_on_load():
    expect_error(errors.HardwareLimitError, "err_num_partition_exceed_arch_limit", "pmax-load",
                 k_load_256_partitions, f32(256, 4), fragments=("number of partitions 256",))


def test_partition_dim_of_128_is_fine():
    x = f32(128, 4)
    np.testing.assert_array_equal(run(k_sbuf_128_partitions, x).outputs, x)


# ----- nc_matmul operand limits ---------------------------------------------------------------------

def k_matmul_stationary_256(x):
    a = nl.ones((128, 256), nl.float32)
    b = nl.ones((128, 512), nl.float32)
    return nisa.nc_matmul(a, b)  # <stat-fmax>


def k_matmul_moving_1024(x):
    a = nl.ones((128, 128), nl.float32)
    b = nl.ones((128, 1024), nl.float32)
    return nisa.nc_matmul(a, b)  # <mov-fmax>


def k_matmul_contraction_mismatch(x):
    a = nl.ones((128, 128), nl.float32)
    b = nl.ones((64, 512), nl.float32)
    return nisa.nc_matmul(a, b)  # <contract>


def k_matmul_moving_in_psum(x):
    a = nl.ones((128, 128), nl.float32)
    p = nl.zeros((128, 128), nl.float32, buffer=nl.psum)
    return nisa.nc_matmul(a, p)  # <mm-psum>


def k_matmul_stationary_in_hbm(x):
    b = nl.ones((128, 512), nl.float32)
    return nisa.nc_matmul(x, b)  # <mm-hbm>


def k_matmul_at_the_limits(a, b):
    out = nl.ndarray((128, 512), nl.float32, buffer=nl.hbm)
    a_sb = nl.ndarray((128, 128), nl.float32)
    b_sb = nl.ndarray((128, 512), nl.float32)
    nisa.dma_copy(dst=a_sb, src=a)
    nisa.dma_copy(dst=b_sb, src=b)
    res = nisa.tensor_copy(nisa.nc_matmul(a_sb, b_sb))
    nisa.dma_copy(dst=out, src=res)
    return out


def test_matmul_stationary_free_size_over_128():
    expect_error(errors.HardwareLimitError, "err_size_of_dimension_exceed_arch_limit", "stat-fmax",
                 k_matmul_stationary_256, f32(1, 1),
                 fragments=("free size of stationary 256", "'nc_matmul'", "limitation of 128"))


def test_matmul_moving_free_size_over_512():
    expect_error(errors.HardwareLimitError, "err_size_of_dimension_exceed_arch_limit", "mov-fmax",
                 k_matmul_moving_1024, f32(1, 1),
                 fragments=("free size of moving 1024", "'nc_matmul'", "limitation of 512"))


def test_matmul_contraction_sizes_differ():
    expect_error(errors.ShapeError, "err_param_shape_incompatible_with_matmul", "contract",
                 k_matmul_contraction_mismatch, f32(1, 1),
                 fragments=("stationary[128, 128] has 128", "moving[64, 512] has 64"))


def test_matmul_operand_in_psum():
    err = expect_error(errors.MemorySpaceError, "err_unsupported_memory", "mm-psum",
                       k_matmul_moving_in_psum, f32(1, 1),
                       fragments=("Expected operand 'moving' of 'nc_matmul' to be in address space "
                                  "'sbuf', but got a tile in 'psum' instead.",))
    assert "SBUF" in err.remedy and isinstance(err, TypeError)


def test_matmul_operand_in_hbm():
    expect_error(errors.MemorySpaceError, "err_unsupported_memory", "mm-hbm",
                 k_matmul_stationary_in_hbm, f32(128, 128),
                 fragments=("operand 'stationary' of 'nc_matmul'", "'sbuf'", "'hbm'"))


def test_matmul_at_exactly_128_by_512_is_fine():
    a, b = f32(128, 128, seed=1), f32(128, 512, seed=2)
    np.testing.assert_allclose(run(k_matmul_at_the_limits, a, b).outputs, a.T @ b, rtol=1e-4, atol=1e-4)


# ----- PSUM: one bank per tile, 8 banks -------------------------------------------------------------

def k_psum_tile_two_banks(x):
    acc = nl.zeros((128, 1024), nl.float32, buffer=nl.psum)  # <psum-bank>
    return acc


def k_psum_tile_two_banks_bf16(x):
    acc = nl.ndarray((128, 2, 640), nl.bfloat16, buffer=nl.psum)  # <psum-bank-bf16>
    return acc


def k_nine_psum_tiles(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    accs = []
    for i in range(9):
        accs.append(nl.zeros((128, 512), nl.float32, buffer=nl.psum))  # <ninth-psum>
    t = nl.ndarray((128, 4), nl.float32)     # the allocator runs out before this tile
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=t)
    return out


def k_nine_psum_tiles_then_only_dma(x):
    """No allocation follows the ninth tile: the overflow must still be found."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    accs = [nl.zeros((128, 512), nl.float32, buffer=nl.psum) for _ in range(9)]  # <ninth-psum-end>
    nisa.dma_copy(dst=out, src=x)
    return out


def k_eight_psum_accumulators(a, b):
    """lhsT a (256, 128), b (256, 4096): all 8 PSUM banks hold an accumulator at once."""
    K, M = a.shape
    N = b.shape[1]
    out = nl.ndarray((M, N), nl.float32, buffer=nl.hbm)
    accs = [nl.zeros((M, 512), nl.float32, buffer=nl.psum) for _ in range(N // 512)]
    for k in nl.affine_range(K // 128):
        a_sb = nl.ndarray((128, M), nl.float32)
        b_sb = nl.ndarray((128, N), nl.float32)
        nisa.dma_copy(dst=a_sb, src=a[k * 128:(k + 1) * 128, :])
        nisa.dma_copy(dst=b_sb, src=b[k * 128:(k + 1) * 128, :])
        for n in nl.affine_range(N // 512):
            accs[n] += nisa.nc_matmul(a_sb, b_sb[:, n * 512:(n + 1) * 512])
    for n in nl.affine_range(N // 512):
        res = nisa.tensor_copy(accs[n])
        nisa.dma_copy(dst=out[:, n * 512:(n + 1) * 512], src=res)
    return out


def test_psum_tile_larger_than_one_bank():
    err = expect_error(errors.HardwareLimitError, "err_psum_tile_exceeds_bank", "psum-bank",
                       k_psum_tile_two_banks, f32(1, 1),
                       fragments=("float32[128, 1024]", "4096 bytes per partition", "2048-byte bank"))
    assert "512" in err.remedy


def test_psum_tile_larger_than_one_bank_counts_bytes_not_elements():
    # 2 x 640 bf16 = 2560 bytes: fewer than 2048 fp32-sized elements would suggest, still too big
    expect_error(errors.HardwareLimitError, "err_psum_tile_exceeds_bank", "psum-bank-bf16",
                 k_psum_tile_two_banks_bf16, f32(1, 1), fragments=("2560 bytes per partition",))


def test_more_than_8_psum_banks_live():
    err = expect_error(errors.AllocationError, "err_stack_overflow_psum", "ninth-psum",
                       k_nine_psum_tiles, f32(128, 4),
                       fragments=("required PSUM banks 9 exceeds the available 8 banks",
                                  "2048 bytes per partition", "Live psum tensors"))
    assert "8 PSUM tiles" in err.remedy


def test_more_than_8_psum_banks_live_at_the_end_of_the_kernel():
    expect_error(errors.AllocationError, "err_stack_overflow_psum", "ninth-psum-end",
                 k_nine_psum_tiles_then_only_dma, f32(128, 4),
                 fragments=("required PSUM banks 9 exceeds the available 8 banks",))


def test_psum_accumulate_with_8_banks_live_does_not_overflow():
    a, b = f32(256, 128, seed=3), f32(256, 4096, seed=4)
    result = run(k_eight_psum_accumulators, a, b)
    np.testing.assert_allclose(result.outputs, a.T @ b, rtol=1e-4, atol=1e-3)
    assert result.peak_psum_banks == 8


# ----- SBUF capacity ----------------------------------------------------------------------------------

def k_sbuf_three_tiles(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    a = nl.ndarray((128, 26624), nl.float32)     # 106496 B per partition
    b = nl.ndarray((128, 30718), nl.float32)     # 229368 B: exactly the usable budget
    c = nl.ndarray((128, 2), nl.float32)  # <sbuf-third>
    nisa.dma_copy(dst=c, src=x)
    d = nisa.tensor_copy(c)
    nisa.dma_copy(dst=out, src=d)
    return out


def k_sbuf_one_buffer(x, cols):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    big = nl.ndarray((128, cols), nl.float32, buffer=nl.sbuf)  # <sbuf-big>
    nisa.dma_copy(dst=big[:, 0:4], src=x)
    t = nisa.tensor_scalar(big[:, 0:4], np.multiply, 2.0)
    nisa.dma_copy(dst=out, src=t)
    return out


def k_sbuf_huge_buffer_then_only_dma(x):
    """No allocation follows the big buffer: the overflow must still be found."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    big = nl.ndarray((128, 60000), nl.float32, buffer=nl.sbuf)  # <sbuf-dma-only>
    nisa.dma_copy(dst=big[:, 0:4], src=x)
    nisa.dma_copy(dst=out, src=big[:, 0:4])
    return out


def k_sbuf_rebound_in_loop(x):
    """16 iterations x 120 KiB: two of these tiles would not fit, one at a time does."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    for i in nl.affine_range(16):
        big = nl.ndarray((128, 30720), nl.float32)
        nisa.dma_copy(dst=big[:, 0:512], src=x)
        t = nisa.tensor_scalar(big[:, 0:512], np.add, float(i))
    nisa.dma_copy(dst=out, src=t)
    return out


def test_sbuf_capacity_exceeded():
    err = expect_error(errors.AllocationError, "err_stack_overflow_sbuf", "sbuf-third",
                       k_sbuf_three_tiles, f32(128, 2),
                       fragments=(f"required SBUF {DEFAULT_USABLE_SBUF + 8} bytes per partition exceeds "
                                  f"the available {DEFAULT_USABLE_SBUF} bytes per partition",
                                  "229376 physical minus 8 reserved", "Live sbuf tensors"))
    assert isinstance(err, MemoryError)


def test_sbuf_one_buffer_over_the_default_budget():
    cols = 57343                    # 229372 B: under the 224 KiB physical size, over 224 KiB - 8 B
    expect_error(errors.AllocationError, "err_stack_overflow_sbuf", "sbuf-big",
                 k_sbuf_one_buffer, f32(128, 4), cols=cols,
                 fragments=("required SBUF 229372 bytes", f"available {DEFAULT_USABLE_SBUF} bytes"))


def test_sbuf_overflow_by_the_last_allocation_of_the_kernel():
    expect_error(errors.AllocationError, "err_stack_overflow_sbuf", "sbuf-dma-only",
                 k_sbuf_huge_buffer_then_only_dma, f32(128, 4),
                 fragments=("required SBUF 240000 bytes per partition",
                            "float32[128, 60000] in sbuf (240000 B/partition)"))


def test_sbuf_budget_follows_the_reserve_setting():
    x = f32(128, 4)
    cols_216k = 216 * 1024 // 4
    no_reserve = nkisim.SimSettings(limits=nkisim.HardwareLimits(sbuf_reserved_bytes=0))
    # fits once nothing is reserved
    np.testing.assert_array_equal(run(k_sbuf_one_buffer, x, cols=cols_216k, settings=no_reserve).outputs, 2 * x)
    # 200 KiB fits the default budget ...
    cols_200k = 200 * 1024 // 4
    np.testing.assert_array_equal(run(k_sbuf_one_buffer, x, cols=cols_200k).outputs, 2 * x)
    # ... but not when the compiler keeps 32 KiB
    big_reserve = nkisim.SimSettings(limits=nkisim.HardwareLimits(sbuf_reserved_bytes=32 * 1024))
    expect_error(errors.AllocationError, "err_stack_overflow_sbuf", "sbuf-big",
                 k_sbuf_one_buffer, x, cols=cols_200k, settings=big_reserve,
                 fragments=("required SBUF 204800 bytes", "available 196608 bytes",
                            "229376 physical minus 32768 reserved"))


def test_sbuf_at_exactly_the_budget_is_fine():
    x = f32(128, 4)
    cols = DEFAULT_USABLE_SBUF // 4 - 4          # leaves room for the (128, 4) result tile
    result = run(k_sbuf_one_buffer, x, cols=cols)
    np.testing.assert_array_equal(result.outputs, 2 * x)
    assert result.peak_sbuf_bytes == DEFAULT_USABLE_SBUF


def test_tiles_rebound_in_a_loop_do_not_accumulate():
    x = f32(128, 512)
    result = run(k_sbuf_rebound_in_loop, x)
    np.testing.assert_allclose(result.outputs, x + 15.0)
    peak = result.peak_sbuf_bytes
    assert 30720 * 4 <= peak <= DEFAULT_USABLE_SBUF
    assert result.machine.memory.sbuf_bytes == 0     # everything freed when the kernel returned


# ----- which buffer each instruction may read / write ----------------------------------------------

def k_dma_from_psum(x):
    out = nl.ndarray((128, 128), nl.float32, buffer=nl.hbm)
    p = nl.zeros((128, 128), nl.float32, buffer=nl.psum)
    nisa.dma_copy(dst=out, src=p)  # <dma-from-psum>
    return out


def k_dma_into_psum(x):
    p = nl.zeros((128, 128), nl.float32, buffer=nl.psum)
    nisa.dma_copy(dst=p, src=x)  # <dma-to-psum>
    return p


def k_tensor_tensor_both_psum(x):
    p1 = nl.zeros((128, 64), nl.float32, buffer=nl.psum)
    p2 = nl.zeros((128, 64), nl.float32, buffer=nl.psum)
    return nisa.tensor_tensor(p1, p2, np.add)  # <tt-psum>


def k_tensor_tensor_one_psum(x):
    out = nl.ndarray((128, 64), nl.float32, buffer=nl.hbm)
    p1 = nl.zeros((128, 64), nl.float32, buffer=nl.psum)
    s = nl.ndarray((128, 64), nl.float32)
    nisa.dma_copy(dst=s, src=x)
    r = nisa.tensor_tensor(p1, s, np.add)
    nisa.dma_copy(dst=out, src=r)
    return out


def k_compute_on_hbm(x):
    return nisa.tensor_scalar(x, np.add, 1.0)  # <hbm-compute>


def k_activation_on_hbm(x):
    return nisa.activation(nl.exp, x)  # <hbm-activation>


def k_gpsimd_reads_psum(x):
    p = nl.zeros((128, 64), nl.float32, buffer=nl.psum)
    return nisa.tensor_copy(p, engine=nisa.gpsimd_engine)  # <gpsimd-psum>


def k_assign_into_hbm(x):
    out = nl.ndarray((128, 64), nl.float32, buffer=nl.hbm)
    t = nl.ndarray((128, 64), nl.float32)
    nisa.dma_copy(dst=t, src=x)
    out[...] = t  # <hbm-assign>
    return out


def test_dma_copy_from_psum():
    err = expect_error(errors.MemorySpaceError, "err_unsupported_memory", "dma-from-psum",
                       k_dma_from_psum, f32(1, 1),
                       fragments=("Expected operand 'src' of 'dma_copy' to be in address space "
                                  "'hbm|sbuf', but got a tile in 'psum' instead.",))
    assert "tensor_copy" in err.remedy


def test_dma_copy_into_psum():
    expect_error(errors.MemorySpaceError, "err_unsupported_memory", "dma-to-psum",
                 k_dma_into_psum, f32(128, 128),
                 fragments=("operand 'dst' of 'dma_copy'", "'hbm|sbuf'", "'psum'"))


def test_tensor_tensor_with_both_inputs_in_psum():
    expect_error(errors.MemorySpaceError, "err_unsupported_memory", "tt-psum",
                 k_tensor_tensor_both_psum, f32(1, 1),
                 fragments=("both inputs of 'tensor_tensor' are in PSUM",))


def test_tensor_tensor_with_one_input_in_psum_is_fine():
    x = f32(128, 64)
    np.testing.assert_array_equal(run(k_tensor_tensor_one_psum, x).outputs, x)


def test_compute_on_an_hbm_tensor():
    err = expect_error(errors.MemorySpaceError, "err_unsupported_memory", "hbm-compute",
                       k_compute_on_hbm, f32(128, 4),
                       fragments=("operand 'data' of 'tensor_scalar'", "'psum|sbuf'",
                                  "got a tile in 'hbm' instead"))
    assert "dma_copy" in err.remedy


def test_activation_on_an_hbm_tensor():
    expect_error(errors.MemorySpaceError, "err_unsupported_memory", "hbm-activation",
                 k_activation_on_hbm, f32(128, 4),
                 fragments=("operand 'data' of 'activation'", "'hbm'"))


def test_gpsimd_engine_cannot_access_psum():
    expect_error(errors.MemorySpaceError, "err_unsupported_memory", "gpsimd-psum",
                 k_gpsimd_reads_psum, f32(1, 1),
                 fragments=("GpSimd engine cannot access PSUM", "'tensor_copy'"))


def test_assign_into_hbm_with_equals():
    err = expect_error(errors.MemorySpaceError, "err_unsupported_memory", "hbm-assign",
                       k_assign_into_hbm, f32(128, 64),
                       fragments=("cannot assign into HBM tensor", "float32[128, 64] in hbm", "'='"))
    assert "dma_copy" in err.remedy


# ----- indexing ----------------------------------------------------------------------------------------

def k_oob_slice(x):
    t = nl.ndarray((128, 4096), nl.float32)
    nisa.dma_copy(dst=t, src=x[:, 0:4096])  # <oob-slice>


def k_oob_int(x):
    t = nl.ndarray((128, 1), nl.float32)
    nisa.dma_copy(dst=t, src=x[:, 4000])  # <oob-int>


def k_oob_partition_slice(x):
    t = nl.ndarray((128, 4), nl.float32, name="t")
    nisa.dma_copy(dst=t[0:129, :], src=x)  # <oob-par>


def k_oob_advanced(x):
    t = nl.ndarray((128, 4), nl.float32, name="t")
    i_p, i_f = nl.mgrid[0:128, 0:8]
    return nisa.tensor_copy(t[i_p, i_f])  # <oob-adv>


def k_partition_stride(x):
    t = nl.ndarray((128, 4), nl.float32, name="t")
    nisa.dma_copy(dst=t, src=x)
    return nisa.tensor_copy(t[0:128:2, :])  # <par-stride>


def k_legal_strides(x):
    """Stepping along a free dim of a tile, and along dim 0 of an HBM tensor, is fine."""
    out = nl.ndarray((64, 2), nl.float32, buffer=nl.hbm)
    t = nl.ndarray((64, 4), nl.float32)
    nisa.dma_copy(dst=t, src=x[0:128:2, :])
    even = nisa.tensor_copy(t[:, 0:4:2])
    nisa.dma_copy(dst=out, src=even)
    return out


def k_mixed_indexing(x):
    t = nl.ndarray((128, 4), nl.float32)
    i_p = nl.arange(128)[:, None]
    return nisa.tensor_copy(t[i_p, 0:4])  # <mixed>


def k_1d_arange(x):
    t = nl.ndarray((128, 4), nl.float32)
    return nisa.tensor_copy(t[nl.arange(128), nl.arange(4)])  # <arange-1d>


def test_out_of_bound_static_slice():
    err = expect_error(errors.OutOfBoundsError, "err_tensor_access_out_of_bound", "oob-slice",
                       k_oob_slice, f32(128, 4000),
                       fragments=("Out-of-bound access for tensor `x` on dimension 1: index range "
                                  "[0, 4095] exceed dimension size of 4000",))
    assert isinstance(err, IndexError)


def test_out_of_bound_int_index():
    expect_error(errors.OutOfBoundsError, "err_tensor_access_out_of_bound", "oob-int",
                 k_oob_int, f32(128, 4000),
                 fragments=("tensor `x` on dimension 1", "index 4000 exceed dimension size of 4000"))


def test_out_of_bound_partition_slice_of_a_tile():
    expect_error(errors.OutOfBoundsError, "err_tensor_access_out_of_bound", "oob-par",
                 k_oob_partition_slice, f32(128, 4),
                 fragments=("tensor `t` on dimension 0: index range [0, 128] exceed dimension size of 128",))


def test_out_of_bound_advanced_index():
    expect_error(errors.OutOfBoundsError, "err_tensor_access_out_of_bound", "oob-adv",
                 k_oob_advanced, f32(1, 1),
                 fragments=("tensor `t` on dimension 1: index range [0, 7] exceed dimension size of 4",))


def test_strided_partition_slice_of_an_onchip_tile():
    err = expect_error(errors.IndexingError, "err_partition_dim_stride_not_supported", "par-stride",
                       k_partition_stride, f32(128, 4),
                       fragments=("partition dimension of t", "step 2"))
    assert "free dimension" in err.remedy


def test_free_dim_and_hbm_strides_are_fine():
    x = f32(128, 4)
    np.testing.assert_array_equal(run(k_legal_strides, x).outputs, x[0:128:2, 0:4:2])


def test_mixing_basic_and_advanced_indexing():
    expect_error(errors.IndexingError, "err_unsupported_mixing_basic_advanced_tensor_indexing", "mixed",
                 k_mixed_indexing, f32(1, 1),
                 fragments=("Mixing basic tensor indexing and advanced tensor indexing is not supported.",))


def test_1d_arange_index():
    err = expect_error(errors.IndexingError, "err_1d_arange_not_supported", "arange-1d",
                       k_1d_arange, f32(1, 1), fragments=("1d arange is not supported", "dimension 0"))
    assert "[:, None]" in err.remedy


# ----- dtypes -------------------------------------------------------------------------------------------

def k_matmul_int32(x):
    a = nl.zeros((128, 128), nl.int32)
    b = nl.zeros((128, 512), nl.int32)
    return nisa.nc_matmul(a, b)  # <mm-int32>


def k_float64_tile(x):
    return nl.ndarray((128, 4), np.float64)  # <f64>


def k_activation_int_bias(x):
    t = nl.ndarray((128, 4), nl.float32)
    nisa.dma_copy(dst=t, src=x)
    bias = nl.zeros((128, 1), nl.int32)
    return nisa.activation(nl.exp, t, bias=bias)  # <act-bias>


def test_matmul_on_int32_tiles():
    err = expect_error(errors.DtypeError, "err_instruction_unsupported_dtypes", "mm-int32",
                       k_matmul_int32, f32(1, 1),
                       fragments=("operand 'stationary' of 'nc_matmul' has dtype int32",))
    assert "bf16" in err.remedy and isinstance(err, TypeError)


def test_unsupported_dtype_for_a_tile():
    expect_error(errors.DtypeError, "err_unsupported_dtype_value", "f64", k_float64_tile, f32(1, 1),
                 fragments=("unsupported dtype", "float64"))


def test_activation_bias_must_be_float():
    expect_error(errors.DtypeError, "err_activation_bias_invalid_type", "act-bias",
                 k_activation_int_bias, f32(128, 4),
                 fragments=("'bias' param of 'activation' must be a vector of type float32", "int32"))


# ----- instruction operand shapes -------------------------------------------------------------------------

def k_reduce_axis0(x):
    t = nl.ndarray((128, 4), nl.float32)
    nisa.dma_copy(dst=t, src=x)
    return nisa.tensor_reduce(np.add, t, axis=0)  # <reduce-p>


def k_tensor_scalar_full_tile(x):
    t = nl.ndarray((128, 4), nl.float32)
    nisa.dma_copy(dst=t, src=x)
    return nisa.tensor_scalar(t, np.multiply, t)  # <ts-operand>


def k_tensor_scalar_vector_ok(x):
    out = nl.ndarray((128, 4), nl.float32, buffer=nl.hbm)
    t = nl.ndarray((128, 4), nl.float32)
    nisa.dma_copy(dst=t, src=x)
    r = nisa.tensor_scalar(t, np.multiply, t[:, 0:1])
    nisa.dma_copy(dst=out, src=r)
    return out


def k_partition_mismatch(x):
    a = nl.zeros((128, 512), nl.float32)
    b = nl.zeros((1, 512), nl.float32)
    return nisa.tensor_tensor(a, b, np.add)  # <p-mismatch>


def k_dma_count_mismatch(x):
    t = nl.ndarray((128, 4), nl.float32)
    nisa.dma_copy(dst=t, src=x[:, 0:3])  # <dma-count>


def k_zeros_on_hbm(x):
    out = nl.zeros((128, 4), nl.float32, buffer=nl.hbm)  # <hbm-zeros>
    return out


def k_transpose_128x512(x):
    t = nl.zeros((128, 512), nl.float32)
    return nl.transpose(t)  # <nl-transpose>


def k_vector_transpose_64(x):
    t = nl.zeros((64, 64), nl.float32)
    return nisa.nc_transpose(t, engine=nisa.vector_engine)  # <vec-transpose>


def k_transposes_at_the_limits(x):
    """x (128, 128): a 32x32 block on the Vector Engine and all of it on the Tensor Engine."""
    out = nl.ndarray((160, 128), nl.float32, buffer=nl.hbm)
    t = nl.ndarray((128, 128), nl.float32)
    nisa.dma_copy(dst=t, src=x)
    small = nisa.nc_transpose(t[0:32, 0:32], engine=nisa.vector_engine)
    full = nisa.tensor_copy(nisa.nc_transpose(t))
    nisa.dma_copy(dst=out[0:128, :], src=full)
    nisa.dma_copy(dst=out[128:160, 0:32], src=small)
    nisa.dma_copy(dst=out[128:160, 32:128], src=t[0:32, 32:128])
    return out


def test_tensor_reduce_over_partition_axis():
    err = expect_error(errors.ShapeError, "err_reduce_on_partition_axis", "reduce-p",
                       k_reduce_axis0, f32(128, 4), fragments=("partition dimension (axis 0)",))
    assert "tensor_partition_reduce" in err.remedy


def test_tensor_scalar_operand_must_be_scalar_or_vector():
    expect_error(errors.ShapeError, "err_tensor_scalar_operand_shape", "ts-operand",
                 k_tensor_scalar_full_tile, f32(128, 4),
                 fragments=("operand 'operand0' of 'tensor_scalar'", "(128, 1)", "got [128, 4]"))


def test_tensor_scalar_with_a_partition_vector_is_fine():
    x = f32(128, 4)
    np.testing.assert_allclose(run(k_tensor_scalar_vector_ok, x).outputs, x * x[:, 0:1])


def test_partition_mismatch_in_tensor_tensor():
    err = expect_error(errors.PartitionMismatchError, "err_num_partition_mismatch", "p-mismatch",
                       k_partition_mismatch, f32(1, 1),
                       fragments=("number of partitions (dimension 0 size of a tile) mismatch in "
                                  "parameters (data1[128, 512], data2[1, 512]) of 'tensor_tensor'",))
    assert isinstance(err, ValueError)


def test_dma_copy_with_different_element_counts():
    expect_error(errors.ShapeError, "err_dma_shape_mismatch", "dma-count",
                 k_dma_count_mismatch, f32(128, 4),
                 fragments=("same number of elements", "has 384", "has 512"))


def test_zeros_on_hbm():
    expect_error(errors.MemorySpaceError, "err_hbm_tensor_with_init_value_not_supported", "hbm-zeros",
                 k_zeros_on_hbm, f32(1, 1), fragments=("HBM tensor with an initial value",))


def test_nl_transpose_of_128x512():
    expect_error(errors.HardwareLimitError, "err_size_of_dimension_exceed_arch_limit", "nl-transpose",
                 k_transpose_128x512, f32(1, 1),
                 fragments=("size of dimension 1 in 'x[128, 512]' of 'transpose' exceed architecture "
                            "limitation of 128",))


def test_vector_engine_transpose_over_32x32():
    err = expect_error(errors.HardwareLimitError, "err_size_of_dimension_exceed_arch_limit", "vec-transpose",
                       k_vector_transpose_64, f32(1, 1),
                       fragments=("partition size 64 of 'nc_transpose'", "limitation of 32"))
    assert "Tensor Engine" in err.remedy


def test_transposes_at_their_limits_are_fine():
    x = f32(128, 128)
    out = run(k_transposes_at_the_limits, x).outputs
    np.testing.assert_array_equal(out[0:128], x.T)
    np.testing.assert_array_equal(out[128:160, 0:32], x[0:32, 0:32].T)


# ----- block dimensions (nl.par_dim not first) ---------------------------------------------------------

def k_block_dims(x):
    """x (256, 4) held as 2 blocks of (128, 4) in one SBUF tensor with a leading block dim."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    t = nl.ndarray((2, nl.par_dim(128), 4), nl.float32, buffer=nl.sbuf)  # <block-dim>
    for b in nl.affine_range(2):
        nisa.dma_copy(dst=t[b], src=x[b * 128:(b + 1) * 128, :])
        nisa.dma_copy(dst=out[b * 128:(b + 1) * 128, :], src=t[b])
    return out


def test_block_dimension_warns_at_the_kernel_line():
    x = f32(256, 4)
    with pytest.warns(BlockDimensionWarning, match="block dimensions") as record:
        out = run(k_block_dims, x).outputs
    np.testing.assert_array_equal(out, x)          # a warning only: the kernel still runs
    warning = next(w for w in record if issubclass(w.category, BlockDimensionWarning))
    assert os.path.abspath(warning.filename) == THIS_FILE
    assert warning.lineno == line_of("block-dim")


def test_block_dimension_is_an_error_when_configured():
    strict = nkisim.SimSettings(block_dims_are_errors=True)
    err = expect_error(errors.ShapeError, "err_leading_dimension_of_tensor_must_be_partition", "block-dim",
                       k_block_dims, f32(256, 4), settings=strict,
                       fragments=("leading dimension of SBUF/PSUM tensors must be the partition dimension",
                                  "[2, 128, 4]"))
    assert "partition dimension first" in err.remedy


# ----- through the student-facing entry point ------------------------------------------------------------

def test_errors_surface_through_nki_baremetal():
    with pytest.raises(errors.HardwareLimitError) as info:
        nki.baremetal(k_sbuf_256_partitions)(f32(256, 4))
    assert info.value.site.lineno == line_of("pmax-sbuf")
    assert "err_num_partition_exceed_arch_limit" in str(info.value)
