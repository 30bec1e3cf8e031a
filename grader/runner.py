"""Running one test configuration in two halves, across the trust boundary.

1. The sandboxed child (grader.child) traces the student's kernel from the shapes and dtypes of
   its inputs alone and sends back an artifact: the traced program (simulator) or a NEFF
   (neuronx-cc). It never holds an input value, an output or a timing.
2. A trusted process runs the artifact on the real inputs: grader.executor validates and
   executes a program and estimates its latency from the instructions it executed; on a Trn2,
   grader.neuron runs the NEFF on the NeuronCore and times it.

Everything read back from either process is parsed defensively (grader.wire): a malformed
result is a verdict for this run, never a crashed grade.

A trusted process (either one: neither runs student code) ended by a signal none of the job's
limits sends is no verdict at all but the grader's failure (ExecutorKilled, raised). A signal
that ends the tracing child stays the kernel's failure whoever sent it: that child runs the
student's code, and a kill it sent itself looks the same from here.

What tracing already knows is used before any execution: given the output a test expects, the
simulator's executor refuses to execute a program whose declared outputs cannot be it, and the
run ends "mismatch" with what the program declared (see grader.executor).
"""
from __future__ import annotations

import json
import math
import os
import shutil
import signal
import sys
import tempfile
import threading
from dataclasses import dataclass, field

import numpy as np
from nkisim.dialects import LEGACY

from . import sharedmem, wire
from .dtypes import dtype_of
from .errors import GraderFault
from .sandbox import ChildResult, Limits, minimal_env, run_child
from .vocabulary import Backend


@dataclass
class RunnerJob:
    backend: str                        # a Backend
    filename: str                       # the student's file name, as the kernel imports it
    source: str
    function: str
    args: list                          # the kernel's array arguments (NumPy)
    kwargs: dict                        # its scalar keyword arguments
    mode: str = "correctness"           # "correctness" | "benchmark"
    warmup: int = 5
    iters: int = 20
    platform: str = "trn2"
    job_root: str = ""                  # where job directories go (one per configuration)
    hide_paths: tuple = ()
    neuron_core: int | None = None
    neuron: dict | None = None          # the machine's Neuron setup (grader.neuron.detect().job_fields())
    input_names: tuple = ()             # the kernel's array parameters: the NEFF's input names
    compile_options: dict = field(default_factory=dict)
    max_instructions: int = 2_000_000
    thresholds_us: dict | None = None   # for the profile's picture
    expected_output: tuple | None = None  # (shape, dtype) the test expects; None: no check before executing
    # `args` as drawn into sealed shared memory (grader.sharedmem), given to the executor as they
    # are; None: the simulator's executor gets a sealed copy of `args`. The caller closes it.
    shared_inputs: sharedmem.SharedInputs | None = None
    # (shape, dtype) of each array argument, for tracing before `args` are drawn; None: `args`'
    arg_specs: list | None = None
    # the simulator's executor: at most this many processes execute the program at once, each a share
    # of its output (nkisim.split); the grade's share of the cores
    processes: int = 1
    # the NKI dialect the spec's kernels are written in: the tracing child refuses a kernel of another
    dialect: str = LEGACY.name
    # the logical NeuronCore's physical cores the kernel is launched on (the spec's; 1: one core)
    lnc: int = 1


class SimulatorFault(GraderFault):
    """nkisim failed to execute a valid program (ConfigRun status "simulator_error"): the grader's
    fault, not the student's. grade() raises it, so the run is a grader error (a worker retries
    it, then gives up as infra_error), never a test scored 0."""


class RunnerFault(GraderFault):
    """The trusted runner could not run a valid artifact through no fault of the kernel's
    (ConfigRun status "grader_error": a Neuron tool, module or library missing or broken, the
    runtime or the device out of order, device events that do not add up to calls;
    grader/neuron/faults.py). grade() raises it, as SimulatorFault."""


class ExecutorKilled(GraderFault):
    """The trusted process that runs the traced program or the NEFF (grader.executor,
    grader.neuron) was ended by a signal none of the job's own limits sends: another program on
    the host, the host's OOM killer. It runs no student code, so it is the grader's fault, not
    the kernel's: grade() raises it (a worker retries the run, then gives up as infra_error),
    never a test scored 0. `signal`: the signal's number."""

    def __init__(self, message: str, sig: int):
        super().__init__(message, sig)          # both in args: the error pickles (Celery results)
        self.signal = sig

    def __str__(self) -> str:
        return self.args[0]


# What ends a process without anyone sending a signal: a fault of its own execution (where an
# address-space cap is also how running out of memory can show: a stack that cannot grow, an
# allocation that aborts), the job's syscall filter, its CPU and file-size limits. Any other
# signal came from outside the job. (The memory cgroup's kill, a timeout and a cancel are told
# apart by the sandbox itself: ChildResult.killed_by.)
OWN_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGABRT,
                         signal.SIGTRAP, signal.SIGSYS, signal.SIGXCPU, signal.SIGXFSZ})


@dataclass
class ConfigRun:
    status: str                         # ok | error | timeout | crashed | cancelled | invalid | mismatch | simulator_error | grader_error
    message: str = ""
    outputs: list = field(default_factory=list)
    printed: str = ""
    child_output: str = ""
    wall_s: float = 0.0
    opcodes: frozenset = frozenset()
    matmul_flops: int = 0
    instructions: int = 0
    dma_count: int = 0
    latency_us: float | None = None
    profile: dict | None = None
    declared: list | None = None        # mismatch: (shape, dtype name) of each output the program declares
    processes: int = 1                  # how many processes executed the program (nkisim.split)


def run_configuration(job: RunnerJob, limits: Limits, cancel: threading.Event | None = None,
                      traced: tuple | ConfigRun | None = None) -> ConfigRun:
    """Trace (unless `traced`, what trace_configuration gave for this job, is given) and execute."""
    if traced is None:
        traced = trace_configuration(job, limits, cancel)
    if isinstance(traced, ConfigRun):
        return traced
    artifact, child = traced
    base = tempfile.mkdtemp(prefix="exec-", dir=job.job_root or None)
    try:
        done = _execute(job, os.path.join(base, "exec"), artifact, limits, cancel)
        done.child_output = wire.bounded_text(child.output, 4000)
        done.wall_s = round(child.wall_seconds + done.wall_s, 3)
        return done
    finally:
        shutil.rmtree(base, ignore_errors=True)


def trace_configuration(job: RunnerJob, limits: Limits,
                        cancel: threading.Event | None = None) -> tuple[memoryview, ChildResult] | ConfigRun:
    """The untrusted half alone: the artifact and the child's result, or the run's verdict when
    tracing failed. It needs no input value (job.arg_specs will do), so it may run while the
    inputs are drawn."""
    base = tempfile.mkdtemp(prefix="trace-", dir=job.job_root or None)
    try:
        return _trace(job, os.path.join(base, "trace"), limits, cancel)
    finally:
        shutil.rmtree(base, ignore_errors=True)


# ----- the untrusted half: tracing ---------------------------------------------------------------

def _neuron_env(job: RunnerJob, limits: Limits) -> dict:
    extra = {}
    if job.backend == Backend.NEURON:
        # each process sees only the job's NeuronCore, as core 0 (nrt-configurable-parameters)
        if job.neuron_core is not None:
            extra["NEURON_RT_VISIBLE_CORES"] = str(job.neuron_core)
        extra["NEURON_RT_EXEC_TIMEOUT"] = str(int(limits.wall_seconds))
        extra["LD_LIBRARY_PATH"] = os.path.dirname(job.neuron["libnrt"])   # nrtpy finds libnrt there
        # the worker's logical-NeuronCore degree (grader.neuron.lines): the child compiles at it,
        # the runner loads at it; the minimal environment would leave the platform's default
        extra["NEURON_LOGICAL_NC_CONFIG"] = str(job.neuron.get("lnc", 2))
    return extra


def _trace(job: RunnerJob, workdir: str, limits: Limits, cancel) -> tuple[memoryview, ChildResult] | ConfigRun:
    os.makedirs(workdir)
    with open(os.path.join(workdir, job.filename), "w") as fh:
        fh.write(job.source)
    with open(os.path.join(workdir, "job.json"), "w") as fh:
        # what tracing needs, and nothing that tells a timed run from a correctness run
        json.dump({"backend": job.backend, "file": job.filename, "function": job.function,
                   "inputs": _input_specs(job), "kwargs": job.kwargs,
                   "platform": job.platform, "compile_options": job.compile_options,
                   "line": job.neuron["line"] if job.neuron else None, "dialect": job.dialect, "lnc": job.lnc}, fh)
    child = run_child([sys.executable, "-I", "-m", "grader.child"], workdir, limits=limits,
                      env=minimal_env(_neuron_env(job, limits)), hide_paths=(job.job_root,) + tuple(job.hide_paths),
                      own_uid=job.backend == Backend.SIM, cancel=cancel)
    failed = _process_failure(child, limits, "the kernel's process")
    if failed is not None:
        return failed
    try:
        header, pos = wire.read_header_line(child.result)
        if header.get("status") != "ok":
            return ConfigRun("error", _kernel_error(header), child_output=wire.bounded_text(child.output, 4000),
                             wall_s=child.wall_seconds)
        size = wire.bounded_int(header.get("artifact_bytes"), 0, limits.result_bytes, "artifact size")
        if header.get("artifact") not in ("program", "neff") or len(child.result) - pos != size:
            raise wire.BadResult("the artifact is not what the header announced")
    except wire.BadResult as err:
        return ConfigRun("invalid", f"the kernel's process sent back a malformed result ({err})",
                         child_output=wire.bounded_text(child.output, 4000), wall_s=child.wall_seconds)
    return memoryview(child.result)[pos:], child          # no copy: the grader holds one result at most


def _input_specs(job: RunnerJob) -> list:
    # by name: ml_dtypes' bfloat16 has the void type string '<V2', which the child reads back as
    # a void dtype; its name ('bfloat16') is what np.dtype reads once ml_dtypes is loaded
    if job.arg_specs is not None:
        return [[[int(n) for n in shape], dtype_of(dtype).name] for shape, dtype in job.arg_specs]
    return [[list(a.shape), a.dtype.name] for a in job.args]


def _kernel_error(header: dict) -> str:
    kind = wire.bounded_text(str(header.get("error_type", "Error")), 100)
    text = wire.bounded_text(str(header.get("error", "")))
    where = wire.bounded_text(str(header.get("where", "")), 2000).rstrip()
    return f"{kind}: {text}" + (f"\n{where}" if where else "")


def _process_failure(child: ChildResult, limits: Limits, who: str) -> ConfigRun | None:
    if child.cancelled:
        return ConfigRun("cancelled", "cancelled", wall_s=child.wall_seconds)
    if child.timed_out:
        return ConfigRun("timeout", f"timed out after {limits.wall_seconds:g} s", wall_s=child.wall_seconds,
                         child_output=wire.bounded_text(child.output, 4000))
    if child.result_truncated:          # a limit, not a forgery: no program_invalid flag
        return ConfigRun("error", f"{who} sent back a result too large: more than the {limits.result_bytes} bytes "
                                  f"this configuration allows (what an honest program and its outputs need, with "
                                  f"margin); the rest was discarded unread", wall_s=child.wall_seconds)
    if not child.result:
        if _cpu_limit_reached(child, limits):
            return ConfigRun("crashed", f"{who} used up its CPU time limit ({limits.cpu_seconds:g} s of CPU) "
                                        f"and was stopped; look for work far beyond what the problem needs",
                             wall_s=child.wall_seconds, child_output=wire.bounded_text(child.output, 4000))
        why = child.killed_by or f"exit code {child.returncode}"
        return ConfigRun("crashed", f"{who} died ({why}) before reporting", wall_s=child.wall_seconds,
                         child_output=wire.bounded_text(child.output, 4000))
    return None


def _signal_of(child: ChildResult) -> int | None:
    """The signal that ended the child (run_child's "signal N"), or None."""
    kind, _, number = child.killed_by.partition(" ")
    return int(number) if kind == "signal" and number.isdigit() else None


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:                  # a real-time signal has no name of its own
        return f"SIGRTMIN+{sig - signal.SIGRTMIN}" if sig >= signal.SIGRTMIN else "unnamed"


def _cpu_limit_reached(child: ChildResult, limits: Limits) -> bool:
    """Did RLIMIT_CPU end the child? The sandbox sets its soft and hard values alike, so at the
    limit Linux sends SIGKILL (SIGXCPU only below a higher hard limit): a SIGKILL counts as the
    limit's once the child had spent it (within a second: the limit is in whole seconds).
    Without the CPU time (a child the fork server did not start) its wall time stands in, as
    much as one thread can spend."""
    sig = _signal_of(child)
    if sig == signal.SIGXCPU:
        return True
    spent = child.cpu_seconds if child.cpu_seconds is not None else child.wall_seconds
    return sig == signal.SIGKILL and spent >= limits.cpu_seconds - 1


def _killed_from_outside(child: ChildResult, limits: Limits) -> int | None:
    """The signal from outside the job that ended this trusted child, or None when it ended by
    itself, by the job's own limits, its cancel or its timeout."""
    sig = _signal_of(child)
    if child.cancelled or child.timed_out or sig is None or sig in OWN_SIGNALS or _cpu_limit_reached(child, limits):
        return None
    return sig


# ----- the trusted half: execution -----------------------------------------------------------------

def _execute(job: RunnerJob, workdir: str, artifact, limits: Limits, cancel) -> ConfigRun:
    # the simulator's executor gets the inputs (and room for the output) in memory shared with
    # it alone (grader.sharedmem); the Neuron runner reads files
    if job.backend != Backend.SIM:
        return _execute_with(job, workdir, artifact, limits, cancel, None)
    inputs = job.shared_inputs if job.shared_inputs is not None else sharedmem.share(job.args)
    room = None
    try:
        expected = _expected_output(job)
        room = sharedmem.output_room(*expected) if expected else None
        return _execute_with(job, workdir, artifact, limits, cancel, (inputs, room))
    finally:
        if inputs is not job.shared_inputs:
            inputs.close()
        if room is not None:
            os.close(room[0])


def _execute_with(job: RunnerJob, workdir: str, artifact, limits: Limits, cancel, shared) -> ConfigRun:
    """`shared`: (SharedInputs, (output memfd, size) or None) for the simulator's executor."""
    if shared is None:
        os.makedirs(os.path.join(workdir, "inputs"))
        for i, a in enumerate(job.args):
            np.save(os.path.join(workdir, "inputs", f"arg{i}.npy"), a, allow_pickle=False)
    else:
        os.makedirs(workdir)
    name = "program.bin" if job.backend == Backend.SIM else "kernel.neff"
    with open(os.path.join(workdir, name), "wb") as fh:
        fh.write(artifact)
    inputs, room = shared if shared is not None else (None, None)
    layout = {"inputs": inputs.layout, "output": room[1] if room else None} if shared is not None else None
    with open(os.path.join(workdir, "job.json"), "w") as fh:
        json.dump({"n_inputs": len(job.args), "mode": job.mode, "platform": job.platform,
                   "max_instructions": job.max_instructions, "thresholds_us": job.thresholds_us,
                   "warmup": job.warmup, "iters": job.iters, "neuron_core": job.neuron_core,
                   "neuron": job.neuron, "input_names": list(job.input_names),
                   "expected_output": _expected_output(job), "shared": layout,
                   "processes": job.processes, "dialect": job.dialect, "lnc": job.lnc}, fh)
    module = "grader.executor" if name == "program.bin" else "grader.neuron"
    fds = () if shared is None else (inputs.fd,) + ((room[0],) if room else ())
    done = run_child([sys.executable, "-I", "-m", module], workdir, limits=limits,
                     env=minimal_env(_neuron_env(job, limits)), hide_paths=(job.job_root,) + tuple(job.hide_paths),
                     own_uid=job.backend == Backend.SIM, cancel=cancel, shared_fds=fds)
    outside = _killed_from_outside(done, limits)
    if outside is not None:             # whatever it sent back: not a verdict on the kernel
        raise ExecutorKilled(
            f"the grader's own process running the program of {job.function} ({module}, a {job.mode} run) was "
            f"killed by signal {outside} ({_signal_name(outside)}) after {done.wall_seconds:.1f} s, a "
            f"signal none of the grade's limits sends: something outside the grade ended it (another program "
            f"on the grading machine, or the machine running out of memory). This is the grader's fault, not "
            f"the kernel's: no test is scored for it, and the run is to be graded again", outside)
    failed = _process_failure(done, limits, "running the kernel's program")
    if failed is not None:
        if failed.status == "crashed" and done.killed_by == "memory limit":
            failed.message = "the kernel's program needs more memory than the grader allows"
        return failed
    try:
        return _parse_execution(done, limits, _shared_output(room, job))
    except wire.BadResult as err:
        return ConfigRun("invalid", f"running the kernel's program gave a malformed result ({err})",
                         wall_s=done.wall_seconds)


def _shared_output(room, job: RunnerJob):
    """A function giving the expected output from its room in shared memory (see
    grader.sharedmem); None without such a room."""
    if room is None:
        return None
    fd, size = room

    def read() -> np.ndarray:
        shape, dtype = job.expected_output
        try:
            return sharedmem.read_output(fd, size, shape, dtype_of(dtype))
        except ValueError as err:
            raise wire.BadResult(str(err)) from None
    return read


def _expected_output(job: RunnerJob) -> list | None:
    """What the executor compares the program's declared outputs with (only the simulator's
    executor reads a traced program)."""
    if job.expected_output is None or job.backend != Backend.SIM:
        return None
    shape, dtype = job.expected_output
    return [[int(n) for n in shape], dtype_of(dtype).name]


def _declared(header: dict) -> list[tuple[tuple[int, ...], str]]:
    raw = header.get("declared")
    if not isinstance(raw, list) or not 1 <= len(raw) <= 16:
        raise wire.BadResult("a mismatch must list 1 to 16 declared outputs")
    declared = []
    for item in raw:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], list)
                and len(item[0]) <= wire.MAX_DIMS and isinstance(item[1], str)):
            raise wire.BadResult("a declared output must be [shape, dtype name]")
        shape = tuple(wire.bounded_int(n, 0, 1 << 40, "a declared dimension") for n in item[0])
        declared.append((shape, wire.bounded_text(item[1], 40)))
    return declared


def _parse_execution(done: ChildResult, limits: Limits, shared_output=None) -> ConfigRun:
    """The executor's result. `shared_output`: how to read the expected output from the memory
    the grader gave the executor (see _shared_output), when it gave some."""
    header, pos = wire.read_header_line(done.result)
    if header.get("status") == "mismatch":
        return ConfigRun("mismatch", "its declared outputs cannot be the expected ones",
                         wall_s=done.wall_seconds, declared=_declared(header))
    if header.get("status") == "kernel_error":     # the kernel's fault, found by executing its values
        return ConfigRun("error", wire.bounded_text(str(header.get("error", ""))), wall_s=done.wall_seconds)
    if header.get("status") in ("simulator_error", "grader_error"):   # the trusted process's word: its own failure
        return ConfigRun(header["status"], wire.bounded_text(str(header.get("error", ""))), wall_s=done.wall_seconds)
    if header.get("status") != "ok":
        message = wire.bounded_text(str(header.get("error", "the program could not run")))
        return ConfigRun("invalid", f"the traced program breaks the hardware's rules: {message}",
                         wall_s=done.wall_seconds)
    count = wire.bounded_int(header.get("arrays"), 0, 16, "output count")
    view = memoryview(done.result)
    outputs = []
    for _ in range(count):
        arr, pos = wire.read_npy_at(view, pos, limits.result_bytes)
        outputs.append(arr)
    shared = header.get("shared_output", False)
    if shared is not False:
        if shared is not True or shared_output is None or count:
            raise wire.BadResult("an output in shared memory the grader did not give, or beside piped ones")
        outputs = [shared_output()]
    latency = header.get("latency_us")
    if latency is not None and not (isinstance(latency, (int, float)) and math.isfinite(latency) and latency > 0):
        raise wire.BadResult("latency is not a positive number")
    opcodes = header.get("opcodes", [])
    if not isinstance(opcodes, list) or not all(isinstance(o, str) for o in opcodes):
        raise wire.BadResult("opcodes must be a list of names")
    profile = header.get("profile")
    return ConfigRun("ok", outputs=outputs, printed=wire.bounded_text(str(header.get("printed", "")), 64 * 1024),
                     wall_s=done.wall_seconds, opcodes=frozenset(opcodes),
                     matmul_flops=wire.bounded_int(header.get("matmul_flops", 0), 0, 1 << 62, "matmul FLOPs"),
                     instructions=wire.bounded_int(header.get("instructions", 0), 0, 1 << 40, "instruction count"),
                     dma_count=wire.bounded_int(header.get("dma_count", 0), 0, 1 << 40, "DMA count"),
                     latency_us=float(latency) if latency is not None else None,
                     profile=profile if isinstance(profile, dict) else None,
                     processes=wire.bounded_int(header.get("processes", 1), 1, 64, "process count"))
