"""The Trn2 cost model: rules for every instruction, a golden timeline derived by hand from
the documented constants, scheduler behaviour, nki.benchmark latencies and profiles."""
import json
import xml.dom.minidom

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nkisim

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

from nkisim import cost  # noqa: E402
from nkisim.cost.profile import build_profile, timeline_svg  # noqa: E402
from nkisim.cost.dependencies import FAN_IN, dependencies  # noqa: E402
from nkisim.cost.rules import COST_RULES  # noqa: E402
from nkisim.registry import INSTRUCTIONS  # noqa: E402
from reference_kernels import vector_add  # noqa: E402

P = cost.DEFAULT_PARAMS


def test_every_registered_instruction_has_a_cost_rule():
    assert set(INSTRUCTIONS) - set(COST_RULES) == set()
    assert set(COST_RULES) - set(INSTRUCTIONS) == set()


@nki.jit
def add_512(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)
    a_sb = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    b_sb = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_sb, src=a)
    nisa.dma_copy(dst=b_sb, src=b)
    res = nisa.tensor_tensor(a_sb, b_sb, op=nl.add)
    nisa.dma_copy(dst=out, src=res)
    return out


def test_golden_timeline_of_a_small_kernel():
    """Every number below follows from CostParams by hand (see the comments)."""
    a = np.ones((128, 512), np.float32)
    run = nkisim.run_kernel(add_512, (a, a), {})
    tl = cost.estimate(run)
    issue = P.dge_issue_ns + 128 * P.dge_issue_per_row_ns            # 128 partition rows: 613 ns
    chunk = 128 * 512 * 4 / 16 / P.dma_engine_bytes_per_ns + 128 / 16 * P.dma_descriptor_ns
    load_a, load_b, add, store = tl.slots
    assert (load_a.issue_start, load_a.issue_end) == pytest.approx((0, issue))
    assert (load_b.issue_start, load_b.issue_end) == pytest.approx((issue, 2 * issue))
    assert load_a.start == pytest.approx(issue + P.dma_start_latency_ns)
    assert load_a.end == pytest.approx(load_a.start + chunk + P.dma_end_latency_ns)
    # b's transfer needs all 16 engines, which a holds until its last byte moves
    assert load_b.start == pytest.approx(load_a.start + chunk)
    add_ns = (1024 / P.dve_fp32_rate + P.dve_overhead_cycles) / P.dve_ghz   # two fp32 inputs
    assert add.queue == "DVE"
    assert add.start == pytest.approx(load_b.end + P.semaphore_ns)
    assert add.end == pytest.approx(add.start + add_ns)
    assert store.issue_start == pytest.approx(add.end + P.semaphore_ns)
    assert store.end == pytest.approx(store.issue_start + issue + P.dma_start_latency_ns + chunk
                                      + P.dma_end_latency_ns)
    assert tl.total_ns == pytest.approx(P.bench_overhead_ns + store.end)
    assert tl.dma_count == 3 and tl.dma_bytes == 3 * 128 * 512 * 4


def test_static_dma_mode_is_selected_by_disable_dge():
    a = np.ones((128, 512), np.float32)
    run = nkisim.run_kernel(add_512, (a, a), {}, compile_options={"additional_compile_opt": "--disable-dge"})
    tl = cost.estimate(run)
    assert tl.dma_mode == "static"
    assert tl.slots[0].issue_end - tl.slots[0].issue_start == pytest.approx(P.static_issue_ns)


def test_many_small_dmas_are_bound_by_serial_dge_issue():
    a = np.ones(25600, np.float32)
    dge = cost.estimate(nkisim.run_kernel(vector_add.make_vector_add_tiled(128), (a, a), {}))
    static = cost.estimate(nkisim.run_kernel(vector_add.make_vector_add_tiled(128), (a, a), {},
                                             compile_options={"additional_compile_opt": "--disable-dge"}))
    per_dma = P.dge_issue_ns + 128 * P.dge_issue_per_row_ns
    # 600 DMAs issued back to back: the loads of later iterations fill the gaps while stores wait
    assert dge.busy_ns["DGE"] == pytest.approx(600 * per_dma)
    assert dge.makespan_ns == pytest.approx(600 * per_dma, rel=0.02)
    assert static.total_ns < dge.total_ns / 3


@nki.jit
def accumulate(x, w):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.hbm)
    x_sb = nl.ndarray((128, 4, 512), dtype=x.dtype, buffer=nl.sbuf)
    w_sb = nl.ndarray((128, 4, 128), dtype=w.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x_sb, src=x)
    nisa.dma_copy(dst=w_sb, src=w)
    acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(4):
        acc += nisa.nc_matmul(w_sb[:, k, :], x_sb[:, k, :])
    res = nisa.tensor_copy(acc)
    nisa.dma_copy(dst=out, src=res)
    return out


@pytest.mark.parametrize("dtype, cycles", [(np.float16, 512),
                                           (np.float32, 4 * (512 + P.pe_fp32_pass_cycles))])
def test_matmuls_accumulate_in_program_order_at_the_documented_rate(dtype, cycles):
    """16-bit: one moving column a cycle; fp32: four passes, each reloading the stationary."""
    x, w = np.ones((128, 4, 512), dtype), np.ones((128, 4, 128), dtype)
    run = nkisim.run_kernel(accumulate, (x, w), {})
    tl = cost.estimate(run)
    mm = [s for r, s in zip(run.trace, tl.slots) if r.opcode == "nc_matmul"]
    per = (cycles + P.pe_overhead_cycles) / P.pe_ghz
    assert [s.end - s.start for s in mm] == pytest.approx([per] * 4)
    assert all(b.start >= a.end for a, b in zip(mm, mm[1:]))
    evict = tl.slots[[r.opcode for r in run.trace].index("tensor_copy")]
    assert evict.queue == "ACT" and evict.start >= mm[-1].end + P.semaphore_ns


def test_scheduler_is_a_pure_function_of_the_trace():
    a = np.ones(25600, np.float32)
    run = nkisim.run_kernel(vector_add.make_vector_add_stream(200), (a, a), {})
    first, second = cost.estimate(run), cost.estimate(run)
    assert [(s.start, s.end) for s in first.slots] == [(s.start, s.end) for s in second.slots]


def test_benchmark_percentiles_are_deterministic_by_default():
    a = np.ones(25600, np.float32)
    bench = nki.benchmark(warmup=5, iters=20)(vector_add.make_vector_add_stream(200))
    out = bench(a, a)
    np.testing.assert_array_equal(out, a + a)
    lat = bench.benchmark_result.nc_latency
    values = [lat.get_latency_percentile(p) for p in (0, 1, 10, 25, 50, 90, 99, 100)]
    assert len(set(values)) == 1
    assert values[0] == pytest.approx(cost.estimate(bench.benchmark_result.run).total_us)


def test_benchmark_noise_model_spreads_the_percentiles():
    a = np.ones(25600, np.float32)
    settings = nkisim.SimSettings(latency_noise=0.05, noise_seed=3)
    bench = nki.benchmark(warmup=5, iters=20, settings=settings)(vector_add.make_vector_add_stream(200))
    bench(a, a)
    lat = bench.benchmark_result.nc_latency
    p1, p50, p99 = (lat.get_latency_percentile(p) for p in (1, 50, 99))
    assert p1 < p50 < p99
    with pytest.raises(ValueError):
        lat.get_latency_percentile(101)


def test_profile_reports_mfu_roofline_and_a_timeline():
    x, w = np.ones((128, 4, 512), np.float16), np.ones((128, 4, 128), np.float16)
    run = nkisim.run_kernel(accumulate, (x, w), {})
    tl = cost.estimate(run)
    prof = build_profile(run.trace, tl)
    flops = 4 * 2 * 128 * 128 * 512
    assert prof.matmul_flops == flops and prof.transpose_flops == 0
    assert prof.mfu == pytest.approx(flops / (P.pe_peak_flops_per_ns * tl.total_ns))
    assert prof.engines["PE"].instructions == 4 and prof.engines["DMA"].instructions == 3
    assert prof.roofline_us <= prof.total_us
    assert prof.hbm_bytes == x.nbytes + w.nbytes + 128 * 512 * 4
    json.dumps(prof.to_json())
    svg = timeline_svg(run.trace, tl, title="accumulate")
    doc = xml.dom.minidom.parseString(svg)
    bars = [r for r in doc.getElementsByTagName("rect") if r.getElementsByTagName("title")]
    assert len(bars) == len(run.trace) + 3          # each DMA has an issue bar and a transfer bar
    assert "Tensor (PE)" in svg and "accumulate" in svg


def test_profile_cli_writes_svg_and_json(tmp_path, capsys):
    from nkisim.cli import main
    svg, js = tmp_path / "t.svg", tmp_path / "t.json"
    assert main(["profile", "reference_kernels/transpose.py", "--preset", "transpose-1024",
                 "--svg", str(svg), "--json", str(js)]) == 0
    out = capsys.readouterr().out
    assert "estimated latency" in out and "MFU" in out
    data = json.loads(js.read_text())
    assert data["dma_count"] > 0 and data["total_us"] > data["overhead_us"]
    xml.dom.minidom.parse(str(svg))


def test_profile_cli_rejects_unknown_kernel_names(tmp_path):
    from nkisim.cli import main
    with pytest.raises(SystemExit, match="no kernel named 'nope'"):
        main(["profile", "reference_kernels/transpose.py", "--kernel", "nope", "--input", "128x128"])


# ----- dependencies: an interval index per allocation, bounded work per record ---------------

@nki.jit
def scattered_writes(a, count):
    """`count` one-element writes into one tile, each followed by a read of the whole tile:
    the pattern that made the old dependency scan quadratic."""
    out = nl.ndarray((1, 1), dtype=a.dtype, buffer=nl.hbm)
    t = nl.ndarray((1, count), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    for j in nl.affine_range(count):
        t[0:1, j:j + 1] = nisa.tensor_copy(t[0:1, 0:1])
        total = nisa.tensor_reduce(nl.add, t, axis=1)
    nisa.dma_copy(dst=out, src=total)
    return out


def test_twenty_thousand_tiny_writes_to_one_tile_cost_linear_work():
    count = 20_000
    run = nkisim.run_kernel(scattered_writes, (np.ones((1, count), np.float32), count), {})
    graph = dependencies(run.trace)
    # each record looks at a bounded number of element ranges (the old scan looked at ~count**2 / 2
    # in all) and waits on a bounded number of nodes
    assert graph.checks <= FAN_IN * len(run.trace)
    assert max(len(d) for d in graph.deps) <= FAN_IN + 1
    tl = cost.estimate(run)
    assert tl.dependency_checks == graph.checks
    # and nothing is lost: the last reduce still waits for every one-element write
    writes = [s for r, s in zip(run.trace, tl.slots) if r.opcode == "tensor_copy"]
    last_reduce = [s for r, s in zip(run.trace, tl.slots) if r.opcode == "tensor_reduce"][-1]
    assert last_reduce.start >= max(s.end for s in writes)


def _region(alloc, lo, hi):
    from nkisim.trace import Region
    return Region(alloc, "sbuf", lo, (hi - lo,), (4,), 4, "float32", 1)


def _expand(node, graph, n):
    """The trace records a dependency node stands for (a join stands for its inputs)."""
    if node < n:
        return {node}
    return set().union(*(_expand(j, graph, n) for j in graph.joins[node - n]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 2), st.integers(0, 40), st.integers(1, 12)),
                min_size=1, max_size=60))
def test_dependencies_cover_the_last_writer_of_every_element_read(ops):
    """Against a per-element oracle, with joins forced early (FAN_IN = 2): every record waits
    for the last writer of each element it reads, and only for earlier writers it overlaps."""
    from nkisim.trace import Engine, TraceRecord
    trace = []
    for i, (is_write, alloc, lo, size) in enumerate(ops):
        region = _region(alloc, lo, lo + size)
        trace.append(TraceRecord(i, "tensor_copy", Engine.VECTOR, [] if is_write else [region],
                                 [region] if is_write else [], None))
    graph = dependencies(trace, fan_in=2)
    last: dict[tuple[int, int], int] = {}
    for i, (is_write, alloc, lo, size) in enumerate(ops):
        waits = set().union(*[_expand(d, graph, len(trace)) for d in graph.deps[i]])
        if is_write:
            for e in range(lo, lo + size):
                last[(alloc, e)] = i
            continue
        needed = {last[(alloc, e)] for e in range(lo, lo + size) if (alloc, e) in last}
        assert needed <= waits
        assert all(ops[j][0] and ops[j][1] == alloc for j in waits)
