"""What the infrastructure-fault tests share (tests/grader/test_infra_faults.py,
tests/workers/test_infra_retry.py): a kernel whose program executes for about a minute, a spec
of one transpose test to grade it under, and how to find a grade's executor in the process
table to kill it from outside."""
from __future__ import annotations

import os

import psutil

# A correct transpose of one 128x128 block that first copies a 12 MiB SBUF tile 100,000 times
# (data movement, which the transpose problem allows besides nc_transpose): traced in about a
# second, executed in about a minute (~0.6 ms a copy), so its executor is surely found running.
LONG_KERNEL = '''
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def matrix_transpose(a_tensor):
    M, N = a_tensor.shape
    out = nl.ndarray((N, M), dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    work = nisa.memset(shape=(128, 24576), value=1.0, dtype=nl.float32)
    for i in nl.sequential_range(100000):
        work = nisa.tensor_copy(work)
    tile = nl.ndarray((128, 128), dtype=a_tensor.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=a_tensor[0:128, 0:128])
    nisa.dma_copy(dst=out[0:128, 0:128], src=nisa.tensor_copy(nisa.nc_transpose(tile)))
    return out
'''


def transpose_spec(assignment: str, **extra) -> dict:
    """A spec (as its TOML table) of one 3-point correctness test of matrix_transpose."""
    return {"assignment": assignment, "spec_version": "1", "thresholds_version": "t1", "platform": "trn2",
            "time_budget_s": 600, **extra,
            "files": {"kernels": {"archive_path": "part1/kernels.py", "functions": {"matrix_transpose": ["a_tensor"]}}},
            "tolerances": {"float32": {"rtol": 1e-5, "atol": 1e-8}},
            "tests": [{"name": "transpose", "title": "Correctness: transpose", "kind": "correctness",
                       "file": "kernels", "problem": "transpose", "points": 3,
                       "configs": [{"m": 128, "n": 128, "dtype": "float32"}]}]}


def executors_under(root: int, not_pids: set[int] = frozenset()) -> list[psutil.Process]:
    """The executor processes running below `root` but `not_pids`: those whose working directory
    is an executor's job directory (grader.runner: <job root>/exec-*/exec), topmost only (a
    process the executor forked works there too). Through the fork server every job's command
    line is the server's, so the command line cannot tell an executor from a tracing child."""
    found = []
    try:
        below = psutil.Process(root).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    for proc in below:
        try:
            cwd = proc.cwd()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if proc.pid not in not_pids and os.path.basename(cwd) == "exec" \
                and os.path.basename(os.path.dirname(cwd)).startswith("exec-"):
            found.append(proc)
    pids = {p.pid for p in found}
    return [p for p in found if _ppid(p) not in pids]


def _ppid(proc: psutil.Process) -> int | None:
    try:
        return proc.ppid()
    except psutil.NoSuchProcess:
        return None
