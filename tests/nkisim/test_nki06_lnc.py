"""NKI 0.6's launch on a logical NeuronCore of two physical cores (kernel[2]): each core runs the
kernel with its own nl.program_id(0) and its own on-chip memory, HBM is shared, the cores run
in parallel in the cost model, and a program is held to what two cores can do."""
import os

import numpy as np
import pytest

import nkisim
from nkisim import cost, errors
from nkisim import program as programs
from nkisim.settings import HardwareLimits

nkisim.install()

import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

LIMITS = HardwareLimits()


def data(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@nki.jit
def doubled(a):
    """Each core doubles its half of the rows, 128 at a time."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    share = a.shape[0] // nl.num_programs()
    first = nl.program_id(0) * share
    for r in range(share // 128):
        rows = slice(first + r * 128, first + (r + 1) * 128)
        t = nl.ndarray((128, a.shape[1]), a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[rows, :])
        nisa.activation(dst=t, op=nl.exp, data=t)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out[rows, :], src=t)
    return out


def test_two_cores_split_the_work_and_compute_the_same_values():
    a = data((1024, 512))
    one, two = nkisim.run_kernel(doubled, (a,), {}), nkisim.run_kernel(doubled[2], (a,), {})
    expected = np.exp(a) * np.float32(2)
    np.testing.assert_allclose(one.outputs, expected, rtol=1e-6)
    np.testing.assert_array_equal(two.outputs, one.outputs)
    np.testing.assert_array_equal(nki.simulate(doubled[2])(a), one.outputs)
    assert two.program.lnc == 2 and one.program.lnc == 1
    cores = [r.attrs.get("core", 0) for r in two.trace]
    assert cores.count(0) == cores.count(1) == len(one.trace) // 2


def test_two_cores_run_side_by_side_on_their_own_engines():
    a = data((1024, 512))
    one, two = (cost.estimate(nkisim.run_kernel(k, (a,), {})) for k in (doubled, doubled[2]))
    assert {"ACT", "DVE", "ACT:core1", "DVE:core1"} <= set(two.busy_ns)
    assert "ACT:core1" not in one.busy_ns
    # the same instructions spread over two cores' engines and DMA engines: shorter than one core
    assert two.total_ns - two.overhead_ns < 0.75 * (one.total_ns - one.overhead_ns)


def test_the_launch_is_what_nl_program_id_and_num_programs_say():
    seen = []

    @nki.jit
    def launch(a):
        seen.append((nl.program_id(0), nl.num_programs(), nl.program_ndim()))
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.dma_copy(dst=out, src=t)
        return out
    a = data((128, 8))
    launch(a)
    launch[1](a)
    launch[2](a)
    assert seen == [(0, 1, 0), (0, 1, 0), (0, 2, 1), (1, 2, 1)]


def test_each_core_has_its_own_sbuf():
    """Two tiles of 150 KiB a partition: too much for one core, fine for one on each."""
    @nki.jit
    def big(a):
        out = nl.ndarray((128, 2), nl.float32, buffer=nl.shared_hbm)
        tiles = [nl.ndarray((128, 38400), nl.float32, buffer=nl.sbuf)
                 for _ in range(2 if nl.num_programs() == 1 else 1)]
        for t in tiles:
            nisa.memset(dst=t, value=1.0)
        part = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=part, op=nl.add, data=tiles[0], axis=1)
        nisa.dma_copy(dst=out[:, nl.program_id(0):nl.program_id(0) + 1], src=part)
        return out
    run = nkisim.run_kernel(big[2], (data((128, 8)),), {})
    np.testing.assert_array_equal(run.outputs, np.full((128, 2), 38400, np.float32))
    programs.validate(programs.decode(programs.encode(run.program)), LIMITS)
    with pytest.raises(errors.NKISimError, match="SBUF|capacity|exceed"):
        nkisim.run_kernel(big, (data((128, 8)),), {})


def test_cores_allocate_the_same_shared_tensors():
    @nki.jit
    def lopsided(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        if nl.program_id(0) == 1:
            nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.dma_copy(dst=out, src=t)
        return out
    with pytest.raises(errors.KernelContractError, match="shared_hbm tensors") as raised:
        lopsided[2](data((128, 8)))
    assert raised.value.code == "err_lnc_control_flow"


@pytest.mark.parametrize("launch, words", [(3, "at most 2"), ("2", "single int"), (0, "single int")])
def test_a_launch_trn2_cannot_make_is_refused(launch, words):
    with pytest.raises(errors.ArgumentError, match=words):
        doubled[launch]


def test_trn1_has_one_core_a_logical_neuroncore(monkeypatch):
    monkeypatch.setitem(os.environ, "NEURON_PLATFORM_TARGET_OVERRIDE", "trn1")
    with pytest.raises(errors.ArgumentError, match="at most 1"):
        doubled[2]


# ----- a program from another process -------------------------------------------------------------
def traced(kernel, a):
    program = nkisim.run_kernel(kernel, (a,), {}).program
    return programs.decode(programs.encode(program))


def test_a_two_core_program_round_trips_to_the_same_values_and_latency():
    a = data((512, 256))
    run = nkisim.run_kernel(doubled[2], (a,), {})
    again = traced(doubled[2], a)
    programs.validate(again, LIMITS, [a])
    from nkisim.execute import execute
    np.testing.assert_array_equal(execute(again, [a]).outputs, run.outputs)
    assert again.lnc == 2 and [r.attrs.get("core", 0) for r in again.records] == \
        [r.attrs.get("core", 0) for r in run.program.records]
    decoded_ns = cost.time_trace(again.records, again.allocs, dge=True,
                                 overhead_ns=cost.DEFAULT_PARAMS.bench_overhead_ns).total_ns
    assert decoded_ns == pytest.approx(cost.estimate(run).total_ns)


def test_a_record_claiming_another_core_is_refused():
    a = data((512, 256))
    one = traced(doubled, a)
    one.records[3].attrs["core"] = 1           # half the work on a core a one-core launch lacks
    with pytest.raises(programs.ProgramError, match="core 1 of a logical NeuronCore of 1"):
        programs.validate(one, LIMITS, [a])


def test_on_chip_memory_shared_by_two_cores_is_refused():
    a = data((512, 256))
    two = traced(doubled[2], a)
    first_core1 = next(i for i, r in enumerate(two.records) if r.attrs.get("core") == 1)
    two.records[first_core1 - 1].attrs["core"] = 1     # core 0's last store, claimed by core 1
    with pytest.raises(programs.ProgramError, match="another physical core"):
        programs.validate(two, LIMITS, [a])


def test_the_profile_shows_each_core_and_a_roofline_of_both():
    from nkisim.cost.profile import build_profile
    a = data((1024, 512))
    one, two = (nkisim.run_kernel(k, (a,), {}) for k in (doubled, doubled[2]))
    p1, p2 = (build_profile(run.trace, cost.estimate(run)) for run in (one, two))
    assert (p1.cores, p2.cores) == (1, 2)
    assert "Scalar (ACT), core 1" in p2.summary() and "core 1" not in p1.summary()
    # both cores' DMA engines: half the single core's memory-bound time above the fixed overhead
    assert p2.roofline_us - p2.overhead_us == pytest.approx((p1.roofline_us - p1.overhead_us) / 2)


# ----- the cores meeting: core_barrier and sendrecv ------------------------------------------------
@nki.jit
def swapped_halves(a):
    """Each core loads its half of the rows and sends it to the other, which writes it out."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    me, other = nl.program_id(0), 1 - nl.program_id(0)
    mine = nl.ndarray((128, a.shape[1]), a.dtype, buffer=nl.sbuf)
    theirs = nl.ndarray((128, a.shape[1]), a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=a[me * 128:(me + 1) * 128, :])
    nisa.sendrecv(src=mine, dst=theirs, send_to_rank=other, recv_from_rank=other, pipe_id=0)
    nisa.dma_copy(dst=out[me * 128:(me + 1) * 128, :], src=theirs)
    return out


@nki.jit
def handed_over(a):
    """Core 0 doubles the input into shared scratch; after the barrier core 1 copies it out."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    scratch = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    if nl.program_id(0) == 0:
        nisa.dma_copy(dst=t, src=a)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=scratch, src=t)
    nisa.core_barrier(scratch, (0, 1))
    if nl.program_id(0) == 1:
        nisa.dma_copy(dst=t, src=scratch)
        nisa.dma_copy(dst=out, src=t)
    return out


def test_sendrecv_swaps_the_cores_tiles():
    a = data((256, 64))
    run = nkisim.run_kernel(swapped_halves[2], (a,), {})
    np.testing.assert_array_equal(run.outputs, np.concatenate([a[128:], a[:128]]))
    again = traced(swapped_halves[2], a)
    programs.validate(again, LIMITS, [a])            # the one instruction writing the other core's SBUF


def test_after_a_barrier_a_core_reads_what_the_other_wrote_before_it():
    a = data((128, 64))
    run = nkisim.run_kernel(handed_over[2], (a,), {})
    np.testing.assert_array_equal(run.outputs, a * np.float32(2))
    barriers = [r for r in run.trace if r.opcode == "core_barrier"]
    assert [r.attrs.get("core", 0) for r in barriers] == [0, 1]
    # core 1 leaves the barrier after core 0's last instructions before it
    slots = dict(zip((r.index for r in run.trace), cost.estimate(run).slots))
    core0_store = max(r.index for r in run.trace if r.opcode == "dma_copy" and r.attrs.get("core", 0) == 0)
    assert slots[barriers[1].index].start >= slots[core0_store].end


def test_threads_of_a_launch_end_with_it():
    import threading
    before = threading.active_count()
    handed_over[2](data((128, 64)))
    with pytest.raises(errors.KernelContractError):
        lonely_barrier[2](data((128, 64)))
    assert threading.active_count() == before


@nki.jit
def lonely_barrier(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    if nl.program_id(0) == 0:
        nisa.core_barrier(out, (0, 1))
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def mispaired(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    u = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.sendrecv(src=t, dst=u, send_to_rank=1 - nl.program_id(0), recv_from_rank=1 - nl.program_id(0),
                  pipe_id=nl.program_id(0))
    nisa.dma_copy(dst=out, src=u)
    return out


@nki.jit
def fails_on_core_1(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.core_barrier(out, (0, 1))
    if nl.program_id(0) == 1:
        nisa.tensor_tensor(dst=t, data1=t, data2=t[0:64], op=nl.add)
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize("kernel, error, words", [
    (lambda: lonely_barrier[2], errors.KernelContractError, "ended without reaching core_barrier #1"),
    (lambda: mispaired[2], errors.KernelContractError, "must pair up"),
    (lambda: fails_on_core_1[2], errors.ShapeError, "partitions"),
    (lambda: handed_over, errors.KernelContractError, "runs on one"),
])
def test_meetings_the_cores_cannot_keep_are_errors(kernel, error, words):
    with pytest.raises(error, match=words):
        kernel()(data((128, 64)))


def test_an_interrupted_launch_ends_its_cores_threads():
    """A KeyboardInterrupt in the tracing thread while the cores wait for each other: every core's
    thread ends before the interrupt reaches the caller."""
    import threading
    import _thread
    before = threading.active_count()

    @nki.jit
    def interrupted(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        if nl.program_id(0) == 1:
            _thread.interrupt_main()         # the caller's thread gets the interrupt while core 0 waits
        nisa.core_barrier(out, (0, 1))
        nisa.dma_copy(dst=out, src=t)
        return out
    # interrupt_main() does nothing unless Python handles SIGINT: make that so whatever ran before
    import signal
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            interrupted[2](data((128, 8)))
    finally:
        signal.signal(signal.SIGINT, previous)
    assert threading.active_count() == before
