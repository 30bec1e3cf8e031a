"""Tiled matrix multiplication C = A @ B.

Inputs (in HBM):
    a_tensor: (M, K)
    b_tensor: (K, N)
M, K and N are multiples of 128; the dtype is float32, bfloat16 or float16.

Return an HBM tensor of shape (M, N), with the same dtype as a_tensor, holding
A @ B accumulated in float32.

nisa.nc_matmul(stationary, moving) computes stationary.T @ moving: both operands
hold the contraction (K) on their partitions, so a (128, 128) block of A must be
transposed first (nisa.nc_transpose), and moving may be up to 512 columns wide
(one PSUM bank of float32). psum += nisa.nc_matmul(...) over the K tiles
accumulates in PSUM; copy the result to SBUF (casting to the output dtype)
before storing it.
"""

import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa


@nki.compiler.skip_middle_end_transformations
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
