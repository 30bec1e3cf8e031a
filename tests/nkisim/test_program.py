"""Programs across the trust boundary: what tracing produces round-trips through bytes and
executes to the same answer, and a program written by an attacker is either a real NKI program
(executed and timed as such) or refused, never cheaper than what it does."""
from __future__ import annotations

import json
import struct

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
def matmul_kernel(a_t, b):
    """a_t (K, M) and b (K, N): out = a_t.T @ b, one PSUM tile."""
    k, m = a_t.shape
    _, n = b.shape
    out = nl.ndarray((m, n), dtype=b.dtype, buffer=nl.hbm)
    a_sb = nl.ndarray((k, m), dtype=a_t.dtype, buffer=nl.sbuf)
    b_sb = nl.ndarray((k, n), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_sb, src=a_t)
    nisa.dma_copy(dst=b_sb, src=b)
    acc = nl.zeros((m, n), nl.float32, buffer=nl.psum)
    acc += nisa.nc_matmul(a_sb, b_sb)
    res = nisa.tensor_copy(acc, dtype=b.dtype)
    nl.device_print("res", res)
    nisa.dma_copy(dst=out, src=res)
    return out


def inputs(k=128, m=64, n=96):
    rng = np.random.default_rng(3)
    return [rng.random((k, m), dtype=np.float32), rng.random((k, n), dtype=np.float32)]


def traced(args):
    program, _ = trace_kernel(matmul_kernel, [ArgSpec(a.shape, a.dtype) for a in args], {})
    return program


def header_of(data: bytes) -> tuple[dict, bytes]:
    (n,) = struct.unpack("<Q", data[8:16])
    return json.loads(data[16:16 + n]), data[16 + n:]


def rebuild(header: dict, blob: bytes) -> bytes:
    head = json.dumps(header).encode()
    return programs.MAGIC + struct.pack("<Q", len(head)) + head + blob


def region_matrix(header: dict, blob: bytes) -> np.ndarray:
    """The program's region table (a writable copy); `with_regions` puts it back."""
    dtype, shape, offset, size = header["arrays"][header["regions"]]
    return np.frombuffer(blob[offset:offset + size], dtype=dtype).reshape(shape).copy()


def with_regions(header: dict, blob: bytes, matrix: np.ndarray) -> bytes:
    _, _, offset, size = header["arrays"][header["regions"]]
    return blob[:offset] + matrix.tobytes() + blob[offset + size:]


START, NDIM, SHAPE, STRIDES = 1, 2, 3, 3 + programs.MAX_DIMS
PARTITIONS = 5 + 2 * programs.MAX_DIMS


def decoded(data: bytes, args):
    program = programs.decode(data)
    programs.validate(program, LIMITS, args)
    return program


def test_tracing_needs_only_shapes_and_the_program_round_trips_to_the_same_answer():
    args = inputs()
    program = traced(args)
    assert all(isinstance(r, object) for r in program.records)
    again = decoded(programs.encode(program), args)
    done = execute(again, args)
    np.testing.assert_allclose(done.outputs, args[0].T @ args[1], rtol=1e-5)
    assert done.printed and done.printed[0].startswith("res [[")
    assert [r.opcode for r in done.trace] == [r.opcode for r in program.records if r.kind != "print"]


def test_latency_of_a_decoded_program_equals_the_local_estimate():
    args = inputs()
    local = nkisim.run_kernel(matmul_kernel, tuple(args), {})
    remote = execute(decoded(programs.encode(traced(args)), args), args)
    assert cost.schedule(remote.trace, cost.DEFAULT_PARAMS, dge=True).total_us == pytest.approx(
        cost.estimate(local).total_us)


def test_claimed_matmul_sizes_and_partitions_are_replaced_by_what_the_regions_say():
    args = inputs()
    header, blob = header_of(programs.encode(traced(args)))
    for head in header["heads"]:
        if head[0] == "nc_matmul":
            head[5].update(k=1, m=1, n=1)
    matrix = region_matrix(header, blob)
    matrix[:, PARTITIONS] = 128      # claim every access spans all partitions
    program = decoded(rebuild(header, with_regions(header, blob, matrix)), args)
    matmul = next(r for r in program.records if r.opcode == "nc_matmul")
    assert (matmul.attrs["k"], matmul.attrs["m"], matmul.attrs["n"]) == (128, 64, 96)
    assert matmul.reads[0].partitions == 128 and matmul.writes[0].partitions == 64
    hbm_reads = [r for rec in program.records for r in rec.reads if r.buffer == "hbm"]
    assert hbm_reads and all(r.partitions == 1 for r in hbm_reads)


@pytest.mark.parametrize("tamper, fragment", [
    (lambda h: h["heads"][0].__setitem__(0, "magic_op"), "unknown opcode"),
    (lambda h: h["heads"][0].__setitem__(1, 1), "engine"),
    (lambda h: h["records"][0][2].__setitem__(0, 10**6), "points nowhere"),
    (lambda h: h["records"][0].__setitem__(0, 10**6), "points nowhere"),
    (lambda h: h["allocs"][0].__setitem__(3, "float64x"), "unknown dtype"),
    (lambda h: h["records"].__setitem__(0, ["dma_copy"]), "malformed"),
])
def test_forged_programs_are_refused_with_a_reason(tamper, fragment):
    args = inputs()
    header, blob = header_of(programs.encode(traced(args)))
    tamper(header)
    with pytest.raises(programs.ProgramError) as info:
        decoded(rebuild(header, blob), args)
    assert fragment in str(info.value)


@pytest.mark.parametrize("column, value, fragment", [
    (START, 10**9, "outside its allocation"),
    (STRIDES, -4, "outside its allocation"),
    (SHAPE, 2**27, "outside its allocation"),
    (SHAPE, 2**40, "malformed"),
    (NDIM, 9, "malformed"),
    (SHAPE + 5, 7, "malformed"),          # a dimension past ndim
])
def test_forged_regions_are_refused(column, value, fragment):
    args = inputs()
    header, blob = header_of(programs.encode(traced(args)))
    matrix = region_matrix(header, blob)
    matrix[header["records"][0][2][0], column] = value
    with pytest.raises(programs.ProgramError) as info:
        decoded(rebuild(header, with_regions(header, blob, matrix)), args)
    assert fragment in str(info.value)


def test_hardware_rules_hold_for_a_program_no_tracer_would_write():
    args = inputs()
    header, blob = header_of(programs.encode(traced(args)))
    rec = next(r for r in header["records"] if header["heads"][r[0]][0] == "nc_matmul")
    matrix = region_matrix(header, blob)
    psum = matrix[rec[2][0], 0]
    moving = rec[1][1]
    # a moving operand of 128 x 4096: the Tensor Engine takes at most 512 columns
    next(a for a in header["allocs"] if a[0] == matrix[moving, 0])[2] = [128, 4096]
    matrix[moving, SHAPE:SHAPE + 2] = [128, 4096]
    matrix[moving, STRIDES:STRIDES + 2] = [4096 * 4, 4]
    next(a for a in header["allocs"] if a[0] == psum)[2] = [64, 4096]
    with pytest.raises(programs.ProgramError):
        decoded(rebuild(header, with_regions(header, blob, matrix)), args)


def test_a_program_writing_an_input_or_keeping_too_much_sbuf_live_is_refused():
    args = inputs()
    header, blob = header_of(programs.encode(traced(args)))
    first_dma = header["records"][0]
    first_dma[2][0] = first_dma[1][0]                # write into the input it reads
    with pytest.raises(programs.ProgramError, match="writes a kernel input"):
        decoded(rebuild(header, blob), args)
    header, blob = header_of(programs.encode(traced(args)))
    sbuf = next(a for a in header["allocs"] if a[1] == "sbuf")
    sbuf[2] = [128, 60_000]                          # 240 KB per partition, live with the rest
    with pytest.raises(programs.ProgramError, match="on-chip memory"):
        decoded(rebuild(header, blob), args)


def test_a_print_whose_mask_does_not_fit_the_printed_tile_is_refused():
    """A print writes nothing, so its mask is held to the tile it reads: a forged one that does not
    fit it would otherwise fail in the executor instead of being refused at the boundary."""
    args = inputs()
    program = traced(args)
    printed = next(r for r in program.records if r.kind == "print")
    printed.mask = np.ones((64, 1), dtype=bool)                  # fits the (64, 96) tile: kept
    assert decoded(programs.encode(program), args) is not None
    printed.mask = np.ones((65, 96), dtype=bool)
    with pytest.raises(programs.ProgramError, match="mask does not fit the printed tile"):
        decoded(programs.encode(program), args)


def test_garbage_and_oversized_programs_are_refused():
    for data in (b"", b"NKIPROG1", b"x" * 64, programs.MAGIC + struct.pack("<Q", 10**12)):
        with pytest.raises(programs.ProgramError):
            programs.decode(data)
    args = inputs()
    data = programs.encode(traced(args))
    with pytest.raises(programs.ProgramError, match="at most 3 instructions"):
        programs.decode(data, programs.ProgramLimits(max_records=3))


def test_inputs_must_match_what_the_program_was_traced_for():
    args = inputs()
    program = programs.decode(programs.encode(traced(args)))
    with pytest.raises(programs.ProgramError, match="input 1"):
        programs.validate(program, LIMITS, [args[0], args[1][:, :10]])


def fills_of_both_zeros(x):
    """Fills alternating 0.0 and -0.0 (equal as floats, different bits), and a loop of equal
    matmuls: each record keeps its own attributes through encoding."""
    out = nl.ndarray((128, 128), nl.float32, buffer=nl.hbm)
    x_sb = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x_sb, src=x)
    acc = nl.zeros((128, 128), nl.float32, buffer=nl.psum)
    for i in nl.sequential_range(4):
        for value in (0.0, -0.0):
            nisa.memset((128, 128), value, nl.float32)
        acc += nisa.nc_matmul(x_sb, x_sb)
    nisa.dma_copy(dst=out, src=nisa.tensor_copy(acc))
    return out


def test_encoding_keeps_each_instructions_attributes_and_shares_equal_ones():
    x = np.ones((128, 128), np.float32)
    program, _ = trace_kernel(fills_of_both_zeros, [ArgSpec(x.shape, x.dtype)], {}, nkisim.SimSettings(), {})
    data = programs.encode(program)
    decoded = programs.decode(data)
    fills = [r.attrs["value"] for r in decoded.records if r.opcode == "memset" and r.writes[0].shape == (128, 128)
             and r.writes[0].buffer == "sbuf"]
    assert [np.signbit(v) for v in fills] == [False, True] * 4
    matmuls = [r.attrs for r in decoded.records if r.opcode == "nc_matmul"]
    assert len(matmuls) == 4 and all(a == matmuls[0] for a in matmuls)
    (length,) = struct.unpack("<Q", data[8:16])
    heads = json.loads(data[16:16 + length])["heads"]
    assert sum(1 for h in heads if h[0] == "nc_matmul") == 1
