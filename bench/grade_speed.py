"""Grading speed: prints figures, asserts nothing.

Runs a full `grader grade` of the optimized reference conv2d on the simulator (asst4-trainium2,
public seed) and prints its wall time. Then grades the same tests again in this process without
a sandbox, the way a trusting harness would: each configuration's inputs, the NumPy reference
answer worked out in a thread while the kernel runs (as the grader does), the kernel run
in-process (nkisim.run_kernel for correctness, nki.benchmark for timed tests) and the output
check. What the sandboxed grade takes beyond that is the sandbox's overhead (child start-up and
imports, job directories, input and result transfer, the parent timing the trace again):

    overhead share = (sandboxed grade wall - unsandboxed grade wall) / sandboxed grade wall

(target <= 5%).

The floor, measured in the same run: the BLAS time of the same arithmetic, each configuration's
convolution as one GEMM (np.matmul, filters x im2col columns, in column blocks that fit in
memory) on every core, in float32 (the simulator's engines and the float16 tests multiply in
float32; NumPy has no float16 BLAS). Only the matmuls are timed, not building the columns. A
warm grade has its reference answers made ahead, so its floor is the kernels' arithmetic once;
a cold grade works the answers out too, the same arithmetic again:

    warm floor = sum of the GEMM times        cold floor = 2 x warm floor

The warm grade is a real sandboxed grade that draws its inputs and answers from an answer pool
(grader/answer_pool.py, as a worker with NKI_ANSWER_POOL_SIZE does): one set is made ahead
(timed apart, on one BLAS thread) and the grade runs with its secret seed, reading the answers
instead of computing them. Its verdicts are compared with the cold grade's (the simulator's
latencies do not depend on input values, so they agree across seeds). The whole machine's busy
CPU-seconds during the warm grade (/proc/stat, bench/cpu_meter.py) say whether it is bound by
its work or by idle cores: busy / cores is what it would take with every core busy throughout.
Peak memory: the largest resident set of the grader's process during the first cold grade
(inputs, reference answers, outputs read back). The children are forked by the warm zygote, not
by this process, so their peaks are not counted here; each is capped by its memory limit.

    python bench/grade_speed.py [--seed N] [--rounds N]
    python bench/grade_speed.py --breakdown     (where a warm grade's time goes: bench/grade_breakdown.py)
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import grader  # noqa: E402
from grader import cli, problems, spec as specs  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from cpu_meter import Machine  # noqa: E402

KERNEL = ROOT / "reference_kernels" / "conv2d_optimized.py"


def full_grade(seed: int) -> tuple[float, dict]:
    """`grader grade` as a student or the worker runs it; returns its wall time and the report."""
    with tempfile.TemporaryDirectory() as tmp:
        submission = os.path.join(tmp, "conv2d.py")      # the name the assignment grades
        shutil.copyfile(KERNEL, submission)
        out = os.path.join(tmp, "report.json")
        start = time.perf_counter()
        status = cli.main(["grade", submission, "--assignment", "asst4-trainium2", "--backend", "sim",
                           "--seed", str(seed), "--json", out])
        wall = time.perf_counter() - start
        if status != 0:
            raise SystemExit(f"grader grade exited with {status}")
        with open(out) as fh:
            return wall, json.load(fh)


def ran_configs(spec, report: dict):
    """(test index, config index, test, config) of every configuration the grade ran."""
    ran = {t["name"] for t in report["tests"] if t["status"] != "skipped"}
    return [(i, ci, t, c) for i, t in enumerate(spec.tests) if t.name in ran for ci, c in enumerate(t.configs)]


COLUMN_BLOCK_BYTES = 256 * 2**20


def floor_operands(config: dict, block: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A configuration's floor GEMM, float32: its filters (C_out x depth C_in K K), a block of
    `block` im2col columns, and the output block they make."""
    depth = config["c_in"] * config["k"] ** 2
    return (rng.random((config["c_out"], depth), dtype=np.float32), rng.random((depth, block), dtype=np.float32),
            np.empty((config["c_out"], block), dtype=np.float32))


def blas_floor(spec, report: dict) -> tuple[float, float]:
    """(seconds, FLOPs) of every convolution the grade ran as float32 GEMMs (see the docstring)."""
    rng = np.random.default_rng(0)
    seconds = flops = 0.0
    for _, _, test, c in ran_configs(spec, report):
        if test.problem != "conv2d":
            continue
        depth = c["c_in"] * c["k"] ** 2
        columns = c["batch"] * (c["height"] - c["k"] + 1) * (c["width"] - c["k"] + 1)
        block = max(1, min(columns, COLUMN_BLOCK_BYTES // (4 * depth)))
        w, cols, out = floor_operands(c, block, rng)
        np.matmul(w, cols, out=out)                      # BLAS threads up, pages touched
        for start in range(0, columns, block):
            n = min(block, columns - start)
            t0 = time.perf_counter()
            np.matmul(w, cols[:, :n], out=out[:, :n])
            seconds += time.perf_counter() - t0
        flops += 2.0 * c["c_out"] * depth * columns
    return seconds, flops


def pooled_grade(spec, kernel=KERNEL, jobs: int = 1, timers=None) -> tuple[float, float, dict, float]:
    """(seconds to make one answer set, warm grade wall seconds, its report as JSON with the
    drawn set's seed, the whole machine's busy CPU-seconds during the grade): the grade draws
    the set from a pool in a private directory, as a worker does. `jobs`: GradeOptions.jobs;
    `timers` (bench/grade_breakdown.py's Timers) are installed for the grade's length."""
    with tempfile.TemporaryDirectory(dir="/var/tmp" if os.path.isdir("/var/tmp") else None) as tmp:
        pool = grader.AnswerPool(os.path.join(tmp, "answers"), size=1, uses=1)
        start = time.perf_counter()
        with threadpool_limits(limits=1, user_api="blas"):          # as a busy worker makes them
            pool.fill(spec)
        made = time.perf_counter() - start
        submission = os.path.join(tmp, "conv2d.py")
        shutil.copyfile(kernel, submission)
        if timers is not None:
            timers.install()
        try:
            busy_before, _ = Machine.sample()
            start = time.perf_counter()
            answers = pool.draw(spec)
            sub = grader.load_submission(submission, spec)
            report = grader.grade(sub, spec, grader.GradeOptions(backend="sim", answers=answers, jobs=jobs))
            wall = time.perf_counter() - start
            busy = Machine.sample()[0] - busy_before
        finally:
            if timers is not None:
                timers.uninstall()
        seed = answers.seed
        del answers
        return made, wall, report.to_json() | {"seed": seed}, busy


def peak_rss_mb() -> float:
    """Largest resident set of this process so far, in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load_kernel():
    """The kernel file loaded the way the child loads it."""
    import nkisim
    nkisim.install()
    module = types.ModuleType("conv2d")
    module.__file__ = str(KERNEL)
    exec(compile(KERNEL.read_text(), str(KERNEL), "exec"), module.__dict__)
    return module.fused_conv2d_maxpool


def in_process(spec, report: dict, seed: int) -> dict[str, float]:
    """Wall seconds per test that ran, graded without a sandbox (see the module docstring)."""
    kernel = load_kernel()          # installs nkisim as neuronxcc first
    import neuronxcc.nki as nki
    import nkisim
    from grader.checks import check_output
    ran = {t["name"] for t in report["tests"] if t["status"] != "skipped"}
    walls = {}
    for index, test in enumerate(spec.tests):
        if test.name not in ran:
            continue
        start = time.perf_counter()
        for ci, config in enumerate(test.configs):
            rng = np.random.default_rng(np.random.SeedSequence([seed, index, ci]))
            args, kwargs = problems.make_inputs(test.problem, config, rng)
            with ThreadPoolExecutor(max_workers=1) as answer:
                expected = answer.submit(problems.reference, test.problem, args, kwargs,
                                         threads=grader.usable_cores())
                if test.timed:
                    out = nki.benchmark(warmup=test.warmup, iters=test.iters)(kernel)(*args, **kwargs)
                else:
                    out = nkisim.run_kernel(kernel, args, kwargs).outputs
                tol = spec.tolerance(out.dtype)
                if not check_output(out, expected.result(), tol["rtol"], tol["atol"]).ok:
                    raise SystemExit(f"{test.name}: the in-process run disagrees with the reference")
        walls[test.name] = time.perf_counter() - start
    return walls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=42, help="public seed of the grade (default 42)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="sandboxed and unsandboxed grades, alternating; the best of each counts, so "
                             "neither pays alone for a cold machine (default 2)")
    parser.add_argument("--breakdown", action="store_true",
                        help="instead: one warm grade timed step by step, and the executor's matmul share")
    args = parser.parse_args()
    spec = specs.load("asst4-trainium2")
    if args.breakdown:
        sys.path.insert(0, str(ROOT / "bench"))
        import grade_breakdown
        grade_breakdown.main(spec, KERNEL, pooled_grade, blas_floor)
        return

    print(f"== grader grade conv2d.py (a copy of {KERNEL.relative_to(ROOT)}) --backend sim --seed {args.seed}",
          flush=True)
    totals, warms, floors, busies, sandboxed, unsandboxed, child = [], [], [], [], {}, {}, {}
    for round_ in range(1, args.rounds + 1):
        total, report = full_grade(args.seed)
        if round_ == 1:
            print(f"\npeak memory of the cold grade: grader process {peak_rss_mb():.0f} MB", flush=True)
        floor_s, flops = blas_floor(spec, report)
        floors.append(floor_s)
        print(f"\nround {round_}: BLAS floor {floor_s:.2f} s for {flops / 1e9:.0f} GFLOP "
              f"({flops / floor_s / 1e9:.1f} GFLOP/s, {os.cpu_count()} cores)", flush=True)
        answers_s, warm, warm_report, busy = pooled_grade(spec)
        warms.append(warm)
        busies.append((warm, busy))
        verdicts = lambda r: [(t["name"], t["status"], t["points"], t.get("p99_us")) for t in r["tests"]]  # noqa: E731
        same = "same verdicts as the cold grade" if verdicts(warm_report) == verdicts(report) else \
            f"VERDICTS DIFFER from the cold grade: {verdicts(warm_report)} vs {verdicts(report)}"
        print(f"round {round_}: an answer set made ahead in {answers_s:.2f} s (one thread); "
              f"warm sandboxed grade drawing it {warm:.2f} s ({same}); the machine busy "
              f"{busy:.1f} CPU-s meanwhile, {busy / warm:.2f} of its {os.cpu_count()} cores on average", flush=True)
        with threadpool_limits(limits=1, user_api="blas"):      # as the grader computes references
            walls = in_process(spec, report, args.seed)
        print(f"\nround {round_}: sandboxed grade {total:.2f} s (score {report['score']['total']:g}/"
              f"{report['score']['max_total']:g}), unsandboxed {sum(walls.values()):.2f} s\n", flush=True)
        totals.append(total)
        for t in report["tests"]:
            if t["name"] in walls:
                sandboxed[t["name"]] = min(sandboxed.get(t["name"], float("inf")), t["duration_s"])
                unsandboxed[t["name"]] = min(unsandboxed.get(t["name"], float("inf")), walls[t["name"]])
                child[t["name"]] = sum(c.get("wall_s", 0.0) for c in t["details"].get("configs", []))

    print(f"best of {args.rounds} rounds, per test:")
    print(f"{'test':26} {'sandboxed s':>12} {'of which child s':>17} {'unsandboxed s':>14} {'overhead s':>11}")
    for name in sandboxed:
        print(f"{name:26} {sandboxed[name]:12.2f} {child[name]:17.2f} {unsandboxed[name]:14.2f} "
              f"{sandboxed[name] - unsandboxed[name]:11.2f}")
    tests_s, tests_u = sum(sandboxed.values()), sum(unsandboxed.values())
    print(f"{'all tests':26} {tests_s:12.2f} {'':17} {tests_u:14.2f} {tests_s - tests_u:11.2f}")
    print()
    total = min(totals)
    print(f"whole sandboxed grade      {total:8.2f} s (best round; CLI, spec, precheck and report included)")
    print(f"unsandboxed grade          {tests_u:8.2f} s (sum of each test's best)")
    overhead = total - tests_u
    print(f"sandbox overhead           {overhead:8.2f} s = {overhead / total:.1%} of the grade (target <= 5%)")
    # the large tests can come out ahead: in the sandbox the reference answer is computed in the
    # grader's process truly beside the kernel, not sharing one interpreter's lock with it
    costly = sum(max(0.0, sandboxed[n] - unsandboxed[n]) for n in sandboxed)
    print(f"  counting only the tests the sandbox slows: {costly:.2f} s = {costly / total:.1%}")
    print()
    floor, warm = min(floors), min(warms)
    print(f"BLAS floor, warm           {floor:8.2f} s (the kernels' arithmetic once; best round)")
    print(f"BLAS floor, cold           {2 * floor:8.2f} s (and the reference answers' again)")
    print(f"cold grade / cold floor    {total / (2 * floor):8.2f}x (target <= 2)")
    print(f"warm grade / warm floor    {warm / floor:8.2f}x (target <= 1.5; warm grade {warm:.2f} s)")
    # what the warm grade's work costs, however well it kept the cores busy: a grade that is
    # CPU-bound gets faster only by doing less, one that leaves cores idle by overlapping more
    warm_wall, warm_busy = min(busies)
    bound = warm_busy / (os.cpu_count() or 1)
    print(f"  its CPU: {warm_busy:.1f} s busy over {warm_wall:.2f} s ({warm_busy / warm_wall:.2f} of "
          f"{os.cpu_count()} cores); with every core busy throughout it would still take {bound:.2f} s "
          f"= {bound / floor:.2f}x the floor")


if __name__ == "__main__":
    main()
