"""The sandboxed executor multiplies on worker threads (grader.executor.matmul_threads: the cores
it may use, fewer when its job says so) and its outputs are those of one thread, bit for bit."""
from __future__ import annotations

import os
import types

import numpy as np
from threadpoolctl import threadpool_limits

import nkisim
from grader import problems
from grader.executor import MAX_MATMUL_THREADS, matmul_threads
from grader.runner import RunnerJob, run_configuration
from grader.sandbox import Limits
from nkisim.execute import execute
from nkisim.runtime import trace_kernel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with open(os.path.join(ROOT, "reference_kernels", "conv2d_optimized.py")) as _fh:
    OPTIMIZED = _fh.read()

CONFIG = dict(batch=2, c_in=256, c_out=128, height=12, width=10, k=3, bias=True, pool=1, dtype="float32")


def test_the_sandboxed_executor_gives_the_bits_of_one_thread(tmp_path):
    args, kwargs = problems.make_inputs("conv2d", CONFIG, np.random.default_rng(8))
    job = RunnerJob(backend="sim", filename="conv2d.py", source=OPTIMIZED, function="fused_conv2d_maxpool",
                    args=args, kwargs=kwargs, job_root=str(tmp_path))
    run = run_configuration(job, Limits())
    assert run.status == "ok", run.message
    nkisim.install()
    module = types.ModuleType("conv2d")
    exec(compile(OPTIMIZED, "conv2d.py", "exec"), module.__dict__)
    program, _ = trace_kernel(module.fused_conv2d_maxpool, args, kwargs)
    with np.errstate(all="ignore"), threadpool_limits(limits=1, user_api="blas"):
        alone = execute(program, list(args), threads=1).outputs
    assert len(run.outputs) == 1
    assert run.outputs[0].dtype == alone.dtype and run.outputs[0].tobytes() == alone.tobytes()


def test_the_thread_count_is_the_free_usable_cores_or_what_the_job_asks_below_them():
    usable = min(len(os.sched_getaffinity(0)), MAX_MATMUL_THREADS)
    idle = 1.0                        # the grade's own tracing child: nothing else runs
    assert matmul_threads({}, load=idle) == usable
    assert matmul_threads({}, load=usable + 1.0) == 1       # every core busy with other work
    assert matmul_threads({}, load=50.0) == 1
    assert matmul_threads({"matmul_threads": 1}, load=idle) == 1
    assert matmul_threads({"matmul_threads": 10_000}, load=idle) == usable
    for nonsense in (0, -3, "2", 1.5, True, None):
        assert matmul_threads({"matmul_threads": nonsense}, load=idle) == usable
    assert 1 <= matmul_threads({}) <= usable                # the system's load, whatever it is now
