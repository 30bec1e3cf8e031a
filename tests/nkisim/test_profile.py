"""Profiles of simulated runs: the summary the grader and web pages show, the bottleneck
verdict, and the timeline picture (lanes, DMA queues, thresholds, legend, bounded size)."""
import xml.dom.minidom

import numpy as np
import pytest

import nkisim

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

from nkisim import cost  # noqa: E402
from nkisim.cost.profile import profile_summary  # noqa: E402
from reference_kernels import vector_add  # noqa: E402


@nki.jit
def matmul_chain(x, w, count):
    """`count` 16-bit matmuls accumulating in one PSUM bank: the Tensor Engine does the work."""
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.hbm)
    x_sb = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
    w_sb = nl.ndarray((128, 128), dtype=w.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x_sb, src=x)
    nisa.dma_copy(dst=w_sb, src=w)
    acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    for _ in nl.affine_range(count):
        acc += nisa.nc_matmul(w_sb, x_sb)
    nisa.dma_copy(dst=out, src=nisa.tensor_copy(acc))
    return out


@nki.jit
def small_adds(a, count):
    """`count` small independent Vector Engine adds, then a store of the last."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    for _ in nl.affine_range(count):
        y = nisa.tensor_tensor(x, x, op=nl.add)
    nisa.dma_copy(dst=out, src=y)
    return out


def summary_of(kernel, args, **kw):
    run = nkisim.run_kernel(kernel, args, {})
    return run, profile_summary(run.trace, cost.estimate(run), **kw)


def rect_count(svg: str) -> int:
    return len(xml.dom.minidom.parseString(svg).getElementsByTagName("rect"))


def test_summary_has_what_the_pages_show_and_a_compute_verdict():
    run, summary = summary_of(matmul_chain, (np.ones((128, 512), np.float16), np.ones((128, 128), np.float16), 400))
    assert set(summary) == {"svg", "mfu", "engine_utilisation", "engine_instructions", "busiest_lines", "verdict",
                            "total_us", "achieved_tflops", "roofline_us", "roofline_limit", "bound"}
    assert summary["bound"] == "tensor"
    assert summary["roofline_limit"] == "compute" and 0 < summary["roofline_us"] <= summary["total_us"]
    assert summary["achieved_tflops"] > 0
    assert set(summary["engine_instructions"]) == set(summary["engine_utilisation"])
    assert summary["engine_instructions"]["PE"] > 0
    assert summary["verdict"].startswith("Tensor Engine bound")
    assert summary["engine_utilisation"]["PE"] > 0.8 and 0.5 < summary["mfu"] <= 1
    assert summary["busiest_lines"][0]["queue"] == "PE" and "test_profile.py" in summary["busiest_lines"][0]["line"]
    assert summary["total_us"] == cost.estimate(run).total_us
    svg = summary["svg"]
    xml.dom.minidom.parseString(svg)
    # a legend naming the opcodes drawn, and every DMA engine as a lane of its own
    assert ">nc_matmul</text>" in svg and ">dma_copy</text>" in svg
    assert all(f">DMA queue {i}<" in svg for i in range(16))
    assert summary["verdict"] in svg


def test_many_small_dmas_get_a_dma_issue_verdict():
    a = np.ones(25600, np.float32)
    _, summary = summary_of(vector_add.make_vector_add_tiled(128), (a, a))
    assert summary["verdict"].startswith("DMA issue bound") and "600 DMAs" in summary["verdict"]


def test_thresholds_are_marked_where_the_total_latency_reaches_them():
    a = np.ones(25600, np.float32)
    run, summary = summary_of(vector_add.make_vector_add_stream(200), (a, a),
                              thresholds_us={"optimized": 40, "relaxed": 60})
    svg = summary["svg"]
    lines = xml.dom.minidom.parseString(svg).getElementsByTagName("line")
    assert len(lines) == 2
    assert "optimized 40 us" in svg and "relaxed 60 us" in svg
    # the axis runs past the later threshold, and the markers sit in time order
    xs = sorted(float(line.getAttribute("x1")) for line in lines)
    assert xs[0] < xs[1] < 1400
    _, plain = summary_of(vector_add.make_vector_add_stream(200), (a, a))
    assert not xml.dom.minidom.parseString(plain["svg"]).getElementsByTagName("line")


def test_the_picture_stays_small_for_many_instructions():
    """Busy time is binned per pixel: 4x the instructions, about the same picture."""
    a = np.ones((128, 4), np.float32)
    _, small = summary_of(small_adds, (a, 3_000))
    _, large = summary_of(small_adds, (a, 12_000))
    assert len(large["svg"]) < 100_000
    assert rect_count(large["svg"]) < 1.5 * rect_count(small["svg"]) + 50


def test_profile_cli_marks_the_presets_thresholds(tmp_path, capsys):
    from nkisim.cli import main
    svg = tmp_path / "conv.svg"
    assert main(["profile", "reference_kernels/conv2d_optimized.py", "--preset", "conv2d-32x16-float16-pool1",
                 "--svg", str(svg)]) == 0
    out = capsys.readouterr().out
    assert "bottleneck: " in out
    text = svg.read_text()
    xml.dom.minidom.parseString(text)
    assert "threshold 84 us" in text


@nki.jit
def halves(x, w, tiled):
    """Two 64-row matmuls, on the PE array's two row halves when `tiled`."""
    out = nl.ndarray((2, 64, 512), dtype=nl.float32, buffer=nl.hbm)
    x_sb = nl.load(x)
    w_sb = nl.load(w)
    for h in nl.static_range(2):
        extra = {"tile_position": (64 * h, 0), "tile_size": (64, 128)} if tiled else {}
        part = nisa.nc_matmul(w_sb[64 * h:64 * (h + 1), :], x_sb[64 * h:64 * (h + 1), :], **extra)
        nl.store(out[h], nl.copy(part))
    return out


def test_a_tiled_kernel_is_told_its_matmuls_are_timed_as_untiled():
    x, w = np.ones((128, 512), np.float16), np.ones((128, 64), np.float16)
    from nkisim.cost.profile import build_profile
    profiles = {}
    for tiled in (True, False):
        run = nkisim.run_kernel(halves, (x, w, tiled), {})
        timeline = cost.estimate(run)
        profiles[tiled] = (build_profile(run.trace, timeline), timeline.total_ns)
    tiled, untiled = profiles[True][0], profiles[False][0]
    assert tiled.pe_tiled_matmuls == 2 and "PE tiling mode" in tiled.summary() and "upper bound" in tiled.summary()
    assert untiled.pe_tiled_matmuls == 0 and "PE tiling mode" not in untiled.summary()
    assert profiles[True][1] == profiles[False][1]        # timed alike, as documented


def test_the_hardware_profile_view_unions_intervals_and_takes_medians():
    from nkisim.cost.profile import build_profile, interval_union
    assert interval_union([(0, 10), (5, 15), (20, 30), (21, 22)]) == 25
    assert interval_union([]) == 0
    run = nkisim.run_kernel(matmul_chain, (np.ones((128, 512), np.float16), np.ones((128, 128), np.float16), 50), {})
    timeline = cost.estimate(run)
    profile = build_profile(run.trace, timeline)
    pe = profile.activity["PE"]
    matmuls = [s for r, s in zip(run.trace, timeline.slots) if r.opcode == "nc_matmul"]
    assert pe.instructions == len(matmuls) == 50
    assert abs(pe.busy_us - interval_union((s.start, s.end) for s in matmuls) / 1e3) < 1e-9
    durations = sorted(s.end - s.start for s in matmuls)
    assert pe.median_ns == (durations[24] + durations[25]) / 2
    assert pe.median_interval_ns > 0 and ("DGE-SP" in profile.activity or "DMA-issue" in profile.activity)
    assert "as a hardware profile counts them" in profile.summary() and profile.to_json()["activity"]["PE"]["instructions"] == 50


SPMD_ADD = '''
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def tiled_add(a, b):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    rows = a.shape[0] // nl.num_programs(0)
    i = nl.program_id(0)
    block = slice(i * rows, (i + 1) * rows)
    nl.store(out[block], nl.add(nl.load(a[block]), nl.load(b[block])))
    return out
'''


def test_profile_cli_launches_a_grid_and_reports_a_kernel_error_without_a_traceback(tmp_path, capsys):
    from nkisim.cli import main
    path = tmp_path / "spmd_add.py"
    path.write_text(SPMD_ADD)
    common = ["profile", str(path), "--kernel", "tiled_add", "--input", "256x1024", "--input", "256x1024"]
    assert main(common + ["--grid", "nc2"]) == 0
    out = capsys.readouterr().out
    assert "Vector (DVE), core 1" in out and "8 instructions" in out
    assert main(common + ["--grid", "1"]) == 1            # one instance of 256 rows: too many partitions
    captured = capsys.readouterr()
    assert "err_num_partition_exceed_arch_limit" in captured.err and "Traceback" not in captured.err
    with pytest.raises(SystemExit, match="bad --grid"):
        main(common + ["--grid", "two"])
