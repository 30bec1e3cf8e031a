"""The Trainium1 (NeuronCore-v2) cost model against the Trn1 hardware profiles of the part-1
vector add (/work/shared/data/trn1-profiles/README.md; bench/profiles.py --platform trn1 and
bench/fidelity.py --platform trn1 print the full comparison), and the NC-v2 rules the model
applies that NC-v3 lifted: no DGE, and the Vector engine sharing SBUF with GpSimd and PSUM with
the Scalar engine."""
import numpy as np
import pytest

import nkisim

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

from nkisim import cost  # noqa: E402
from nkisim.cost.rules import COST_RULES, pipeline_ns  # noqa: E402
from nkisim.settings import SimSettings  # noqa: E402
from reference_kernels import vector_add  # noqa: E402

# trn1-profiles README, table "Profiles": kernel span (us) of each run; fd1k is 2 tiles of
# 128 x 1000 fp32, fd2k one tile of 128 x 2000, both of a [256000] fp32 add
MEASURED_SPAN_US = {1000: [14.169, 14.010, 13.896, 14.095, 13.956, 14.013, 14.560],
                    2000: [18.022, 17.698, 17.676, 17.879, 18.001]}
# README headline fact 2: DVE 0x41 (tensor_tensor) start->end, medians of n = 14 and n = 5
MEASURED_DVE_NS = {1000: 2016.1, 2000: 3820.5}


def _vector_add(free_dim: int, platform: str = "trn1"):
    v = np.random.default_rng(1).random(256000, dtype=np.float32)
    run = nkisim.run_kernel(vector_add.make_vector_add_stream(free_dim), (v, v.copy()), {},
                            settings=SimSettings(platform=platform))
    np.testing.assert_allclose(run.outputs, 2 * v, rtol=1e-6)
    return run, cost.estimate(run, measurement="profile")


@pytest.mark.parametrize("free_dim", [1000, 2000])
def test_trn1_vector_add_span_is_within_15_percent_of_the_profiles(free_dim):
    run, tl = _vector_add(free_dim)
    assert tl.params == cost.params_for("trn1")
    measured_ns = float(np.median(MEASURED_SPAN_US[free_dim])) * 1e3
    assert tl.makespan_ns / measured_ns == pytest.approx(1.0, abs=0.15), (tl.makespan_ns, measured_ns)
    # neuron-profile's total_time is the span plus the fixed overhead the profiles measure (fact 1)
    assert tl.total_ns - tl.makespan_ns == pytest.approx(tl.params.profile_overhead_ns)


def test_trn1_spans_keep_the_measured_gap_between_one_and_two_tiles():
    """One 2000-wide tile cannot start its add before both loads end, nor its store before the add
    (README fact 6): fd2k is the slower kernel on Trn1, by 3.5-4.1 us across the runs."""
    spans = {fd: _vector_add(fd)[1].makespan_ns / 1e3 for fd in (1000, 2000)}
    gap = spans[2000] - spans[1000]
    measured = float(np.median(MEASURED_SPAN_US[2000]) - np.median(MEASURED_SPAN_US[1000]))
    assert gap / measured == pytest.approx(1.0, abs=0.15), (spans, measured)


@pytest.mark.parametrize("free_dim", [1000, 2000])
def test_trn1_dve_tensor_tensor_matches_the_measured_durations_within_5_percent(free_dim):
    run, tl = _vector_add(free_dim)
    p = tl.params
    adds = [(r, s) for r, s in zip(run.trace, tl.slots) if r.opcode == "tensor_tensor"]
    assert len(adds) == 256000 // 128 // free_dim
    for rec, slot in adds:
        assert slot.queue == "DVE" and rec.elements_per_partition == free_dim
        occupancy = COST_RULES["tensor_tensor"](rec, p).ns
        # the engine is held for the cost rule's occupancy; the sum lands the pipeline later
        assert slot.end - slot.start == pytest.approx(occupancy + pipeline_ns("DVE", p))
        assert (slot.end - slot.start) / MEASURED_DVE_NS[free_dim] == pytest.approx(1.0, abs=0.05)


def test_trn1_dmas_are_prebuilt_and_issued_one_static_issue_apart():
    """NC-v2 has no DGE: every DMA is issued from prebuilt descriptors on the one static queue,
    whatever the compile options, at the SP trigger interval the profiles measure."""
    run, tl = _vector_add(1000)
    assert tl.dma_mode == "static"
    dmas = [s for s in tl.slots if s.queue == "DMA"]
    assert len(dmas) == 6 and {s.issue_queue for s in dmas} == {"DMA-issue"}
    p = tl.params
    for s in dmas:
        assert s.issue_end - s.issue_start == pytest.approx(p.static_issue_ns)
    # the four loads are issued back to back from the kernel's start
    loads = [s for r, s in zip(run.trace, tl.slots) if r.opcode == "dma_copy" and r.writes[0].buffer == "sbuf"]
    assert [s.issue_end for s in loads] == pytest.approx([p.static_issue_ns * k for k in range(1, 5)])
    # the same kernel on trn2 goes through the DGE queues
    _, tl2 = _vector_add(1000, "trn2")
    assert tl2.dma_mode == "dge"
    assert {s.issue_queue for s in tl2.slots if s.queue == "DMA"} <= {"DGE-SP", "DGE-ACT"}


def test_trn1_loads_and_stores_start_at_their_own_measured_latencies():
    """The Trn1 profiles: a load's data starts 1384 ns after its trigger, a store's 669 ns (medians,
    n = 12 each, bench/profiles.py --platform trn1); Trn2's model keeps one latency for both."""
    run, tl = _vector_add(1000)
    p = tl.params
    assert (p.dma_start_latency_ns, p.dma_store_start_latency_ns) == (1384.0, 669.0)
    moved = [(r, s) for r, s in zip(run.trace, tl.slots) if r.opcode == "dma_copy"]
    stores = [s for r, s in moved if r.writes[0].buffer == "hbm"]
    loads = [s for r, s in moved if r.writes[0].buffer == "sbuf"]
    assert len(stores) == 2 and len(loads) == 4
    assert all(s.start >= s.issue_end + 669.0 - 1e-6 for s in stores)
    # the last store is triggered once every load is done: nothing else holds its rings
    assert stores[-1].start == pytest.approx(stores[-1].issue_end + 669.0)
    assert loads[0].start == pytest.approx(loads[0].issue_end + 1384.0)
    assert cost.params_for("trn2").dma_store_start_latency_ns is None


@nki.jit
def vector_and_gpsimd_on_sbuf(a):
    out = nl.ndarray((2,) + a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    summed = nisa.tensor_tensor(x, x, op=nl.add)                    # Vector engine, reads SBUF
    copied = nisa.tensor_copy(x, engine=nisa.gpsimd_engine)         # GpSimd, reads the same SBUF tile
    nisa.dma_copy(dst=out[0], src=summed)
    nisa.dma_copy(dst=out[1], src=copied)
    return out


@nki.jit
def vector_and_scalar_on_psum(a):
    out = nl.ndarray((2,) + a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    ps = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.psum)
    ps[...] = nisa.tensor_copy(x, engine=nisa.vector_engine)
    by_vector = nisa.tensor_copy(ps, engine=nisa.vector_engine)     # Vector engine, reads PSUM
    by_scalar = nisa.tensor_copy(ps, engine=nisa.scalar_engine)     # Scalar engine, reads the same PSUM tile
    nisa.dma_copy(dst=out[0], src=by_vector)
    nisa.dma_copy(dst=out[1], src=by_scalar)
    return out


def _engine_intervals(kernel, platform: str, a, expected, engines):
    """[(start, start + occupancy)] of the kernel's last instruction on each of `engines`: the
    time each holds its engine (and, on NC-v2, the shared port)."""
    run = nkisim.run_kernel(kernel, (a,), {}, settings=SimSettings(platform=platform))
    np.testing.assert_allclose(run.outputs, expected, rtol=1e-6)
    tl = cost.estimate(run)
    p = tl.params
    found = {}
    for rec, slot in zip(run.trace, tl.slots):
        if slot.queue in engines:
            found[slot.queue] = (slot.start, slot.start + COST_RULES[rec.opcode](rec, p).ns)
    assert set(found) == set(engines), found
    return [found[e] for e in engines]


def _overlap(a, b) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_ncv2_vector_and_gpsimd_take_turns_at_sbuf_but_not_on_trn2():
    """[A2]: on NeuronCore-v2 the Vector and GpSimd engines cannot access SBUF at once; NC-v3
    lifted it, so two independent instructions on one SBUF tile run side by side there."""
    a = np.random.default_rng(3).random((128, 1024), dtype=np.float32)
    expected = np.stack([2 * a, a])
    dve, pool = _engine_intervals(vector_and_gpsimd_on_sbuf, "trn1", a, expected, ("DVE", "POOL"))
    assert not _overlap(dve, pool), (dve, pool)
    dve, pool = _engine_intervals(vector_and_gpsimd_on_sbuf, "trn2", a, expected, ("DVE", "POOL"))
    assert _overlap(dve, pool), (dve, pool)


def test_ncv2_vector_and_scalar_take_turns_at_psum_but_not_on_trn2():
    """[A2]: nor the Vector and Scalar engines PSUM; NC-v3 lifted that too."""
    a = np.random.default_rng(4).random((128, 512), dtype=np.float32)
    expected = np.stack([a, a])
    dve, act = _engine_intervals(vector_and_scalar_on_psum, "trn1", a, expected, ("DVE", "ACT"))
    assert not _overlap(dve, act), (dve, act)
    dve, act = _engine_intervals(vector_and_scalar_on_psum, "trn2", a, expected, ("DVE", "ACT"))
    assert _overlap(dve, act), (dve, act)
