"""Pure NumPy references for the course kernels.

These are the ground truth the grader compares kernel outputs against, so
they favour obvious correctness and speed over cleverness: the convolution
is K*K dense matrix products (one per filter offset) instead of a loop over
pixels.
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

    # One image at a time: X[b] is already channels-first, so every filter
    # offset is one (C_out, C_in) @ (C_in, pixels) product done by BLAS. The
    # shifted window is copied into a reused scratch buffer and the product
    # written into a reused buffer; fresh 100 MB temporaries per offset would
    # cost more than the arithmetic (page faults).
    w_acc = W.astype(accumulate_dtype)
    bias_acc = bias.astype(accumulate_dtype)[:, None]
    hp, wp = h_out // pool_size, w_out // pool_size
    result = np.empty((batch, c_out, hp, wp), dtype=X.dtype)
    window = np.empty((c_in, h_out, w_out), dtype=accumulate_dtype)
    product = np.empty((c_out, h_out * w_out), dtype=accumulate_dtype)
    acc = np.empty((c_out, h_out * w_out), dtype=accumulate_dtype)
    for b in range(batch):
        image = X[b].astype(accumulate_dtype)
        acc[...] = bias_acc
        for kh in range(k_h):
            for kw in range(k_w):
                np.copyto(window, image[:, kh:kh + h_out, kw:kw + w_out])
                np.matmul(w_acc[:, :, kh, kw], window.reshape(c_in, -1), out=product)
                acc += product
        conv = acc.reshape(c_out, h_out, w_out)
        if pool_size > 1:
            # Drop rows/columns that do not fill a whole window, then take the
            # max over each pool_size x pool_size window.
            conv = conv[:, :hp * pool_size, :wp * pool_size]
            conv = conv.reshape(c_out, hp, pool_size, wp, pool_size).max(axis=(2, 4))
        result[b] = conv
    return result
