"""The fork server that starts sandboxed children: what a child sees and how it ends are the
same as for a fresh `python -I -m grader.child`, and the grader copes with the server dying."""
import json
import os
import signal
import sys

import numpy as np
import pytest

from grader.sandbox import Limits, minimal_env, run_child
from grader.wire import read_header_line
from grader.zygote import ZYGOTE

CHILD = [sys.executable, "-I", "-m", "grader.child"]

PROBE = """
import os, sys
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

listed = sorted(int(f) for f in os.listdir("/proc/self/fd"))
print("fds", [f for f in listed if os.path.exists(f"/proc/self/fd/{f}")])   # less the listing's own
print("cwd", os.path.basename(os.getcwd()))
print("env", sorted(os.environ))
print("main", sys.modules["__main__"].__name__, sys.modules["__main__"].__file__.endswith("child.py"))
print("to stderr", file=sys.stderr)

def kernel(x):
    {body}
    tile = nl.ndarray((1, 6), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    out = nl.ndarray((1, 6), dtype=x.dtype, buffer=nl.hbm)
    nisa.dma_copy(dst=out, src=nisa.tensor_scalar(tile, nl.add, {offset}))
    return out
"""


def job_dir(tmp_path, body: str = "pass", offset: int = 0):
    job = tmp_path / "job"
    (job / "inputs").mkdir(parents=True)
    (job / "k.py").write_text(PROBE.replace("{body}", body).replace("{offset}", str(offset)))
    np.save(job / "inputs" / "arg0.npy", np.arange(6, dtype=np.float32).reshape(1, 6))
    # what the child reads, in the form of a run that holds the values and of one that traces
    (job / "job.json").write_text(json.dumps({"backend": "sim", "file": "k.py", "function": "kernel", "n_args": 1,
                                              "inputs": [[[1, 6], "float32"]], "platform": "trn2",
                                              "kwargs": {}, "mode": "correctness", "warmup": 1, "iters": 1,
                                              "compile_options": {}, "want_trace": False}))
    job.chmod(0o755)
    return str(job)


def run(job, **limits):
    return run_child(CHILD, job, limits=Limits(**dict({"wall_seconds": 20.0}, **limits)), env=minimal_env(),
                     hide_paths=(os.path.dirname(job),))


def test_a_child_from_the_zygote_sees_only_its_job(tmp_path):
    result = run(job_dir(tmp_path))
    assert ZYGOTE.pid is not None                         # it went through the fork server
    assert result.returncode == 0 and not result.timed_out
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert lines["fds"] == "[0, 1, 2, 3]"                 # no control socket, no other job's pipes
    assert lines["cwd"] == "job"
    assert "GRADER_RESULT_FD" not in lines["env"] and "GRADER_SANDBOX" not in lines["env"]  # popped on entry
    assert lines["main"] == "__main__ True"               # run as under `python -m`
    assert result.stderr.strip() == "to stderr"
    header, _ = read_header_line(result.result)
    assert header["status"] == "ok", header


def test_a_job_finds_what_either_child_imports_loaded_and_its_cpu_time_comes_back(tmp_path):
    # the kernel's process never imports the executor's modules itself: found loaded, they were
    # preloaded by the zygote (an import per job cost each configuration again); it then works
    # 0.3 s of its own CPU time, which the monitor reports (a count, not a clock race)
    body = ("import time; print('preloaded', all(m in sys.modules for m in ('grader.executor', "
            "'grader.wire', 'nkisim.cost.profile', 'nkisim.platforms')))\n"
            "    while time.process_time() < 0.3: pass")
    result = run(job_dir(tmp_path, "import sys; " + body))
    assert result.returncode == 0, result.output
    assert "preloaded True" in result.stdout
    assert result.cpu_seconds is not None and result.cpu_seconds >= 0.3


# the simulator's jobs and what they run: a module they import inside a function is imported
# by every job again, from source in the sandbox's read-only view (no .pyc is written there):
# nkisim.split cost each executor ~5 ms of compiling until it was preloaded
JOB_SOURCES = {"grader/executor.py": "grader.executor", "grader/child.py": "grader.child",
               "grader/jobs.py": "grader.jobs", "nkisim/split.py": "nkisim.split"}
NOT_SIMULATOR = ("grader.neuron",)        # the Neuron backend's own child and SDK


def is_module(name: str) -> bool:
    import importlib.util
    try:
        return importlib.util.find_spec(name) is not None
    except (ModuleNotFoundError, ValueError):       # a name inside a module that is no package
        return False


def lazily_imported() -> set[str]:
    """The grader's and nkisim's modules that JOB_SOURCES import inside functions."""
    import ast
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    found = set()
    for path, module in JOB_SOURCES.items():
        with open(os.path.join(root, path)) as fh:
            tree = ast.parse(fh.read())
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    base = node.module or ""
                    if node.level:
                        package = module.rsplit(".", node.level)[0]
                        base = f"{package}.{base}" if base else package
                    # `from nkisim import split` imports a module; `from x import name`, x itself
                    names = [base] + [f"{base}.{a.name}" for a in node.names if is_module(f"{base}.{a.name}")]
                else:
                    continue
                found.update(n for n in names if n.split(".")[0] in ("grader", "nkisim")
                             and not n.startswith(NOT_SIMULATOR))
    return found


def test_every_module_a_simulator_job_imports_late_is_preloaded(tmp_path):
    wanted = lazily_imported()
    assert {"nkisim.split", "nkisim.cost.profile", "grader.wire"} <= wanted     # the scan finds them
    body = f"print('missing', sorted(m for m in {sorted(wanted)!r} if m not in sys.modules))"
    result = run(job_dir(tmp_path, "import sys; " + body))
    assert result.returncode == 0, result.output
    assert "missing []" in result.stdout, result.stdout


def test_a_job_inherits_the_blas_libraries_found_once_and_the_executor_runs_blas_on_one_thread(tmp_path):
    # finding them costs a forked child ~3 ms per configuration: the zygote does it before it
    # forks; the executor's single-threaded BLAS (what its results' bits and the grade's CPU
    # planning rely on) still holds, read from the library itself inside the context
    body = ("import grader.jobs as j; print('found', bool(j._BLAS))\n"
            "    with j.single_threaded_blas():\n"
            "        print('threads', sorted({c.num_threads for c in j.blas_controller().select(user_api='blas').lib_controllers}))")
    result = run(job_dir(tmp_path, body))
    assert result.returncode == 0, result.output
    assert "found True" in result.stdout
    assert "threads [1]" in result.stdout, result.stdout


def test_exit_codes_signals_and_timeouts_come_back_as_from_a_process(tmp_path):
    exited = run(job_dir(tmp_path, "import os; os._exit(7)"))
    assert exited.returncode == 7 and exited.killed_by == "" and exited.result == b""
    (tmp_path / "job").rename(tmp_path / "old0")
    crashed = run(job_dir(tmp_path, "import ctypes; ctypes.string_at(0)"))
    assert crashed.killed_by == f"signal {signal.SIGSEGV.value}" and crashed.result == b""
    (tmp_path / "job").rename(tmp_path / "old1")
    stuck = run(job_dir(tmp_path, "import time; time.sleep(60)"), wall_seconds=1.0)
    assert stuck.timed_out and stuck.killed_by == "timeout" and stuck.wall_seconds < 10


def test_a_dead_zygote_is_replaced(tmp_path):
    assert run(job_dir(tmp_path)).returncode == 0
    first = ZYGOTE.pid
    os.kill(first, signal.SIGKILL)
    # a new directory, not the first one's path again: the first job's monitor, orphaned by the
    # kill, may still be removing its job directory (as it does when the grader is gone)
    again = run(job_dir(tmp_path / "second"))
    assert again.returncode == 0 and read_header_line(again.result)[0]["status"] == "ok"
    assert ZYGOTE.pid not in (None, first)


def test_other_command_lines_run_as_fresh_processes(tmp_path):
    result = run_child([sys.executable, "-I", "-c", "import os; os.write(int(os.environ['GRADER_RESULT_FD']), b'hi')"],
                       str(tmp_path), limits=Limits(wall_seconds=20.0), env=minimal_env())
    assert result.returncode == 0 and result.result == b"hi"


@pytest.mark.parametrize("jobs", [4])
def test_children_started_from_several_threads_do_not_mix(tmp_path, jobs):
    from concurrent.futures import ThreadPoolExecutor
    dirs = []
    for i in range(jobs):
        base = tmp_path / f"t{i}"
        base.mkdir()
        dirs.append(job_dir(base, body=f"print('job', {i})", offset=i))
    with ThreadPoolExecutor(jobs) as pool:
        results = list(pool.map(run, dirs))
    for i, result in enumerate(results):
        assert result.returncode == 0
        assert [x for x in result.stdout.splitlines() if x.startswith("job ")] == [f"job {i}"]
        assert read_header_line(result.result)[0]["status"] == "ok"
