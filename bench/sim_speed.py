"""Simulator speed: prints figures, asserts nothing.

1. The four asst4-trainium2 correctness tests on the optimized reference conv2d: simulator wall
   time vs the time NumPy needs for the same reference outputs on this machine (target ratio <= 3),
   and the wall time the cost model adds on top (target <= 25% of simulator time).
2. Per-instruction overhead: 100k small tensor_tensor instructions (target <= 15 us each), and
   the same figure as a multiple of a baseline measured in the same run: NumPy's own add of the
   same (128, 4) tile (np.add, the arithmetic the instruction stands for), which moves with the
   machine's speed as the simulator's Python does, so the multiple compares across hours. Then
   tracing alone in both dialects: NKI 0.6 (dst first) against the legacy call writing the same
   tile (`y[...] = nisa.tensor_tensor(...)`), target <= 1.0x.
3. Cost-model scaling on a hostile trace: one-element writes into one tile, each followed by a
   read of the whole tile, at n and 4n records (target: time ratio near 4, i.e. linear).
4. Advanced-index row loads (`nl.load(x[0, i_p, row, i_f])`, how students load conv rows with
   nl.mgrid/nl.arange): CPU per load from a 1x256x224x224 input against the same loads from a
   1x256x4x224 one (target ratio near 1: a gather costs what it reads, not the input's size), and
   against NumPy's own fancy index of the same elements.
5. Peak RSS of this process (target <= 3 GiB).

    python bench/sim_speed.py [--quick] [--instructions-only]
"""
from __future__ import annotations

import argparse
import resource
import time

import numpy as np

import nkisim
from nkisim import cost

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402
import nki as nki06  # noqa: E402  (the current dialect, NKI 0.6)
import nki.isa as nisa06  # noqa: E402
import nki.language as nl06  # noqa: E402

from reference_kernels import conv2d_optimized  # noqa: E402
from reference_kernels.numpy_reference import conv2d_maxpool_reference  # noqa: E402


def correctness_configs(batch: int):
    """(name, C_in, C_out, H, W, bias?, pool) as the course's four correctness tests."""
    small = [(f"small {ci}x{co}", ci, co, 32, 16, False, 1) for ci in (128, 256) for co in (128, 256)]
    large = [("large", 256, 256, 224, 224, False, 1), ("large+bias", 256, 256, 224, 224, True, 1),
             ("large+bias+pool", 256, 256, 224, 224, True, 2)]
    return small + large


def time_conv_tests(batch: int) -> tuple[float, float, float]:
    rng = np.random.default_rng(1)
    sim_total = ref_total = cost_total = 0.0
    print(f"{'test':18} {'sim s':>8} {'numpy s':>8} {'ratio':>6} {'cost s':>7} {'instr':>7}  match")
    for name, ci, co, h, w, with_bias, pool in correctness_configs(batch):
        x = rng.random((batch, ci, h, w), dtype=np.float32)
        wt = rng.random((co, ci, 3, 3), dtype=np.float32)
        bias = rng.random(co, dtype=np.float32) if with_bias else np.zeros(co, np.float32)
        start = time.perf_counter()
        run = nkisim.run_kernel(conv2d_optimized.fused_conv2d_maxpool, (x, wt, bias), {"pool_size": pool})
        sim = time.perf_counter() - start
        start = time.perf_counter()
        cost.estimate(run)
        cost_s = time.perf_counter() - start
        cost_total += cost_s
        start = time.perf_counter()
        expected = conv2d_maxpool_reference(x, wt, bias, pool)
        ref = time.perf_counter() - start
        sim_total += sim
        ref_total += ref
        print(f"{name:18} {sim:8.2f} {ref:8.2f} {sim / ref:6.2f} {cost_s:7.2f} {len(run.trace):7d}  "
              f"{np.allclose(run.outputs, expected)}")
    return sim_total, ref_total, cost_total


@nki.jit
def many_adds(a, count):
    """`count` small tensor_tensor instructions on (128, 4) tiles."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    for _ in nl.affine_range(count):
        y = nisa.tensor_tensor(x, x, op=nl.add)
    nisa.dma_copy(dst=out, src=y)
    return out


@nki.jit
def many_adds_into(a, count):
    """many_adds, each result written into one tile as `y[...] = nisa.tensor_tensor(...)`: what an
    NKI 0.6 instruction always does."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    y = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    for _ in nl.affine_range(count):
        y[...] = nisa.tensor_tensor(x, x, op=nl.add)
    nisa.dma_copy(dst=out, src=y)
    return out


@nki06.jit
def many_adds_06(a, count):
    """many_adds_into in NKI 0.6: the destination first, nothing returned."""
    out = nl06.ndarray(a.shape, a.dtype, buffer=nl06.shared_hbm)
    x = nl06.ndarray(a.shape, a.dtype, buffer=nl06.sbuf)
    y = nl06.ndarray(a.shape, a.dtype, buffer=nl06.sbuf)
    nisa06.dma_copy(dst=x, src=a)
    for _ in nl06.affine_range(count):
        nisa06.tensor_tensor(dst=y, data1=x, data2=x, op=nl06.add)
    nisa06.dma_copy(dst=out, src=y)
    return out


DIALECT_CASES = (("legacy, result returned", many_adds), ("legacy, into a tile", many_adds_into),
                 ("NKI 0.6, dst first", many_adds_06))


def tracing_seconds_by_dialect(count: int) -> list[tuple[str, float]]:
    """CPU seconds per traced instruction of each case of DIALECT_CASES, in turn."""
    from nkisim.runtime import trace_kernel
    a = np.ones((128, 4), np.float32)
    found = []
    for name, kernel in DIALECT_CASES:
        start = time.process_time()
        trace_kernel(kernel, (a, count), {})
        found.append((name, (time.process_time() - start) / count))
    return found


def numpy_add_seconds(calls: int = 100_000) -> float:
    """Seconds of one np.add of the (128, 4) float32 tile many_adds adds: the baseline."""
    a = np.ones((128, 4), np.float32)
    add = np.add
    start = time.process_time()
    for _ in range(calls):
        add(a, a)
    return (time.process_time() - start) / calls


def per_instruction_overhead(count: int) -> tuple[float, float, float, float]:
    """Seconds per instruction: (wall, CPU of this process, CPU tracing, CPU executing). CPU
    time is what a busy shared machine distorts least."""
    a = np.ones((128, 4), np.float32)
    start, cpu = time.perf_counter(), time.process_time()
    nki.baremetal(many_adds)(a, count)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    from nkisim.execute import execute
    from nkisim.runtime import trace_kernel
    t0 = time.process_time()
    program, _ = trace_kernel(many_adds, (a, count), {})
    t1 = time.process_time()
    with np.errstate(all="ignore"):
        execute(program, [a])
    t2 = time.process_time()
    return wall / count, cpu / count, (t1 - t0) / count, (t2 - t1) / count


@nki.jit
def scattered_writes(a, count):
    """`count` one-element writes into one tile, each followed by a read of the whole tile."""
    out = nl.ndarray((1, 1), dtype=a.dtype, buffer=nl.hbm)
    t = nl.ndarray((1, count), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    for j in nl.affine_range(count):
        t[0:1, j:j + 1] = nisa.tensor_copy(t[0:1, 0:1])
        total = nisa.tensor_reduce(nl.add, t, axis=1)
    nisa.dma_copy(dst=out, src=total)
    return out


@nki.jit
def row_gathers(x, loads):
    """`loads` advanced-index loads of one 128 x W input row each, summed into one tile."""
    _, c, h, w = x.shape
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(w)[None, :]
    out = nl.ndarray((128, w), dtype=x.dtype, buffer=nl.hbm)
    acc = nl.zeros((128, w), dtype=x.dtype, buffer=nl.sbuf)
    for j in nl.sequential_range(loads):
        acc[...] = nisa.tensor_tensor(acc, nl.load(x[0, i_p, j % h, i_f]), op=nl.add)
    nisa.dma_copy(dst=out, src=acc)
    return out


def gather_seconds(height: int, loads: int) -> float:
    """CPU seconds per row load of row_gathers on a 1x256xheightx224 input (trace and execute)."""
    x = np.ones((1, 256, height, 224), np.float32)
    start = time.process_time()
    nkisim.run_kernel(row_gathers, (x, loads), {})
    return (time.process_time() - start) / loads


def numpy_gather_seconds(calls: int = 2000) -> float:
    """CPU seconds of NumPy's fancy index of the elements one row load reads: the baseline."""
    x = np.ones((1, 256, 224, 224), np.float32)
    i_p, i_f = np.arange(128)[:, None], np.arange(224)[None, :]
    start = time.process_time()
    for j in range(calls):
        x[0, i_p, j % 224, i_f]
    return (time.process_time() - start) / calls


def scheduler_seconds(count: int) -> tuple[int, float, int]:
    run = nkisim.run_kernel(scattered_writes, (np.ones((1, count), np.float32), count), {})
    start = time.perf_counter()
    timeline = cost.estimate(run)
    return len(run.trace), time.perf_counter() - start, timeline.dependency_checks


def print_dialects(count: int, add: float) -> None:
    """Tracing cost per instruction in both dialects, each the best of 3 rounds taken in turn."""
    rounds = [tracing_seconds_by_dialect(count) for _ in range(3)]
    best = {name: min(r[i][1] for r in rounds) for i, (name, _) in enumerate(DIALECT_CASES)}
    into = best["legacy, into a tile"]
    print(f"== tracing per instruction by dialect, best of 3 ({count} tensor_tensor instructions):")
    for name, seconds in best.items():
        print(f"   {name:24} {seconds * 1e6:6.1f} us CPU = {seconds / add:5.1f}x NumPy's add, "
              f"{seconds / into:.2f}x legacy into a tile")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="batch 1 instead of the course's batch 4")
    parser.add_argument("--instructions", type=int, default=100_000)
    parser.add_argument("--writes", type=int, default=5_000, help="one-element writes of the scaling run (n)")
    parser.add_argument("--instructions-only", action="store_true",
                        help="only the per-instruction overhead (2.), each figure the best of 3 runs")
    args = parser.parse_args()
    if args.instructions_only:
        runs, adds = [], []
        for _ in range(3):          # the baseline in turn with the runs: both see the same hours
            runs.append(per_instruction_overhead(args.instructions))
            adds.append(numpy_add_seconds())
        # each figure's best run apart: a neighbour's burst lands in one figure of one run
        overhead, cpu, trace_cpu, exec_cpu = (min(column) for column in zip(*runs))
        add = min(adds)
        print(f"== per-instruction overhead, best of 3: {overhead * 1e6:.1f} us over {args.instructions} "
              f"tensor_tensor instructions; CPU {cpu * 1e6:.1f} us (again, apart: tracing {trace_cpu * 1e6:.1f} us "
              f"+ executing {exec_cpu * 1e6:.1f} us)")
        print(f"   = {cpu / add:.1f}x NumPy's own add of the same tile ({add * 1e6:.2f} us CPU in this run; "
              f"tracing {trace_cpu / add:.1f}x + executing {exec_cpu / add:.1f}x)")
        print_dialects(args.instructions, add)
        return
    batch = 1 if args.quick else 4
    print(f"== conv2d correctness tests, optimized reference, batch {batch}")
    sim, ref, cost_s = time_conv_tests(batch)
    print(f"total: simulator {sim:.2f} s, NumPy reference {ref:.2f} s, ratio {sim / ref:.2f} (target <= 3)")
    print(f"cost model: {cost_s:.2f} s, adds {cost_s / sim:.1%} to simulator time (target <= 25%)")
    overhead, cpu, trace_cpu, exec_cpu = per_instruction_overhead(args.instructions)
    print(f"== per-instruction overhead: {overhead * 1e6:.1f} us over {args.instructions} tensor_tensor "
          f"instructions (target <= 15 us); CPU {cpu * 1e6:.1f} us (again, apart: tracing "
          f"{trace_cpu * 1e6:.1f} us + executing {exec_cpu * 1e6:.1f} us)")
    add = numpy_add_seconds()
    print(f"   = {cpu / add:.1f}x NumPy's own add of the same tile ({add * 1e6:.2f} us CPU in this run)")
    print_dialects(args.instructions, add)
    (n1, t1, c1), (n4, t4, c4) = scheduler_seconds(args.writes), scheduler_seconds(4 * args.writes)
    print(f"== cost model on one-element writes to one tile: {n1} records {t1:.2f} s ({c1} range checks), "
          f"{n4} records {t4:.2f} s ({c4} checks); ratio {t4 / t1:.2f} for 4x the records (linear: ~4)")
    loads = 500
    large, small, base = gather_seconds(224, loads), gather_seconds(4, loads), numpy_gather_seconds()
    print(f"== advanced-index row loads ({loads}): {large * 1e6:.0f} us CPU each from 1x256x224x224, "
          f"{small * 1e6:.0f} us from 1x256x4x224: ratio {large / small:.2f} (target near 1); "
          f"{large / base:.0f}x NumPy's own fancy index of the row ({base * 1e6:.1f} us)")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20   # KiB -> GiB
    print(f"== peak RSS: {peak:.2f} GiB (target <= 3 GiB)")


if __name__ == "__main__":
    main()
