"""Which failures of the trusted Neuron runner are the worker's, not the kernel's.

The runner (`python -I -m grader.neuron`) runs no student code, but what it runs (the NEFF the
kernel compiled to) can fail for the kernel's reasons: a NEFF the runtime refuses, an
out-of-bounds access, a numerical error, a hang. Those stay the run's verdict. Everything else
is the machine's: a tool, module or library missing or broken, the runtime out of order, the
device or its cores taken. The runner reports those as "grader_error" (WorkerFault below), the
grade raises runner.RunnerFault, and a worker retries the run and gives it up as a grader error:
never a student's 0, never a program_invalid flag.
"""
from __future__ import annotations

# nrt_status.h (neuron-runtime/api/nrt.rst): the statuses no NEFF can cause. The others stay the
# kernel's: NRT_FAILURE (1, unspecific), NRT_INVALID (2, a NEFF or argument refused),
# NRT_RESOURCE (4, what the NEFF asks for does not fit), NRT_TIMEOUT (5, a kernel that hangs),
# NRT_EXEC_COMPLETED_WITH_NUM_ERR / _WITH_ERR (1003 / 1004) and NRT_EXEC_OOB (1006).
WORKER_STATUSES = {
    3: "NRT_INVALID_HANDLE",             # the runner's own handles
    6: "NRT_HW_ERROR",                   # the device
    7: "NRT_QUEUE_FULL",
    9: "NRT_LOAD_NOT_ENOUGH_NC",         # the job's NeuronCore is taken or absent
    10: "NRT_UNSUPPORTED_NEFF_VERSION",  # the compiler and the runtime do not belong together
    13: "NRT_UNINITIALIZED",
    14: "NRT_CLOSED",
    1002: "NRT_EXEC_BAD_INPUT",          # the inputs as the runner gave them
    1005: "NRT_EXEC_NC_BUSY",            # another process on the job's NeuronCore
}


class WorkerFault(RuntimeError):
    """The machine failed the run, not the kernel: reported as status "grader_error"."""


def from_runtime(call: str, status: int) -> WorkerFault | None:
    """A WorkerFault for a libnrt status no NEFF can cause, else None (the kernel's verdict)."""
    name = WORKER_STATUSES.get(status)
    if name is None:
        return None
    return WorkerFault(f"the Neuron runtime failed on this worker: {call} returned {name}({status}), a status "
                       f"no NEFF causes (the device, its cores or the runtime are out of order)")


def missing(what: str, path: str, err: OSError) -> WorkerFault:
    """A tool or interpreter the worker was set up with cannot be started now."""
    return WorkerFault(f"{what} cannot be started on this worker ({path}: {err.strerror or err}); the worker's "
                       f"Neuron set-up is broken (`grader doctor` says what is missing)")


def verdict(err: BaseException) -> dict | None:
    """The runner's result for an error that is the worker's (None: the kernel's verdict)."""
    if isinstance(err, WorkerFault):
        return {"status": "grader_error", "error": str(err)[:4000]}
    return None
