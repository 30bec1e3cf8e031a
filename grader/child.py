"""The sandboxed side of a test run: `python -I -m grader.child` in a job directory.

Reads job.json from its working directory (the kernel's file, its function, the shapes and
dtypes of its inputs and its scalar arguments), imports the student's file and *traces* the
kernel, as neuronx-cc does: the kernel's Python runs on tensors that have no values. It writes
to the inherited result pipe (GRADER_RESULT_FD) a JSON header (a length-prefixed frame, see
grader.wire) and the artifact: the traced program (simulator) or the compiled NEFF (Neuron
device). It never sees input values, outputs, seeds, thresholds or answers, so nothing a grade
is computed from is within its reach;
the grader executes the artifact in a trusted process (grader.executor).
"""
from __future__ import annotations

import os
import sys
import traceback
import types

from grader.dtypes import dtype_of
from grader.vocabulary import Backend


def _setup_backend(backend: str, platform: str = "trn2") -> None:
    """Simulator: `import neuronxcc.nki` (and NKI 0.6's `import nki`) in the kernel's file
    resolves to nkisim, with the rules of the assignment's platform (its SDK's host-side names
    too, such as logging.OFF on trn1).
    Neuron device: the kernel's file imports the real SDK's namespace itself."""
    if backend == Backend.SIM:
        import nkisim
        nkisim.install(platform=platform)


def _load_module(path: str) -> types.ModuleType:
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
    return module


def _student_traceback(err: BaseException, path: str) -> str:
    frames = [f for f in traceback.extract_tb(err.__traceback__) if os.path.abspath(f.filename) == os.path.abspath(path)]
    return "".join(traceback.format_list(frames[-3:]))


def _arg_specs(job: dict) -> list:
    """Shapes and dtypes of the kernel's array arguments: tracing needs nothing more."""
    from nkisim.runtime import ArgSpec
    return [ArgSpec(tuple(int(n) for n in shape), dtype_of(dtype)) for shape, dtype in job["inputs"]]


def _settings(job: dict):
    import nkisim
    try:
        return nkisim.SimSettings(platform=job.get("platform", "trn2"))
    except TypeError:        # a simulator without platform rules
        return nkisim.SimSettings()


def run(job: dict) -> tuple[dict, bytes]:
    """Trace the kernel into a program. On the simulator the program itself is the result;
    on a Neuron device the program is compiled to a NEFF (by neuronx-cc) and that is."""
    _setup_backend(job["backend"], job.get("platform", "trn2"))
    if job["backend"] == Backend.NEURON:
        from grader.neuron.compile import prepare
        prepare(job)
    module = _load_module(job["file"])
    kernel = getattr(module, job["function"])
    if job["backend"] == Backend.SIM:
        _check_dialect(kernel, job["function"], vars(module), job.get("dialect"))
        from nkisim import program as programs
        from nkisim.runtime import trace_kernel
        # launched on the spec's logical NeuronCore, whatever the submission's kernel object says
        program, _ = trace_kernel(kernel, _arg_specs(job), job["kwargs"], _settings(job), job["compile_options"],
                                  lnc=job.get("lnc", 1))
        return {"status": "ok", "artifact": "program"}, programs.encode(program)
    from grader.neuron.compile import compile_neff    # the real SDK: compile, never run on real inputs
    return {"status": "ok", "artifact": "neff"}, compile_neff(kernel, _arg_specs(job), job)


def _check_dialect(kernel, name: str, namespace: dict, expected: str | None) -> None:
    """Behind the precheck (which a spec or a caller may turn off): refuse a kernel that nkisim
    would trace in another NKI dialect than the assignment's, or whose file uses the other
    dialect's package. On hardware the SDK line itself decides what compiles."""
    from nkisim.runtime import Kernel, as_kernel
    from grader.dialect import CURRENT, DialectError, dialect_named, dialect_of_loaded, kernel_message
    wanted = dialect_named(expected)
    if wanted is CURRENT and not isinstance(kernel, Kernel):      # NKI 0.6 compiles @nki.jit kernels only
        raise DialectError(kernel_message(wanted, name, None, None))
    found = dialect_named(type(as_kernel(kernel)).dialect)    # what nkisim traces it as, not what it says
    if found is not wanted:
        raise DialectError(kernel_message(wanted, name, found, None))
    for value in list(namespace.values()):          # the file's imports: modules, and names taken from them
        owner = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
        used = dialect_of_loaded(owner) if isinstance(owner, str) else None
        if used is not None and used is not wanted:
            raise DialectError(kernel_message(wanted, name, found, used))


def _write(fd: int, header: dict, artifact: bytes) -> None:
    from grader.wire import header_frame
    header["artifact_bytes"] = len(artifact)
    with os.fdopen(fd, "wb") as out:
        out.write(header_frame(header))
        out.write(artifact)


def _error(err: BaseException, job: dict) -> tuple[dict, bytes]:
    """The student's error, reported as a verdict."""
    return {"status": "error", "error_type": type(err).__name__, "error": str(err)[:4000],
            "where": _student_traceback(err, job["file"])}, b""


def main() -> None:
    from grader.jobs import serve_job
    serve_job(run, _write, _error)


if __name__ == "__main__":
    main()
