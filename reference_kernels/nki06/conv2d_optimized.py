"""Optimized reference for the fused conv2d + maxpool kernel (part 2), in NKI 0.6.

The kernel of reference_kernels/conv2d_optimized.py in the current dialect: the same loads,
transposes, matmuls and stores with the same tile shapes and DMA sizes. Where NKI 0.6 does not
have the legacy form, the closest one takes its place, costing within 1% of the legacy kernel:

* PSUM accumulators are uninitialised ndarrays: with nc_matmul's default accumulate=None the
  first matmul into the region overwrites it and the next 17 add to it, so there is no zeroing
  memset (the legacy kernel's nl.zeros has one);
* tensor_tensor does not broadcast, so the bias add (a (128, 1) column against a tile) is a
  tensor_scalar with the column as operand0;
* tensor_reduce reduces trailing free dimensions only, so the 2x2 max-pool reduces a permuted
  view of the PSUM tile (each window's row and column pair last): one instruction, as in the
  legacy reference.

Design (numbers for the graded 224x224, C_in = C_out = 256, K = 3 case):

* The weights come in with one DMA per 128 output channels and are turned into a resident
  [ci, ci_tile, kh*K + kw, co] SBUF tile by Tensor Engine transposes, once per kernel call
  (18 KiB per partition in fp32).
* Output rows are handled in blocks. One DMA per 128-input-channel tile loads a block's input
  rows together with their K - 1 halo rows; one DMA per 128 output channels stores the
  block's pooled output.
* A matmul covers as many output rows as one 2 KiB PSUM bank holds (rows * W_out <= 512
  fp32: 2 rows of 222 here, all 30x14 outputs of a 32x16 image) through the 3-D moving view
  x[:, ci, r:r+rows, kw:kw+W_out].
* Bias and max-pool happen on the way out of PSUM: the max-pool reads PSUM directly, and the
  bias is added to the pooled tile (4x smaller) by an instruction that also casts to the
  output dtype. Adding after the max gives the same values, also after fp32 rounding, since
  rounding is monotonic: max(x) + b == max(x + b).
* fp16 inputs stay fp16 in SBUF and reach the Tensor Engine as fp16; only PSUM and the pooling
  temporaries are fp32.
"""

import numpy as np
import nki
import nki.language as nl
import nki.isa as nisa

# Per-partition byte budget for one block of input rows. The input block and the output block
# of 128 output channels are sized so that two generations of each (the block being computed
# and the next one being loaded) and the resident weights stay well below the ~208 KiB the
# compiler leaves us. For 224x224 fp32 that is 24 output rows per block (26 input rows,
# 45.5 KiB).
INPUT_BLOCK_BYTES = 48 * 1024


def load_transposed_weights(W, dtype):
    """Return an SBUF tile w_t[ci, ci_tile, kh * K + kw, co] = W[co, ci_tile*128 + ci, kh, kw].

    nc_matmul contracts over partitions, so the stationary operand must have input channels on
    partitions, while W comes with output channels first. One DMA per 128 output channels
    loads whole contiguous rows of W; each (ci_tile, kh, kw) 128x128 block is then transposed
    on the Tensor Engine into PSUM and copied into place.
    """
    C_out, C_in, K, _ = W.shape
    P = nl.tile_size.pmax
    n_ci = C_in // P
    n_co = C_out // P
    KK = K * K

    w_t = nl.ndarray((P, n_ci, KK, C_out), dtype=dtype, buffer=nl.sbuf)
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


def load_bias(bias):
    """Return an SBUF tile b[p, co_tile, 0] = bias[co_tile * 128 + p].

    b[:, co_tile, :] is a (128, 1) column: the per-partition scalar operand of tensor_scalar.
    """
    C_out = bias.shape[0]
    P = nl.tile_size.pmax
    n_co = C_out // P
    bias_sb = nl.ndarray((P, n_co, 1), dtype=bias.dtype, buffer=nl.sbuf)
    bias_hbm = bias.reshape((n_co, P, 1))
    for co in nl.affine_range(n_co):
        nisa.dma_copy(dst=bias_sb[:, co, :], src=bias_hbm[co])
    return bias_sb


def rows_per_psum_tile(out_height, out_width, pool_size):
    """The most output rows whose fp32 results fit one PSUM bank, a multiple of pool_size."""
    rows = min(out_height, nl.tile_size.psum_fmax // out_width)
    rows -= rows % pool_size
    assert rows >= pool_size, "an output row (times pool_size) must fit one PSUM bank"
    return rows


def rows_per_block(out_height, rows_per_tile, in_row_bytes, K):
    """Output rows per input block: whole PSUM tiles whose input rows fit INPUT_BLOCK_BYTES."""
    fit = INPUT_BLOCK_BYTES // in_row_bytes - (K - 1)
    block = max(rows_per_tile, fit - fit % rows_per_tile)
    # no block is taller than the image
    return min(block, out_height)


def conv_psum_tile(x_blk, w_t, bias_sb, out_blk, co, r0, out_r0, rows, K, pool_size):
    """Compute `rows` output rows of output-channel tile `co` into out_blk.

    Reads the block-relative input rows r0 .. r0 + rows + K - 2 of x_blk and writes the pooled,
    biased rows out_r0 .. out_r0 + rows // pool_size - 1 of out_blk.
    """
    P = nl.tile_size.pmax
    n_ci = w_t.shape[1]
    out_width = x_blk.shape[3] - K + 1
    out_rows = rows // pool_size

    # Uninitialised: the first matmul of the group overwrites it, the others accumulate.
    acc = nl.ndarray((P, rows, out_width), nl.float32, buffer=nl.psum)
    for ci in nl.affine_range(n_ci):
        for kh in nl.affine_range(K):
            for kw in nl.affine_range(K):
                nisa.nc_matmul(
                    dst=acc,
                    stationary=w_t[:, ci, kh * K + kw, co * P:(co + 1) * P],
                    moving=x_blk[:, ci, r0 + kh:r0 + kh + rows, kw:kw + out_width],
                )

    # tensor_tensor does not broadcast in NKI 0.6: the bias, one value per partition, is the
    # scalar column operand of a tensor_scalar, which also casts to the output dtype
    bias_col = bias_sb[:, co, :]
    if pool_size == 1:
        nisa.tensor_scalar(dst=out_blk[:, out_r0:out_r0 + out_rows, :], data=acc, op0=nl.add, operand0=bias_col)
    else:
        # Pool straight out of PSUM, then add the bias and cast on the smaller tile. NKI 0.6's
        # tensor_reduce reduces trailing free dimensions only: a view (no copy) puts each
        # window's rows and columns last, so one reduce over both pools.
        pooled_width = out_width // pool_size
        windows = acc.reshape((P, out_rows, pool_size, pooled_width, pool_size)).permute((0, 1, 3, 2, 4))
        pooled = nl.ndarray((P, out_rows, pooled_width), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=pooled, op=nl.max, data=windows, axis=(3, 4))
        nisa.tensor_scalar(dst=out_blk[:, out_r0:out_r0 + out_rows, :], data=pooled, op0=nl.add,
                           operand0=bias_col)


def conv_row_block(X, X_out, w_t, bias_sb, b, row0, out_row0, n_rows, rows_per_tile, K, pool_size):
    """Compute conv rows row0 .. row0 + n_rows - 1 of image b for every output channel.

    Writes the pooled rows out_row0 .. out_row0 + n_rows // pool_size - 1 of X_out. n_rows,
    rows_per_tile, K and pool_size are compile-time sizes; row0 and out_row0 may depend on a
    loop index.
    """
    P = nl.tile_size.pmax
    n_ci = X.shape[1] // P
    n_co = X_out.shape[1] // P
    input_width = X.shape[3]
    out_pool_width = X_out.shape[3]
    in_rows = n_rows + K - 1
    out_rows = n_rows // pool_size

    # The block and its halo rows: one DMA per input-channel tile.
    x_blk = nl.ndarray((P, n_ci, in_rows, input_width), dtype=X.dtype, buffer=nl.sbuf)
    for ci in nl.affine_range(n_ci):
        nisa.dma_copy(dst=x_blk[:, ci], src=X[b, ci * P:(ci + 1) * P, row0:row0 + in_rows, :])

    n_full_tiles = n_rows // rows_per_tile
    tail_rows = n_rows % rows_per_tile
    tile_out_rows = rows_per_tile // pool_size
    for co in nl.affine_range(n_co):
        out_blk = nl.ndarray((P, out_rows, out_pool_width), dtype=X_out.dtype, buffer=nl.sbuf)
        for t in nl.affine_range(n_full_tiles):
            conv_psum_tile(x_blk, w_t, bias_sb, out_blk, co,
                           t * rows_per_tile, t * tile_out_rows, rows_per_tile, K, pool_size)
        if tail_rows > 0:
            conv_psum_tile(x_blk, w_t, bias_sb, out_blk, co,
                           n_full_tiles * rows_per_tile, n_full_tiles * tile_out_rows,
                           tail_rows, K, pool_size)
        # The block's rows are contiguous in X_out: one store per output-channel tile.
        nisa.dma_copy(
            dst=X_out[b, co * P:(co + 1) * P, out_row0:out_row0 + out_rows, :],
            src=out_blk,
        )


@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    """Conv2d (stride 1, no padding) + bias + max-pool(pool_size), blocked over output rows."""
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

    X_out = nl.ndarray(
        (batch_size, out_channels, out_pool_height, out_pool_width),
        dtype=X.dtype,
        buffer=nl.shared_hbm,
    )

    n_ci = in_channels // P
    itemsize = np.dtype(X.dtype).itemsize
    rows_per_tile = rows_per_psum_tile(out_height, out_width, pool_size)
    block_rows = rows_per_block(out_height, rows_per_tile, n_ci * input_width * itemsize, K)
    n_full_blocks = out_height // block_rows
    tail_rows = out_height % block_rows      # a multiple of pool_size, as both terms are
    block_out_rows = block_rows // pool_size

    w_t = load_transposed_weights(W, X.dtype)
    bias_sb = load_bias(bias)

    for b in nl.affine_range(batch_size):
        for blk in nl.affine_range(n_full_blocks):
            conv_row_block(X, X_out, w_t, bias_sb, b,
                           blk * block_rows, blk * block_out_rows,
                           block_rows, rows_per_tile, K, pool_size)
        if tail_rows > 0:
            conv_row_block(X, X_out, w_t, bias_sb, b,
                           n_full_blocks * block_rows, n_full_blocks * block_out_rows,
                           tail_rows, rows_per_tile, K, pool_size)

    return X_out
