"""The memory a simulated run's trusted executor shares with the grader, so neither the inputs
nor the expected output cross a file or a pipe: two memfds.

- The inputs (`SharedInputs`): drawn straight into a memfd (`draw`: each array at a page-aligned
  offset; the draw is their only write), then sealed against any further write, shrinking or
  growing before any other process holds it. The grader's arrays are read-only views of it:
  the very memory its reference answer is computed from, which therefore no holder of the
  descriptor (the executor, or anything that took it) can change: writes, writable mappings,
  punched holes and a reopen through /proc all fail on the seal, whatever the permissions.
  `share` copies arrays a caller already holds into such memory.
- The output's room (`output_room`): a memfd of exactly the expected output's size, sealed
  against resizing (a mapping of it cannot fault); the executor computes the output into it and
  the grader maps it privately once the executor has exited (`read_output`).

Both are given to the executor alone (grader.sandbox.run_child's shared_fds: fds 4 and 5 in the
job, listed in GRADER_SHARED_FD): the process that runs the kernel's Python never holds them.
The layout travels in the executor's job.json, written by the grader; the executor maps both
(`attach`)."""
from __future__ import annotations

import fcntl
import math
import mmap
import os
import threading
from typing import Callable

import numpy as np

from .dtypes import dtype_of

PAGE = mmap.ALLOCATIONGRANULARITY
INPUT_SEALS = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
ROOM_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


# Faulting in a new memfd's pages one at a time as the draw first writes them took half of a
# 224x224 batch's draw (0.12 of 0.25 s for its 200 MB); a thread asking the kernel to populate
# them in large steps beside the draw takes much of that off the drawing thread (0.25 -> 0.19 s).
MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)    # Linux 5.14; older: EINVAL, skipped
POPULATE_STEP = 4 << 20
POPULATE_FROM = 16 << 20        # smaller arrays: a thread costs more than it saves


class _Populating(threading.Thread):
    """Populates a writable mapping's pages, step by step from its end (the draw writes from its
    start: the two meet, rather than one trailing the other over the same pages), until done or
    stopped."""

    def __init__(self, memory: mmap.mmap) -> None:
        super().__init__(name="grader-populate", daemon=True)
        self.memory = memory
        self.stopping = threading.Event()

    def run(self) -> None:
        size = len(self.memory)
        for offset in reversed(range(0, size, POPULATE_STEP)):
            if self.stopping.is_set():
                return
            try:
                self.memory.madvise(MADV_POPULATE_WRITE, offset, min(POPULATE_STEP, size - offset))
            except (OSError, ValueError):
                return                  # an older kernel, or the mapping is gone: the draw faults them in

    def finish(self) -> None:
        self.stopping.set()
        self.join()


def _aligned(n: int) -> int:
    return -(-n // PAGE) * PAGE


class SharedInputs:
    """A run's inputs in sealed memory: `fd` (the grader's until `close`), `layout`
    ([[offset, shape, dtype name], ...]) and `arrays`, read-only views that stay valid after
    `close` for as long as they are referenced."""

    def __init__(self, fd: int, layout: list) -> None:
        self.fd, self.layout = fd, layout
        size = os.fstat(fd).st_size
        memory = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        self.arrays = [_view(memory, offset, shape, dtype) for offset, shape, dtype in layout]

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _view(memory, offset: int, shape, dtype) -> np.ndarray:
    arr = np.frombuffer(memory, dtype=dtype_of(dtype), count=math.prod(shape), offset=offset).reshape(shape)
    arr.flags.writeable = False
    return arr


class _Drawing:
    """Writable room for arrays while they are drawn, each in a mapping of its own, so that every
    writable mapping can be let go (and its release checked) before the memory is sealed."""

    def __init__(self) -> None:
        self.fd = os.memfd_create("grader-inputs", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        self.size = 0
        self.made: list[tuple[mmap.mmap, int, tuple]] = []     # (mapping, offset, (address, shape, dtype))
        self.populating: list[_Populating] = []

    def empty(self, shape, dtype) -> np.ndarray:
        """Like np.empty (C order), in the memfd."""
        shape = tuple(int(n) for n in (shape if isinstance(shape, tuple) else (shape,)))
        dtype = dtype_of(dtype)
        nbytes = math.prod(shape) * dtype.itemsize
        if not nbytes:
            return np.empty(shape, dtype)       # no bytes to share: placed at any offset
        offset, self.size = self.size, _aligned(self.size + nbytes)
        os.ftruncate(self.fd, self.size)
        memory = mmap.mmap(self.fd, self.size - offset, flags=mmap.MAP_SHARED,
                           prot=mmap.PROT_READ | mmap.PROT_WRITE, offset=offset)
        arr = np.frombuffer(memory, dtype=dtype, count=math.prod(shape)).reshape(shape)
        self.made.append((memory, offset, _identity(arr)))
        if nbytes >= POPULATE_FROM:
            populating = _Populating(memory)
            try:
                populating.start()
            except RuntimeError:        # no thread to be had: the draw faults its pages in itself
                pass
            else:
                self.populating.append(populating)
        return arr

    def _stop_populating(self) -> None:
        for populating in self.populating:
            populating.finish()
        self.populating.clear()

    def place(self, arrays: list) -> list:
        """The layout of `arrays` in the memfd: each one made here is used in place when it is
        all of what was made, any other is copied in (a problem that built one another way, or
        a caller's own arrays)."""
        layout = []
        for a in arrays:
            a = np.asarray(a)
            here = next((offset for _, offset, made in self.made if a.flags.c_contiguous and _identity(a) == made), None)
            if here is None:
                target = self.empty(a.shape, a.dtype)
                np.copyto(target, a)
                here = self.made[-1][1] if target.nbytes else 0
            layout.append([here, [int(n) for n in a.shape], a.dtype.name])
        return layout

    def seal(self) -> int:
        """Let go of every writable mapping, seal, and hand over the descriptor."""
        self._stop_populating()
        for memory, _, _ in self.made:
            try:
                memory.close()
            except BufferError:
                raise RuntimeError("an input array drawn into shared memory is still held by its maker; "
                                   "it cannot be sealed") from None
        self.made.clear()
        if not self.size:
            os.ftruncate(self.fd, PAGE)         # a mapping needs a byte
        fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, INPUT_SEALS)
        fd, self.fd = self.fd, -1
        return fd

    def abandon(self) -> None:
        self._stop_populating()
        self.made.clear()
        if self.fd >= 0:
            os.close(self.fd)


def _identity(a: np.ndarray) -> tuple:
    return a.__array_interface__["data"][0], a.shape, a.dtype


def draw(make: Callable[[Callable], tuple[list, object]]) -> tuple[SharedInputs, object]:
    """`make(empty)` draws a run's arrays, making each with `empty(shape, dtype)` (np.empty's
    signature), and returns (arrays, anything else); here they come back in sealed shared
    memory, with that anything else. `make` must keep no reference to the arrays."""
    drawing = _Drawing()
    try:
        arrays, extra = make(drawing.empty)
        layout = drawing.place(arrays)
        del arrays
        fd = drawing.seal()
    except BaseException:
        drawing.abandon()
        raise
    try:
        return SharedInputs(fd, layout), extra
    except BaseException:
        os.close(fd)
        raise


def share(arrays: list[np.ndarray]) -> SharedInputs:
    """Arrays a caller already holds, copied into sealed shared memory."""
    shared, _ = draw(lambda empty: (list(arrays), None))
    return shared


def output_room(shape, dtype) -> tuple[int, int] | None:
    """(memfd, size) of room for an output of `shape` and `dtype`; None when it has no bytes."""
    size = math.prod(int(n) for n in shape) * dtype_of(dtype).itemsize
    if not size:
        return None
    fd = os.memfd_create("grader-output", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, size)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, ROOM_SEALS)
    except BaseException:
        os.close(fd)
        raise
    return fd, size


def attach(fds: list[int], layout: dict) -> tuple[list[np.ndarray], np.ndarray | None]:
    """The executor's side: the inputs (read-only views of fds[0]) and the output's room as flat
    bytes (fds[1]; None without one). The arrays keep their mappings alive."""
    inputs = []
    if layout["inputs"]:
        memory = mmap.mmap(fds[0], os.fstat(fds[0]).st_size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        inputs = [_view(memory, offset, shape, dtype)       # NumPy's names (bfloat16: ml_dtypes, loaded)
                  for offset, shape, dtype in layout["inputs"]]
    size = layout.get("output")
    if not size:
        return inputs, None
    room = mmap.mmap(fds[1], size)
    return inputs, np.frombuffer(room, dtype=np.uint8, count=size)


def read_output(fd: int, size: int, shape: tuple, dtype: np.dtype) -> np.ndarray:
    """The grader's side: the output's room as an array of the expected shape and dtype, mapped
    privately (writable, copy on write: as the arrays read back by pipe were)."""
    count = math.prod(int(n) for n in shape)
    if size != count * dtype_of(dtype).itemsize or os.fstat(fd).st_size != size:
        raise ValueError("the shared output memory is not the expected output's size")
    memory = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    return np.frombuffer(memory, dtype=dtype_of(dtype), count=count).reshape(tuple(int(n) for n in shape))
