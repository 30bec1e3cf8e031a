"""The sandbox's share of a configuration's cost: prints figures, asserts nothing.

For each configuration below (the optimized reference conv2d, asst4-trainium2's shapes) the
best of --rounds runs of:

- sandboxed: grader.runner.run_configuration, as a grade runs it (job directories, the traced
  child from the warm zygote, the program and inputs handed to the executor child, outputs read
  back). CPU time = the grader process's own (time.process_time) + each child's (user + system,
  its namespace's processes included, as the zygote's monitor reports it).
- unsandboxed: the same work in this process, trusting the kernel: trace, execute, and for a
  timed test the cost model's timing (nkisim.runtime.trace_kernel, nkisim.execute.execute,
  nkisim.cost.time_trace).

    sandbox share = (sandboxed CPU - unsandboxed CPU) / sandboxed CPU      (target <= 5%)

CPU time, not wall time: the machine this runs on is shared, and wall time there measures the
neighbours. Run from the repository root:

    python bench/sandbox_speed.py [--rounds N] [--quick]
"""
from __future__ import annotations

import argparse
import sys
import time
import types
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grader import problems, runner, sandbox, spec as specs  # noqa: E402
from grader.zygote import ZYGOTE  # noqa: E402

KERNEL = ROOT / "reference_kernels" / "conv2d_optimized.py"
QUICK = ("conv_small",)
FULL = ("conv_small", "ec_32x16_pool1_float32", "perf_224_pool1_float32", "conv_large")


def configurations(spec, names):
    """(test, config) of every configuration of the named tests."""
    return [(t, c) for name in names for t in spec.tests if t.name == name for c in t.configs]


def job_for(spec, test, config, source: str) -> runner.RunnerJob:
    args, kwargs = problems.make_inputs(test.problem, config, np.random.default_rng(0))
    return runner.RunnerJob(backend="sim", filename="conv2d.py", source=source, function=test.kernel,
                            args=args, kwargs=kwargs, mode="benchmark" if test.timed else "correctness",
                            warmup=test.warmup, iters=test.iters, platform=spec.platform,
                            expected_output=problems.output(test.problem, config))


class ChildCPU:
    """Adds up the CPU time of every child run_configuration starts."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.unknown = 0
        self._run_child = runner.run_child
        runner.run_child = self._counted

    def _counted(self, *args, **kwargs):
        result = self._run_child(*args, **kwargs)
        if result.cpu_seconds is None:
            self.unknown += 1
        else:
            self.seconds += result.cpu_seconds
        return result


def sandboxed_cpu(job: runner.RunnerJob, children: ChildCPU) -> float:
    children.seconds = 0.0
    start = time.process_time()
    run = runner.run_configuration(job, sandbox.Limits())
    own = time.process_time() - start
    if run.status != "ok":
        raise SystemExit(f"the sandboxed run ended {run.status}: {run.message}")
    return own + children.seconds


def unsandboxed_cpu(kernel, job: runner.RunnerJob) -> float:
    import nkisim
    from nkisim import cost
    from nkisim.execute import execute
    from nkisim.runtime import ArgSpec, trace_kernel
    start = time.process_time()
    with np.errstate(all="ignore"), threadpool_limits(limits=1, user_api="blas"):   # as the executor runs
        program, _ = trace_kernel(kernel, [ArgSpec(a.shape, a.dtype) for a in job.args], job.kwargs,
                                  nkisim.SimSettings(platform=job.platform), {})
        done = execute(program, job.args)
        if job.mode == "benchmark":
            cost.time_trace(done.trace, program.allocs, dge=cost.uses_dge(program.compile_options))
    return time.process_time() - start


def load_kernel(source: str, function: str, platform: str):
    import nkisim
    nkisim.install(platform=platform)
    module = types.ModuleType("conv2d")
    exec(compile(source, "conv2d.py", "exec"), module.__dict__)
    return getattr(module, function)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="runs of each side per configuration; the best counts")
    parser.add_argument("--quick", action="store_true", help="only the small configurations (conv_small)")
    args = parser.parse_args()
    spec = specs.load("asst4-trainium2")
    source = KERNEL.read_text()
    ZYGOTE.warm()
    children = ChildCPU()
    print(f"{'configuration':44} {'sandboxed CPU s':>16} {'unsandboxed CPU s':>18} {'overhead s':>11} {'share':>7}")
    total_s = total_u = 0.0
    for test, config in configurations(spec, QUICK if args.quick else FULL):
        job = job_for(spec, test, config, source)
        kernel = load_kernel(source, test.kernel, spec.platform)
        sand = min(sandboxed_cpu(job, children) for _ in range(args.rounds))
        bare = min(unsandboxed_cpu(kernel, job) for _ in range(args.rounds))
        total_s, total_u = total_s + sand, total_u + bare
        label = f"{test.name} " + "x".join(str(config[k]) for k in ("batch", "c_in", "c_out", "height", "width"))
        print(f"{label:44} {sand:16.3f} {bare:18.3f} {sand - bare:11.3f} {(sand - bare) / sand:7.1%}", flush=True)
    if children.unknown:
        print(f"({children.unknown} children ran without the zygote: their CPU time is not counted)")
    print(f"{'all':44} {total_s:16.3f} {total_u:18.3f} {total_s - total_u:11.3f} "
          f"{(total_s - total_u) / total_s:7.1%} (target <= 5%)")


if __name__ == "__main__":
    main()
