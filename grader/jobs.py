"""What every process the grader starts in a job directory does around its work: confine itself
(sandbox.enter) before anything else, read job.json, do the job, write the outcome to the
inherited result pipe (GRADER_RESULT_FD), and exit at once, without cleanup handlers that code
it ran could have registered. Used by grader.child, grader.executor and grader.neuron."""
from __future__ import annotations

import json
import os
import sys
from typing import Callable

_BLAS: list = []        # the process's threadpoolctl controller, once made


def blas_controller():
    """threadpoolctl's view of the BLAS libraries loaded here. Finding them (every loaded
    library scanned and opened with ctypes) costs ~3 ms in a freshly forked child, for every
    configuration: the zygote makes it once, before it forks (grader.zygote), and each job
    inherits it, as it inherits the libraries themselves."""
    if not _BLAS:
        from threadpoolctl import ThreadpoolController
        _BLAS.append(ThreadpoolController())
    return _BLAS[0]


_KERNELS: list = []         # blas_kernels()'s answer, found once: a process's core type never changes


def blas_kernels() -> tuple[str, str] | None:
    """(the BLAS library and version, the core type whose kernels it runs) of this process's
    NumPy, as OpenBLAS reports them, or None for a BLAS that does not say. A host may force a core
    type (OPENBLAS_CORETYPE) that a fresh process would not pick: the grader hands its own to
    every child (grader.sandbox.minimal_env), so all of a grade's products round alike."""
    if not _KERNELS:
        found = None
        for info in blas_controller().info():
            architecture = info.get("architecture")
            # a core type is a plain name ("SkylakeX"): anything else is not handed to children
            if info.get("internal_api") == "openblas" and isinstance(architecture, str) and architecture.isalnum():
                found = f"OpenBLAS {info.get('version', '')}".strip(), architecture
                break
        _KERNELS.append(found)
    return _KERNELS[0]


def single_threaded_blas():
    """A context in which BLAS runs one thread, as threadpool_limits(limits=1, user_api="blas")."""
    return blas_controller().limit(limits=1, user_api="blas")


def serve_job(run: Callable[[dict], tuple], write: Callable[..., None],
              on_error: Callable[[BaseException, dict], tuple]) -> None:
    from grader.sandbox import enter
    fd = int(os.environ.pop("GRADER_RESULT_FD"))
    enter()
    with open("job.json") as fh:
        job = json.load(fh)
    try:
        outcome = run(job)
    except BaseException as err:      # a verdict for this run, never a silent death
        outcome = on_error(err, job)
    write(fd, *outcome)
    sys.stdout.flush()
    os._exit(0)
