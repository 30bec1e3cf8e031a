"""Bit-for-bit guard for simulator speed work: one SHA-256 per (kernel, configuration).

Each digest covers what a grade is made of, taken along the graded path (grader.executor):
the traced program's encoding (nkisim.program.encode), the program decoded and validated
again, the outputs of executing it (shape, dtype and bytes), and for every configuration the
cost model's latency, DMA count and profile summary. Inputs come from fixed seeds;
allocation ids restart at 1 for every trace, so a digest does not depend on what ran first.

    python bench/sim_digest.py [--full] [--only NAME] > digests.txt
    python bench/sim_digest.py [--full] --check bench/sim_digests.txt [--threads N] [--processes N]

bench/sim_digests.txt holds the digests (made with --full) of the code as of issue 41's seventh
session (a DMA writing elements apart on chip pays per element, the 16-bit matmul minimum is the
profiles' 128 cycles and PE transposes have their own: docs/cost-model.md, "conv-a/b's weights";
then the semaphore hop measured at 36.6 ns, not the assumed 100; recorded again, model and values
apart, on an OpenBLAS Haswell kernel): speed work must leave every one of them unchanged.

--threads: the executor's matmul threads (nkisim.execute's `threads`), by default 2, so the
check covers the worker threads; the digests must not depend on it.
--processes: execute as a grade with that share of the cores does (grader.executor): split into
that many processes (nkisim.split) when the program allows it, else on one thread. Default 1.

Each line holds two digests: the model's (program, latency, DMA count, profile), which must be
the same on any machine, and the values' (the outputs), which are only comparable on the
BLAS build and CPU kernel they were recorded with (the file's first line names them): the
simulator's matmuls are NumPy's BLAS in fp32, whose summation order is the CPU kernel's
(a Haswell and a SkylakeX OpenBLAS kernel round differently in the last bit). On another BLAS,
--check reports the values but fails only on the model's digests; record the base commit's
digests on that machine to check values there.

--full adds the batch-4 224x224 correctness configurations (minutes); the default set has the
small ones, the batch-1 224x224 performance ones and every transpose and vector-add case.
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import mmap
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import nkisim  # noqa: E402

nkisim.install()

from grader import problems, spec as specs  # noqa: E402
from nkisim import cost, dtypes, memory, program as programs  # noqa: E402
from nkisim.cost.profile import profile_summary  # noqa: E402
from nkisim import split  # noqa: E402
from nkisim.execute import execute  # noqa: E402
from nkisim.platforms import PLATFORMS  # noqa: E402
from nkisim.runtime import ArgSpec, trace_kernel  # noqa: E402
from reference_kernels import conv2d_optimized, conv2d_relaxed, transpose, vector_add  # noqa: E402

BIG = 224 * 224 * 4     # a batch-4 224x224 image: only with --full


def cases(full: bool):
    """(name, kernel, args, kwargs) of every digest."""
    spec = specs.load("asst4-trainium2")
    conv = {"optimized": conv2d_optimized.fused_conv2d_maxpool, "relaxed": conv2d_relaxed.fused_conv2d_maxpool}
    for test in spec.tests:
        for i, config in enumerate(test.configs):
            if test.problem == "conv2d":
                if not full and config["batch"] * config["height"] * config["width"] >= BIG:
                    continue
                kernels = conv.items()
            else:
                kernels = [("transpose", transpose.matrix_transpose)]
            for label, kernel in kernels:
                args, kwargs = problems.make_inputs(test.problem, config, np.random.default_rng(i))
                yield f"{label}/{test.name}/{i}", kernel, args, kwargs
    rng = np.random.default_rng(3)
    a, b = rng.random(25600, dtype=np.float32), rng.random(25600, dtype=np.float32)
    yield "vector_add/naive", vector_add.vector_add_naive, [a[:128], b[:128]], {}
    for name, kernel in (("tiled", vector_add.vector_add_tiled), ("stream", vector_add.vector_add_stream),
                         ("tiled64", vector_add.make_vector_add_tiled(64)),
                         ("stream2", vector_add.make_vector_add_stream(2))):
        yield f"vector_add/{name}", kernel, [a, b], {}


def blas_build() -> str:
    """What the values' digests depend on besides our code: NumPy and its BLAS's CPU kernel."""
    blas = [f"{i['internal_api']}-{i.get('version')}-{i.get('architecture')}"
            for i in threadpool_info() if i["user_api"] == "blas"]
    return f"numpy-{np.__version__}/" + "+".join(blas or ["no-blas"])


def digest(kernel, args, kwargs, platform: str = "trn2", threads: int = 1, processes: int = 1) -> tuple[str, str]:
    """The graded path of grader.executor.run, hashed as it goes (`threads`: its matmul threads;
    `processes` > 1: split as grader.executor splits it, when the program allows): the model's
    digest and the values' digest."""
    memory._ids = itertools.count(1)
    limits = PLATFORMS[platform].hardware_limits()
    h = hashlib.sha256()
    values = hashlib.sha256()
    program, _ = trace_kernel(kernel, [ArgSpec(a.shape, a.dtype) for a in args], kwargs,
                              nkisim.SimSettings(platform=platform), {})
    data = programs.encode(program)
    # the same digests in any checkout: its path left out, and with it the header's length field
    h.update(data[:8] + data[16:].replace(str(ROOT).encode(), b"<root>"))
    decoded = programs.decode(data)
    programs.validate(decoded, limits, args)
    with np.errstate(all="ignore"), threadpool_limits(limits=1, user_api="blas"):
        parts = split.plan(decoded, processes)
        if parts is not None:             # the output in memory the forked parts share, as the grader's room is
            out = decoded.outputs
            alloc = next(a for a in decoded.allocs if a.id == out.alloc_id)
            dtype = dtypes.to_dtype(alloc.dtype)
            size = math.prod(alloc.shape)
            room = np.frombuffer(mmap.mmap(-1, max(1, size * dtype.itemsize)), dtype=dtype, count=size)
            done = split.execute_split(decoded, args, parts, room)
        else:
            done = execute(decoded, args, threads=threads)
    outputs = done.outputs if isinstance(done.outputs, (list, tuple)) else [done.outputs]
    for out in outputs:
        out = np.ascontiguousarray(out)
        h.update(repr((out.shape, out.dtype.str)).encode())
        values.update(out.tobytes())
    timeline = cost.time_trace(done.trace, decoded.allocs, dge=cost.uses_dge(decoded.compile_options), limits=limits)
    summary = {"latency_us": repr(timeline.total_us), "dma_count": timeline.dma_count,
               "instructions": len(done.trace), "printed": done.printed,
               "matmul_flops": sum(2 * r.attrs["k"] * r.attrs["m"] * r.attrs["n"]
                                   for r in done.trace if r.kind == "matmul"),
               "profile": profile_summary(done.trace, timeline, thresholds_us=None)}
    h.update(json.dumps(summary, sort_keys=True, default=repr).encode())
    return h.hexdigest(), values.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="also the batch-4 224x224 configurations")
    parser.add_argument("--only", help="only cases whose name contains this")
    parser.add_argument("--check", type=Path, help="compare with a file this script printed; exit 1 on a difference")
    parser.add_argument("--threads", type=int, default=2,
                        help="the executor's matmul threads (default 2; 1: no worker threads)")
    parser.add_argument("--processes", type=int, default=1,
                        help="processes executing a program that splits (grader.executor's share of the cores)")
    args = parser.parse_args()
    print(f"executing with {args.threads} matmul thread(s), split into {args.processes} process(es) where "
          f"programs allow", file=sys.stderr)
    build = blas_build()
    expected, recorded_on = {}, None
    if args.check:
        lines = [line for line in args.check.read_text().splitlines() if line.strip()]
        if not lines or not lines[0].startswith("# values recorded with "):
            sys.exit(f"{args.check}: its first line does not say which BLAS its values were recorded with; "
                     f"record it again with this script (python bench/sim_digest.py --full > {args.check})")
        recorded_on = lines[0].removeprefix("# values recorded with ").strip()
        expected = {name: (model, values) for model, values, name in (line.split() for line in lines[1:])}
        if recorded_on != build:
            print(f"values were recorded with {recorded_on}, this machine has {build}: the check fails only on "
                  f"the model's digests; record the base commit's digests here to check values", file=sys.stderr)
    else:
        print(f"# values recorded with {build}", flush=True)
    model_differ = values_differ = 0
    for name, kernel, kargs, kwargs in cases(args.full):
        if args.only and args.only not in name:
            continue
        start = time.perf_counter()
        model, values = digest(kernel, kargs, kwargs, threads=args.threads, processes=args.processes)
        took = time.perf_counter() - start
        if args.check:
            want = expected.get(name)
            if want is None:
                verdict = "NEW"
            else:
                verdict = "same" if model == want[0] else "DIFFERENT"
                verdict += "" if values == want[1] else " (values differ)"
                model_differ += model != want[0]
                values_differ += values != want[1]
            print(f"{verdict:26} {name:48} {took:7.2f} s", flush=True)
        else:
            print(f"{model} {values} {name}", flush=True)
            print(f"{name}: {took:.2f} s", file=sys.stderr, flush=True)
    if args.check:
        values_count = recorded_on == build and values_differ
        print(f"model digests: {'all equal' if not model_differ else f'{model_differ} differ'}; values: "
              f"{'all equal' if not values_differ else f'{values_differ} differ'}"
              + ("" if recorded_on == build or not values_differ else " (another BLAS build: not counted)"))
        sys.exit(1 if model_differ or values_count else 0)

if __name__ == "__main__":
    main()
