"""Pure NumPy references for the course kernels.

These are the ground truth the grader compares kernel outputs against, so
they favour obvious correctness and speed over cleverness: the convolution
is one dense matrix product per block of output rows (every filter offset and
input channel at once) instead of a loop over pixels or offsets.
"""

from collections import deque

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def vector_add_reference(a, b):
    """Element-wise sum, in the inputs' promoted dtype."""
    return np.add(np.asarray(a), np.asarray(b))


def transpose_reference(a):
    """2-D transpose as a fresh contiguous array."""
    return np.ascontiguousarray(np.asarray(a).T)


def conv2d_maxpool_reference(X, W, bias, pool_size=1, accumulate_dtype=np.float64, spread=None):
    """Conv2d (stride 1, no padding) + bias, then max-pool (window = stride = pool_size).

    X: (B, C_in, H, W_in); W: (C_out, C_in, K, K); bias: (C_out,).
    Returns (B, C_out, H_out // pool_size, W_out // pool_size) in X.dtype, where
    H_out = H - K + 1 and W_out = W_in - K + 1. Trailing rows or columns that do
    not fill a whole pooling window are dropped.

    The products are accumulated in ``accumulate_dtype`` (float64 by default,
    so the result is a faithful rounding of the exact value) and the result is
    cast to X.dtype only at the end.

    ``spread``: None, or a function that runs the function it is given on several threads at
    once and returns when every one has returned (the caller limits BLAS to one thread each):
    the threads then share the blocks of the product, each with buffers of its own. The result
    is the same either way: each block is the same GEMM call whichever thread makes it. The
    blocks hold COLUMNS_BYTES of columns whatever the threads, since the bits depend on it: a
    GEMM of another width may round differently (BLAS kernels differ by width).
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

    # The whole C_in*K*K sum of every output pixel runs inside one BLAS GEMM: filters (C_out,
    # C_in*K*K) times the windows laid out as columns (im2col, rows (c_in, kh, kw)). A whole
    # configuration's columns can be gigabytes (224x224 images in float64: ~0.9 GB each), so
    # the GEMM is cut into blocks of about COLUMNS_BYTES of columns: several whole images when
    # they fit (a small configuration is one GEMM), else rows of one image, a multiple of
    # pool_size so no pooling window straddles two blocks. Both buffers are reused: fresh 50 MB
    # temporaries per block would cost page faults on the order of the copies themselves.
    hp, wp = h_out // pool_size, w_out // pool_size
    used_rows = hp * pool_size if pool_size > 1 else h_out
    depth = c_in * k_h * k_w
    itemsize = np.dtype(accumulate_dtype).itemsize
    image_bytes = depth * used_rows * w_out * itemsize
    budget = COLUMNS_BYTES
    if image_bytes <= budget:
        images, rows = max(1, min(batch, budget // image_bytes)), used_rows
    else:
        images = 1
        rows = max(pool_size, budget // (depth * w_out * itemsize) // pool_size * pool_size)
    w_mat = W.reshape(c_out, depth).astype(accumulate_dtype)
    bias_acc = bias.astype(accumulate_dtype)[:, None, None, None]
    result = np.empty((batch, c_out, hp, wp), dtype=X.dtype)
    blocks = [(b0, min(images, batch - b0), r0, min(rows, used_rows - r0))
              for b0 in range(0, batch, images) for r0 in range(0, used_rows, rows)]

    # Narrower inputs (float16) are widened a block of image rows at a time, before the windows
    # repeat each value K*K times: NumPy widens float16 an element at a time
    widen = X.dtype != np.dtype(accumulate_dtype)
    # (B, C_in, H_out, W_out, K, K), no copy: the windows of inputs already in the GEMM's dtype
    windows = None if widen else sliding_window_view(X, (k_h, k_w), axis=(2, 3))

    def work_through() -> None:
        columns = np.empty(depth * images * rows * w_out, dtype=accumulate_dtype)
        products = np.empty(c_out * images * rows * w_out, dtype=accumulate_dtype)
        wide = np.empty(images * c_in * (rows + k_h - 1) * width, dtype=accumulate_dtype) if widen else None
        while True:
            try:
                b0, nb, r0, n = pending.popleft()     # thread-safe
            except IndexError:
                return
            cols = columns[:depth * nb * n * w_out].reshape(c_in, k_h, k_w, nb, n, w_out)
            if widen:
                block = wide[:nb * c_in * (n + k_h - 1) * width].reshape(nb, c_in, n + k_h - 1, width)
                np.copyto(block, X[b0:b0 + nb, :, r0:r0 + n + k_h - 1])
                found = sliding_window_view(block, (k_h, k_w), axis=(2, 3))
            else:
                found = windows[b0:b0 + nb, :, r0:r0 + n]
            # (nb, c_in, n, w_out, kh, kw) -> (c_in, kh, kw, nb, n, w_out): one strided copy
            np.copyto(cols, found.transpose(1, 4, 5, 0, 2, 3))
            conv = products[:c_out * nb * n * w_out].reshape(c_out, nb * n * w_out)
            np.matmul(w_mat, cols.reshape(depth, nb * n * w_out), out=conv)
            conv = conv.reshape(c_out, nb, n, w_out)
            conv += bias_acc
            if pool_size > 1:
                # the max over each pool_size x pool_size window; columns that do not fill one
                # are dropped
                conv = conv[..., :wp * pool_size].reshape(c_out, nb, n // pool_size, pool_size, wp, pool_size)
                conv = _window_max(conv)
            result[b0:b0 + nb, :, r0 // pool_size:(r0 + n) // pool_size] = conv.transpose(1, 0, 2, 3)

    # Blocks write disjoint parts of the result and each is the same GEMM call whichever thread
    # makes it, so the bits do not depend on `spread`; each thread has its own buffers.
    pending = deque(blocks)
    if spread is None:
        work_through()
    else:
        spread(work_through)
    return result

COLUMNS_BYTES = 48 * 2**20


def _window_max(conv):
    """conv.max(axis=(3, 5)) as one np.maximum per window offset: NumPy's reduce walks such
    short axes an element at a time (~30x slower), and a maximum's value is the same in any
    order."""
    pool_h, pool_w = conv.shape[3], conv.shape[5]
    out = np.array(conv[:, :, :, 0, :, 0])
    for i in range(pool_h):
        for j in range(pool_w):
            if i or j:
                np.maximum(out, conv[:, :, :, i, :, j], out=out)
    return out
