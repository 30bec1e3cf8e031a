"""Attack tests for tracing's fast paths: each kernel here would only be caught by a check that a
fast path could skip, and must still be refused with the slow path's error.

A fast path of tracing serves the common case with what an earlier, fully checked instruction of
the same run learnt (nkisim.machine.Machine.new_tile: a result tile's shape, dtype and buffer);
these kernels repeat that common case until the state it leaves, not the instruction itself,
breaks a hardware rule.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import nkisim
from nkisim import errors

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

THIS_FILE = os.path.abspath(__file__)
_LINES = Path(THIS_FILE).read_text().splitlines()


def line_of(tag: str) -> int:
    hits = [n for n, text in enumerate(_LINES, 1) if text.rstrip().endswith(f"# <{tag}>")]
    assert len(hits) == 1, f"marker <{tag}> found {len(hits)} times"
    return hits[0]


def f32(*shape):
    return np.ones(shape, np.float32)


def refused(exc_type, code, tag, kernel, *args, fragments=()):
    with pytest.raises(exc_type) as info:
        nkisim.run_kernel(kernel, args, {})
    err = info.value
    assert err.code == code, str(err)
    for fragment in fragments:
        assert fragment in err.detail, f"{fragment!r} not in {err.detail!r}"
    assert err.remedy
    assert err.site is not None and os.path.abspath(err.site.filename) == THIS_FILE, str(err.site)
    assert err.site.lineno == line_of(tag), f"site {err.site} is not the line of <{tag}>"
    return err


# ----- result tiles of a shape seen before (Machine.new_tile) ------------------------------------

@nki.jit
def k_kept_copies_overflow_sbuf(x):
    t = nl.ndarray((128, 8192), nl.float32, buffer=nl.sbuf)     # 32 KiB per partition
    nisa.dma_copy(dst=t, src=x)
    out = nl.ndarray((128, 8192), nl.float32, buffer=nl.hbm)
    kept = []
    for _ in range(8):                                          # the 7th copy needs 256 KiB live
        kept.append(nisa.tensor_copy(t))  # <kept-copy>
    kept.clear()                                                # nothing over capacity at the end
    nisa.dma_copy(dst=out, src=t)
    return out


def test_results_of_one_shape_kept_alive_still_overflow_sbuf():
    # every copy after the first has a shape, dtype and buffer seen before in this run
    err = refused(errors.AllocationError, "err_stack_overflow_sbuf", "kept-copy", k_kept_copies_overflow_sbuf,
                  f32(128, 8192), fragments=("exceeds the available 229368 bytes per partition",))
    assert err.detail.count("float32[128, 8192] in sbuf") >= 7


@nki.jit
def k_kept_matmuls_overflow_psum(x):
    a = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
    b = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=x[:, 0:128])
    nisa.dma_copy(dst=b, src=x)
    kept = []
    for _ in range(10):                                         # one 2 KiB bank each; 8 banks
        kept.append(nisa.nc_matmul(a, b))  # <kept-matmul>
    return kept


def test_results_of_one_shape_kept_alive_still_overflow_psum():
    err = refused(errors.AllocationError, "err_stack_overflow_psum", "kept-matmul", k_kept_matmuls_overflow_psum,
                  f32(128, 512), fragments=("required PSUM banks 9 exceeds the available 8 banks",))
    assert err.detail.count("float32[128, 512] in psum") == 8


@nki.jit
def k_results_dropped_at_once(x):
    out = nl.ndarray((128, 8192), nl.float32, buffer=nl.hbm)
    t = nl.ndarray((128, 8192), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    for _ in range(64):                                         # each result dies at the next
        y = nisa.tensor_copy(t)
    nisa.dma_copy(dst=out, src=y)
    return out


def test_results_dropped_at_once_are_released_on_the_fast_path():
    run = nkisim.run_kernel(k_results_dropped_at_once, (f32(128, 8192),), {})
    assert run.peak_sbuf_bytes == 2 * 32768                    # t and one y at a time


@nki.jit
def k_float32_then_tfloat32(x):
    out = nl.ndarray((128, 4), nl.float32, buffer=nl.hbm)
    t = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    a = nisa.tensor_copy(t, dtype=nl.float32)
    b = nisa.tensor_copy(a, dtype=nl.tfloat32)     # equal to float32 as a NumPy dtype, not in NKI
    c = nisa.tensor_copy(b, dtype=nl.float32)
    nisa.dma_copy(dst=out, src=c)
    return out


def test_a_tfloat32_result_after_a_float32_one_of_the_same_shape_keeps_its_name():
    run = nkisim.run_kernel(k_float32_then_tfloat32, (f32(128, 4),), {})
    copies = [r for r in run.program.records if r.opcode == "tensor_copy"]
    assert [r.writes[0].dtype for r in copies] == ["float32", "tfloat32", "float32"]
    names = {a.id: a.dtype for a in run.program.allocs}
    assert [names[r.writes[0].alloc_id] for r in copies] == ["float32", "tfloat32", "float32"]


# ----- the instruction table, checked by one set lookup per record (Machine.emit) -----------------

def test_a_record_outside_the_instruction_table_is_refused():
    from nkisim.machine import Machine
    from nkisim.memory import Buffer
    from nkisim.trace import Engine
    machine = Machine()
    with machine.activate():
        t = machine.allocate((128, 4), np.float32, Buffer.SBUF)
        for opcode, engine, kind in (("tensor_copy", Engine.TENSOR, "copy"),      # an engine it cannot run on
                                     ("tensor_copy", Engine.VECTOR, "matmul"),    # a kind it never computes
                                     ("no_such_op", Engine.VECTOR, "copy"),
                                     ("tensor_copy", 4, "copy")):                 # engine 4 is no engine
            with pytest.raises((RuntimeError, AttributeError)) as info:
                machine.emit(opcode, engine, kind, [t], [t])
            if info.type is RuntimeError:
                assert "nkisim bug" in str(info.value) and "instruction table" in str(info.value)
        assert machine.trace == []
        machine.emit("tensor_copy", Engine.VECTOR, "copy", [t], [t])        # what the table allows
        machine.emit("tensor_copy", 5, "copy", [t], [t])                    # the Vector engine's number
        assert [r.opcode for r in machine.trace] == ["tensor_copy", "tensor_copy"]
