"""The sandboxed side of a test run: `python -I -m grader.child` in a job directory.

Reads job.json and inputs/*.npy from its working directory, imports the student's file,
runs the kernel on the chosen backend and writes the outcome to the inherited result pipe
(GRADER_RESULT_FD): one JSON header line, then each output array in .npy format, then for
simulated benchmark runs the instruction trace. It never sees seeds, thresholds or answers.
"""
from __future__ import annotations

import json
import os
import sys
import traceback
import types

import numpy as np


def _setup_backend(backend: str):
    if backend == "sim":
        import nkisim
        nkisim.install()
    elif os.environ.get("GRADER_NEURON_SHIM") == "nkisim":
        # tests exercise the neuron code path with nkisim standing in for neuronx-cc
        import nkisim
        nkisim.install(force=True)
    import neuronxcc.nki as nki
    return nki


def _load_kernel(path: str, function: str):
    # Relative to the working directory (the job directory), never absolute: in the sandbox's
    # mount namespace the job directory's absolute path lies under a tmpfs that hides every job.
    sys.path.insert(0, os.path.dirname(path) or os.curdir)
    name = os.path.splitext(os.path.basename(path))[0]
    with open(path, "rb") as fh:            # not importlib: it would make the path absolute
        code = compile(fh.read(), path, "exec")
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module
    exec(code, module.__dict__)
    return getattr(module, function)


def _student_traceback(err: BaseException, path: str) -> str:
    frames = [f for f in traceback.extract_tb(err.__traceback__) if os.path.abspath(f.filename) == os.path.abspath(path)]
    return "".join(traceback.format_list(frames[-3:]))


def _outputs(value) -> list[np.ndarray]:
    values = list(value) if isinstance(value, (tuple, list)) else [value]
    for v in values:
        if type(v) is not np.ndarray:
            raise TypeError(f"the kernel returned {type(v).__name__}, expected a NumPy array from its HBM output")
    return values


def run(job: dict) -> tuple[dict, list[np.ndarray], bytes]:
    nki = _setup_backend(job["backend"])
    kernel = _load_kernel(job["file"], job["function"])
    args = [np.load(os.path.join("inputs", f"arg{i}.npy"), allow_pickle=False) for i in range(job["n_args"])]
    kwargs = job["kwargs"]
    header: dict = {"status": "ok"}
    trace = b""
    if job["backend"] == "sim" and (job["mode"] == "benchmark" or job.get("want_trace")):
        # what nki.baremetal / nki.benchmark run, keeping the trace: the grader times it with its
        # own cost model, so an estimate made here would be thrown away
        import nkisim
        from nkisim import trace_io
        run = nkisim.run_kernel(kernel, args, kwargs, compile_options=job["compile_options"])
        outputs = _outputs(run.outputs)
        trace = trace_io.encode(run.trace)
    elif job["mode"] == "correctness":
        outputs = _outputs(nki.baremetal(kernel)(*args, **kwargs))
    else:
        # on hardware the benchmarked run ignores its inputs, so check outputs with baremetal
        outputs = _outputs(nki.baremetal(kernel)(*args, **kwargs))
        bench = nki.benchmark(warmup=job["warmup"], iters=job["iters"], **job["compile_options"])(kernel)
        bench(*args, **kwargs)
        latency = bench.benchmark_result.nc_latency
        header["percentiles_us"] = {str(p): float(latency.get_latency_percentile(p)) for p in (0, 50, 90, 99, 100)}
    return header, outputs, trace


class _Stream:
    """Only `write`: NumPy then writes an array in bounded chunks (tofile cannot seek a pipe)."""

    def __init__(self, out) -> None:
        self.write = out.write


def _write(fd: int, header: dict, outputs: list[np.ndarray], trace: bytes) -> None:
    header["arrays"] = len(outputs)     # each a self-delimiting .npy stream
    header["trace_bytes"] = len(trace)
    with os.fdopen(fd, "wb") as out:
        out.write(json.dumps(header).encode() + b"\n")
        for arr in outputs:
            np.lib.format.write_array(_Stream(out), arr, allow_pickle=False)
        out.write(trace)


def _pid_namespace_init() -> None:
    """In a new PID namespace the first child is its PID 1: run the job there and pass its
    exit status up, so nothing the kernel does can see or signal processes outside."""
    pid = os.fork()
    if pid == 0:
        return
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        os._exit(128 + os.WTERMSIG(status))
    os._exit(os.WEXITSTATUS(status))


def main() -> None:
    from grader.sandbox import enter
    fd = int(os.environ.pop("GRADER_RESULT_FD"))
    if enter():
        _pid_namespace_init()
    with open("job.json") as fh:
        job = json.load(fh)
    try:
        header, outputs, trace = run(job)
    except BaseException as err:  # the student's error, reported as a verdict
        header = {"status": "error", "error_type": type(err).__name__, "error": str(err)[:4000],
                  "where": _student_traceback(err, job["file"])}
        outputs, trace = [], b""
    _write(fd, header, outputs, trace)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
