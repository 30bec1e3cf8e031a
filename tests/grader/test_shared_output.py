"""The inputs and the expected output cross between the grader and the executor in memory the
grader gives only the executor (grader.sharedmem: a sealed memfd), not through files and the
result pipe: the kernel's own process never holds that memory, a result claiming an output there
without the grader having given room for it is malformed, and the values are the piped ones bit
for bit."""
from __future__ import annotations

import io
import os

import numpy as np
import pytest

from grader import problems, wire
from grader.runner import RunnerJob, _parse_execution, run_configuration
from grader.sandbox import ChildResult, Limits

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with open(os.path.join(ROOT, "reference_kernels", "conv2d_optimized.py")) as _fh:
    OPTIMIZED = _fh.read()

CONFIG = dict(batch=2, c_in=128, c_out=128, height=10, width=10, k=3, bias=True, pool=1, dtype="float32")

# at import, in the kernel's process: every descriptor it holds and what each one is
LIST_DESCRIPTORS = """
import os as _os
_held = []
for _name in sorted(_os.listdir("/proc/self/fd"), key=int):
    try:
        _held.append(f"{_name}={_os.readlink('/proc/self/fd/' + _name)}")
    except OSError:
        pass
print("held", " ".join(_held))
"""


def job(source: str, expected, tmp_path) -> RunnerJob:
    args, kwargs = problems.make_inputs("conv2d", CONFIG, np.random.default_rng(7))
    return RunnerJob(backend="sim", filename="conv2d.py", source=source, function="fused_conv2d_maxpool",
                     args=args, kwargs=kwargs, job_root=str(tmp_path), expected_output=expected)


def backing(arr: np.ndarray):
    """The object an array's memory finally belongs to (the pipe's bytes, or a mapping)."""
    while isinstance(arr, np.ndarray) and arr.base is not None:
        arr = arr.base
    return arr.obj if isinstance(arr, memoryview) else arr


def test_the_kernels_process_never_holds_the_output_memory(tmp_path):
    expected = problems.output("conv2d", CONFIG)
    run = run_configuration(job(LIST_DESCRIPTORS + OPTIMIZED, expected, tmp_path), Limits())
    assert run.status == "ok", run.message
    held = next(line for line in run.child_output.splitlines() if line.startswith("held "))
    numbers = [int(item.split("=", 1)[0]) for item in held.split()[1:]]
    assert max(numbers) <= 3 and "memfd" not in held, held     # stdin/out/err, the result pipe, the listing


def test_the_output_computed_into_shared_memory_is_the_piped_one_bit_for_bit(tmp_path):
    expected = problems.output("conv2d", CONFIG)
    shared = run_configuration(job(OPTIMIZED, expected, tmp_path), Limits())
    piped = run_configuration(job(OPTIMIZED, None, tmp_path), Limits())
    assert shared.status == piped.status == "ok"
    assert type(backing(shared.outputs[0])).__name__ == "mmap"          # it did not cross the pipe
    assert isinstance(backing(piped.outputs[0]), (bytes, bytearray))
    out, ref = shared.outputs[0], piped.outputs[0]
    assert out.shape == ref.shape == expected[0] and out.dtype == ref.dtype == expected[1]
    assert out.tobytes() == ref.tobytes()
    assert np.allclose(out, problems.reference("conv2d", *problems.make_inputs("conv2d", CONFIG,
                                                                                 np.random.default_rng(7))))
    out[0, 0, 0, 0] += 1             # writable like a piped output, and private: a copy on write
    assert out[0, 0, 0, 0] == ref[0, 0, 0, 0] + 1


@pytest.mark.parametrize("header, why", [
    ({"status": "ok", "arrays": 0, "shared_output": True}, "no memory was given"),
    ({"status": "ok", "arrays": 0, "shared_output": "yes"}, "not the flag"),
    ({"status": "ok", "arrays": 0, "shared_output": 1}, "not the flag"),
])
def test_an_output_in_shared_memory_the_grader_did_not_give_is_malformed(header, why):
    done = ChildResult(0, False, "", "", wire.header_frame(header), False, 0.1)
    with pytest.raises(wire.BadResult):
        _parse_execution(done, Limits())


def test_a_shared_output_beside_piped_arrays_is_malformed():
    data = bytearray(wire.header_frame({"status": "ok", "arrays": 1, "shared_output": True}))
    buffer = io.BytesIO()
    np.save(buffer, np.zeros(3, np.float32))
    data += buffer.getvalue()
    done = ChildResult(0, False, "", "", data, False, 0.1)
    given = []
    with pytest.raises(wire.BadResult):
        _parse_execution(done, Limits(), lambda: given.append(1) or np.zeros(3, np.float32))
    assert given == []               # refused before the memory is even read
