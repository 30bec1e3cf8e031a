"""Executor speed with matmul products on worker threads (nkisim.execute.execute's `threads`): an
in-process A/B, alternating runs, on the optimized reference's large configurations. Prints
figures, asserts nothing but prints whether every run's outputs have the same bits.

    python bench/exec_threads.py [--rounds 3] [--threads 2] [--only conv_large,perf_224_pool1_float16] [--at-once K]

Each configuration is traced once, then executed `rounds` times with one thread and with
`threads`, in turn (1, N, 1, N, ...), under one BLAS thread per calling thread as
grader/executor.py runs it. wall: perf_counter around execute(); cpu: this process's
process_time over the same span (every thread's CPU); the median of the rounds is printed.

--at-once K: K processes (forked after tracing) run the same rounds together, each round started
at a barrier, as K grades executing at once on the machine would: wall is the slowest of the K,
cpu their sum; it shows what the worker threads cost when no core is idle.
"""
from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import nkisim  # noqa: E402

nkisim.install()

from grader import problems, spec as specs  # noqa: E402
from nkisim import program as programs  # noqa: E402
from nkisim.execute import execute  # noqa: E402
from nkisim.runtime import ArgSpec, trace_kernel  # noqa: E402
from reference_kernels import conv2d_optimized  # noqa: E402

DEFAULT = "conv_large,perf_224_pool1_float32,perf_224_pool1_float16,perf_224_pool2_float32"


def timed(program, args, threads: int) -> tuple[float, float, bytes]:
    with np.errstate(all="ignore"), threadpool_limits(limits=1, user_api="blas"):
        start, cpu = time.perf_counter(), time.process_time()
        done = execute(program, args, threads=threads)
        wall, used = time.perf_counter() - start, time.process_time() - cpu
    out = done.outputs if isinstance(done.outputs, (list, tuple)) else [done.outputs]
    return wall, used, b"".join(np.ascontiguousarray(o).tobytes() for o in out)


def rounds(program, kargs, n: int, count: int, at_once: int) -> tuple[dict, int]:
    """{threads: [(wall, cpu) per round]} and how many different outputs all runs gave."""
    if at_once == 1:
        return _rounds(program, kargs, n, count, None, None)
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(at_once), ctx.Queue()
    procs = [ctx.Process(target=_rounds, args=(program, kargs, n, count, barrier, results)) for _ in range(at_once)]
    for p in procs:
        p.start()
    each = [results.get() for _ in procs]
    for p in procs:
        p.join()
    runs = {t: [(max(r[0][t][i][0] for r in each), sum(r[0][t][i][1] for r in each)) for i in range(count)]
            for t in (1, n)}
    return runs, len(set().union(*(r[2] for r in each)))


def _rounds(program, kargs, n: int, count: int, barrier, results):
    runs: dict[int, list] = {1: [], n: []}
    outputs = set()
    for _ in range(count):
        for threads in (1, n):
            if barrier is not None:
                barrier.wait()
            wall, cpu, out = timed(program, kargs, threads)
            runs[threads].append((wall, cpu))
            outputs.add(hash(out))
            del out
    if results is None:
        return runs, len(outputs)
    results.put((runs, len(outputs), outputs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", default=DEFAULT, help="test names, comma-separated")
    parser.add_argument("--at-once", type=int, default=1, help="processes executing together (default 1)")
    args = parser.parse_args()
    spec = specs.load("asst4-trainium2")
    names = args.only.split(",")
    n = args.threads
    print(f"{'test':26}{'instrs':>8}{'wall 1t':>9}{'cpu 1t':>8}{f'wall {n}t':>9}{f'cpu {n}t':>8}"
          f"{'wall 1t/' + str(n) + 't':>11}{'same bits':>11}")
    totals = [0.0, 0.0, 0.0, 0.0]
    for test in spec.tests:
        if test.name not in names:
            continue
        config = test.configs[0]
        kargs, kwargs = problems.make_inputs(test.problem, config, np.random.default_rng(0))
        traced, _ = trace_kernel(conv2d_optimized.fused_conv2d_maxpool, [ArgSpec(a.shape, a.dtype) for a in kargs],
                                 kwargs, nkisim.SimSettings(), {})
        program = programs.decode(programs.encode(traced), programs.ProgramLimits(max_records=2_000_000))
        runs, outputs = rounds(program, kargs, n, args.rounds, args.at_once)
        w1, c1 = (statistics.median(x) for x in zip(*runs[1]))
        wn, cn = (statistics.median(x) for x in zip(*runs[n]))
        for i, v in enumerate((w1, c1, wn, cn)):
            totals[i] += v
        print(f"{test.name:26}{len(program.records):8d}{w1:9.2f}{c1:8.2f}{wn:9.2f}{cn:8.2f}{w1 / wn:11.2f}"
              f"{str(outputs == 1):>11}", flush=True)
    w1, c1, wn, cn = totals
    print(f"{'all':26}{'':8}{w1:9.2f}{c1:8.2f}{wn:9.2f}{cn:8.2f}{w1 / wn:11.2f}")
    print(f"(medians of {args.rounds} alternating rounds, seconds; one BLAS thread per calling thread"
          + (f"; {args.at_once} processes at once: wall the slowest, cpu the sum)" if args.at_once > 1 else ")"))


if __name__ == "__main__":
    main()
