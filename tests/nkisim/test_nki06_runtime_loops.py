"""Loops the device runs: a register loaded from memory (nisa.register_load) bounds an nl.fori_loop
or nl.dynamic_range, or ends an nl.while_loop. The body is traced once between control records and
nkisim.sequencer runs it as often as the registers say: values against NumPy, the executed trace
one record per instruction executed, the cost that of the instructions executed, and the
program format holding such programs to their rules (a forged one refused, an endless one stopped).
Every kernel here is our own, written from the NKI 0.6 reference."""
import numpy as np
import pytest

import nkisim
from nkisim import cost, errors
from nkisim import program as programs
from nkisim.execute import execute
from nkisim.limits import HardwareLimits
from nkisim.runtime import ArgSpec, trace_kernel

nkisim.install()

import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402
from kernel_helpers import load, store  # noqa: E402


def loaded(t_hbm):
    """A register holding the int32 element t_hbm[0, 0], loaded on the device."""
    cell = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=cell, src=t_hbm)
    r = nisa.register_alloc()
    nisa.register_load(r, cell)
    return r, cell


sbuf_copy, returned = load, store        # an HBM tensor into SBUF, a tile out to a shared_hbm output


@nki.jit
def add_n_times(a, n):
    t = sbuf_copy(a)
    r, _ = loaded(n)
    nl.fori_loop(0, r, lambda i: nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0))
    return returned(t)


@nki.jit
def add_five_times_unrolled(a, n):
    """add_n_times with n = 5 known when traced: the same instructions, unrolled."""
    t = sbuf_copy(a)
    loaded(n)
    nl.fori_loop(0, 5, lambda i: nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0))
    return returned(t)


def count(n: int) -> np.ndarray:
    return np.array([[n]], np.int32)


A = np.linspace(-1, 1, 128 * 64, dtype=np.float32).reshape(128, 64)


def plus_ones(n: int) -> np.ndarray:
    """A with 1 added n times, rounding to fp32 after each add as the Vector engine does."""
    out = A.copy()
    for _ in range(n):
        out = out + np.float32(1)
    return out


@pytest.mark.parametrize("n", [0, 1, 5])
def test_a_fori_loop_bounded_by_a_loaded_register_runs_as_often_as_it_holds(n):
    run = nkisim.run_kernel(add_n_times, (A, count(n)), {})
    np.testing.assert_array_equal(run.outputs, plus_ones(n))
    # the program holds the body once; the executed trace once per iteration, no control records
    traced = [r.opcode for r in run.program.records]
    assert traced.count("tensor_scalar") == 1 and traced.count("loop_begin") == traced.count("loop_end") == 1
    executed = [r.opcode for r in run.trace]
    assert executed.count("tensor_scalar") == n and "loop_begin" not in executed
    assert [r.index for r in run.trace] == list(range(len(run.trace)))


def test_a_run_time_loop_costs_what_its_iterations_cost():
    """Four more iterations cost four more instructions of the body, as the same loop unrolled
    does; and the body waits for the register it was decided on."""
    def latency(kernel, n):
        return cost.estimate(nkisim.run_kernel(kernel, (A, count(n)), {})).total_ns
    dynamic = latency(add_n_times, 5) - latency(add_n_times, 1)
    run = nkisim.run_kernel(add_five_times_unrolled, (A, count(5)), {})
    timeline = cost.estimate(run)
    body = [slot for slot, rec in zip(timeline.slots, run.trace) if rec.opcode == "tensor_scalar"]
    four_more = body[-1].end - body[0].end
    assert dynamic == pytest.approx(four_more, rel=0.02)
    dyn = nkisim.run_kernel(add_n_times, (A, count(5)), {})
    dyn_timeline = cost.estimate(dyn)
    load = next(i for i, r in enumerate(dyn.trace) if r.opcode == "register_load")
    first_body = next(i for i, r in enumerate(dyn.trace) if r.opcode == "tensor_scalar")
    assert dyn_timeline.slots[first_body].start >= dyn_timeline.slots[load].end
    assert load in dyn.trace[first_body].attrs["after"]


@nki.jit
def countdown(a, n):
    """Adds 1 while the loaded count, decremented on the device each pass, is not 0."""
    t = sbuf_copy(a)
    r, cell = loaded(n)

    def body(cond):
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
        nisa.tensor_scalar(dst=cell, data=cell, op0=nl.subtract, operand0=1)
        nxt = nisa.register_alloc()
        nisa.register_load(nxt, cell)
        return nxt
    nl.while_loop(r, body)
    return returned(t)


@pytest.mark.parametrize("n", [0, 1, 4])
def test_a_while_loop_on_a_loaded_condition_ends_when_the_device_says(n):
    run = nkisim.run_kernel(countdown, (A, count(n)), {})
    np.testing.assert_array_equal(run.outputs, plus_ones(n))
    assert [r.opcode for r in run.trace].count("register_load") == 1 + n
    assert [r.opcode for r in run.program.records].count("while_begin") == 1


def test_dynamic_range_with_a_loaded_bound_runs_its_body_on_the_device():
    @nki.jit
    def kernel(a, n):
        t = sbuf_copy(a)
        r, _ = loaded(n)
        for _ in nl.dynamic_range(r):
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        return returned(t)
    with pytest.warns(DeprecationWarning, match="fori_loop"):
        result = kernel(A, count(3))
    np.testing.assert_array_equal(result, A * np.float32(8))


def test_leaving_a_run_time_dynamic_range_early_is_refused():
    @nki.jit
    def kernel(a, n):
        t = sbuf_copy(a)
        r, _ = loaded(n)
        for _ in nl.dynamic_range(r):
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
            break
        return returned(t)
    with pytest.warns(DeprecationWarning), pytest.raises(errors.KernelContractError, match="break or return"):
        kernel(A, count(3))


@nki.jit
def registers_through_a_loop(n):
    """out[0] = the loaded n; out[1] = the counter's last value; out[2] = what r held at the start
    of the last iteration (set to the counter by each iteration before: loop-carried); out[3] = r
    after the loop (10 if it never ran)."""
    out = nl.ndarray((1, 4), nl.int32, buffer=nl.shared_hbm)
    r_n, _ = loaded(n)
    r = nisa.register_alloc(10)

    def body(i):
        nisa.register_store(out[0:1, 2:3], r)
        nisa.register_move(r, i)
        nisa.register_store(out[0:1, 1:2], i)
    nisa.register_store(out[0:1, 1:2], nisa.register_alloc(-1))
    nisa.register_store(out[0:1, 2:3], nisa.register_alloc(-1))
    nl.fori_loop(0, r_n, body)
    nisa.register_store(out[0:1, 0:1], r_n)
    nisa.register_store(out[0:1, 3:4], r)
    return out


@pytest.mark.parametrize("n, expected", [(0, [0, -1, -1, 10]), (1, [1, 0, 10, 0]), (4, [4, 3, 2, 3])])
def test_registers_carry_their_values_from_one_iteration_to_the_next(n, expected):
    run = nkisim.run_kernel(registers_through_a_loop, (count(n),), {})
    np.testing.assert_array_equal(run.outputs, [expected])


def test_an_access_moved_by_two_run_time_registers_is_refused():
    @nki.jit
    def kernel(a, n):
        t = sbuf_copy(a)
        r, _ = loaded(n)
        s = nisa.register_alloc()
        nisa.register_move(s, r)
        tile = nl.ndarray((128, 4, 64), a.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=tile.select(1, r).ap([[256, 128], [1, 8]], scalar_offset=s, indirect_dim=2),
                         src=t[:, 0:8])
        return returned(t)
    with pytest.raises(errors.NotSimulatedError, match="second run-time register"):
        kernel(A, count(0))


@pytest.mark.parametrize("cell, error, words", [
    (lambda: nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf), errors.NotSimulatedError, "not a 32-bit integer"),
    (lambda: nl.ndarray((1, 2), nl.int32, buffer=nl.sbuf), errors.ShapeError, "exactly one element"),
    (lambda: nl.ndarray((1, 1), nl.int32, buffer=nl.psum), errors.MemorySpaceError, "psum"),
])
def test_register_load_refuses_what_it_cannot_load(cell, error, words):
    @nki.jit
    def kernel(a):
        src = cell()
        nisa.register_load(nisa.register_alloc(), src)
        return returned(sbuf_copy(a))
    with pytest.raises(error, match=words):
        kernel(A)


def test_a_loop_counter_cannot_be_loaded_into():
    @nki.jit
    def kernel(a, n):
        r, cell = loaded(n)
        nl.fori_loop(0, r, lambda i: nisa.register_load(i, cell))
        return returned(sbuf_copy(a))
    with pytest.raises(errors.KernelContractError, match="read-only"):
        kernel(A, count(2))


# ----- the program format: forged programs, endless loops ------------------------------------------

def traced_add_n_times():
    program, _ = trace_kernel(add_n_times, (ArgSpec((128, 64), np.float32), ArgSpec((1, 1), np.int32)), {})
    return program


def inputs(n=3):
    return [A, count(n)]


def test_a_traced_run_time_loop_survives_encoding_and_validation():
    program = programs.decode(programs.encode(traced_add_n_times()))
    programs.validate(program, HardwareLimits(), inputs())
    done = execute(program, inputs())
    np.testing.assert_array_equal(done.outputs, plus_ones(3))


@pytest.mark.parametrize("forge, words", [
    (lambda recs: recs.pop(next(i for i, r in enumerate(recs) if r.opcode == "loop_end")), "never ends"),
    (lambda recs: recs.pop(next(i for i, r in enumerate(recs) if r.opcode == "loop_begin")), "ends no open"),
    (lambda recs: next(r for r in recs if r.opcode == "loop_begin").params.update(step=0), "positive"),
    (lambda recs: next(r for r in recs if r.opcode == "loop_begin").params.update(upper=["reg", -1]),
     "register number"),
    (lambda recs: next(r for r in recs if r.opcode == "loop_begin").params.update(upper=["imm", 2 ** 40]),
     "control operand"),
    (lambda recs: next(r for r in recs if r.opcode == "loop_begin").params.update(extra=1), "unknown form"),
    (lambda recs: next(r for r in recs if r.opcode == "tensor_scalar").params.update(register=0),
     "only a register_store"),
])
def test_a_forged_control_structure_is_refused(forge, words):
    program = traced_add_n_times()
    for rec in program.records:
        rec.params = dict(rec.params)
    forge(program.records)
    for i, rec in enumerate(program.records):
        rec.index = i
    with pytest.raises(programs.ProgramError, match=words):
        programs.validate(programs.decode(programs.encode(program)), HardwareLimits(), inputs())


def test_a_register_read_before_it_is_set_is_the_programs_error():
    program = traced_add_n_times()
    begin = next(r for r in program.records if r.opcode == "loop_begin")
    begin.params = {**begin.params, "upper": ["reg", 77]}
    program = programs.decode(programs.encode(program))
    programs.validate(program, HardwareLimits(), inputs())
    with pytest.raises(programs.ProgramError, match="register 77 before anything set it"):
        execute(program, inputs())


@nki.jit
def endless(a):
    t = sbuf_copy(a)
    one = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=one, value=1)
    r = nisa.register_alloc()
    nisa.register_load(r, one)

    def body(cond):
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
        return cond
    nl.while_loop(r, body)
    return returned(t)


def test_an_endless_run_time_loop_is_stopped_at_the_instruction_limit(tmp_path, monkeypatch):
    """Through the grader's executor, as a graded run executes it: the job's instruction limit
    holds for the instructions executed, not only the ones traced."""
    from grader import executor
    program, _ = trace_kernel(endless, (ArgSpec((128, 64), np.float32),), {})
    assert len(program.records) < 20
    (tmp_path / "program.bin").write_bytes(programs.encode(program))
    (tmp_path / "inputs").mkdir()
    np.save(tmp_path / "inputs" / "arg0.npy", A)
    monkeypatch.chdir(tmp_path)
    result, _ = executor.run({"n_inputs": 1, "mode": "benchmark", "platform": "trn2", "dialect": "nki-0.6",
                              "max_instructions": 500, "lnc": 1})
    assert result["status"] == "invalid" and "executed more than 500 instructions" in result["error"]


def test_a_graded_run_time_loop_is_timed_on_what_it_executed(tmp_path, monkeypatch):
    from grader import executor
    program = traced_add_n_times()
    (tmp_path / "program.bin").write_bytes(programs.encode(program))
    (tmp_path / "inputs").mkdir()
    for i, arr in enumerate(inputs(5)):
        np.save(tmp_path / "inputs" / f"arg{i}.npy", arr)
    monkeypatch.chdir(tmp_path)
    job = {"n_inputs": 2, "mode": "benchmark", "platform": "trn2", "dialect": "nki-0.6",
           "max_instructions": 1000, "lnc": 1}
    header, arrays = executor.run(job)
    assert header["status"] == "ok", header
    assert header["instructions"] == 9 and header["opcodes"].count("tensor_scalar") == 1
    np.testing.assert_array_equal(arrays[0], plus_ones(5))
    run = nkisim.run_kernel(add_n_times, (A, count(5)), {})
    local = cost.time_trace(run.trace, run.program.allocs, dge=cost.uses_dge({}), params=cost.params_for("trn2"),
                            limits=run.settings.limits)
    assert header["latency_us"] == pytest.approx(local.total_us, rel=1e-9)


# ----- accesses addressed by run-time registers ------------------------------------------------------

@nki.jit
def double_first_n_tiles(a, n):
    """out[:, j] = 2 a[:, j] for the first n tiles j of a [128, 4, 64] tensor, the rest 0: the tile
    addressed by the run-time counter, through t.ap on HBM and t.select on SBUF."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    zeros = nl.ndarray((128, 4, 64), a.dtype, buffer=nl.sbuf)
    nisa.memset(dst=zeros, value=0.0)
    nisa.dma_copy(dst=out, src=zeros)
    staged = nl.ndarray((128, 4, 64), a.dtype, buffer=nl.sbuf)
    r, _ = loaded(n)

    def body(i):
        tile = staged.select(1, i)
        nisa.dma_copy(dst=tile, src=a.ap([[256, 128], [1, 64]], scalar_offset=i, indirect_dim=1))
        nisa.tensor_scalar(dst=tile, data=tile, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out.ap([[256, 128], [1, 64]], scalar_offset=i, indirect_dim=1), src=tile)
    nl.fori_loop(0, r, body)
    return out


@pytest.mark.parametrize("n", [0, 2, 4])
def test_an_access_moves_with_its_run_time_register(n):
    a = np.random.default_rng(n).standard_normal((128, 4, 64)).astype(np.float32)
    run = nkisim.run_kernel(double_first_n_tiles, (a, count(n)), {})
    expected = np.zeros_like(a)
    expected[:, :n] = a[:, :n] * 2
    np.testing.assert_array_equal(run.outputs, expected)
    moved = [r for rec in run.program.records for r in rec.reads + rec.writes if r.dyn is not None]
    assert moved and all(r.dyn is None for rec in run.trace for r in rec.reads + rec.writes)
    # the same cost as the loop with n known when traced (the same accesses, each waiting for the load)
    assert cost.estimate(run).total_ns > 0


def test_a_run_time_access_outside_its_tensor_is_the_kernels_error():
    a = np.zeros((128, 4, 64), np.float32)
    with pytest.raises(programs.ProgramError, match="holds 4 at run time, which moves its access"):
        nkisim.run_kernel(double_first_n_tiles, (a, count(5)), {})


def test_a_run_time_offset_survives_encoding_and_a_forged_one_is_refused():
    program, _ = trace_kernel(double_first_n_tiles, (ArgSpec((128, 4, 64), np.float32), ArgSpec((1, 1), np.int32)),
                              {})
    a = np.ones((128, 4, 64), np.float32)
    decoded = programs.decode(programs.encode(program))
    programs.validate(decoded, HardwareLimits(), [a, count(3)])
    out = execute(decoded, [a, count(3)]).outputs
    assert (out[:, :3] == 2).all() and (out[:, 3] == 0).all()
    # a static program whose access claims a run-time register: refused when read
    static, _ = trace_kernel(add_five_times_unrolled, (ArgSpec((128, 64), np.float32), ArgSpec((1, 1), np.int32)), {})
    static.records = [r for r in static.records if r.opcode != "register_load"]
    for i, rec in enumerate(static.records):
        rec.index = i
    static.records[-1].reads[0].dyn = (0, 64)
    with pytest.raises(programs.ProgramError, match="sets none"):
        programs.decode(programs.encode(static))


def test_a_forged_output_moved_by_a_register_is_refused():
    program = traced_add_n_times()
    program.outputs.dyn = (0, 1)
    with pytest.raises(programs.ProgramError, match="not an access a run-time register moves"):
        programs.validate(programs.decode(programs.encode(program)), HardwareLimits(), inputs())
