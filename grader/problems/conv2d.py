"""Part 2: fused conv2d (stride 1, no padding) + bias + max-pool, `fused_conv2d_maxpool`."""
from __future__ import annotations

import numpy as np

from reference_kernels import numpy_reference
from reference_kernels.numpy_reference import conv2d_maxpool_reference

from .base import Problem, on_threads, uniform, zeros


def make_inputs(config: dict, rng: np.random.Generator, empty=np.empty) -> tuple[list[np.ndarray], dict]:
    c = config
    dtype = np.dtype(c.get("dtype", "float32"))
    x = uniform(rng, dtype, c["batch"], c["c_in"], c["height"], c["width"], empty=empty)
    w = uniform(rng, dtype, c["c_out"], c["c_in"], c["k"], c["k"], empty=empty)
    bias = uniform(rng, dtype, c["c_out"], empty=empty) if c.get("bias") else zeros(dtype, c["c_out"], empty=empty)
    return [x, w, bias], {"pool_size": int(c.get("pool", 1))}


def signature(config: dict) -> tuple[list[tuple[tuple[int, ...], np.dtype]], dict]:
    c = config
    dtype = np.dtype(c.get("dtype", "float32"))
    return ([((c["batch"], c["c_in"], c["height"], c["width"]), dtype), ((c["c_out"], c["c_in"], c["k"], c["k"]), dtype),
             ((c["c_out"],), dtype)], {"pool_size": int(c.get("pool", 1))})


def reference(args: list[np.ndarray], kwargs: dict, threads: int = 1) -> np.ndarray:
    if threads <= 1:
        return conv2d_maxpool_reference(*args, **kwargs)
    # each thread its part of the one-thread column budget: no more memory than one thread
    return conv2d_maxpool_reference(*args, **kwargs, spread=on_threads(threads),
                                    columns_bytes=numpy_reference.COLUMNS_BYTES // threads)


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


def sampled_reference(args: list[np.ndarray], kwargs: dict, channels: np.ndarray) -> np.ndarray:
    x, w, bias = args
    return conv2d_maxpool_reference(x, w[channels], bias[channels], **kwargs)


PROBLEM = Problem(name="conv2d", kernel="fused_conv2d_maxpool",
                  config_keys=("batch", "c_in", "c_out", "height", "width", "k"),
                  make_inputs=make_inputs, reference=reference, work=work, label=label, output=output,
                  sample=sample, slice_output=slice_output, sampled_reference=sampled_reference,
                  signature=signature)
