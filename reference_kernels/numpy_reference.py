"""Pure NumPy references for the course kernels.

These are the ground truth the grader compares kernel outputs against, so
they favour obvious correctness and speed over cleverness: the convolution
is one dense matrix product per block of output rows (every filter offset and
input channel at once) instead of a loop over pixels or offsets.
"""

import numpy as np


def vector_add_reference(a, b):
    """Element-wise sum, in the inputs' promoted dtype."""
    return np.add(np.asarray(a), np.asarray(b))


def transpose_reference(a):
    """2-D transpose as a fresh contiguous array."""
    return np.ascontiguousarray(np.asarray(a).T)


def conv2d_maxpool_reference(X, W, bias, pool_size=1, accumulate_dtype=np.float64):
    """Conv2d (stride 1, no padding) + bias, then max-pool (window = stride = pool_size).

    X: (B, C_in, H, W_in); W: (C_out, C_in, K, K); bias: (C_out,).
    Returns (B, C_out, H_out // pool_size, W_out // pool_size) in X.dtype, where
    H_out = H - K + 1 and W_out = W_in - K + 1. Trailing rows or columns that do
    not fill a whole pooling window are dropped.

    The products are accumulated in ``accumulate_dtype`` (float64 by default,
    so the result is a faithful rounding of the exact value) and the result is
    cast to X.dtype only at the end.
    """
    X = np.asarray(X)
    W = np.asarray(W)
    bias = np.asarray(bias)
    batch, c_in, height, width = X.shape
    c_out, c_in_w, k_h, k_w = W.shape
    if c_in_w != c_in:
        raise ValueError(f"X has {c_in} input channels but W expects {c_in_w}")
    if bias.shape != (c_out,):
        raise ValueError(f"bias must have shape ({c_out},), got {bias.shape}")
    if pool_size < 1:
        raise ValueError(f"pool_size must be >= 1, got {pool_size}")
    h_out = height - k_h + 1
    w_out = width - k_w + 1
    if h_out < 1 or w_out < 1:
        raise ValueError("filter is larger than the image")

    # One GEMM per block of output rows, over every input channel and filter offset at once:
    # the block's windows are laid out as columns (im2col, rows (c_in, kh, kw)), so the whole
    # C_in*K*K sum runs inside BLAS. Blocks keep the columns near COLUMNS_BYTES (one image's
    # would be ~1 GB at 224x224 in float64); rows are a multiple of pool_size, so a pooling
    # window never straddles two blocks. Both buffers are reused: fresh 50 MB temporaries per
    # block would cost page faults on the order of the copies themselves.
    hp, wp = h_out // pool_size, w_out // pool_size
    used_rows = hp * pool_size if pool_size > 1 else h_out
    depth = c_in * k_h * k_w
    itemsize = np.dtype(accumulate_dtype).itemsize
    block = max(pool_size, COLUMNS_BYTES // (depth * w_out * itemsize) // pool_size * pool_size)
    block = min(block, max(used_rows, pool_size))
    w_mat = W.reshape(c_out, depth).astype(accumulate_dtype)
    bias_acc = bias.astype(accumulate_dtype)[:, None]
    columns = np.empty(depth * block * w_out, dtype=accumulate_dtype)
    products = np.empty(c_out * block * w_out, dtype=accumulate_dtype)
    result = np.empty((batch, c_out, hp, wp), dtype=X.dtype)
    for b in range(batch):
        for r0 in range(0, used_rows, block):
            n = min(block, used_rows - r0)
            cols = columns[:depth * n * w_out].reshape(c_in, k_h, k_w, n, w_out)
            for kh in range(k_h):
                for kw in range(k_w):
                    cols[:, kh, kw] = X[b, :, r0 + kh:r0 + kh + n, kw:kw + w_out]
            conv = products[:c_out * n * w_out].reshape(c_out, n * w_out)
            np.matmul(w_mat, cols.reshape(depth, n * w_out), out=conv)
            conv += bias_acc
            conv = conv.reshape(c_out, n, w_out)
            if pool_size > 1:
                # the max over each pool_size x pool_size window; columns that do not fill one
                # are dropped
                conv = conv[:, :, :wp * pool_size].reshape(c_out, n // pool_size, pool_size, wp, pool_size)
                conv = conv.max(axis=(2, 4))
            result[b, :, r0 // pool_size:(r0 + n) // pool_size] = conv
    return result


COLUMNS_BYTES = 48 * 2**20
