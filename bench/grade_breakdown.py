"""Where a warm full grade's time goes (`python bench/grade_speed.py --breakdown`): prints
figures, asserts nothing.

1. One warm sandboxed grade of the optimized reference (answers drawn from a one-set answer
   pool, as a worker with NKI_ANSWER_POOL_SIZE grades), with timers around the grader's own
   steps. Per configuration: making its inputs (at its turn; "ahead": the next configuration's,
   drawn beside this one's run), the tracing child and the executor child (wall
   and CPU, user + system as the zygote's monitor reports it), the grader's output comparison
   and downgrade check, and what is left of the configuration's wall (job directories, the
   shared memory, the answer read from the pool, reading results back). An executor starts while
   the configuration before it is compared and checked (grader.grade._launch_next), so its wall
   is counted in its own row but began before that row's configuration did: "rest" is below zero
   by that overlap.
2. The executor's work in this process, per configuration: the program traced here, executed
   with nkisim.execute.execute on the same inputs, with its matmuls timed apart from everything
   else; once on one thread and once with its matmul products on a worker thread per usable core
   (execute's `threads`, as grader/executor.py runs it), one BLAS thread each, with the outputs
   compared bit for bit between the two (matmul Nt: the products' time summed over the workers).
3. The bound those give: the BLAS floor (bench/grade_speed.py) in core-seconds, how much of a
   warm grade's budget at 1.5x the floor the kernel's matmuls already take on one thread each,
   and how the rest of the warm grade's busy CPU (the whole machine's, part 1's grade) compares
   with what is left. Busy CPU counts the timers' own small cost and anything else running.
   The floor is timed twice, right after part 1's grade and again after part 2, and their mean
   counts: a shared machine's BLAS speed drifts over the minutes between (8.63 s against 11.28 s
   on two runs of 2026-11-29), and both figures are printed so the drift shows.

Timers wrap module attributes of this process only (bench code, not the grader's).
"""
from __future__ import annotations

import importlib
import os
import threading
import time
from collections import defaultdict

import numpy as np
from threadpoolctl import threadpool_limits

import grader
from grader import downgrade, problems, runner
from grader.inputs import config_inputs, config_seed

GRADE = importlib.import_module("grader.grade")   # the module (the package attribute is a function)


class Timers:
    """Seconds per (configuration, step), from wrappers around the grader's module attributes."""

    def __init__(self) -> None:
        self.rows: dict[tuple, dict[str, float]] = {}
        self.order: list[tuple] = []
        self.current: tuple | None = None
        self._saved = []

    def _wrap(self, module, name: str, step: str, record=None) -> None:
        original = getattr(module, name)
        self._saved.append((module, name, original))

        def timed(*args, **kwargs):
            start, cpu = time.perf_counter(), time.process_time()
            result = original(*args, **kwargs)
            row = self.rows[self.current]
            # the next configuration's inputs, drawn beside this one's run (grader.grade._trace_next)
            named = "ahead" if threading.current_thread().name == "inputs" else step
            row[named] = row.get(named, 0.0) + time.perf_counter() - start
            row[step + " own cpu"] = row.get(step + " own cpu", 0.0) + time.process_time() - cpu
            if record is not None:
                record(row, args, result)
            return result
        setattr(module, name, timed)

    def install(self) -> None:
        original_config = GRADE._Run._run_config
        self._saved.append((GRADE._Run, "_run_config", original_config))

        def run_config(run, test, index, config):
            self.current = (test.name, index, problems.problem_of_config(config).label(config))
            self.rows[self.current] = {}
            self.order.append(self.current)
            start = time.perf_counter()
            try:
                return original_config(run, test, index, config)
            finally:
                self.rows[self.current]["config"] = time.perf_counter() - start
        GRADE._Run._run_config = run_config

        def child(row, args, result):
            which = "trace" if args[0][-1] == "grader.child" else "exec"
            row[which + " wall"] = row.get(which + " wall", 0.0) + result.wall_seconds
            row[which + " cpu"] = row.get(which + " cpu", 0.0) + (result.cpu_seconds or 0.0)
        self._wrap(runner, "run_child", "children", child)
        self._wrap(GRADE, "config_inputs", "inputs")            # other backends
        self._wrap(GRADE, "shared_config_inputs", "inputs")     # the simulator: into shared memory
        self._wrap(GRADE, "check_output", "compare")
        self._wrap(downgrade, "check", "downgrade")

    def uninstall(self) -> None:
        for module, name, original in reversed(self._saved):
            setattr(module, name, original)


def warm_grade(pooled_grade, spec, kernel_path, jobs: int = 1) -> tuple[float, Timers, dict, float]:
    """(wall seconds, the timers, the report with its seed, the whole machine's busy CPU-seconds
    during the grade): bench/grade_speed.py's warm grade, timed step by step."""
    timers = Timers()
    _, wall, report, busy = pooled_grade(spec, kernel_path, jobs=jobs, timers=timers)
    return wall, timers, report, busy


COLUMNS = ("config", "inputs", "ahead", "trace wall", "trace cpu", "exec wall", "exec cpu", "compare", "downgrade")


def print_grade(wall: float, timers: Timers) -> None:
    print(f"\n== warm sandboxed grade: {wall:.2f} s wall, configurations one after another\n")
    print(f"{'test / configuration':44}" + "".join(f"{c:>11}" for c in COLUMNS + ("rest",)))
    per_test: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    totals: dict[str, float] = defaultdict(float)
    for key in timers.order:
        row = timers.rows[key]
        rest = row.get("config", 0) - sum(row.get(c, 0) for c in ("inputs", "trace wall", "exec wall", "compare",
                                                                   "downgrade"))
        cells = [row.get(c, 0.0) for c in COLUMNS] + [rest]
        print(f"{key[0][:22] + ' ' + key[2][:21]:44}" + "".join(f"{v:11.2f}" for v in cells))
        for c, v in zip(COLUMNS + ("rest",), cells):
            per_test[key[0]][c] += v
            totals[c] += v
    print()
    for name, sums in per_test.items():
        print(f"{name + ' (test)':44}" + "".join(f"{sums[c]:11.2f}" for c in COLUMNS + ("rest",)))
    print(f"{'all configurations':44}" + "".join(f"{totals[c]:11.2f}" for c in COLUMNS + ("rest",)))
    outside = wall - totals["config"]
    print(f"\ngrade wall outside configurations (spec, precheck, zygote, report): {outside:.2f} s")
    serial = totals["trace wall"] + totals["exec wall"]
    print(f"children one after another: trace {totals['trace wall']:.2f} s + exec {totals['exec wall']:.2f} s "
          f"= {serial:.2f} s; grader-side steps {totals['inputs'] + totals['compare'] + totals['downgrade'] + totals['rest']:.2f} s")
    print(f"beside them, on threads of the grader: the next configuration's inputs drawn ahead, {totals['ahead']:.2f} s "
          f"(the 'ahead' column: in the row of the configuration they were drawn beside)")


def executor_split(spec, kernel_source: str, seed: int, threads: int, ran: set[str]) -> float:
    """Part 2 of the module docstring; the matmuls' seconds on one thread."""
    import types

    import nkisim
    from grader import executor
    from nkisim import cost
    from nkisim import execute as ex
    from nkisim import program as programs
    from nkisim.runtime import ArgSpec, trace_kernel
    matmul = ex._KINDS["matmul"]
    spent = [0.0]
    adding = threading.Lock()          # products run on the executor's worker threads

    def timed_matmul(rec, v):
        start = time.perf_counter()
        try:
            return matmul(rec, v)
        finally:
            took = time.perf_counter() - start
            with adding:
                spent[0] += took
    print(f"\n== the executor's work in this process (matmuls apart), 1 thread vs {threads} matmul threads\n")
    print(f"{'test / configuration':44}{'instrs':>8}{'trace':>8}{'decode+val':>11}{'exec 1t':>10}{'matmul 1t':>11}"
          f"{'rest 1t':>9}{'cost+prof':>10}{'exec ' + str(threads) + 't':>10}{'matmul ' + str(threads) + 't':>11}"
          f"{'same bits':>11}")
    nkisim.install(platform=spec.platform)
    module = types.ModuleType("conv2d")
    exec(compile(kernel_source, "conv2d.py", "exec"), module.__dict__)
    sums = defaultdict(float)
    all_same = True
    ex._KINDS["matmul"] = timed_matmul
    try:
        for ti, test in enumerate(spec.tests):
            if test.name not in ran:
                continue
            kernel = getattr(module, test.kernel)
            for ci, config in enumerate(test.configs):
                args, kwargs = config_inputs(test.problem, config, config_seed(seed, ti, ci))
                start = time.perf_counter()
                traced, _ = trace_kernel(kernel, [ArgSpec(a.shape, a.dtype) for a in args], kwargs,
                                         nkisim.SimSettings(platform=spec.platform), {})
                data = programs.encode(traced)
                traced_s = time.perf_counter() - start
                start = time.perf_counter()       # what grader/executor.py does before executing
                program = programs.decode(data, programs.ProgramLimits(max_records=2_000_000))
                programs.validate(program, executor._limits(spec.platform), args)
                decode_s = time.perf_counter() - start
                figures, outs = [], []
                for n in (1, threads):
                    spent[0] = 0.0
                    with np.errstate(all="ignore"), threadpool_limits(limits=1, user_api="blas"):
                        start = time.perf_counter()
                        done = ex.execute(program, args, threads=n)
                        figures.append((time.perf_counter() - start, spent[0]))
                    out = done.outputs if not isinstance(done.outputs, dict) else list(done.outputs.values())
                    outs.append([np.ascontiguousarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])])
                    if n == 1:
                        cost_s = 0.0
                        if test.timed:             # the executor's latency estimate and profile
                            start = time.perf_counter()
                            timeline = cost.time_trace(done.trace, program.allocs,
                                                       dge=cost.uses_dge(program.compile_options),
                                                       limits=executor._limits(spec.platform))
                            executor._profile(done.trace, timeline, {"thresholds_us": test.thresholds_us})
                            cost_s = time.perf_counter() - start
                same = all(a.tobytes() == b.tobytes() for a, b in zip(*outs))
                all_same &= same
                (w1, m1), (wn, mn) = figures
                for k, v in (("w1", w1), ("m1", m1), ("wn", wn), ("mn", mn), ("n", len(program.records)),
                             ("t", traced_s), ("d", decode_s), ("c", cost_s)):
                    sums[k] += v
                label = f"{test.name[:22]} {problems.problem_of_config(config).label(config)[:21]}"
                print(f"{label:44}{len(program.records):8d}{traced_s:8.2f}{decode_s:11.2f}{w1:10.2f}{m1:11.2f}"
                      f"{w1 - m1:9.2f}{cost_s:10.2f}{wn:10.2f}{mn:11.2f}{str(same):>11}", flush=True)
    finally:
        ex._KINDS["matmul"] = matmul
    print(f"{'all':44}{int(sums['n']):8d}{sums['t']:8.2f}{sums['d']:11.2f}{sums['w1']:10.2f}{sums['m1']:11.2f}"
          f"{sums['w1'] - sums['m1']:9.2f}{sums['c']:10.2f}{sums['wn']:10.2f}{sums['mn']:11.2f}{str(all_same):>11}")
    print("(trace: in this process, with encoding; matmul: the executor's matmul instructions, operand casts "
          "included; cost+prof: the latency estimate and profile of a timed test)")
    print(f"execution / its matmuls, one thread: {sums['w1'] / sums['m1']:.2f}x (target <= 1.3)")
    return sums["m1"]


def print_bound(floors: tuple[float, float], matmul_s: float, wall: float, busy: float, cores: int) -> None:
    """Part 3 of the module docstring; `floors`: the floor's seconds after part 1 and after part 2."""
    floor_s = sum(floors) / len(floors)
    budget = 1.5 * floor_s * cores
    print("\n== what a warm grade of 1.5x the floor leaves for the work that is not the kernel's matmuls\n")
    print(f"BLAS floor: {floors[0]:.2f} s after the warm grade, {floors[1]:.2f} s after the executor's split "
          f"({abs(floors[1] - floors[0]) / min(floors):.0%} apart); their mean {floor_s:.2f} s on {cores} cores "
          f"= {floor_s * cores:.2f} core-s; 1.5x of it: {budget:.2f} core-s in all")
    print(f"the kernel's matmul instructions, one thread: {matmul_s:.2f} core-s "
          f"= {matmul_s / (floor_s * cores):.2f}x the floor's core-seconds")
    print(f"left for everything else (tracing, the rest of execution, cost model, inputs, checks): "
          f"{budget - matmul_s:.2f} core-s")
    print(f"everything else in the warm grade above: {busy - matmul_s:.2f} core-s (its {busy:.1f} busy "
          f"CPU-s over {wall:.2f} s, less the matmuls) = {(busy - matmul_s) / max(budget - matmul_s, 1e-9):.2f}x "
          f"what 1.5x leaves")


def verdicts(report: dict) -> list:
    return [(t["name"], t["status"], t["points"], t.get("p99_us")) for t in report["tests"]] + [report["flags"]]


def main(spec, kernel_path, pooled_grade, floor) -> None:
    """`pooled_grade` and `floor`: bench/grade_speed.py's warm grade (part 1) and BLAS floor
    (part 3), passed in by the script that runs this one."""
    wall, timers, report, busy = warm_grade(pooled_grade, spec, kernel_path)
    floor_after_grade, _ = floor(spec, report)         # the grade's own minutes (part 3)
    print_grade(wall, timers)
    threads = grader.usable_cores()
    if threads > 1:
        wall_n, _, report_n, _ = warm_grade(pooled_grade, spec, kernel_path, jobs=threads)
        same = "same verdicts, p99s and flags" if verdicts(report_n) == verdicts(report) else "VERDICTS DIFFER"
        print(f"\nthe same warm grade with {threads} tests at once (GradeOptions.jobs={threads}, one BLAS thread "
              f"each): {wall_n:.2f} s wall vs {wall:.2f} s one at a time ({same})")
    matmul_s = executor_split(spec, kernel_path.read_text(), report["seed"], threads,
                              {t["name"] for t in report["tests"] if t["status"] != "skipped"})
    floor_after_split, _ = floor(spec, report)
    print_bound((floor_after_grade, floor_after_split), matmul_s, wall, busy, os.cpu_count() or 1)
