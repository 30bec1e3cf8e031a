"""Speed of the NumPy reference answers: prints figures, asserts nothing.

For every conv2d configuration of asst4-trainium2, the time the reference (reference_kernels/
numpy_reference.py, as grader/problems/conv2d.py calls it) takes for its answer, against the time
BLAS takes for the same arithmetic as one GEMM in the dtype the answer accumulates in (filters x
im2col columns; float32, conv2d.ACCUMULATE), both on one BLAS thread, as the grader computes
answers. The best of --repeat runs counts for each, so a machine busy with other work weighs on
both alike. With --threads N the reference shares its blocks among N threads (as a grade does,
one per usable core) and the GEMM has N BLAS threads.

    ratio = reference seconds / GEMM seconds      (1.0: as fast as BLAS allows)

With --against FILE (another version of numpy_reference.py, e.g. from `git show
REV:reference_kernels/numpy_reference.py`), that version is timed too (accumulating in the same
dtype), its runs alternating with the current one's, and its answers must be bit-identical.

    python bench/reference_speed.py [--repeat N] [--threads N] [--against FILE]
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grader import problems, spec as specs  # noqa: E402
from grader.problems import conv2d  # noqa: E402

COLUMN_BLOCK_BYTES = 256 * 2**20


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def best_alternating(fns, repeat: int) -> list[float]:
    """The best time of each function, their runs alternating (a load change hits all alike)."""
    times = [[] for _ in fns]
    for _ in range(repeat):
        for fn, kept in zip(fns, times):
            start = time.perf_counter()
            fn()
            kept.append(time.perf_counter() - start)
    return [min(t) for t in times]


def load_reference(path: str):
    spec = importlib.util.spec_from_file_location("reference_against", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.conv2d_maxpool_reference


def gemm_seconds(c: dict, repeat: int) -> float:
    """The configuration's convolution as GEMMs in the answers' dtype (columns in blocks that fit
    in memory)."""
    rng = np.random.default_rng(0)
    dtype = np.dtype(conv2d.ACCUMULATE)
    depth = c["c_in"] * c["k"] ** 2
    columns = c["batch"] * (c["height"] - c["k"] + 1) * (c["width"] - c["k"] + 1)
    block = max(1, min(columns, COLUMN_BLOCK_BYTES // (dtype.itemsize * depth)))
    w = rng.random((c["c_out"], depth), dtype=dtype)
    cols = rng.random((depth, block), dtype=dtype)
    out = np.empty((c["c_out"], block), dtype=dtype)

    def run():
        for start in range(0, columns, block):
            n = min(block, columns - start)
            np.matmul(w, cols[:, :n], out=out[:, :n])
    run()
    return best(run, repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each, the best counts (default 3)")
    parser.add_argument("--against", metavar="FILE", help="another numpy_reference.py to time beside this one")
    parser.add_argument("--threads", type=int, default=1, help="threads of the reference and of the GEMM (default 1)")
    args = parser.parse_args()
    spec = specs.load("asst4-trainium2")
    other = load_reference(args.against) if args.against else None
    seen, total_ref, total_gemm, total_other = set(), 0.0, 0.0, 0.0
    gemm_label = f"{np.dtype(conv2d.ACCUMULATE).name} GEMM s"
    print(f"{'configuration':52} {'reference s':>12} {gemm_label:>15} {'ratio':>6}"
          + (f" {'--against s':>12}" if other else ""))
    with threadpool_limits(limits=1, user_api="blas"):     # each reference thread: one BLAS thread
        for test in spec.tests:
            for c in test.configs:
                key = tuple(sorted(c.items()))
                if test.problem != "conv2d" or key in seen:
                    continue
                seen.add(key)
                inputs, kwargs = problems.make_inputs("conv2d", c, np.random.default_rng(0))
                current = lambda: problems.reference("conv2d", inputs, kwargs, threads=args.threads)   # noqa: E731
                theirs_now = lambda: other(*inputs, **kwargs, accumulate_dtype=conv2d.ACCUMULATE)   # noqa: E731
                if other is None:
                    ref, theirs = best(current, args.repeat), None
                else:
                    if not np.array_equal(current(), theirs_now()):
                        raise SystemExit(f"{problems.label('conv2d', c)}: the two references' answers differ")
                    ref, theirs = best_alternating([current, theirs_now], args.repeat)
                    total_other += theirs
                with threadpool_limits(limits=args.threads, user_api="blas"):
                    gemm = gemm_seconds(c, args.repeat)
                total_ref, total_gemm = total_ref + ref, total_gemm + gemm
                print(f"{problems.label('conv2d', c):52} {ref:12.3f} {gemm:15.3f} {ref / gemm:6.2f}"
                      + (f" {theirs:12.3f}" if other else ""), flush=True)
    print(f"{'every distinct configuration':52} {total_ref:12.3f} {total_gemm:15.3f} {total_ref / total_gemm:6.2f}"
          + (f" {total_other:12.3f}" if other else ""))


if __name__ == "__main__":
    main()
