"""The trusted side of a simulated test run: `python -I -m grader.executor` in a job directory.

What the device does on hardware: it takes the program a sandboxed child traced (program.bin,
untrusted bytes), checks it against the hardware rules (nkisim.program.validate), executes it
on the real inputs (inputs/arg*.npy) with NumPy, and for timed runs estimates its latency with
the cost model from the instructions it actually executed. No student code runs here. It is
still confined and resource-limited like a child (sandbox.enter), since a program may ask for
any amount of work within its caps.

Writes to the result pipe (GRADER_RESULT_FD) a JSON header (a length-prefixed frame, see
grader.wire), then each output array in .npy format. Header fields: status ("ok" | "invalid" |
"mismatch"), error, printed (nl.device_print text), opcodes, matmul_flops, instructions,
dma_count, latency_us, profile; for "mismatch", declared. When the grader hands it memory for the
expected output (GRADER_SHARED_FD: a memfd of exactly its size, sealed against resizing), the
output is computed into that memory, the header says shared_output: true and no array follows.

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

PRINT_LIMIT = 64 * 1024          # device_print text kept for the report


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
    from threadpoolctl import threadpool_limits

    from nkisim import cost
    from nkisim import program as programs
    from nkisim.execute import execute
    with open("program.bin", "rb") as fh:
        data = fh.read()
    inputs = [np.load(os.path.join("inputs", f"arg{i}.npy"), allow_pickle=False, mmap_mode="r")
              for i in range(job["n_inputs"])]
    try:
        program = programs.decode(data, programs.ProgramLimits(max_records=job["max_instructions"]))
        programs.validate(program, _limits(job.get("platform", "trn2")), inputs)
    except programs.ProgramError as err:
        return {"status": "invalid", "error": str(err)[:4000]}, []
    declared = declared_outputs(program.outputs)
    expected = job.get("expected_output")
    if expected is not None and declared is not None and declared != [expected]:
        return {"status": "mismatch", "declared": declared}, []
    shared = _shared_output(program, expected)
    with np.errstate(all="ignore"), threadpool_limits(limits=1, user_api="blas"):
        try:
            done = execute(program, inputs, placed=shared[1] if shared is not None else None)
        except programs.ProgramError as err:
            return {"status": "invalid", "error": str(err)[:4000]}, []
    outputs = done.outputs if isinstance(done.outputs, (list, tuple)) else [done.outputs]
    if isinstance(done.outputs, dict):
        outputs = list(done.outputs.values())
    printed = "\n".join(done.printed)
    header = {"status": "ok", "printed": printed[-PRINT_LIMIT:],
              "opcodes": sorted({r.opcode for r in done.trace}),
              "matmul_flops": sum(2 * r.attrs["k"] * r.attrs["m"] * r.attrs["n"]
                                  for r in done.trace if r.kind == "matmul"),
              "instructions": len(done.trace)}
    if job["mode"] == "benchmark":
        dge = cost.uses_dge(program.compile_options)
        timeline = cost.time_trace(done.trace, program.allocs, dge=dge, limits=_limits(job.get("platform", "trn2")))
        header.update(latency_us=timeline.total_us, dma_count=timeline.dma_count)
        profile = _profile(done.trace, timeline, job)
        if profile is not None:
            header["profile"] = profile
    if shared is not None and _into_shared(shared[0], outputs):
        header["shared_output"] = True
        return header, []
    return header, [np.asarray(o) for o in outputs]


def _shared_output(program, expected) -> tuple | None:
    """The memory the grader gave for the expected output (GRADER_SHARED_FD, sized and sealed by
    the grader), mapped, and {allocation id: its flat array} when the program's output is a whole
    allocation, so execution computes the output there and nothing is copied or piped."""
    import mmap

    from nkisim import dtypes
    from nkisim.trace import Region
    fd = os.environ.pop("GRADER_SHARED_FD", None)
    if fd is None or expected is None:
        return None
    fd = int(fd)
    size = os.fstat(fd).st_size
    memory = mmap.mmap(fd, size) if size else None
    os.close(fd)
    if memory is None:
        return None
    placed = {}
    out = program.outputs
    if isinstance(out, Region) and out.offsets is None and out.start == 0:
        alloc = next(a for a in program.allocs if a.id == out.alloc_id)
        dtype = dtypes.to_dtype(alloc.dtype)
        count = math.prod(alloc.shape)
        if alloc.dtype == out.dtype and out.shape == alloc.shape and count * dtype.itemsize == size:
            placed[alloc.id] = np.frombuffer(memory, dtype=dtype, count=count)
    return memory, placed


def _into_shared(memory, outputs: list) -> bool:
    """Put the one output in the shared memory (where execution left it, or copied there);
    False when it does not fill that memory exactly (it goes down the result pipe then)."""
    if len(outputs) != 1 or not isinstance(outputs[0], np.ndarray) or outputs[0].nbytes != len(memory):
        return False
    result = outputs[0]
    target = np.frombuffer(memory, dtype=result.dtype, count=result.size).reshape(result.shape)
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
