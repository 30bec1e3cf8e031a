"""A known-wrong matmul in NKI 0.6 (grader/problems/matmul/) that tries to tell the grader's
correctness calls from its timing calls, and does less work when it thinks it is timed.

What a kernel can observe when it runs: only its arguments' shapes and dtypes (and its scalar
arguments). The grader traces it in a child whose job names no mode, iteration count or test
(tests/grader/test_hostile.py), one configuration per process, so call counts and the job file
say nothing. The one tell left is the shape: problem.toml publishes the correctness tests'
configurations, so this kernel is the reference on exactly those shapes and, on any other (the
benchmark's), accumulates only the first half of the K tiles: half the matmuls, a faster p99,
and wrong values. The grader checks every timed output as strictly as a correctness one, so its
benchmark fails and earns nothing; `grader problem check` says so (its may_pass lets it pass the
correctness tests, which it computes honestly)."""


import numpy as np
import nki
import nki.language as nl
import nki.isa as nisa

# Bytes a partition gives the resident column group of B (all of a 2048 x 2048 fp32 B would be
# 128 KiB a partition); A's rows and the output tiles use the rest.
B_GROUP_BYTES = 64 * 1024

# the correctness tests' (M, K, N), as grader/problems/matmul/problem.toml publishes them
PUBLISHED = {(256, 384, 640), (128, 128, 128), (256, 256, 512), (128, 512, 384)}


def _group_columns(K, N, itemsize, block):
    """The most columns of B (whole 512-column blocks) one group holds."""
    per_block = (K // 128) * block * itemsize
    return max(1, B_GROUP_BYTES // per_block) * block


@nki.jit
def matmul(a_tensor, b_tensor):
    """Return A @ B for A [M, K] and B [K, N], M, K and N multiples of 128, in A's dtype."""
    M, K = a_tensor.shape
    K2, N = b_tensor.shape
    assert K == K2, "A's columns and B's rows must agree"
    P = nl.tile_size.pmax                      # 128: rows of a tile, and the contraction per matmul
    BLOCK = nl.tile_size.gemm_moving_fmax      # 512: fp32 columns of one PSUM bank
    assert M % P == 0 and K % P == 0 and N % P == 0, "M, K and N must be multiples of 128"
    dtype = a_tensor.dtype
    out = nl.ndarray((M, N), dtype=dtype, buffer=nl.shared_hbm)

    n_k = K // P
    # WRONG: on a shape no correctness test uses, only the first half of the K tiles
    n_used = n_k if (M, K, N) in PUBLISHED else max(1, n_k // 2)
    group = min(N, _group_columns(K, N, np.dtype(dtype).itemsize, BLOCK))
    for g0 in nl.sequential_range((N + group - 1) // group):
        c0 = g0 * group
        width = min(group, N - c0)
        # b_sb[k, kt, j] = B[kt * 128 + k, c0 + j]
        b_sb = nl.ndarray((P, n_k, width), dtype=dtype, buffer=nl.sbuf)
        for kt in nl.affine_range(n_k):
            nisa.dma_copy(dst=b_sb[:, kt, :], src=b_tensor[kt * P:(kt + 1) * P, c0:c0 + width])

        for mt in nl.affine_range(M // P):
            a_rows = nl.ndarray((P, K), dtype=dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=a_rows, src=a_tensor[mt * P:(mt + 1) * P, :])
            # a_t[k, kt, m] = A[mt * 128 + m, kt * 128 + k]: K on partitions for the stationary side
            a_t = nl.ndarray((P, n_k, P), dtype=dtype, buffer=nl.sbuf)
            for kt in nl.affine_range(n_k):
                block_t = nl.ndarray((P, P), dtype=dtype, buffer=nl.psum)
                nisa.nc_transpose(dst=block_t, data=a_rows[:, kt * P:(kt + 1) * P])
                nisa.tensor_copy(dst=a_t[:, kt, :], src=block_t)

            for nb in nl.affine_range((width + BLOCK - 1) // BLOCK):
                cols = min(BLOCK, width - nb * BLOCK)
                acc = nl.ndarray((P, cols), dtype=nl.float32, buffer=nl.psum)
                for kt in nl.affine_range(n_used):
                    nisa.nc_matmul(dst=acc, stationary=a_t[:, kt, :], moving=b_sb[:, kt, nb * BLOCK:nb * BLOCK + cols])
                c_sb = nl.ndarray((P, cols), dtype=dtype, buffer=nl.sbuf)
                nisa.tensor_copy(dst=c_sb, src=acc)
                nisa.dma_copy(dst=out[mt * P:(mt + 1) * P, c0 + nb * BLOCK:c0 + nb * BLOCK + cols], src=c_sb)

    return out
