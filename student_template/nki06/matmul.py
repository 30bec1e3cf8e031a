"""Tiled matrix multiplication C = A @ B (NKI 0.6).

Inputs (in HBM):
    a_tensor: (M, K)
    b_tensor: (K, N)
M, K and N are multiples of 128; the dtype is float32, bfloat16 or float16.

Return an HBM tensor (allocated in nl.shared_hbm) of shape (M, N), with the
same dtype as a_tensor, holding A @ B accumulated in float32.

nisa.nc_matmul(dst=psum, stationary=s, moving=m) computes s.T @ m: both
operands hold the contraction (K) on their partitions, so a (128, 128) block
of A must be transposed first (nisa.nc_transpose into a PSUM tile, then
nisa.tensor_copy to SBUF), and moving may be up to 512 columns wide (one PSUM
bank of float32). A PSUM tile from nl.ndarray(shape, nl.float32,
buffer=nl.psum) needs no zeroing: the first matmul into it overwrites it, the
next ones accumulate. DMA cannot read PSUM: copy the result to an SBUF tile of
the output dtype (nisa.tensor_copy casts) before storing it.
"""

import numpy as np
import nki
import nki.language as nl
import nki.isa as nisa


@nki.jit
def matmul(a_tensor, b_tensor):
    M, K = a_tensor.shape
    K_, N = b_tensor.shape
    assert K == K_, "A's columns and B's rows must agree"
    assert M % 128 == 0 and K % 128 == 0 and N % 128 == 0, "M, K and N must be multiples of 128"

    out = nl.ndarray((M, N), dtype=a_tensor.dtype, buffer=nl.shared_hbm)

    # TODO: compute A @ B into out, then delete the raise below.
    raise NotImplementedError(
        "matmul is not implemented yet: load tiles of A and B into SBUF, "
        "transpose A's tiles, multiply them into PSUM with nisa.nc_matmul, "
        "and store each finished tile into out."
    )

    return out
