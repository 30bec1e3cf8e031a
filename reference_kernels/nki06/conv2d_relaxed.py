"""Unoptimized reference for the fused conv2d + maxpool kernel (part 2), in NKI 0.6.

The kernel of reference_kernels/conv2d_relaxed.py in the current dialect: the same loads,
matmuls and stores with the same tile shapes and DMA sizes. NKI 0.6 changes three things: the
PSUM accumulator is an uninitialised ndarray that the first matmul overwrites (no zeroing
memset), the bias column is added by a tensor_scalar (tensor_tensor does not broadcast), and
the 2x2 max-pool reduces a permuted view of the conv rows (tensor_reduce reduces trailing free
dimensions only): one instruction, as in the legacy kernel.

It is plain and correct rather than fast, and stands for the course's unoptimized reference
(the "relaxed" tier's threshold is 1.2 x its latency). The course's own code is not available;
its latency is, ~305 us above the optimized reference's in float32 and float16 alike. A gap
that does not depend on the dtype is a per-row cost that does not grow with the matmuls: a DMA
round trip for every output row. This kernel therefore has the structure a student writes
first (and the measured kernel C1 of docs/cost-model.md): each (output-channel tile, conv row)
pair loads its own input rows and its own bias tile, waits for them, and stores its row. Only
the weights are loaded once, transposed into a resident [ci, co] layout.
"""

import nki
import nki.language as nl
import nki.isa as nisa


def load_transposed_weights(W, dtype):
    """Return an SBUF tile w_t[ci, ci_tile, kh * K + kw, co] = W[co, ci_tile*128 + ci, kh, kw].

    nc_matmul contracts over the partition dimension, so the stationary operand must have
    input channels on partitions; W comes with output channels first. Each 128x128 block is
    transposed on the Tensor Engine into PSUM, then copied into place.
    """
    C_out, C_in, K, _ = W.shape
    P = nl.tile_size.pmax
    n_ci = C_in // P
    n_co = C_out // P
    KK = K * K

    w_t = nl.ndarray((P, n_ci, KK, C_out), dtype=dtype, buffer=nl.sbuf)
    # row co of w_rows holds all C_in * K * K weights of output channel co
    w_rows_hbm = W.reshape((n_co, P, C_in * KK))
    for co in nl.affine_range(n_co):
        w_rows = nl.ndarray((P, C_in * KK), dtype=dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=w_rows, src=w_rows_hbm[co])
        # w_rows_view[co_p, ci, kk] = W[co, ci, kh, kw]
        w_rows_view = w_rows.reshape((P, C_in, KK))
        for ci_tile in nl.affine_range(n_ci):
            for kk in nl.affine_range(KK):
                block_t = nl.ndarray((P, P), dtype=dtype, buffer=nl.psum)
                nisa.nc_transpose(dst=block_t, data=w_rows_view[:, ci_tile * P:(ci_tile + 1) * P, kk])
                nisa.tensor_copy(dst=w_t[:, ci_tile, kk, co * P:(co + 1) * P], src=block_t)
    return w_t


@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    """Conv2d (stride 1, no padding) + bias + max-pool(pool_size), one conv row of one
    output-channel tile at a time."""
    batch_size, in_channels, input_height, input_width = X.shape
    out_channels, in_channels_, filter_height, filter_width = W.shape
    P = nl.tile_size.pmax

    assert in_channels_ == in_channels and bias.shape[0] == out_channels
    assert filter_height == filter_width
    assert in_channels % P == 0 and out_channels % P == 0
    assert pool_size in (1, 2)

    K = filter_height
    out_height = input_height - K + 1
    out_width = input_width - K + 1
    assert out_height % pool_size == 0 and out_width % pool_size == 0
    out_pool_height = out_height // pool_size
    out_pool_width = out_width // pool_size
    assert out_width <= nl.tile_size.psum_fmax, "image too wide for one PSUM bank"

    X_out = nl.ndarray(
        (batch_size, out_channels, out_pool_height, out_pool_width),
        dtype=X.dtype,
        buffer=nl.shared_hbm,
    )

    n_ci = in_channels // P
    n_co = out_channels // P

    w_t = load_transposed_weights(W, X.dtype)
    # bias_hbm[co]: the bias of output-channel tile co, one value per partition
    bias_hbm = bias.reshape((n_co, P, 1))

    for b in nl.affine_range(batch_size):
        for co in nl.affine_range(n_co):
            for hp in nl.affine_range(out_pool_height):
                # the pool_size conv rows of this pooled row, bias added
                conv_rows = nl.ndarray((P, pool_size, out_width), dtype=nl.float32, buffer=nl.sbuf)
                for r in nl.affine_range(pool_size):
                    h = hp * pool_size + r
                    # the K input rows conv row h needs, one DMA per row and input-channel tile,
                    # loaded again for every output-channel tile
                    x_rows = nl.ndarray((P, n_ci, K, input_width), dtype=X.dtype, buffer=nl.sbuf)
                    for ci in nl.affine_range(n_ci):
                        for kh in nl.affine_range(K):
                            nisa.dma_copy(dst=x_rows[:, ci, kh, :], src=X[b, ci * P:(ci + 1) * P, h + kh, :])
                    # and the tile's bias, loaded again for every row
                    bias_sb = nl.ndarray((P, 1), dtype=bias.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=bias_sb, src=bias_hbm[co])

                    # all input-channel tiles and filter offsets summed in one PSUM bank: the
                    # first matmul overwrites the uninitialised tile, the rest accumulate
                    acc = nl.ndarray((P, out_width), nl.float32, buffer=nl.psum)
                    for ci in nl.affine_range(n_ci):
                        for kh in nl.affine_range(K):
                            for kw in nl.affine_range(K):
                                nisa.nc_matmul(
                                    dst=acc,
                                    stationary=w_t[:, ci, kh * K + kw, co * P:(co + 1) * P],
                                    moving=x_rows[:, ci, kh, kw:kw + out_width],
                                )
                    # the bias column is a per-partition scalar (tensor_tensor does not broadcast)
                    nisa.tensor_scalar(dst=conv_rows[:, r, :], data=acc, op0=nl.add, operand0=bias_sb)

                if pool_size > 1:
                    # each 2x2 window's row and column pairs last (a view: NKI 0.6 reduces
                    # trailing free dimensions only), then one reduce over both
                    windows = conv_rows.reshape((P, pool_size, out_pool_width, pool_size)).permute((0, 2, 1, 3))
                    pooled = nl.ndarray((P, out_pool_width), dtype=nl.float32, buffer=nl.sbuf)
                    nisa.tensor_reduce(dst=pooled, op=nl.max, data=windows, axis=(2, 3))
                else:
                    pooled = conv_rows[:, 0, :]
                out_row = nl.ndarray((P, out_pool_width), dtype=X.dtype, buffer=nl.sbuf)
                nisa.tensor_copy(dst=out_row, src=pooled)
                nisa.dma_copy(dst=X_out[b, co * P:(co + 1) * P, hp, :], src=out_row)

    return X_out
