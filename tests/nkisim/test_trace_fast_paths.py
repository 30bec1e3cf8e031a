"""Attack tests for tracing's fast paths: each kernel here would only be caught by a check that a
fast path could skip, and must still be refused with the slow path's error.

A fast path of tracing serves the common case with what an earlier, fully checked instruction of
the same run learnt (nkisim.machine.Machine.new_tile: a result tile's shape, dtype and buffer);
these kernels repeat that common case until the state it leaves, not the instruction itself,
breaks a hardware rule.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import nkisim
from marker_lines import marker_lines
import nkisim.memory
from nkisim import errors

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

THIS_FILE = os.path.abspath(__file__)
line_of = marker_lines(THIS_FILE)


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
def k_matmuls_dropped_at_once(x):
    out = nl.ndarray((128, 512), nl.float32, buffer=nl.hbm)
    a = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
    b = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=x[:, 0:128])
    nisa.dma_copy(dst=b, src=x)
    for _ in range(20):                                         # each result dies at the next
        p = nisa.nc_matmul(a, b)
    y = nisa.tensor_copy(p)
    nisa.dma_copy(dst=out, src=y)
    return out


def test_psum_results_dropped_at_once_give_their_bank_back():
    run = nkisim.run_kernel(k_matmuls_dropped_at_once, (f32(128, 512),), {})
    assert run.peak_psum_banks == 1                             # counted as each next one is made
    assert run.machine.memory.psum_banks == 0 and not run.machine.memory.live[nkisim.memory.Buffer.PSUM]


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


# ----- subscripts (DeviceTensor.__getitem__'s fast path against _subscript, which checks all) -------

def _fields(t):
    return (t._alloc, t._start, t._strides, None if t._offsets is None else t._offsets.tolist(),
            None if t._invalid is None else t._invalid.tolist(), t._oob, t.shape, t.dtype, t.par_axis, t.name)


def _outcome(view):
    try:
        return ("view", _fields(view()))
    except Exception as err:          # noqa: BLE001 - whatever the checked path raises, the fast one must
        return ("error", type(err), str(err))


def test_every_subscript_gives_the_view_or_the_error_of_the_checked_path():
    import random

    from nkisim.machine import Machine
    from nkisim.memory import Buffer
    rng = random.Random(24)
    bounds = [None, 0, 1, 2, 3, 5, 7, 8, 9, -1, -3, 2.0, np.int64(2), True]
    steps = [None, None, 1, 2, 3, 0, -1, 2.0, np.int64(2)]
    machine = Machine()
    with machine.activate():
        tensors = [machine.allocate((8, 6), np.float32, Buffer.SBUF, name="t"),
                   machine.allocate((4, 8, 5), np.float16, Buffer.SBUF, par_axis=1),     # block dim first
                   machine.allocate((3, 7, 5), np.float32, Buffer.HBM, name="h"),
                   machine.allocate((8, 0, 3), np.float32, Buffer.SBUF)]
        tensors.append(tensors[0][1:7, 0:6:2])                                       # a strided view
        tensors.append(tensors[1][2])
        seen = {"view": 0, "error": 0}
        for _ in range(6000):
            t = rng.choice(tensors)
            key = []
            for _ in range(rng.randint(0, t.ndim + 1)):
                kind = rng.random()
                if kind < 0.6:
                    key.append(slice(rng.choice(bounds), rng.choice(bounds), rng.choice(steps)))
                elif kind < 0.95:
                    key.append(rng.choice([0, 1, 2, 4, 7, 8, -1, -9, np.int64(1), True, 1.0]))
                else:
                    key.append(rng.choice([Ellipsis, None, "x"]))
            key = tuple(key) if len(key) != 1 or rng.random() < 0.5 else key[0]
            fast, checked = _outcome(lambda: t[key]), _outcome(lambda: t._subscript(key if isinstance(key, tuple)
                                                                                      else (key,)))
            assert fast == checked, (t, key)
            seen[fast[0]] += 1
        assert seen["view"] > 1000 and seen["error"] > 300        # both sides were exercised


@nki.jit
def k_overhanging_slice_read(x):
    out = nl.ndarray((128, 4), nl.float32, buffer=nl.hbm)
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    for j in range(3):
        y = nisa.tensor_copy(t[:, j * 3:j * 3 + 4])  # <overhang-read>
    nisa.dma_copy(dst=out, src=y)                         # the third window reached column 9 of 8
    return out


def test_a_window_that_overhangs_after_in_bounds_ones_is_still_refused():
    with pytest.raises(errors.OutOfBoundsError) as info:
        nkisim.run_kernel(k_overhanging_slice_read, (f32(128, 8),), {})
    assert "index range [6, 9] exceed dimension size of 8" in info.value.detail
    assert info.value.site.lineno == line_of("overhang-read")           # the copy that reads it


@nki.jit
def k_partition_stride(x):
    t = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    a = t[0:64, 0:8:2]                                    # a free-dim stride: fine
    return t[0:128:2, 0:8]  # <partition-stride>


def test_a_partition_stride_after_a_free_stride_is_still_refused():
    refused(errors.IndexingError, "err_partition_dim_stride_not_supported", "partition-stride",
            k_partition_stride, f32(128, 8))


# ----- nc_matmul: operand dtypes checked by identity first, sizes compared before check_limit -----

def _matmul_after_valid_ones(dtype, moving_free=512, stationary_free=128):
    @nki.jit
    def kernel(x):
        a = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
        b = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x[:, 0:128])
        nisa.dma_copy(dst=b, src=x)
        for _ in range(3):
            p = nisa.nc_matmul(a, b)                            # valid: fp32, 128 x 512
        s = nl.ndarray((128, stationary_free), dtype, buffer=nl.sbuf)
        mv = nl.ndarray((128, moving_free), dtype, buffer=nl.sbuf)
        nisa.memset(shape=(128, stationary_free), value=0, dtype=dtype)
        return nisa.nc_matmul(s, mv)  # <matmul-after-valid>
    return kernel


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint8", "bool_"])
def test_a_matmul_of_integer_tiles_after_float_ones_is_still_refused(dtype):
    refused(errors.DtypeError, "err_instruction_unsupported_dtypes", "matmul-after-valid",
            _matmul_after_valid_ones(getattr(nl, dtype)), f32(128, 512),
            fragments=("operand 'stationary' of 'nc_matmul' has dtype",))


@pytest.mark.parametrize("moving_free, stationary_free, fragment", [
    (513, 128, "free size of moving 513"), (512, 129, "free size of stationary 129")])
def test_a_matmul_over_the_pe_array_after_valid_ones_is_still_refused(moving_free, stationary_free, fragment):
    refused(errors.HardwareLimitError, "err_size_of_dimension_exceed_arch_limit", "matmul-after-valid",
            _matmul_after_valid_ones(nl.float32, moving_free, stationary_free), f32(128, 512),
            fragments=(fragment,))


@nki.jit
def k_tf32_matmul(x):
    out = nl.ndarray((128, 512), nl.float32, buffer=nl.hbm)
    a = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
    b = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=x[:, 0:128])
    nisa.dma_copy(dst=b, src=x)
    p = nisa.nc_matmul(nisa.tensor_copy(a, dtype=nl.tfloat32), nisa.tensor_copy(b, dtype=nl.tfloat32))
    nisa.dma_copy(dst=out, src=nisa.tensor_copy(p))
    return out


def test_a_tf32_matmul_is_accepted_by_the_checked_dtype_path():
    run = nkisim.run_kernel(k_tf32_matmul, (f32(128, 512),), {})
    (matmul,) = [r for r in run.program.records if r.opcode == "nc_matmul"]
    assert (matmul.attrs["dtype"], matmul.attrs["moving_dtype"]) == ("tfloat32", "tfloat32")
    assert (matmul.attrs["k"], matmul.attrs["m"], matmul.attrs["n"]) == (128, 128, 512)


# ----- the kernel line of a record, found by the instruction wrapper (Machine.emit) ----------------

class _EngineThatTraces:
    """An engine argument whose int() runs kernel code inside the instruction: a record emitted
    there belongs to this line, not to the line of the instruction being traced."""

    def __init__(self, tile):
        self.tile = tile

    def __int__(self):
        self.tile[0:1, 0:1] = 2.0  # <inside-int>
        nisa.tensor_copy(self.tile)  # <inside-int-copy>
        return 0


@nki.jit
def k_engine_that_traces(x):
    out = nl.ndarray((128, 4), nl.float32, buffer=nl.hbm)
    t = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    y = nisa.tensor_scalar(t, nl.add, 1.0, engine=_EngineThatTraces(t))  # <outer-call>
    nisa.dma_copy(dst=out, src=y)
    return out


def test_records_made_by_kernel_code_inside_an_instruction_keep_their_own_lines():
    run = nkisim.run_kernel(k_engine_that_traces, (f32(128, 4),), {})
    lines = [(r.opcode, r.site.lineno) for r in run.program.records]
    assert lines[1:4] == [("memset", line_of("inside-int")), ("tensor_copy", line_of("inside-int-copy")),
                          ("tensor_scalar", line_of("outer-call"))]


# ----- tensor_tensor's inline operand, op and promotion checks -------------------------------------

def _tensor_tensor_after_valid_ones(make_operands, op=None, mask=None):
    @nki.jit
    def kernel(x):
        t = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        for _ in range(3):
            y = nisa.tensor_tensor(t, t, op=nl.add)            # valid: the fast checks pass
        a, b = make_operands(x, t)
        r = nisa.tensor_tensor(a, b, op=op or nl.add, mask=mask)  # <tt-after-valid>
        out = nl.ndarray((128, 4), nl.float32, buffer=nl.hbm)
        nisa.dma_copy(dst=out, src=r)
        return out
    return kernel


def _blocks(x, t):
    b = nl.ndarray((2, nl.par_dim(128), 4), nl.float32, buffer=nl.sbuf)     # partition dimension second
    return t, b


def _overhang(x, t):
    return t, t[:, 2:6]


@pytest.mark.parametrize("make_operands, exc_type, code, fragment", [
    (lambda x, t: (t, x), errors.MemorySpaceError, "err_unsupported_memory", "operand 'data2'"),
    (lambda x, t: (x, t), errors.MemorySpaceError, "err_unsupported_memory", "operand 'data1'"),
    (lambda x, t: (t, 3.0), errors.ShapeError, "err_operand_must_be_tensor", "operand 'data2'"),
    (_blocks, errors.ShapeError, "err_failed_to_infer_tile_from_local_tensor", "operand 'data2'"),
    (_overhang, errors.OutOfBoundsError, "err_tensor_access_out_of_bound", "index range [2, 5]"),
])
def test_operands_the_fast_check_does_not_pass_are_still_refused(make_operands, exc_type, code, fragment):
    import warnings

    from nkisim.instructions.language_ops import BlockDimensionWarning
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BlockDimensionWarning)    # the deprecated layout, on purpose
        refused(exc_type, code, "tt-after-valid", _tensor_tensor_after_valid_ones(make_operands), f32(128, 4),
                fragments=(fragment,))


def test_an_overhanging_operand_that_a_mask_keeps_inside_is_accepted():
    i_p, i_f = nl.mgrid[0:128, 0:4]
    run = nkisim.run_kernel(_tensor_tensor_after_valid_ones(_overhang, mask=(i_f < 2)), (f32(128, 4),), {})
    assert [r.opcode for r in run.program.records][-2:] == ["tensor_tensor", "dma_copy"]


def test_an_op_that_is_not_binary_is_still_refused():
    refused(errors.UnsupportedOperationError, "err_instruction_unsupported_op", "tt-after-valid",
            _tensor_tensor_after_valid_ones(lambda x, t: (t, t), op=nl.exp), f32(128, 4),
            fragments=("'tensor_tensor'",))


@pytest.mark.parametrize("dtype, expected", [("bool_", "uint8"), ("tfloat32", "float32"), ("bfloat16", "bfloat16"),
                                             ("int32", "int32"), ("float8_e4m3", "float8_e4m3fn")])
def test_two_tiles_of_one_dtype_promote_as_promote_says(dtype, expected):
    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 4), nl.float32, buffer=nl.hbm)
        t = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        c = nisa.tensor_copy(t, dtype=getattr(nl, dtype))
        y = nisa.tensor_tensor(c, c, op=nl.maximum)
        nisa.dma_copy(dst=out, src=nisa.tensor_copy(y, dtype=nl.float32))
        return out
    run = nkisim.run_kernel(kernel, (f32(128, 4),), {})
    (record,) = [r for r in run.program.records if r.opcode == "tensor_tensor"]
    assert record.writes[0].dtype == expected
