"""What the grader must know about one problem (a kernel the course asks for), as one record.
Every problem is a folder (grader/problems/folder.py builds its record): the bundled ones in
grader/problems/<name>/, a course's anywhere an operator installed it."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable

import numpy as np
from nkisim.platforms import DEFAULT_PLATFORM


@dataclass(frozen=True)
class Problem:
    name: str                                   # the spec's `problem = "..."`
    kernel: str                                 # the function the student's file defines
    config_keys: tuple[str, ...]                # keys every config of this problem must give
    # (config, rng, empty): the arrays made with `empty` (np.empty's signature), drawn from rng
    make_inputs: Callable[[dict, np.random.Generator, Callable], tuple[list[np.ndarray], dict]]
    reference: Callable[..., np.ndarray]   # (args, kwargs, threads=1): in the grader, never student code
    work: Callable[[dict], tuple[float, float]]  # (Tensor Engine FLOPs, HBM bytes) any correct kernel needs
    label: Callable[[dict], str]                 # a config as the student reads it in a message
    # (shape, dtype) of the reference answer, known without computing it: a traced program
    # declaring another output fails before it is executed
    output: Callable[[dict], tuple[tuple[int, ...], np.dtype]]
    # the only compute instructions a kernel may use (None: any), by name: an instruction has the
    # same name (and traces the same opcode) in either NKI dialect; data movement is always allowed
    allowed_instructions: frozenset[str] | None = None
    # for grader.downgrade: choose a few output slices, slice an output, and the reference on just
    # those slices (None: the problem has no arithmetic a lower precision could speed up)
    sample: Callable | None = None
    slice_output: Callable | None = None
    sampled_reference: Callable | None = None
    # what the kernel is called with, known without drawing a value: ([(shape, dtype) of each
    # array argument], the scalar keyword arguments), as make_inputs gives them; tracing needs no
    # more, so it can start before the inputs are drawn (None: it waits for them)
    signature: Callable[[dict], tuple[list[tuple[tuple[int, ...], np.dtype]], dict]] | None = None
    # where it came from: its folder's sha256 (problem.toml and the top-level .py files: what
    # grades), the folder itself, whether it ships with the grader, and what problem.toml says
    sha256: str = ""
    folder: str = ""
    bundled: bool = False
    title: str = ""
    arguments: tuple[str, ...] = ()              # the kernel's leading parameters
    dialects: tuple[str, ...] = ()               # NKI dialects a kernel may be written in (empty: any)
    display: str = ""                            # the name course staff wrote (name is the registry's key)

    def roofline_us(self, config: dict, platform: str = DEFAULT_PLATFORM) -> float:
        """Lower bound on the latency on `platform`'s generation: fixed overhead + max(compute at
        its peak, traffic at its DMA bandwidth)."""
        from nkisim.cost import params_for
        p = params_for(platform)
        flops, moved = self.work(config)
        peak = p.pe_peak_flops_per_ns / (p.pe_fp32_factor if config.get("dtype", "float32") == "float32" else 1)
        return (p.bench_overhead_ns + max(flops / peak, moved / p.dma_bytes_per_ns)) / 1e3


DRAW_CHUNK = 1 << 20        # float32 values drawn at a time for a narrower dtype (4 MB)


def uniform(rng: np.random.Generator, dtype: np.dtype, *shape: int, empty=np.empty) -> np.ndarray:
    """Uniform [0, 1) values in `dtype`, as the course's np.random.rand inputs: float32 draws
    (then cast), in an array made by `empty` (np.empty's signature: shared memory, say), which
    the draw is the only write to. A narrower dtype is drawn in float32 chunks, which give the
    same values as one whole draw (a float32 draw keeps the unused half of each 64-bit word for
    the next call), so no float32 copy of a whole input is ever made."""
    out = empty(shape, dtype)
    if out.dtype == np.float32:
        rng.random(out=out, dtype=np.float32)
        return out
    flat = out.reshape(-1)
    chunk = np.empty(min(DRAW_CHUNK, flat.size), np.float32)
    for start in range(0, flat.size, DRAW_CHUNK):
        part = chunk[:min(DRAW_CHUNK, flat.size - start)]
        rng.random(out=part, dtype=np.float32)
        flat[start:start + part.size] = part
    return out


def zeros(dtype: np.dtype, *shape: int, empty=np.empty) -> np.ndarray:
    out = empty(shape, dtype)
    out.fill(0)
    return out


def on_threads(threads: int) -> Callable[[Callable[[], None]], None]:
    """A `spread` for the references: runs a function on `threads` threads at once (this one and
    threads - 1 daemon threads, so a grader that stops waiting for an answer can still exit) and
    returns when all have returned, raising the first error any of them raised."""
    def spread(work: Callable[[], None]) -> None:
        failed: list[BaseException] = []

        def helper() -> None:
            try:
                work()
            except BaseException as err:        # raised again below, on the caller's thread
                failed.append(err)
        helpers = [threading.Thread(target=helper, daemon=True, name="reference-blocks") for _ in range(threads - 1)]
        for thread in helpers:
            thread.start()
        try:
            work()
        finally:
            for thread in helpers:
                thread.join()
        if failed:
            raise failed[0]
    return spread
