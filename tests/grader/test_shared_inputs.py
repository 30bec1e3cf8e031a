"""A configuration's inputs are drawn straight into the memory the executor maps (grader.sharedmem,
grader.inputs.shared_config_inputs): the draw is their only write, and the grader computes its
reference answer from that same memory. So nobody may change it once drawn: the memory is sealed
against writing before any process but the grader holds it, and a process holding it (the
executor, or anything that took its descriptor) can neither write it, map it writable, punch it
out, resize it nor reopen it writable. The values are the ones a seed always gave, bit for bit."""
from __future__ import annotations

import inspect
import json
import mmap
import os
import sys
import tempfile

import ml_dtypes
import numpy as np
import pytest

from grader import problems, sharedmem
from grader.inputs import config_inputs, config_seed, shared_config_inputs
from grader.sandbox import Limits, minimal_env, run_child

CONFIGS = [
    dict(batch=2, c_in=128, c_out=128, height=10, width=10, k=3, bias=True, pool=1, dtype="float32"),
    dict(batch=1, c_in=128, c_out=256, height=34, width=34, k=3, bias=False, pool=2, dtype="float16"),
    dict(batch=1, c_in=128, c_out=128, height=12, width=12, k=3, bias=True, pool=1, dtype="bfloat16"),
]


def drawn_as_always(config: dict, seq: np.random.SeedSequence) -> list[np.ndarray]:
    """The seed-to-values mapping the digests and the answer pool rely on, spelled out: float32
    uniforms drawn whole, in order x, w, bias, then cast to the test's dtype."""
    rng = np.random.default_rng(seq)
    dtype = np.dtype(config["dtype"])
    c = config
    x = rng.random((c["batch"], c["c_in"], c["height"], c["width"]), dtype=np.float32).astype(dtype)
    w = rng.random((c["c_out"], c["c_in"], c["k"], c["k"]), dtype=np.float32).astype(dtype)
    bias = rng.random((c["c_out"],), dtype=np.float32).astype(dtype) if c["bias"] else np.zeros(c["c_out"], dtype)
    return [x, w, bias]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c["dtype"])
def test_inputs_drawn_into_shared_memory_are_the_values_a_seed_always_gave(config):
    seq = config_seed(12345, 3, 1)
    shared, kwargs = shared_config_inputs("conv2d", config, seq)
    try:
        plain, plain_kwargs = config_inputs("conv2d", config, seq)
        for got, private, old in zip(shared.arrays, plain, drawn_as_always(config, seq), strict=True):
            assert got.dtype == private.dtype == old.dtype and got.shape == private.shape == old.shape
            assert got.tobytes() == private.tobytes() == old.tobytes()
            assert not got.flags.writeable
        assert kwargs == plain_kwargs
    finally:
        shared.close()


def test_an_input_larger_than_one_drawing_chunk_keeps_its_values():
    """Narrow dtypes are drawn in float32 chunks and cast into place: the chunks' seams must not
    show (a float32 draw buffers half of each 64-bit word across calls)."""
    config = dict(batch=1, c_in=128, c_out=128, height=130, width=131, k=3, bias=True, pool=1, dtype="float16")
    seq = config_seed(7, 0, 0)
    shared, _ = shared_config_inputs("conv2d", config, seq)
    try:
        assert shared.arrays[0].size > problems.base.DRAW_CHUNK
        for got, old in zip(shared.arrays, drawn_as_always(config, seq), strict=True):
            assert got.tobytes() == old.tobytes()
    finally:
        shared.close()


def _populating_threads() -> list:
    import threading
    return [t for t in threading.enumerate() if t.name == "grader-populate"]


def test_an_input_whose_pages_are_populated_beside_the_draw_keeps_its_values_and_no_thread_outlives_it():
    config = dict(batch=1, c_in=128, c_out=128, height=210, width=210, k=3, bias=True, pool=1, dtype="float32")
    seq = config_seed(9, 1, 0)
    shared, _ = shared_config_inputs("conv2d", config, seq)
    try:
        assert shared.arrays[0].nbytes >= sharedmem.POPULATE_FROM      # populated on a thread of its own
        assert not _populating_threads()
        for got, old in zip(shared.arrays, drawn_as_always(config, seq), strict=True):
            assert got.tobytes() == old.tobytes()
    finally:
        shared.close()


def test_a_draw_that_fails_stops_its_populating_thread_and_leaves_no_descriptor():
    before = set(os.listdir("/proc/self/fd"))

    def make(empty):
        empty((sharedmem.POPULATE_FROM // 4 + 1,), np.float32)
        raise ValueError("the problem's maker failed")
    with pytest.raises(ValueError, match="maker failed"):
        sharedmem.draw(make)
    assert not _populating_threads()
    assert set(os.listdir("/proc/self/fd")) <= before


def attempts(fd: int) -> dict[str, str]:
    """Every way a holder of the descriptor could change the memory: 'refused' or 'done'."""
    size = os.fstat(fd).st_size
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)

    def raw_mmap_then_mprotect():
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap")
        if libc.mprotect(ctypes.c_void_p(addr), ctypes.c_size_t(size), mmap.PROT_READ | mmap.PROT_WRITE) != 0:
            raise OSError(ctypes.get_errno(), "mprotect")
        ctypes.memset(addr, 0xFF, 16)

    def punch():
        if libc.fallocate(fd, 3, ctypes.c_long(0), ctypes.c_long(size)) != 0:     # PUNCH_HOLE | KEEP_SIZE
            raise OSError(ctypes.get_errno(), "fallocate")

    def reopened(flags):
        def go():
            other = os.open(f"/proc/self/fd/{fd}", flags)
            try:
                os.pwrite(other, b"\xff" * 16, 0)
            finally:
                os.close(other)
        return go

    def reopened_mapping():
        other = os.open(f"/proc/self/fd/{fd}", os.O_RDWR)
        try:
            with mmap.mmap(other, size) as m:
                m[:16] = b"\xff" * 16
        finally:
            os.close(other)

    def shared_mapping():
        with mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE) as m:
            m[:16] = b"\xff" * 16

    tries = {"pwrite": lambda: os.pwrite(fd, b"\xff" * 16, 0),
             "writable shared mapping": shared_mapping,
             "read-only mapping made writable": raw_mmap_then_mprotect,
             "punch a hole": punch,
             "shrink": lambda: os.ftruncate(fd, 0),
             "grow": lambda: os.ftruncate(fd, size + (1 << 20)),
             "reopen writable": reopened(os.O_RDWR),
             "reopen truncating": reopened(os.O_WRONLY | os.O_TRUNC),
             "reopen and map writable": reopened_mapping}
    outcome = {}
    for name, attempt in tries.items():
        try:
            attempt()
            outcome[name] = "done"
        except (OSError, ValueError):
            outcome[name] = "refused"
    return outcome


def test_even_root_holding_the_descriptor_cannot_change_drawn_inputs():
    """The seal is on the memory itself: neither permissions nor the sandbox are what refuse."""
    config = CONFIGS[0]
    seq = config_seed(1, 0, 0)
    shared, _ = shared_config_inputs("conv2d", config, seq)
    try:
        outcome = attempts(shared.fd)
        assert set(outcome.values()) == {"refused"}, outcome
        for got, old in zip(shared.arrays, drawn_as_always(config, seq), strict=True):
            assert got.tobytes() == old.tobytes()
    finally:
        shared.close()


def test_a_sandboxed_process_given_the_inputs_cannot_change_what_the_grader_compares_against(tmp_path):
    """What the executor holds, in the hands of hostile code in its place: every attempt fails,
    and the grader's arrays (what its reference answer is computed from) keep their values."""
    config = CONFIGS[1]
    seq = config_seed(99, 2, 0)
    shared, _ = shared_config_inputs("conv2d", config, seq)
    job = tempfile.mkdtemp(prefix="hostile-", dir=tmp_path)
    os.chmod(job, 0o755)            # the child may run as another uid
    code = "\n".join(["from grader.sandbox import enter", "enter()", "import json, mmap, os",
                      inspect.getsource(attempts),
                      'print("OUTCOME", json.dumps(attempts(int(os.environ["GRADER_SHARED_FD"].split(",")[0]))))'])
    try:
        result = run_child([sys.executable, "-I", "-c", code], job, limits=Limits(wall_seconds=60.0),
                           env=minimal_env(), shared_fds=(shared.fd,))
        line = next((x for x in result.stdout.splitlines() if x.startswith("OUTCOME ")), None)
        assert line is not None, result.output
        outcome = json.loads(line.split(" ", 1)[1])
        assert len(outcome) == 9 and set(outcome.values()) == {"refused"}, outcome
        for got, old in zip(shared.arrays, drawn_as_always(config, seq), strict=True):
            assert got.tobytes() == old.tobytes()
    finally:
        shared.close()


def test_inputs_given_as_arrays_are_sealed_the_same_way():
    """A caller holding plain arrays (a bench, a test) gets them copied into sealed memory."""
    arrays = [np.arange(12, dtype=np.float32).reshape(3, 4), np.ones(5, ml_dtypes.bfloat16)]
    shared = sharedmem.share(arrays)
    try:
        assert [a.tobytes() for a in shared.arrays] == [a.tobytes() for a in arrays]
        assert [a.dtype for a in shared.arrays] == [a.dtype for a in arrays]
        assert set(attempts(shared.fd).values()) == {"refused"}
    finally:
        shared.close()


def test_the_graders_arrays_outlive_the_descriptor():
    shared, _ = shared_config_inputs("conv2d", CONFIGS[0], config_seed(3, 0, 0))
    arrays = shared.arrays
    shared.close()
    shared.close()                   # again, as a finally after an error path may
    assert [a.tobytes() for a in arrays] == [a.tobytes() for a in drawn_as_always(CONFIGS[0], config_seed(3, 0, 0))]
