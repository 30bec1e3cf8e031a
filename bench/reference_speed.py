"""Speed of the NumPy reference answers: prints figures, asserts nothing.

For every conv2d configuration of asst4-trainium2, the time the reference (reference_kernels/
numpy_reference.py) takes for its answer, against the time BLAS takes for the same arithmetic as
one float64 GEMM (filters x im2col columns; the reference accumulates in float64), both on one
BLAS thread, as the grader computes answers. The best of --repeat runs counts for each, so a
machine busy with other work weighs on both alike.

    ratio = reference seconds / GEMM seconds      (1.0: as fast as BLAS allows)

    python bench/reference_speed.py [--repeat N]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grader import problems, spec as specs  # noqa: E402

COLUMN_BLOCK_BYTES = 256 * 2**20


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def gemm_seconds(c: dict, repeat: int) -> float:
    """The configuration's convolution as float64 GEMMs (columns in blocks that fit in memory)."""
    rng = np.random.default_rng(0)
    depth = c["c_in"] * c["k"] ** 2
    columns = c["batch"] * (c["height"] - c["k"] + 1) * (c["width"] - c["k"] + 1)
    block = max(1, min(columns, COLUMN_BLOCK_BYTES // (8 * depth)))
    w = rng.random((c["c_out"], depth))
    cols = rng.random((depth, block))
    out = np.empty((c["c_out"], block))

    def run():
        for start in range(0, columns, block):
            n = min(block, columns - start)
            np.matmul(w, cols[:, :n], out=out[:, :n])
    run()
    return best(run, repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each, the best counts (default 3)")
    args = parser.parse_args()
    spec = specs.load("asst4-trainium2")
    seen, total_ref, total_gemm = set(), 0.0, 0.0
    print(f"{'configuration':52} {'reference s':>12} {'float64 GEMM s':>15} {'ratio':>6}")
    with threadpool_limits(limits=1, user_api="blas"):
        for test in spec.tests:
            for c in test.configs:
                key = tuple(sorted(c.items()))
                if test.problem != "conv2d" or key in seen:
                    continue
                seen.add(key)
                inputs, kwargs = problems.make_inputs("conv2d", c, np.random.default_rng(0))
                ref = best(lambda: problems.reference("conv2d", inputs, kwargs), args.repeat)
                gemm = gemm_seconds(c, args.repeat)
                total_ref, total_gemm = total_ref + ref, total_gemm + gemm
                print(f"{problems.label('conv2d', c):52} {ref:12.3f} {gemm:15.3f} {ref / gemm:6.2f}", flush=True)
    print(f"{'every distinct configuration':52} {total_ref:12.3f} {total_gemm:15.3f} {total_ref / total_gemm:6.2f}")


if __name__ == "__main__":
    main()
