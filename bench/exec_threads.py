"""Executor speed with matmul products on worker threads (nkisim.execute.execute's `threads`): an
in-process A/B, alternating runs, on the optimized reference's large configurations. Prints
figures, asserts nothing but prints whether every run's outputs have the same bits.

    python bench/exec_threads.py [--rounds 3] [--threads 2] [--only conv_large,perf_224_pool1_float16]

Each configuration is traced once, then executed `rounds` times with one thread and with
`threads`, in turn (1, N, 1, N, ...), under one BLAS thread per calling thread as
grader/executor.py runs it. wall: perf_counter around execute(); cpu: this process's
process_time over the same span (every thread's CPU); the median of the rounds is printed.
"""
from __future__ import annotations

import argparse
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", default=DEFAULT, help="test names, comma-separated")
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
        runs: dict[int, list] = {1: [], n: []}
        outputs = set()
        for _ in range(args.rounds):
            for threads in (1, n):
                wall, cpu, out = timed(program, kargs, threads)
                runs[threads].append((wall, cpu))
                outputs.add(out)
                del out
        w1, c1 = (statistics.median(x) for x in zip(*runs[1]))
        wn, cn = (statistics.median(x) for x in zip(*runs[n]))
        for i, v in enumerate((w1, c1, wn, cn)):
            totals[i] += v
        print(f"{test.name:26}{len(program.records):8d}{w1:9.2f}{c1:8.2f}{wn:9.2f}{cn:8.2f}{w1 / wn:11.2f}"
              f"{str(len(outputs) == 1):>11}", flush=True)
    w1, c1, wn, cn = totals
    print(f"{'all':26}{'':8}{w1:9.2f}{c1:8.2f}{wn:9.2f}{cn:8.2f}{w1 / wn:11.2f}")
    print(f"(medians of {args.rounds} alternating rounds, seconds; one BLAS thread per calling thread)")


if __name__ == "__main__":
    main()
