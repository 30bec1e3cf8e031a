"""The trusted side of a simulated test run: `python -I -m grader.executor` in a job directory.

What the device does on hardware: it takes the program a sandboxed child traced (program.bin,
untrusted bytes), checks it against the hardware rules (nkisim.program.validate), executes it
on the real inputs (in memory the grader shares, else inputs/arg*.npy) with NumPy, and for
timed runs estimates its latency with the cost model from the instructions it actually executed. No student code runs here. It is
still confined and resource-limited like a child (sandbox.enter), since a program may ask for
any amount of work within its caps.

Writes to the result pipe (GRADER_RESULT_FD) a JSON header (a length-prefixed frame, see
grader.wire), then each output array in .npy format. Header fields: status ("ok" | "invalid" |
"mismatch" | "kernel_error": the kernel's values broke a promise it made, such as nc_matmul's
0/1 hints | "simulator_error": nkisim failed on a valid program), error, printed (nl.device_print text), opcodes, matmul_flops, instructions,
dma_count, latency_us, profile, processes; for "mismatch", declared. When the grader shares memory with it
(grader.sharedmem: GRADER_SHARED_FD, its layout in job.json's "shared"), the inputs are read there,
in place, and the expected output is computed into its room: the header says shared_output: true and no
array follows. With that room, and job.json's "processes" above 1 (the grade's share of the
cores), a program whose output splits into independent shares (nkisim.split: a conv2d's
blocks) is executed by that many processes at once, each writing its share into the room.

What tracing already knows is used before any execution: when job.json gives the output the
test expects ([shape, dtype]) and the valid program declares outputs that cannot be it (their
count, shape or dtype), nothing is executed and the header says "mismatch" with the declared
[shape, dtype] of each output (a 224x224 configuration executes for tens of seconds; this
verdict takes the time to decode).
"""
from __future__ import annotations

import math
import os

import numpy as np

from grader import sharedmem      # at import: in the sandbox's view the grader's package is not readable

PRINT_LIMIT = 64 * 1024          # device_print text kept for the report
MAX_PROCESSES = 8


def _limits(platform: str):
    from nkisim.settings import HardwareLimits
    try:
        from nkisim.platforms import PLATFORMS
        return PLATFORMS[platform].hardware_limits()
    except (ImportError, KeyError, AttributeError):
        return HardwareLimits()


def _profile(trace, timeline, job: dict) -> dict | None:
    try:
        from nkisim.cost.profile import profile_summary
    except ImportError:
        return None
    return profile_summary(trace, timeline, thresholds_us=job.get("thresholds_us"))


def run(job: dict) -> tuple[dict, list[np.ndarray]]:
    from grader.jobs import single_threaded_blas
    from nkisim import collector, forked, split
    from nkisim import program as programs
    from nkisim.errors import KernelValueError
    from nkisim.execute import execute
    with open("program.bin", "rb") as fh:
        data = fh.read()
    shared = _attach(job)
    if shared is not None:
        inputs, room = shared             # the arrays keep their mappings alive
    else:
        inputs = [np.load(os.path.join("inputs", f"arg{i}.npy"), allow_pickle=False, mmap_mode="r")
                  for i in range(job["n_inputs"])]
        room = None
    # the program is read-only data for the rest of this short-lived process: frozen out of the
    # collector's sight as a finished trace is, collections during execution no longer rescan
    # it (~0.05 s for a 224x224 configuration's 18k instructions)
    try:
        with collector.paused():
            program = programs.decode(data, programs.ProgramLimits(max_records=job["max_instructions"]))
            programs.validate(program, _limits(job.get("platform", "trn2")), inputs)
            # the spec's dialect decides what never-written memory holds, not what the kernel's
            # process claims
            from nkisim.dialects import dialect_named
            program.dialect = dialect_named(job.get("dialect")).name
            if program.lnc != job.get("lnc", 1):       # the spec's launch, not what the child claims
                raise programs.ProgramError(f"the program runs on a logical NeuronCore of {program.lnc} physical "
                                            f"cores; the assignment grades on {job.get('lnc', 1)}")
            if program.mutable_inputs:              # an assignment's kernel writes only what it allocates
                raise programs.ProgramError("the program writes its inputs (nt.mutable_tensor parameters "
                                            f"{list(program.mutable_inputs)}); the assignment's kernel takes none")
    except programs.ProgramError as err:
        return {"status": "invalid", "error": str(err)[:4000]}, []
    declared = declared_outputs(program.outputs)
    expected = job.get("expected_output")
    if expected is not None and declared is not None and declared != [expected]:
        return {"status": "mismatch", "declared": declared}, []
    placed = _placed(program, room)
    parts = split.plan(program, processes(job)) if placed is not None else None
    timing = None
    # (a program with run-time loops is never split: it is timed on what it executed, after it)
    if job["mode"] == "benchmark" and parts is not None:
        # the latency needs the instructions, not their values: estimated by one more process
        # while the parts execute, not after them on one core (~0.15 s of a 224x224 run)
        timing = forked.start(lambda: _timing([r for r in program.records if r.kind != "print"], program, job))
    with np.errstate(all="ignore"), single_threaded_blas():
        try:
            if parts is not None:         # independent shares of the output, each in its own process
                done = split.execute_split(program, inputs, parts, next(iter(placed.values())))
            else:
                done = execute(program, inputs, placed=placed, max_executed=job["max_instructions"])
        except programs.ProgramError as err:
            if timing is not None:
                timing.kill()
            return {"status": "invalid", "error": str(err)[:4000]}, []
        except KernelValueError as err:   # the kernel's values broke its own promise (nc_matmul's 0/1 hints)
            if timing is not None:
                timing.kill()
            return {"status": "kernel_error", "error": str(err)[:4000]}, []
        except Exception as err:
            if timing is not None:
                timing.kill()
            if isinstance(err, MemoryError):
                raise
            # a valid program that the simulator failed to execute (nkisim.errors.SimulatorFailure,
            # or what a part's process raised): nkisim's fault, never the student's (runner.SimulatorFault)
            return {"status": "simulator_error", "error": f"{type(err).__name__}: {err}"[:4000]}, []
        except BaseException:
            if timing is not None:
                timing.kill()
            raise
    outputs = done.outputs if isinstance(done.outputs, (list, tuple)) else [done.outputs]
    if isinstance(done.outputs, dict):
        outputs = list(done.outputs.values())
    printed = "\n".join(done.printed)
    header = {"status": "ok", "printed": printed[-PRINT_LIMIT:],
              "opcodes": sorted({r.opcode for r in done.trace}),
              "matmul_flops": sum(2 * r.attrs["k"] * r.attrs["m"] * r.attrs["n"]
                                  for r in done.trace if r.kind == "matmul"),
              "instructions": len(done.trace), "processes": len(parts) if parts is not None else 1}
    if job["mode"] == "benchmark":
        # the same estimate either way, of the same instructions (the ones executed: every one
        # but the prints); worked out here when the forked process sent nothing
        estimated = timing.report()[0] if timing is not None else None
        header.update(estimated if isinstance(estimated, dict) else _timing(done.trace, program, job))
    if room is not None and _into_shared(room, outputs):
        header["shared_output"] = True
        return header, []
    return header, [np.asarray(o) for o in outputs]


def _timing(trace, program, job: dict) -> dict:
    """A timed run's header fields: the cost model's latency of `trace` (the executed
    instructions) and the profile the report shows."""
    from nkisim import cost
    platform = job.get("platform", "trn2")
    timeline = cost.time_trace(trace, program.allocs, dge=cost.uses_dge(program.compile_options),
                               params=cost.params_for(platform), limits=_limits(platform))
    fields = {"latency_us": timeline.total_us, "dma_count": timeline.dma_count}
    profile = _profile(trace, timeline, job)
    if profile is not None:
        fields["profile"] = profile
    return fields


def processes(job: dict) -> int:
    """How many processes may execute the program at once: job.json's "processes", the grade's
    share of the machine's cores (a grade's other work shares them too), at most MAX_PROCESSES
    (each holds its own tiles; past a few, the parts' shared work is most of each)."""
    asked = job.get("processes")
    if type(asked) is not int or asked < 1:
        return 1
    return min(asked, MAX_PROCESSES)


def _attach(job: dict) -> tuple | None:
    """The memory the grader shares with this process (grader.sharedmem: the inputs, and room
    for the expected output), when it gave some: (inputs, output room or None)."""
    listed = os.environ.pop("GRADER_SHARED_FD", None)
    layout = job.get("shared")
    if listed is None or not isinstance(layout, dict):
        return None
    fds = [int(fd) for fd in listed.split(",")]
    try:
        return sharedmem.attach(fds, layout)
    finally:
        for fd in fds:
            os.close(fd)


def _placed(program, room) -> dict | None:
    """{allocation id: its flat array in the output's room} when the program's output is a whole
    allocation of exactly the room's size: execution computes it there, nothing is copied."""
    from nkisim import dtypes
    from nkisim.trace import Region
    out = program.outputs
    if room is None or not isinstance(out, Region) or out.offsets is not None or out.start != 0:
        return None
    alloc = next(a for a in program.allocs if a.id == out.alloc_id)
    dtype = dtypes.to_dtype(alloc.dtype)
    if alloc.dtype != out.dtype or out.shape != alloc.shape or math.prod(alloc.shape) * dtype.itemsize != room.nbytes:
        return None
    return {alloc.id: room.view(dtype)}


def _into_shared(room: np.ndarray, outputs: list) -> bool:
    """Put the one output in the output's room (where execution left it, or copied there);
    False when it does not fill the room exactly (it goes down the result pipe then)."""
    if len(outputs) != 1 or not isinstance(outputs[0], np.ndarray) or outputs[0].nbytes != room.nbytes:
        return False
    result = outputs[0]
    target = room.view(result.dtype).reshape(result.shape)
    if not np.may_share_memory(result, target):
        np.copyto(target, result)
    return True


def declared_outputs(outputs) -> list | None:
    """[shape, dtype name] of each output as run() returns them (a dict's values, a tuple's or
    list's items, or the one region), from the program alone; None for a nesting run() would
    not return as arrays one by one."""
    from nkisim import dtypes
    from nkisim.trace import Region
    items = list(outputs.values()) if isinstance(outputs, dict) else (
        list(outputs) if isinstance(outputs, (list, tuple)) else [outputs])
    if not all(isinstance(r, Region) for r in items):
        return None
    return [[list(r.shape), dtypes.to_dtype(r.dtype).name] for r in items]


class _Stream:
    """Only `write`: NumPy then writes an array in bounded chunks (tofile cannot seek a pipe)."""

    def __init__(self, out) -> None:
        self.write = out.write


def _write(fd: int, header: dict, outputs: list[np.ndarray]) -> None:
    from grader.wire import header_frame
    header["arrays"] = len(outputs)
    with os.fdopen(fd, "wb") as out:
        out.write(header_frame(header))
        for arr in outputs:
            np.lib.format.write_array(_Stream(out), np.ascontiguousarray(arr), allow_pickle=False)


def refused(err: BaseException, job: dict) -> tuple[dict, list]:
    """What could not run is this run's verdict (a program needing more memory than allowed,
    a NEFF the runtime refuses)."""
    if isinstance(err, MemoryError):
        return {"status": "invalid", "error": "the program needs more memory than the grader allows"}, []
    return {"status": "invalid", "error": f"{type(err).__name__}: {err}"[:4000]}, []


def main() -> None:
    from grader.jobs import serve_job
    serve_job(run, _write, refused)


if __name__ == "__main__":
    main()
