"""Part 2: fused conv2d (stride 1, no padding) + bias + max-pool, `fused_conv2d_maxpool`."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from reference_kernels import numpy_reference
from reference_kernels.numpy_reference import conv2d_maxpool_reference

from ..base import on_threads, uniform, zeros


def make_inputs(config: dict, rng: np.random.Generator, empty=np.empty) -> tuple[list[np.ndarray], dict]:
    ((x_shape, dtype), (w_shape, _), (bias_shape, _)), kwargs = signature(config)
    x = uniform(rng, dtype, *x_shape, empty=empty)
    w = uniform(rng, dtype, *w_shape, empty=empty)
    bias = uniform(rng, dtype, *bias_shape, empty=empty) if config.get("bias") else zeros(dtype, *bias_shape, empty=empty)
    return [x, w, bias], kwargs


def signature(config: dict) -> tuple[list[tuple[tuple[int, ...], np.dtype]], dict]:
    c = config
    dtype = np.dtype(c.get("dtype", "float32"))
    return ([((c["batch"], c["c_in"], c["height"], c["width"]), dtype), ((c["c_out"], c["c_in"], c["k"], c["k"]), dtype),
             ((c["c_out"],), dtype)], {"pool_size": int(c.get("pool", 1))})


# The answers' GEMM runs in float32, at twice float64's BLAS speed with half the columns' bytes
# (a 224x224 batch's answer: 3.0 s of one core against 5.1). Exactness is not lost where a grade
# could notice: every input is drawn from [0, 1) (uniform), so no sum cancels, and a float32 sum
# of depth = C_in * K * K such products is within ~1e-6 of its exact value (relative; 7.6e-7 at
# most over a 224x224 image of depth 2304, against float64), a tenth of the tightest tolerance
# (float32: rtol 1e-5). tests/grader/test_reference_precision.py holds every shipped spec's
# configurations to that tenth. float16 inputs multiply exactly in float32.
ACCUMULATE = np.float32


def reference(args: list[np.ndarray], kwargs: dict, threads: int = 1) -> np.ndarray:
    if threads <= 1:
        return conv2d_maxpool_reference(*args, **kwargs, accumulate_dtype=ACCUMULATE)
    # the threads share the one-thread blocks, each with buffers of its own (a block's columns
    # apiece): the same GEMM calls, so the same bits, whatever the BLAS. Smaller blocks per
    # thread would change the products' widths, and some BLAS kernels round a product of
    # another width differently (OpenBLAS 0.3.31's Haswell sgemm, on AMD EPYC)
    return conv2d_maxpool_reference(*args, **kwargs, accumulate_dtype=ACCUMULATE, spread=on_threads(threads))


def work(config: dict) -> tuple[float, float]:
    c = config
    item = np.dtype(c.get("dtype", "float32")).itemsize
    ho, wo = c["height"] - c["k"] + 1, c["width"] - c["k"] + 1
    pool = int(c.get("pool", 1))
    flops = 2.0 * c["batch"] * c["c_in"] * c["c_out"] * c["k"] ** 2 * ho * wo
    moved = (c["batch"] * c["c_in"] * c["height"] * c["width"] + c["c_out"] * c["c_in"] * c["k"] ** 2
             + c["c_out"] + c["batch"] * c["c_out"] * (ho // pool) * (wo // pool))
    return flops, moved * item


def output(config: dict) -> tuple[tuple[int, ...], np.dtype]:
    c = config
    pool = int(c.get("pool", 1))
    ho, wo = c["height"] - c["k"] + 1, c["width"] - c["k"] + 1
    return (c["batch"], c["c_out"], ho // pool, wo // pool), np.dtype(c.get("dtype", "float32"))


def label(config: dict) -> str:
    c = config
    return (f"B={c['batch']} C_in={c['c_in']} C_out={c['c_out']} {c['height']}x{c['width']} "
            f"pool={c.get('pool', 1)} {c.get('dtype', 'float32')}")


def sample(args: list[np.ndarray], kwargs: dict, count: int, rng: np.random.Generator) -> np.ndarray:
    """A few output channels: each is computed from every input value, and only its own filters."""
    c_out = args[1].shape[0]
    return np.sort(rng.choice(c_out, size=min(count, c_out), replace=False))


def slice_output(out: np.ndarray, channels: np.ndarray) -> np.ndarray:
    return out[:, channels]


SAMPLED_BLOCK_BYTES = 4 << 20    # float64 image rows the sampled reference converts at a time


def sampled_reference(args: list[np.ndarray], kwargs: dict, channels: np.ndarray,
                      rounding: Callable[[np.ndarray], np.ndarray] | None = None,
                      block_bytes: int = SAMPLED_BLOCK_BYTES) -> np.ndarray:
    """conv2d_maxpool_reference's answer on a few output channels (the downgrade check's
    sample), from the inputs passed through `rounding` first (elementwise: a lower precision's
    rounding), in float64 like it.

    With a handful of channels, laying the windows out as columns (what the whole reference
    does) would cost far more than the arithmetic. Instead every tap's filters make the rows of
    one matrix, multiplied with a block of whole image rows as they lie in memory, and the taps'
    products are added shifted into place; blocks of rows are converted to float64 into reused
    buffers (fresh hundred-megabyte arrays cost page faults of the order of the work). Every
    product of two float32 values is exact in float64, so the sum differs from the columns'
    GEMM only by float64 rounding, far below the float32 result's."""
    same = rounding or (lambda a: a)
    x = np.asarray(args[0])
    w, bias = same(np.asarray(args[1])[channels]), same(np.asarray(args[2])[channels])
    pool = kwargs.get("pool_size", 1)
    batch, c_in, height, width = x.shape
    c_out, _, k_h, k_w = w.shape
    h_out, w_out = height - k_h + 1, width - k_w + 1
    hp, wp = h_out // pool, w_out // pool
    rows, cols = (hp * pool, wp * pool) if pool > 1 else (h_out, w_out)
    result = np.empty((batch, c_out, hp, wp), dtype=x.dtype)
    if not (batch and c_out and rows > 0 and cols > 0):
        return result
    # rows (tap_h, tap_w, channel), columns the input channels: one GEMM for every tap
    taps = np.ascontiguousarray(w.transpose(2, 3, 0, 1)).reshape(k_h * k_w * c_out, c_in).astype(np.float64)
    bias64 = bias.astype(np.float64)[:, None, None]
    step = min(rows, max(pool, block_bytes // (c_in * width * 8) // pool * pool))
    span = step + k_h - 1
    image = np.empty(c_in * span * width)
    products = np.empty(k_h * k_w * c_out * span * width)
    summed = np.empty(c_out * step * cols)
    for b in range(batch):
        for r0 in range(0, rows, step):
            n = min(step, rows - r0)
            m = n + k_h - 1
            block = image[:c_in * m * width].reshape(c_in, m, width)
            np.copyto(block, same(x[b, :, r0:r0 + m, :]))
            per_tap = products[:k_h * k_w * c_out * m * width].reshape(k_h * k_w * c_out, m * width)
            np.matmul(taps, block.reshape(c_in, m * width), out=per_tap)
            per_tap = per_tap.reshape(k_h, k_w, c_out, m, width)
            out = summed[:c_out * n * cols].reshape(c_out, n, cols)
            np.copyto(out, per_tap[0, 0, :, 0:n, 0:cols])
            for i in range(k_h):
                for j in range(k_w):
                    if i or j:
                        out += per_tap[i, j, :, i:i + n, j:j + cols]
            out += bias64
            if pool > 1:
                out = numpy_reference._window_max(out.reshape(c_out, 1, n // pool, pool, wp, pool))[:, 0]
            result[b, :, r0 // pool:(r0 + n) // pool] = out
    return result
