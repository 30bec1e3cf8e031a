"""How fast the executor's matmul products run against the BLAS floor's GEMM: prints figures,
asserts nothing.

bench/grade_speed.py divides a grade's time by a floor: the grade's convolutions as large
float32 GEMMs (filters x im2col columns). The executor instead multiplies what the kernel's
nc_matmul instructions give it: a 128 x 128 stationary tile by a 128-deep moving tile (for the
optimized reference, 128 x 2 x 222), summed into PSUM in program order, 18 per output tile (two
input-channel tiles x nine filter taps). This measures, on the same machine in the same run:

- products:   the executor's products as it computes them, one GEMM per instruction, each
              added into its tile's accumulator in order (the operands captured from a real
              execution of conv_large at batch 1, the first --groups accumulation groups);
- fused:      the same groups, each as one GEMM of depth 18 x 128 (the operands concatenated,
              concatenation timed): what merging an accumulation group would give;
- in BLAS:    the same products, each added into its accumulator by the GEMM itself (sgemm with
              beta = 1: C += A B, no product array and no separate add), through NumPy's own
              OpenBLAS by ctypes; printed when that library is found, and whether its sums have
              the bits of `products`;
- floor GEMM: the floor's shape for the same configuration (C_out filters x depth C_in K K, here
              256 x 2304, by a column block of the same count of FLOPs), as bench/grade_speed.py
              times it;

each on one thread, then on two threads at once (each thread its own copy of the work, one BLAS
thread each), in alternating rounds (products, fused, floor, products, ...). GFLOP/s per thread
and in all. When products run at the floor GEMM's rate, the executor's matmuls cost the floor's
CPU-seconds, and a grade's time beyond the floor is its other work.

    python bench/matmul_bound.py [--groups 40] [--rounds 3]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import nkisim  # noqa: E402

nkisim.install()

from grader import problems, spec as specs  # noqa: E402
from nkisim import execute as executor  # noqa: E402
from nkisim import program as programs  # noqa: E402
from nkisim.runtime import ArgSpec, trace_kernel  # noqa: E402
from reference_kernels import conv2d_optimized  # noqa: E402
from grade_speed import floor_operands  # noqa: E402  (bench/, this script's own directory)


def conv_large() -> tuple[str, dict]:
    """The problem and configuration of conv_large, at batch 1."""
    test = next(t for t in specs.load("asst4-trainium2").tests if t.name == "conv_large")
    return test.problem, dict(test.configs[0], batch=1)


def captured_groups(problem: str, config: dict, count: int) -> list[list[tuple[np.ndarray, np.ndarray]]]:
    """The operands of the configuration's first `count` PSUM accumulation groups, as the
    executor passes them to its matmul (copies, so later writes do not change them)."""
    args, kwargs = problems.make_inputs(problem, config, np.random.default_rng(0))
    traced, _ = trace_kernel(conv2d_optimized.fused_conv2d_maxpool, [ArgSpec(a.shape, a.dtype) for a in args],
                             kwargs, nkisim.SimSettings(), {})
    program = programs.decode(programs.encode(traced), programs.ProgramLimits(max_records=2_000_000))
    groups: list[tuple[tuple, list]] = []
    original = executor._KINDS["matmul"]

    def capture(rec, values):
        if len(groups) <= count:
            dest = (rec.writes[0].alloc_id, rec.writes[0].start, rec.writes[0].shape)
            if not groups or groups[-1][0] != dest:
                groups.append((dest, []))
            groups[-1][1].append((np.array(values[0]), np.array(values[1])))
        return original(rec, values)

    executor._KINDS["matmul"] = capture
    try:
        with np.errstate(all="ignore"), threadpool_limits(limits=1, user_api="blas"):
            executor.execute(program, args)
    finally:
        executor._KINDS["matmul"] = original
    return [items for _, items in groups[:count]]


def products(groups, keep: list | None = None) -> None:
    """Each group's products as the executor computes them, summed in order (the sums appended
    to `keep` when given)."""
    for items in groups:
        total = None
        for s, mv in items:
            p = executor._matmul(None, (s, mv))[0]      # the executor's own product (it reads no record)
            if total is None:
                total = p
            else:
                total += p
        if keep is not None:
            keep.append(total)


def fused(groups) -> None:
    for items in groups:
        k = items[0][0].shape[0]
        stationary = np.concatenate([s.reshape(k, -1) for s, _ in items])
        moving = np.concatenate([mv.reshape(k, -1) for _, mv in items])
        stationary.T @ moving


def blas_accumulate():
    """A function doing `products` with each sum made by sgemm (beta = 1) in NumPy's bundled
    OpenBLAS, or None where that library or its CBLAS symbol is not found."""
    import ctypes
    libs = sorted(Path(np.__file__).parent.parent.glob("numpy.libs/libscipy_openblas*.so"))
    if not libs:
        return None
    try:
        sgemm = ctypes.CDLL(str(libs[0])).scipy_cblas_sgemm64_
    except AttributeError:
        return None
    n = ctypes.c_int64
    sgemm.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, n, n, n, ctypes.c_float, ctypes.c_void_p, n,
                      ctypes.c_void_p, n, ctypes.c_float, ctypes.c_void_p, n]
    row_major, no_trans, trans = 101, 111, 112

    def run(groups, keep: list | None = None) -> None:
        for items in groups:
            k = items[0][0].shape[0]
            m, cols = items[0][0].size // k, items[0][1].size // k
            total = np.empty((m, cols), dtype=np.float32)
            for i, (s, mv) in enumerate(items):
                # total (m x cols) = s^T (m x k) mv (k x cols) + (0 first, then 1) x total
                sgemm(row_major, trans, no_trans, m, cols, k, 1.0, s.ctypes.data, m, mv.ctypes.data, cols,
                      0.0 if i == 0 else 1.0, total.ctypes.data, cols)
            if keep is not None:
                keep.append(total)
    return run


def same_sums(groups, in_blas) -> bool:
    """Do the BLAS-accumulated sums have the bits of the products added one by one?"""
    expected: list = []
    products(groups, expected)
    mine: list = []
    in_blas(groups, mine)
    return all(np.array_equal(a, b) for a, b in zip(expected, mine))


def flops_of(groups) -> float:
    # depth x stationary columns x moving columns, two FLOPs each
    return sum(2.0 * s.shape[0] * (s.size // s.shape[0]) * (mv.size // mv.shape[0]) for items in groups for s, mv in items)


def floor_gemm(config: dict, flops: float):
    """bench/grade_speed.py's floor GEMM for the configuration (filters x depth C_in K K, by a
    column block) with about `flops` of work: (the GEMM, its FLOPs)."""
    depth, rows = config["c_in"] * config["k"] ** 2, config["c_out"]
    block = max(1, int(flops / (2 * depth * rows)))
    w, cols, out = floor_operands(config, block, np.random.default_rng(1))
    return (lambda: np.matmul(w, cols, out=out)), 2.0 * rows * depth * block


def timed(work, threads: int) -> float:
    """Seconds for `threads` threads each doing `work()` once, started together."""
    start = threading.Barrier(threads + 1)

    def run():
        start.wait()
        work()
    pool = [threading.Thread(target=run) for _ in range(threads)]
    for t in pool:
        t.start()
    start.wait()
    began = time.perf_counter()
    for t in pool:
        t.join()
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=40, help="accumulation groups captured (18 products each)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    problem, config = conv_large()
    groups = captured_groups(problem, config, args.groups)
    flops = flops_of(groups)
    floor_work, floor_flops = floor_gemm(config, flops)
    print(f"{len(groups)} groups, {sum(len(g) for g in groups)} products, {flops / 1e9:.2f} GFLOP; "
          f"operands {groups[0][0][0].shape} x {groups[0][0][1].shape}")
    kinds = {"products": (lambda: products(groups), flops), "fused": (lambda: fused(groups), flops)}
    in_blas = blas_accumulate()
    if in_blas is not None:
        kinds["in BLAS"] = (lambda: in_blas(groups), flops)
    kinds["floor GEMM"] = (floor_work, floor_flops)
    with threadpool_limits(limits=1, user_api="blas"):
        for work, _ in kinds.values():
            work()                                  # pages touched, BLAS buffers made
        rates: dict[tuple[str, int], list[float]] = {}
        for _ in range(args.rounds):
            for threads in (1, 2):
                for name, (work, work_flops) in kinds.items():
                    seconds = timed(work, threads)
                    rates.setdefault((name, threads), []).append(work_flops * threads / seconds / 1e9)
    print(f"{'':12}{'1 thread GFLOP/s':>18}{'2 threads GFLOP/s':>19}{'2 vs 1':>8}")
    for name in kinds:
        one, two = (statistics.median(rates[(name, n)]) for n in (1, 2))
        print(f"{name:12}{one:18.1f}{two:19.1f}{two / one:8.2f}")
    products_rate = statistics.median(rates[("products", 2)])
    print(f"products / floor GEMM, two threads: {products_rate / statistics.median(rates[('floor GEMM', 2)]):.2f}"
          f"; fused / products: {statistics.median(rates[('fused', 2)]) / products_rate:.2f}"
          f" (medians of {args.rounds} alternating rounds)")
    if in_blas is not None:
        with threadpool_limits(limits=1, user_api="blas"):
            same = same_sums(groups, in_blas)
        print(f"in BLAS / products, two threads: {statistics.median(rates[('in BLAS', 2)]) / products_rate:.2f}; "
              f"the same bits as products: {same}")
    else:
        print("in BLAS: NumPy's bundled OpenBLAS not found; not measured")


if __name__ == "__main__":
    main()
