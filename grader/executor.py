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
dma_count, latency_us, profile; for "mismatch", declared.

What tracing already knows is used before any execution: when job.json gives the output the
test expects ([shape, dtype]) and the valid program declares outputs that cannot be it (their
count, shape or dtype), nothing is executed and the header says "mismatch" with the declared
[shape, dtype] of each output (a 224x224 configuration executes for tens of seconds; this
verdict takes the time to decode).
"""
from __future__ import annotations

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
    with np.errstate(all="ignore"), threadpool_limits(limits=1, user_api="blas"):
        try:
            done = execute(program, inputs)
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
    return header, [np.asarray(o) for o in outputs]


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
