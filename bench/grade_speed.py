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

    python bench/grade_speed.py [--seed N]
"""
from __future__ import annotations

import argparse
import json
import os
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

from grader import cli, problems, spec as specs  # noqa: E402

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
                expected = answer.submit(problems.reference, test.problem, args, kwargs)
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
    args = parser.parse_args()
    spec = specs.load("asst4-trainium2")

    print(f"== grader grade conv2d.py (a copy of {KERNEL.relative_to(ROOT)}) --backend sim --seed {args.seed}",
          flush=True)
    totals, sandboxed, unsandboxed, child = [], {}, {}, {}
    for round_ in range(1, args.rounds + 1):
        total, report = full_grade(args.seed)
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


if __name__ == "__main__":
    main()
