"""The problems a spec's tests exercise: how to make inputs for a config, the reference
answer (computed in the grader's process, float64 accumulation, no student code), and the
work a correct kernel must do (for the roofline plausibility check)."""
from __future__ import annotations

import numpy as np

from reference_kernels.numpy_reference import conv2d_maxpool_reference, transpose_reference


def make_inputs(problem: str, config: dict, rng: np.random.Generator) -> tuple[list[np.ndarray], dict]:
    dtype = np.dtype(config.get("dtype", "float32"))

    def rand(*shape):   # uniform [0, 1), as the course's np.random.rand
        return rng.random(shape, dtype=np.float32).astype(dtype)

    if problem == "conv2d":
        c = config
        x = rand(c["batch"], c["c_in"], c["height"], c["width"])
        w = rand(c["c_out"], c["c_in"], c["k"], c["k"])
        bias = rand(c["c_out"]) if c.get("bias") else np.zeros(c["c_out"], dtype)
        return [x, w, bias], {"pool_size": int(c.get("pool", 1))}
    if problem == "transpose":
        return [rand(config["m"], config["n"])], {}
    raise ValueError(f"unknown problem {problem!r}")


def reference(problem: str, args: list[np.ndarray], kwargs: dict) -> np.ndarray:
    if problem == "conv2d":
        return conv2d_maxpool_reference(*args, **kwargs)
    if problem == "transpose":
        return transpose_reference(args[0])
    raise ValueError(f"unknown problem {problem!r}")


def work(problem: str, config: dict) -> tuple[float, float]:
    """(FLOPs on the Tensor Engine, bytes to and from HBM) that any correct kernel needs."""
    item = np.dtype(config.get("dtype", "float32")).itemsize
    if problem == "conv2d":
        c = config
        ho, wo = c["height"] - c["k"] + 1, c["width"] - c["k"] + 1
        pool = int(c.get("pool", 1))
        flops = 2.0 * c["batch"] * c["c_in"] * c["c_out"] * c["k"] ** 2 * ho * wo
        moved = (c["batch"] * c["c_in"] * c["height"] * c["width"] + c["c_out"] * c["c_in"] * c["k"] ** 2
                 + c["c_out"] + c["batch"] * c["c_out"] * (ho // pool) * (wo // pool))
        return flops, moved * item
    if problem == "transpose":
        return 0.0, 2.0 * config["m"] * config["n"] * item
    raise ValueError(f"unknown problem {problem!r}")


def roofline_us(problem: str, config: dict) -> float:
    """Lower bound on Trn2 latency: fixed overhead + max(compute at peak, traffic at DMA bandwidth)."""
    from nkisim.cost import DEFAULT_PARAMS as p
    flops, moved = work(problem, config)
    peak = p.pe_peak_flops_per_ns / (p.pe_fp32_factor if config.get("dtype", "float32") == "float32" else 1)
    return (p.bench_overhead_ns + max(flops / peak, moved / p.dma_bytes_per_ns)) / 1e3
