"""Fused convolution + max-pool layer (NKI 0.6).

Inputs (all in HBM):
    X:    (batch_size, in_channels, input_height, input_width)
    W:    (out_channels, in_channels, filter_height, filter_width)
    bias: (out_channels,)
    pool_size: 1 (plain convolution) or 2 (2x2 max-pool with stride 2)

The convolution uses stride 1 and no padding. in_channels and out_channels
are multiples of 128, filter_height == filter_width, and the convolution
output height is divisible by pool_size.

Return an HBM tensor (allocated in nl.shared_hbm) of shape
    (batch_size, out_channels, out_height // pool_size, out_width // pool_size)
with the same dtype as X, where out_height = input_height - filter_height + 1
and out_width = input_width - filter_width + 1.

In NKI 0.6 every nisa call takes its destination first and returns nothing,
e.g. nisa.nc_matmul(dst=psum_tile, stationary=w_tile, moving=x_tile); a PSUM
tile from nl.ndarray(shape, nl.float32, buffer=nl.psum) needs no zeroing: the
first matmul into it overwrites it, the next ones accumulate.
"""

import numpy as np
import nki
import nki.language as nl
import nki.isa as nisa


@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):

    batch_size, in_channels, input_height, input_width = X.shape
    out_channels, in_channels_, filter_height, filter_width = W.shape
    out_channels_ = bias.shape[0]

    assert (
        in_channels_ == in_channels and out_channels_ == out_channels
    ), "Shapes of X, W and bias do not agree"
    assert filter_height == filter_width, "Only square filters are supported"

    out_height = input_height - filter_height + 1
    out_width = input_width - filter_width + 1
    out_pool_height = out_height // pool_size
    out_pool_width = out_width // pool_size

    # The largest partition dimension a tile may have (128); in_channels and
    # out_channels are multiples of it.
    c_in_pmax = nl.tile_size.pmax
    n_tiles_c_in = in_channels // c_in_pmax

    # The result lives in HBM and is returned at the end; NKI 0.6 returns
    # only tensors allocated in nl.shared_hbm.
    X_out = nl.ndarray(
        (batch_size, out_channels, out_pool_height, out_pool_width),
        dtype=X.dtype,
        buffer=nl.shared_hbm,
    )

    # TODO: compute the convolution, add the bias, apply the max-pool and
    # write the result into X_out, then delete the raise below.
    raise NotImplementedError(
        "fused_conv2d_maxpool is not implemented yet: fill in the TODO in "
        "conv2d.py so that the kernel writes conv2d + bias + max-pool into X_out "
        "and returns it."
    )

    return X_out
