"""The memory a simulated run's trusted executor shares with the grader: one memfd holding the
kernel's inputs and room for the expected output, so neither crosses a file or a pipe.

The grader makes it (`create`): the inputs written once, each at a page-aligned offset, then
the output's room; sealed so its size never changes (a mapping of it cannot fault). It is given
to the executor alone (grader.sandbox.run_child's shared_fd, fd 4 in the job): the process that
runs the kernel's Python never holds it. The layout travels in the executor's job.json, written
by the grader. The executor maps it (`attach`): inputs read in place, the output computed into
its room. The grader then maps the output's room privately (`read_output`, copy on write) and
gives back the inputs' pages (`release_inputs`)."""
from __future__ import annotations

import ctypes
import fcntl
import math
import mmap
import os

import numpy as np

PAGE = mmap.ALLOCATIONGRANULARITY
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE = 1, 2


def _aligned(n: int) -> int:
    return -(-n // PAGE) * PAGE


def create(args: list[np.ndarray], output: tuple | None) -> tuple[int, dict]:
    """A sealed memfd with `args` in it and room for `output` ((shape, dtype) or None), and its
    layout: {"inputs": [[offset, shape, dtype name], ...], "output": [offset, bytes] or None}."""
    inputs, offset = [], 0
    for a in args:
        inputs.append([offset, [int(n) for n in a.shape], a.dtype.name])
        offset = _aligned(offset + a.nbytes)
    room = None
    if output is not None:
        shape, dtype = output
        size = math.prod(int(n) for n in shape) * np.dtype(dtype).itemsize
        if size:
            room = [offset, size]
            offset += size
    fd = os.memfd_create("grader-run", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, max(offset, 1))
        for a, (start, _, _) in zip(args, inputs):
            data = memoryview(np.ascontiguousarray(a)).cast("B")
            while data:
                written = os.pwrite(fd, data, start)
                data, start = data[written:], start + written
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    except BaseException:
        os.close(fd)
        raise
    return fd, {"inputs": inputs, "output": room}


def attach(fd: int, layout: dict) -> tuple[mmap.mmap, list[np.ndarray], np.ndarray | None]:
    """The executor's side: the mapping, the inputs (read-only views) and the output's room as
    flat bytes (None without one)."""
    memory = mmap.mmap(fd, os.fstat(fd).st_size)
    inputs = []
    for offset, shape, dtype in layout["inputs"]:      # NumPy's names (bfloat16: ml_dtypes, loaded)
        arr = np.frombuffer(memory, dtype=np.dtype(dtype), count=math.prod(shape), offset=offset).reshape(shape)
        arr.flags.writeable = False
        inputs.append(arr)
    room = layout.get("output")
    out = np.frombuffer(memory, dtype=np.uint8, count=room[1], offset=room[0]) if room else None
    return memory, inputs, out


def read_output(fd: int, layout: dict, shape: tuple, dtype: np.dtype) -> np.ndarray:
    """The grader's side: the output's room as an array of the expected shape and dtype, mapped
    privately (writable, copy on write: as the arrays read back by pipe were)."""
    offset, size = layout["output"]
    count = math.prod(int(n) for n in shape)
    if size != count * np.dtype(dtype).itemsize or os.fstat(fd).st_size < offset + size:
        raise ValueError("the shared output memory is not the expected output's size")
    memory = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE, offset=offset)
    return np.frombuffer(memory, dtype=np.dtype(dtype), count=count).reshape(tuple(int(n) for n in shape))


def release_inputs(fd: int, layout: dict) -> None:
    """Give back the inputs' pages once the executor is done (the output's may stay mapped)."""
    room = layout.get("output")
    end = room[0] if room else os.fstat(fd).st_size
    if not end:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate(ctypes.c_int(fd), ctypes.c_int(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE),
                   ctypes.c_long(0), ctypes.c_long(end))      # best effort: memory, not correctness
