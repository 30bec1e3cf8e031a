"""The sandboxed executor runs a program that splits in as many processes as its job allows
(grader.executor.processes, nkisim.split), and its outputs are those of one process, bit for bit."""
from __future__ import annotations

import os
import types

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import nkisim
from grader import problems, sharedmem
from grader.executor import MAX_PROCESSES, processes
from grader.runner import RunnerJob, run_configuration
from grader.sandbox import Limits
from nkisim.execute import execute
from nkisim.runtime import trace_kernel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with open(os.path.join(ROOT, "reference_kernels", "conv2d_optimized.py")) as _fh:
    OPTIMIZED = _fh.read()

CONFIG = dict(batch=4, c_in=256, c_out=128, height=64, width=32, k=3, bias=True, pool=1, dtype="float32")


@pytest.mark.parametrize("asked", [1, 2, 3])
def test_the_sandboxed_executor_gives_the_bits_of_one_process(tmp_path, asked):
    shared, kwargs = sharedmem.draw(lambda empty: problems.make_inputs("conv2d", CONFIG, np.random.default_rng(8), empty))
    args = shared.arrays
    try:
        job = RunnerJob(backend="sim", filename="conv2d.py", source=OPTIMIZED, function="fused_conv2d_maxpool",
                        args=args, kwargs=kwargs, job_root=str(tmp_path), shared_inputs=shared, processes=asked,
                        expected_output=problems.output("conv2d", CONFIG))
        run = run_configuration(job, Limits())
    finally:
        shared.close()
    assert run.status == "ok", run.message
    assert run.processes == asked            # the batch's four images split over up to four processes
    nkisim.install()
    module = types.ModuleType("conv2d")
    exec(compile(OPTIMIZED, "conv2d.py", "exec"), module.__dict__)
    program, _ = trace_kernel(module.fused_conv2d_maxpool, args, kwargs)
    with np.errstate(all="ignore"), threadpool_limits(limits=1, user_api="blas"):
        alone = execute(program, list(args)).outputs
    assert len(run.outputs) == 1
    assert run.outputs[0].dtype == alone.dtype and run.outputs[0].tobytes() == alone.tobytes()


def test_the_process_count_is_what_the_job_asks_within_the_cap():
    assert processes({}) == 1
    assert processes({"processes": 1}) == 1
    assert processes({"processes": 3}) == 3
    assert processes({"processes": 10_000}) == MAX_PROCESSES
    for nonsense in (0, -3, "2", 1.5, True, None):
        assert processes({"processes": nonsense}) == 1


def test_every_process_of_a_grade_runs_the_blas_kernels_of_the_grader(tmp_path):
    """A grader whose machine forces an OpenBLAS core type (OPENBLAS_CORETYPE, as some hosts set)
    hands the same to the sandboxed executors, whose environment is otherwise minimal: the bits
    of a split execution are still those of one process of the grader's."""
    import platform
    import subprocess
    import sys
    forced = {"x86_64": "Nehalem", "aarch64": "ARMV8"}[platform.machine()]     # not the machine's default
    script = (f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); from pathlib import Path\n"
              "from threadpoolctl import threadpool_info\n"
              "import numpy\n"
              "assert any(i.get('architecture', '').lower() == sys.argv[1].lower() for i in threadpool_info())\n"
              "import test_executor_processes as t\n"
              "t.test_the_sandboxed_executor_gives_the_bits_of_one_process(Path(sys.argv[2]), 2)\n"
              "print('same bits')\n")
    env = dict(os.environ, OPENBLAS_CORETYPE=forced, PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-c", script, forced, str(tmp_path)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "same bits" in done.stdout, done.stderr[-3000:]
