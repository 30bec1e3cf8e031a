"""One cost model per NeuronCore generation: data over one set of rules (nkisim.cost.generations),
chosen by the run's platform, each difference with its source."""
import dataclasses

import numpy as np
import pytest

import nkisim

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

from nkisim import cost  # noqa: E402
from nkisim.cost.generations import ASSUMED, DOCUMENTED, FIT, GENERATIONS, MEASURED  # noqa: E402
from nkisim.platforms import PLATFORMS  # noqa: E402
from nkisim.settings import SimSettings  # noqa: E402


def test_every_platform_has_one_generation_and_every_difference_a_source():
    assert set(GENERATIONS) == set(PLATFORMS)
    fields = {f.name for f in dataclasses.fields(cost.CostParams)}
    for name, gen in GENERATIONS.items():
        names = [d.name for d in gen.differences]
        assert len(names) == len(set(names)), f"{name} lists a parameter twice"
        for d in gen.differences:
            assert d.name in fields, f"{name}: {d.name} is no CostParams field"
            assert d.status in (DOCUMENTED, MEASURED, FIT, ASSUMED) and len(d.source) > 10, d
            assert getattr(cost.DEFAULT_PARAMS, d.name) != d.value, f"{name}: {d.name} repeats NC-v3's value"
        assert set(gen.carried_over()) == fields - set(names)
    # NC-v3's model is the defaults themselves, never a copy of them with numbers changed
    assert GENERATIONS["trn2"].differences == () and cost.params_for("trn2") == cost.DEFAULT_PARAMS


def test_documented_figures_of_each_generation():
    trn1, trn2, trn3 = (cost.params_for(p) for p in ("trn1", "trn2", "trn3"))
    assert (trn1.pe_ghz, trn1.dve_ghz, trn1.act_ghz, trn1.pool_ghz) == (2.8, 1.12, 1.4, 1.4)
    assert (trn2.pe_ghz, trn2.dve_ghz, trn2.act_ghz, trn2.pool_ghz) == (2.4, 0.96, 1.2, 1.2)
    assert (trn3.pe_ghz, trn3.dve_ghz, trn3.act_ghz, trn3.pool_ghz) == (2.4, 1.2, 1.2, 1.2)
    # documented: 17 / 23 / 33 B/ns an engine, 16 engines; NC-v2's is the Trn1 profiles' measured rate
    assert trn1.dma_bytes_per_ns == pytest.approx(16 * 17, rel=0.1)
    assert [p.dma_bytes_per_ns for p in (trn2, trn3)] == [16 * 23, 16 * 33]
    assert (trn1.hardware_dge, trn2.hardware_dge, trn3.hardware_dge) == (False, True, True)
    assert [PLATFORMS[p].sbuf_partition_bytes // 1024 for p in ("trn1", "trn2", "trn3")] == [192, 224, 256]
    assert GENERATIONS["trn3"].calibrated is False and GENERATIONS["trn1"].calibrated


def test_unknown_platform_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="unknown platform 'trn4'.*'trn1'"):
        cost.params_for("trn4")


@nki.jit
def add_rows(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    a_sb = nl.load(a)
    b_sb = nl.load(b)
    nl.store(out, value=nisa.tensor_tensor(a_sb, b_sb, op=nl.add))
    return out


def _timeline(kernel, args, platform, **options):
    run = nkisim.run_kernel(kernel, args, {}, settings=SimSettings(platform=platform), compile_options=options)
    return run, cost.estimate(run)


def test_the_run_platform_picks_the_cost_model():
    a = np.ones((128, 2000), np.float32)
    times = {}
    for platform in GENERATIONS:
        _, tl = _timeline(add_rows, (a, a), platform)
        assert tl.params == cost.params_for(platform)
        add = next(s for s in tl.slots if s.queue == "DVE")
        times[platform] = add.end - add.start
    p1, p2 = cost.params_for("trn1"), cost.params_for("trn2")
    # one rule, each generation's numbers: (N x cycles an element + overhead) / clock + pipeline
    assert times["trn1"] == pytest.approx((2000 * p1.dve_cycles_per_element + p1.dve_overhead_cycles) / p1.dve_ghz
                                          + p1.dve_pipeline_ns)
    assert times["trn2"] == pytest.approx((2000 + p2.dve_overhead_cycles) / p2.dve_ghz + p2.dve_pipeline_ns)
    assert times["trn1"] > times["trn2"] > times["trn3"]


def test_trn1_has_no_dge_whatever_the_compile_options_ask():
    a = np.ones((128, 512), np.float32)
    _, tl1 = _timeline(add_rows, (a, a), "trn1")
    _, tl2 = _timeline(add_rows, (a, a), "trn2")
    assert tl1.dma_mode == "static" and tl2.dma_mode == "dge"
    assert {s.issue_queue for s in tl1.slots if s.queue == "DMA"} == {"DMA-issue"}
    assert {s.issue_queue for s in tl2.slots if s.queue == "DMA"} <= {"DGE-SP", "DGE-ACT"}


@nki.jit
def vector_and_gpsimd(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    doubled = nisa.tensor_scalar(x, op0=nl.multiply, operand0=2.0, engine=nisa.vector_engine)
    tripled = nisa.tensor_scalar(x, op0=nl.multiply, operand0=3.0, engine=nisa.gpsimd_engine)
    nl.store(out, value=nl.add(doubled, tripled))
    return out


def test_ncv2_vector_and_gpsimd_take_turns_at_sbuf():
    """[A2]: on NeuronCore-v2 the Vector and GpSimd engines cannot reach SBUF at once; NC-v3
    lifted it, so the same two independent instructions overlap there."""
    a = np.ones((128, 1024), np.float32)
    for platform, overlap in (("trn1", False), ("trn2", True)):
        run, tl = _timeline(vector_and_gpsimd, (a,), platform)
        np.testing.assert_allclose(run.outputs, 5 * a)
        dve = [s for s, r in zip(tl.slots, run.trace) if r.opcode == "tensor_scalar" and s.queue == "DVE"]
        pool = [s for s, r in zip(tl.slots, run.trace) if r.opcode == "tensor_scalar" and s.queue == "POOL"]
        assert len(dve) == len(pool) == 1
        (d,), (g,) = dve, pool
        params = tl.params
        d_busy = d.end - params.dve_pipeline_ns     # the port is held for the occupancy
        overlapped = d.start < g.end and g.start < d_busy
        assert overlapped is overlap, (platform, d, g)
