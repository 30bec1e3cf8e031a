"""Red team on the trace-then-execute boundary (issue 17): the kernel's Python holds the
instruction records it produced and may rewrite them after the fact; the grader re-derives
what every instruction does and costs from its opcode and refuses what the opcode cannot be."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import nkisim
from nkisim import cost
from nkisim import program as programs
from nkisim.execute import execute
from nkisim.runtime import ArgSpec, trace_kernel
from nkisim.settings import HardwareLimits

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

LIMITS = HardwareLimits()


@nki.jit
def matmul_relabelled_as_transpose(a_t, b):
    """An honest matmul whose record is rewritten into a 1x1 nc_transpose once traced."""
    k, m = a_t.shape
    _, n = b.shape
    out = nl.ndarray((m, n), dtype=b.dtype, buffer=nl.hbm)
    a_sb = nl.ndarray((k, m), dtype=a_t.dtype, buffer=nl.sbuf)
    b_sb = nl.ndarray((k, n), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_sb, src=a_t)
    nisa.dma_copy(dst=b_sb, src=b)
    product = nisa.nc_matmul(a_sb, b_sb)
    record = product._alloc.producer
    record.opcode = "nc_transpose"
    record.attrs.update(p=1, f=1, dtype="bfloat16")
    res = nisa.tensor_copy(product, dtype=b.dtype)
    nisa.dma_copy(dst=out, src=res)
    return out


@nki.jit
def copy_retargeted_as_permute(x):
    """A plain load whose dma_copy record is given permute semantics: a transpose for free."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.hbm)
    tile = nl.load(x)
    record = tile._alloc.producer
    record.kind = "permute"
    record.params = {"perm": [1, 0]}
    nl.store(out, tile)
    return out


def wire(kernel, args):
    program, _ = trace_kernel(kernel, [ArgSpec(a.shape, a.dtype) for a in args], {})
    return programs.encode(program)


def graded_program(data: bytes, args):
    """What grader.executor does with a child's program: decode, validate, execute, time."""
    program = programs.decode(data)
    programs.validate(program, LIMITS, args)
    done = execute(program, args)
    return done, cost.schedule(done.trace, cost.DEFAULT_PARAMS).total_us


def test_a_matmul_relabelled_as_a_transpose_is_refused_naming_the_instruction():
    rng = np.random.default_rng(0)
    args = [rng.random((128, 128), dtype=np.float32), rng.random((128, 512), dtype=np.float32)]
    with pytest.raises(programs.ProgramError, match=r"instruction \d+ \(nc_transpose.*matmul"):
        graded_program(wire(matmul_relabelled_as_transpose, args), args)


def test_a_dma_copy_given_permute_semantics_is_refused_naming_the_instruction():
    x = np.random.default_rng(1).random((128, 128), dtype=np.float32)
    with pytest.raises(programs.ProgramError, match=r"instruction \d+ \(dma_copy.*permute"):
        graded_program(wire(copy_retargeted_as_permute, [x]), [x])


@nki.jit
def output_written_by_a_forged_store(x):
    """The values reach the HBM output as a free extra store of an on-chip copy: no DMA out."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.hbm)
    tile = nl.load(x)
    copied = nisa.tensor_copy(tile)
    copied._alloc.producer.stores.append(out.region())
    out._alloc.written = True
    return out


def test_an_extra_store_added_to_a_record_is_refused():
    x = np.random.default_rng(2).random((128, 64), dtype=np.float32)
    with pytest.raises(programs.ProgramError, match=r"instruction \d+ \(tensor_copy.*store"):
        graded_program(wire(output_written_by_a_forged_store, [x]), [x])


# ----- size is not suspicion ------------------------------------------------------------------------

def many_small_instructions(count: int) -> str:
    """The honest reference conv2d, then `count` tiny honest instructions on a scratch tile:
    correct, slow, and long, as a beginner's element-by-element kernel is."""
    from pathlib import Path
    source = (Path(__file__).resolve().parents[2] / "reference_kernels" / "conv2d_relaxed.py").read_text()
    extra = f"""
    scratch = nisa.memset((1, 1), value=0.0, dtype=nl.float32)
    for i in nl.affine_range({count}):
        scratch[...] = nisa.tensor_scalar(scratch, np.add, 0.0)
    return X_out
"""
    assert "\n    return X_out\n" in source
    return source.replace("\n    return X_out\n", extra)


def test_an_honest_kernel_of_a_hundred_thousand_instructions_grades_without_a_flag():
    from test_hostile import by_name, graded
    report = graded(many_small_instructions(100_000), wall_seconds=600)
    tests = by_name(report)
    assert report.flags == []
    assert tests["conv"].status == "passed" and tests["conv"].points == 2.5
    # timed, and slower than the thresholds: failed on speed, not refused
    assert tests["perf"].status == "failed" and "slower than" in tests["perf"].message


# ----- no job outlives its grade -------------------------------------------------------------------

IPC_LEFTOVERS = """
import ctypes, ctypes.util, os, sys
libc = ctypes.CDLL(None, use_errno=True)
made = []
# a 16 MiB SysV segment, marked so the grader can find it: key 0x17171717
shm = libc.shmget(0x17171717, 16 << 20, 0o1666)              # IPC_CREAT | 0666
made.append(("sysv_shm", shm >= 0))
queue = libc.msgget(0x17171718, 0o1666)
made.append(("sysv_msg", queue >= 0))
try:
    fd = os.open("/dev/shm/issue17-leftover", os.O_CREAT | os.O_RDWR, 0o666)
    os.ftruncate(fd, 1 << 20)
    made.append(("posix_shm", True))
except OSError:
    made.append(("posix_shm", False))
rt = ctypes.CDLL(ctypes.util.find_library("rt") or None, use_errno=True)
rt.mq_open.restype = ctypes.c_int
mq = rt.mq_open(b"/issue17-leftover", os.O_CREAT | os.O_RDWR, 0o666, None)
made.append(("posix_mq", mq >= 0))
print(made)
"""


def _sysv_keys(path: str) -> set[int]:
    try:
        lines = Path(path).read_text().splitlines()[1:]
    except OSError:
        return set()
    return {int(line.split()[0]) for line in lines if line.split()}


def _mq_exists(name: bytes) -> bool:
    import ctypes
    import ctypes.util
    rt = ctypes.CDLL(ctypes.util.find_library("rt") or None, use_errno=True)
    fd = rt.mq_open(name, os.O_RDONLY)
    if fd >= 0:
        rt.mq_unlink(name)          # the test's own clean-up: a leftover is a failure, not a leak
        return True
    return False


def test_no_shared_memory_or_message_queue_survives_the_job(tmp_path):
    from grader.sandbox import Limits, minimal_env, run_child
    job = tmp_path / "job"
    job.mkdir()
    job.chmod(0o755)
    argv = [sys.executable, "-I", "-c", "from grader.sandbox import enter\nenter()\n" + IPC_LEFTOVERS]
    done = run_child(argv, str(job), limits=Limits(wall_seconds=60.0), env=minimal_env())
    assert done.returncode == 0, done.output
    assert "('sysv_shm', True)" in done.stdout and "('sysv_msg', True)" in done.stdout, done.output
    survivors = {"sysv_shm": 0x17171717 in _sysv_keys("/proc/sysvipc/shm"),
                 "sysv_msg": 0x17171718 in _sysv_keys("/proc/sysvipc/msg"),
                 "posix_shm": os.path.exists("/dev/shm/issue17-leftover"),
                 "posix_mq": _mq_exists(b"/issue17-leftover")}
    # the test's own clean-up, so that a failure here does not leak into the next run
    subprocess.run(["ipcrm", "-M", str(0x17171717)], capture_output=True)
    subprocess.run(["ipcrm", "-Q", str(0x17171718)], capture_output=True)
    if survivors["posix_shm"]:
        os.unlink("/dev/shm/issue17-leftover")
    assert not any(survivors.values()), survivors


# ----- the Tensor Engine computes in its operands' dtype ----------------------------------------------

def matmul_through_view(view_dtype):
    @nki.jit
    def kernel(a_t, b):
        k, m = a_t.shape
        _, n = b.shape
        out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.hbm)
        a_sb = nl.ndarray((k, m), dtype=a_t.dtype, buffer=nl.sbuf)
        b_sb = nl.ndarray((k, n), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_sb, src=a_t)
        nisa.dma_copy(dst=b_sb, src=b)
        a_op, b_op = (a_sb, b_sb) if view_dtype is None else (a_sb.view(view_dtype), b_sb.view(view_dtype))
        res = nisa.tensor_copy(nisa.nc_matmul(a_op, b_op), dtype=nl.float32)
        nisa.dma_copy(dst=out, src=res)
        return out
    return kernel


def rounded_to_mantissa(x: np.ndarray, bits: int) -> np.ndarray:
    """fp32 values rounded to nearest even at `bits` explicit mantissa bits (exponent range kept)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    drop = 23 - bits
    half = (1 << (drop - 1)) - 1
    u = (u + half + ((u >> drop) & 1)) & ~np.uint64((1 << drop) - 1)
    return u.astype(np.uint32).view(np.float32)


def executed(kernel, args) -> np.ndarray:
    done, _ = graded_program(wire(kernel, args), args)
    return np.asarray(done.outputs, dtype=np.float64)


def test_a_tf32_view_of_fp32_data_multiplies_with_a_10_bit_mantissa():
    """tf32 is timed at the 16-bit rate; it must compute at tf32 precision, not fp32's."""
    rng = np.random.default_rng(5)
    args = [rng.random((128, 64), dtype=np.float32), rng.random((128, 96), dtype=np.float32)]
    got = executed(matmul_through_view(nl.tfloat32), args)
    a, b = (rounded_to_mantissa(x, 10).astype(np.float64) for x in args)
    exact = args[0].astype(np.float64).T @ args[1].astype(np.float64)
    np.testing.assert_allclose(got, a.T @ b, rtol=1e-6)
    assert np.abs(got - exact).max() > 1e-5 * np.abs(exact).max()     # fp32 would be within 1e-7


@pytest.mark.parametrize("dtype, view, mantissa", [
    ("bfloat16", None, 7), ("float16", None, 10), ("float8_e4m3", None, 3), ("float8_e5m2", None, 2),
    ("float16", "bfloat16", 7), ("float8_e4m3", "float8_e5m2", 2)])
def test_each_operand_dtype_multiplies_at_its_documented_precision(dtype, view, mantissa):
    """Operands stored in (or viewed as) a narrow float multiply exactly as the values that
    dtype holds, accumulated in fp32: the product of the rounded operands, never better."""
    from nkisim import dtypes
    rng = np.random.default_rng(6)
    stored = dtypes.to_dtype(dtype)
    args = [(rng.random((64, 32)) + 0.5).astype(stored), (rng.random((64, 48)) + 0.5).astype(stored)]
    got = executed(matmul_through_view(None if view is None else getattr(nl, view)), args)
    operands = [a.view(dtypes.to_dtype(view)) if view else a for a in args]
    held = [o.astype(np.float64) for o in operands]
    assert all(np.array_equal(rounded_to_mantissa(h.astype(np.float32), mantissa), h.astype(np.float32))
               for h in held if np.isfinite(h).all())
    np.testing.assert_allclose(got, held[0].T @ held[1], rtol=1e-5)


def test_a_long_program_costs_tens_of_bytes_per_instruction_on_the_wire():
    """Equal operands share one region row and unread result tiles are not sent: the size of a
    program follows its instructions, so the largest honest program stays well inside limits."""
    args = [ArgSpec((1, 128, 10, 10), np.dtype(np.float32)), ArgSpec((128, 128, 3, 3), np.dtype(np.float32)),
            ArgSpec((128,), np.dtype(np.float32))]
    sizes = []
    for count in (0, 10_000):
        namespace: dict = {}
        exec(compile(many_small_instructions(count), "conv2d.py", "exec"), namespace)
        program, _ = trace_kernel(namespace["fused_conv2d_maxpool"], args, {"pool_size": 1})
        sizes.append(len(programs.encode(program)))
    assert (sizes[1] - sizes[0]) / 10_000 < 64


# ----- the precheck's promise holds for string annotations ------------------------------------------

STRING_ANNOTATION = '''
import functools
import neuronxcc.nki as nki

@functools.singledispatch
def pick(x):
    return x

@pick.register
def _(x: "__import__('os').system('echo pwned') or int"):
    return x

def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    return pick(X)
'''

NESTED_STRING_ANNOTATION = '''
import typing
import os

def helper(x: typing.List["os.system('echo pwned')"]) -> "os.getcwd()":
    return typing.get_type_hints(helper)

def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    return helper(X)
'''


@pytest.mark.parametrize("source, fragment", [(STRING_ANNOTATION, "__import__"),
                                              (NESTED_STRING_ANNOTATION, "os.system")])
def test_code_in_a_string_annotation_is_checked_as_code(source, fragment):
    """typing.get_type_hints (functools.singledispatch, dataclasses) evaluates annotations
    written as strings: the precheck reads them as the code they are."""
    from grader.precheck import precheck
    errors = [v for v in precheck(source, "conv2d.py") if v.severity == "error"]
    assert errors and any(fragment in v.message for v in errors), errors


def test_an_annotation_string_that_is_not_an_expression_is_refused():
    from grader.precheck import precheck
    source = 'def fused_conv2d_maxpool(X, W, bias, pool_size: "import os" = 1):\n    return X\n'
    errors = [v for v in precheck(source, "conv2d.py") if v.severity == "error"]
    assert any("annotation" in v.message for v in errors), errors


def test_a_program_declaring_a_mutable_input_is_refused_by_the_parent(tmp_path, monkeypatch):
    """A kernel that writes its input (nt.mutable_tensor) and returns it as its output: the
    executor never writes the caller's arrays, and the parent refuses a program that claims a
    mutable input where the assignment's kernel has none."""
    import neuronxcc.nki.typing as nt
    from grader import executor

    @nki.jit
    def in_place(a: nt.mutable_tensor):
        nl.store(a, nl.add(nl.load(a), 1.0))
        return a
    x = np.ones((128, 8), np.float32)
    run = nkisim.run_kernel(in_place, (x,), {})
    np.testing.assert_array_equal(run.outputs, x + 1)
    np.testing.assert_array_equal(x, np.ones((128, 8), np.float32))       # the caller's array is untouched
    program, _ = trace_kernel(in_place, (ArgSpec((128, 8), np.float32),), {})
    assert program.mutable_inputs == (0,)
    (tmp_path / "program.bin").write_bytes(programs.encode(program))
    (tmp_path / "inputs").mkdir()
    np.save(tmp_path / "inputs" / "arg0.npy", x)
    monkeypatch.chdir(tmp_path)
    result, _ = executor.run({"n_inputs": 1, "mode": "correctness", "platform": "trn2", "dialect": "neuronxcc-nki",
                              "max_instructions": 100})
    assert result["status"] == "invalid" and "mutable" in result["error"]


def test_a_forged_write_to_an_input_not_declared_mutable_is_refused():
    @nki.jit
    def copy(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a))
        return out
    program, _ = trace_kernel(copy, (ArgSpec((128, 8), np.float32),), {})
    store = next(r for r in program.records if r.writes and r.writes[0].buffer == "shared_hbm")
    source = next(r for r in program.records if r.reads and r.reads[0].buffer == "hbm")
    store.writes[0] = source.reads[0]                    # the store now writes the input
    with pytest.raises(programs.ProgramError, match="writes a kernel input"):
        programs.validate(programs.decode(programs.encode(program)), HardwareLimits(), [np.ones((128, 8), np.float32)])
