"""Grading speed: prints figures, asserts nothing.

Runs a full `grader grade` of the optimized reference conv2d on the simulator (asst4-trainium2,
public seed) and prints its wall time. Then does the same work in this process, without a
sandbox: every test's inputs and NumPy reference answers as the grader makes them, and every
kernel run as the child makes it (nkisim.run_kernel for correctness, nki.benchmark for timed
tests). What is left of the grade's wall time is the sandbox's overhead (child start-up and
imports, job directories, result and trace transfer, the parent timing the trace again):

    overhead share = (grade wall - in-process kernel time - reference time) / grade wall

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
from pathlib import Path

import numpy as np

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


def in_process(spec, report: dict, seed: int) -> dict[str, dict]:
    """Per test that ran: reference time, kernel time, and for timed tests the time the parent
    spends encoding, decoding and scheduling the trace (part of the overhead)."""
    kernel = load_kernel()          # installs nkisim as neuronxcc first
    import neuronxcc.nki as nki
    from nkisim import cost, trace_io
    ran = {t["name"] for t in report["tests"] if t["status"] != "skipped"}
    figures = {}
    for index, test in enumerate(spec.tests):
        if test.name not in ran:
            continue
        ref_s = kernel_s = trace_s = 0.0
        for ci, config in enumerate(test.configs):
            start = time.perf_counter()
            rng = np.random.default_rng(np.random.SeedSequence([seed, index, ci]))
            args, kwargs = problems.make_inputs(test.problem, config, rng)
            problems.reference(test.problem, args, kwargs)
            ref_s += time.perf_counter() - start
            start = time.perf_counter()
            if test.timed:
                bench = nki.benchmark(warmup=test.warmup, iters=test.iters)(kernel)
                bench(*args, **kwargs)
                kernel_s += time.perf_counter() - start
                start = time.perf_counter()
                records = trace_io.decode(trace_io.encode(bench.benchmark_result.run.trace))
                cost.schedule(records, cost.DEFAULT_PARAMS, dge=True)
                trace_s += time.perf_counter() - start
            else:
                import nkisim
                nkisim.run_kernel(kernel, args, kwargs)
                kernel_s += time.perf_counter() - start
        figures[test.name] = {"ref": ref_s, "kernel": kernel_s, "trace": trace_s}
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=42, help="public seed of the grade (default 42)")
    args = parser.parse_args()
    spec = specs.load("asst4-trainium2")

    print(f"== grader grade conv2d.py (a copy of {KERNEL.relative_to(ROOT)}) --backend sim --seed {args.seed}",
          flush=True)
    total, report = full_grade(args.seed)
    print(f"\nwhole grade: {total:.2f} s wall (report: {report['duration_s']:.2f} s; score "
          f"{report['score']['total']:g}/{report['score']['max_total']:g})\n", flush=True)

    figures = in_process(spec, report, args.seed)
    by_name = {t["name"]: t for t in report["tests"]}
    print(f"{'test':26} {'graded s':>9} {'child s':>8} {'kernel s':>9} {'ref s':>7} {'trace s':>8} "
          f"{'overhead s':>11}")
    sums = dict.fromkeys(("graded", "child", "kernel", "ref", "trace"), 0.0)
    for name, f in figures.items():
        t = by_name[name]
        child = sum(c.get("wall_s", 0.0) for c in t["details"].get("configs", []))
        over = t["duration_s"] - f["kernel"] - f["ref"]
        print(f"{name:26} {t['duration_s']:9.2f} {child:8.2f} {f['kernel']:9.2f} {f['ref']:7.2f} "
              f"{f['trace']:8.2f} {over:11.2f}")
        for key, value in (("graded", t["duration_s"]), ("child", child), ("kernel", f["kernel"]),
                           ("ref", f["ref"]), ("trace", f["trace"])):
            sums[key] += value
    overhead = total - sums["kernel"] - sums["ref"]
    print(f"{'all':26} {sums['graded']:9.2f} {sums['child']:8.2f} {sums['kernel']:9.2f} {sums['ref']:7.2f} "
          f"{sums['trace']:8.2f} {sums['graded'] - sums['kernel'] - sums['ref']:11.2f}")
    print()
    print(f"in-process kernel time     {sums['kernel']:8.2f} s")
    print(f"reference time             {sums['ref']:8.2f} s")
    print(f"sandbox overhead           {overhead:8.2f} s = {overhead / total:.1%} of the grade (target <= 5%)")
    print(f"  child start-up/transfer  {sums['child'] - sums['kernel']:8.2f} s  (child wall - kernel time)")
    print(f"  trace encode/decode/model{sums['trace']:8.2f} s  (in-process estimate of the parent's re-timing)")
    print(f"  rest (job dirs, checks, CLI, tests skipped)  "
          f"{overhead - (sums['child'] - sums['kernel']):.2f} s")


if __name__ == "__main__":
    main()
