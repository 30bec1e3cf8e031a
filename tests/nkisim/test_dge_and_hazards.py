"""DMA issue as Trn2 builds it (two hardware DGE queues, triggered from the Sync or Scalar
engine, `engine=` and `dge_mode=` per DMA) and write-after-read / write-after-write hazards:
HBM is never renamed, small on-chip tiles are, tiles too large to hold twice are not."""
import dataclasses
import xml.dom.minidom

import numpy as np
import pytest

import nkisim

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

from nkisim import cost  # noqa: E402
from nkisim.cost.dependencies import hazards  # noqa: E402
from nkisim.cost.profile import build_profile, profile_summary  # noqa: E402
from nkisim.errors import NKISimError  # noqa: E402

P = cost.DEFAULT_PARAMS


def make_row_loads(engines):
    """One 128-row load per entry of `engines` (None: the compiler's choice) into fresh tiles."""

    @nki.jit
    def row_loads(a):
        out = nl.ndarray((128, 4), dtype=a.dtype, buffer=nl.hbm)
        for i, engine in enumerate(engines):
            t = nl.ndarray((128, 4), dtype=a.dtype, buffer=nl.sbuf)
            if engine is None:
                nisa.dma_copy(dst=t, src=a[:, i * 4:(i + 1) * 4])
            else:
                nisa.dma_copy(dst=t, src=a[:, i * 4:(i + 1) * 4], engine=engine)
        nisa.dma_copy(dst=out, src=t)
        return out

    return row_loads


def issue_queues(run, tl):
    return [s.issue_queue for r, s in zip(run.trace, tl.slots) if r.opcode == "dma_copy"]


def test_unplaced_dmas_issue_on_the_sync_engines_dge_one_after_another():
    a = np.ones((128, 400), np.float32)
    run = nkisim.run_kernel(make_row_loads([None] * 100), (a,), {})
    tl = cost.estimate(run)
    assert set(issue_queues(run, tl)) == {"DGE-SP"}
    per = P.dge_issue_ns + 128 * P.dge_issue_per_row_ns
    assert tl.busy_ns["DGE-SP"] == pytest.approx(101 * per)
    issues = sorted((s.issue_start, s.issue_end) for s in tl.slots)
    assert all(b[0] >= a[1] - 1e-6 for a, b in zip(issues, issues[1:]))     # one DGE: back to back


def test_engine_picks_the_dge_and_two_dges_issue_side_by_side():
    a = np.ones((128, 400), np.float32)
    split = [nisa.engine.scalar if i % 2 else nisa.engine.sync for i in range(100)]
    one = cost.estimate(nkisim.run_kernel(make_row_loads([None] * 100), (a,), {}))
    run = nkisim.run_kernel(make_row_loads(split), (a,), {})
    two = cost.estimate(run)
    queues = issue_queues(run, two)
    assert queues[:100] == ["DGE-ACT" if i % 2 else "DGE-SP" for i in range(100)]
    per = P.dge_issue_ns + 128 * P.dge_issue_per_row_ns
    assert two.busy_ns["DGE-ACT"] == pytest.approx(50 * per)
    # the two DGE instances work at once: the issue-bound kernel takes about half as long
    assert two.makespan_ns == pytest.approx(one.makespan_ns / 2, rel=0.1)
    # the Scalar engine's compute pipeline is not held up by its DGE (documented: independent)
    assert "ACT" not in two.busy_ns


def test_the_documented_alternative_both_dges_by_default_is_a_parameter():
    a = np.ones((128, 400), np.float32)
    run = nkisim.run_kernel(make_row_loads([None] * 100), (a,), {})
    both = dataclasses.replace(P, dge_default_queues=("DGE-SP", "DGE-ACT"))
    tl = cost.estimate(run, both)
    queues = issue_queues(run, tl)
    assert 45 <= queues.count("DGE-ACT") <= 56 and queues.count("DGE-SP") + queues.count("DGE-ACT") == 101


@nki.jit
def dge_modes(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a, dge_mode=nisa.dge_mode.none)
    u = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=u, src=a, dge_mode=nisa.dge_mode.swdge)
    nisa.dma_copy(dst=out, src=nisa.tensor_tensor(t, u, op=nl.add), dge_mode=nisa.dge_mode.hwdge,
                  engine=nisa.engine.scalar)
    return out


def test_dge_mode_per_dma_prebuilt_software_or_hardware():
    a = np.ones((128, 64), np.float32)
    run = nkisim.run_kernel(dge_modes, (a,), {})
    np.testing.assert_array_equal(run.outputs, a + a)
    tl = cost.estimate(run)
    prebuilt, software, hardware = [s for r, s in zip(run.trace, tl.slots) if r.opcode == "dma_copy"]
    assert prebuilt.issue_queue == "DMA-issue" and prebuilt.issue_end - prebuilt.issue_start == P.static_issue_ns
    assert software.issue_queue == "POOL"           # GpSimd generates the descriptors
    assert hardware.issue_queue == "DGE-ACT"


@pytest.mark.parametrize("mode, engine, says", [
    (nisa.dge_mode.hwdge, nisa.engine.vector, "nisa.engine.sync or nisa.engine.scalar"),
    (nisa.dge_mode.unknown, nisa.engine.tensor, "nisa.engine.sync or nisa.engine.scalar"),
    (nisa.dge_mode.none, nisa.engine.sync, "dge_mode=none prebuilds descriptors"),
    (nisa.dge_mode.swdge, nisa.engine.scalar, "nisa.engine.gpsimd")])
def test_engine_that_cannot_trigger_the_dma_is_refused_with_the_fix(mode, engine, says):
    @nki.jit
    def bad(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a, dge_mode=mode, engine=engine)
        return a

    with pytest.raises(NKISimError) as err:
        nkisim.run_kernel(bad, (np.ones((128, 4), np.float32),), {})
    assert says in str(err.value) and "dma_copy" in str(err.value)


# ----- hazards ---------------------------------------------------------------------------------

@nki.jit
def hbm_scratch_reuse(a):
    """Write an HBM scratch, read it back, overwrite it: the overwrite must wait for the read
    (WAR) and for the first write (WAW); HBM cannot be renamed."""
    out = nl.ndarray((2, 128, 512), dtype=a.dtype, buffer=nl.hbm)
    scratch = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.hbm)
    for k in range(2):
        t = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[k])
        nisa.dma_copy(dst=scratch, src=t)             # write
        back = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=back, src=scratch)          # read
        nisa.dma_copy(dst=out[k], src=back)
    return out


def test_overwriting_hbm_waits_for_its_readers_and_writers():
    a = np.random.default_rng(0).random((2, 128, 512), dtype=np.float32)
    run = nkisim.run_kernel(hbm_scratch_reuse, (a,), {})
    np.testing.assert_array_equal(run.outputs, a)
    ops = run.trace
    tracked = cost.hazard_tracked(run.program.allocs, P)
    found = hazards(ops, tracked)
    # records: 0 load, 1 write scratch, 2 read scratch, 3 store, 4 load, 5 write scratch again, ...
    assert set(found[5]) == {1, 2}
    tl = cost.estimate(run)
    second_write, first_read = tl.slots[5], tl.slots[2]
    assert second_write.start >= first_read.end + P.dma_hazard_hop_ns + P.dma_start_latency_ns - 1e-6
    assert second_write.hazard_wait > 0 and tl.hazard_count >= 1
    # it was issued before the read finished: only its data movement waited
    assert second_write.issue_end < first_read.end


@nki.jit
def sbuf_rewrite(a, big):
    """A tile loaded, read by an add, then reloaded: small tiles are renamed (no wait), a tile
    too large to hold twice is not (the reload waits for the add)."""
    out = nl.ndarray((128, 8), dtype=a.dtype, buffer=nl.hbm)
    free = 120 * 1024 // 4 if big else 8
    t = nl.ndarray((128, free), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[:, 0:8], src=a)
    s = nisa.tensor_tensor(t[:, 0:8], t[:, 0:8], op=nl.add)
    nisa.dma_copy(dst=t[:, 0:8], src=a)
    nisa.dma_copy(dst=out, src=nisa.tensor_tensor(s, t[:, 0:8], op=nl.add))
    return out


@pytest.mark.parametrize("big", [False, True])
def test_onchip_tiles_are_renamed_while_two_copies_fit(big):
    a = np.ones((128, 8), np.float32)
    run = nkisim.run_kernel(sbuf_rewrite, (a, big), {})
    np.testing.assert_array_equal(run.outputs, 3 * a)
    tl = cost.estimate(run)
    add, reload = tl.slots[1], tl.slots[2]
    if big:          # 120 KiB a partition: two copies do not fit 224 KiB, so the reload waits
        assert reload.start >= add.end + P.dma_hazard_hop_ns + P.dma_start_latency_ns - 1e-6
        assert reload.hazard_wait > 0
    else:
        assert reload.hazard_wait == 0
        assert reload.start == pytest.approx(reload.issue_end + P.dma_start_latency_ns)


def test_hazards_leave_the_calibration_kernels_where_they_were():
    """No calibration kernel rewrites memory another instruction still uses, except into
    distinct elements: element-exact hazards leave their timelines alone."""
    from reference_kernels import calibration, vector_add
    v = np.random.default_rng(1).random(25600, dtype=np.float32)
    for run in (nkisim.run_kernel(vector_add.make_vector_add_tiled(128), (v, v), {}),
                nkisim.run_kernel(vector_add.make_vector_add_stream(2), (v, v), {}),
                nkisim.run_kernel(calibration.transpose_per_tile, (np.ones((512, 512), np.float32),), {})):
        with_hazards = cost.estimate(run)
        without = cost.schedule(run.trace, P)
        assert with_hazards.hazard_count == 0
        assert with_hazards.total_ns == pytest.approx(without.total_ns)


@nki.jit
def strided_stores(a):
    """Column pairs of a (128, 16) output, one store each: the stores share 64-byte granules."""
    out = nl.ndarray((128, 16), dtype=a.dtype, buffer=nl.hbm)
    for j in range(8):
        t = nl.ndarray((128, 2), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[:, 2 * j:2 * j + 2])
        nisa.dma_copy(dst=out[:, 2 * j:2 * j + 2], src=t)
    return out


def test_granule_hazards_order_stores_into_one_granule_when_enabled():
    a = np.ones((128, 16), np.float32)
    run = nkisim.run_kernel(strided_stores, (a,), {})
    stores = [i for i, r in enumerate(run.trace) if r.writes[0].buffer == "hbm"]
    exact = hazards(run.trace, cost.hazard_tracked(run.program.allocs, P))
    assert all(not exact[i] for i in stores)           # element-exact: distinct columns, no hazard
    granular = dataclasses.replace(P, dma_hazard_granule_bytes=64)
    found = hazards(run.trace, cost.hazard_tracked(run.program.allocs, granular))
    # 64-byte granules hold 16 fp32 values: every store shares one with the one before
    assert all(found[b] == (a_,) for a_, b in zip(stores, stores[1:]))
    assert cost.estimate(run, granular).hazard_count == 7


# ----- the profile shows both ----------------------------------------------------------------

def test_profile_shows_both_dge_queues_and_hazard_waits():
    a = np.random.default_rng(0).random((2, 128, 512), dtype=np.float32)
    run = nkisim.run_kernel(hbm_scratch_reuse, (a,), {})
    tl = cost.estimate(run)
    prof = build_profile(run.trace, tl)
    assert prof.hazard_waits >= 1 and prof.hazard_wait_us > 0
    assert "test_dge_and_hazards.py" in prof.hazard_lines[0]["line"]
    text = prof.summary()
    assert "hazard waits" in text and "DGE from Sync" in text
    svg = profile_summary(run.trace, tl)["svg"]
    xml.dom.minidom.parseString(svg)
    assert ">hazard waits<" in svg and ">hazard wait</text>" in svg and ">DGE from Sync<" in svg
    assert ">DGE from Scalar<" in svg and prof.engines["DGE-ACT"].instructions == 0   # shown, idle

    split = [nisa.engine.scalar if i % 2 else None for i in range(20)]
    run = nkisim.run_kernel(make_row_loads(split), (np.ones((128, 80), np.float32),), {})
    tl = cost.estimate(run)
    prof = build_profile(run.trace, tl)
    assert prof.engines["DGE-SP"].instructions == 11 and prof.engines["DGE-ACT"].instructions == 10
    svg = profile_summary(run.trace, tl)["svg"]
    assert ">DGE from Sync<" in svg and ">DGE from Scalar<" in svg


def test_an_issue_bound_kernel_on_one_dge_is_told_about_the_other():
    a = np.ones(25600, np.float32)
    from reference_kernels import vector_add
    _, summary = None, profile_summary(*(lambda r: (r.trace, cost.estimate(r)))(
        nkisim.run_kernel(vector_add.make_vector_add_tiled(128), (a, a), {})))
    assert summary["verdict"].startswith("DMA issue bound: 600 DMAs issued one after another on the DGE from Sync")
    assert "engine=nisa.engine.scalar" in summary["verdict"]


# ----- adjacent DMAs issued as one (C5) ------------------------------------------------------

def make_row_dmas(step):
    """Per output row, three input rows of every channel tile by three DMAs from one line into
    one tile; `step` 1 takes rows h, h+1, h+2 (each DMA continues the last), 2 skips rows."""

    @nki.jit
    def row_dmas(x):
        C, H, W = x.shape
        out = nl.ndarray((C, 2, 3 * W), dtype=x.dtype, buffer=nl.hbm)
        for h in range(2):
            rows = nl.ndarray((C, 3, W), dtype=x.dtype, buffer=nl.sbuf)
            for r in range(3):
                nisa.dma_copy(dst=rows[:, r, :], src=x[:, h + step * r, :])
            nisa.dma_copy(dst=out[:, h, :], src=rows.reshape((C, 3 * W)))
        return out

    return row_dmas


def test_dmas_that_continue_each_other_issue_as_one():
    from nkisim.cost.merge import adjacent_dma_groups
    x = np.random.default_rng(2).random((128, 8, 224)).astype(np.float16)
    run = nkisim.run_kernel(make_row_dmas(1), (x,), {})
    np.testing.assert_array_equal(run.outputs[:, 1], x[:, 1:4].reshape(128, -1))   # values untouched
    assert adjacent_dma_groups(run.trace) == [(0, 1, 2), (4, 5, 6)]
    tl = cost.estimate(run)
    assert tl.dma_count == 4              # two merged loads, two stores
    lead, *riders = tl.slots[0:3]
    # one issue for the three, whose rows are three times as long
    assert lead.issue_end - lead.issue_start == pytest.approx(P.dge_issue_ns + 128 * P.dge_issue_per_row_ns)
    assert all(s.issue_end == s.issue_start and s.end == lead.end for s in riders)
    unmerged = cost.estimate(run, dataclasses.replace(P, dma_merge_adjacent=False))
    assert unmerged.dma_count == 8 and unmerged.total_ns > tl.total_ns
    # the profile counts the DGE issues (one per merged group) and their time once
    prof = build_profile(run.trace, tl)
    assert prof.engines["DGE-SP"].instructions == 4
    assert prof.engines["DGE-SP"].busy_us == pytest.approx(tl.busy_ns["DGE-SP"] / 1e3)
    assert tl.busy_ns["DGE-SP"] == pytest.approx(4 * (P.dge_issue_ns + 128 * P.dge_issue_per_row_ns))


def test_dmas_that_skip_rows_stay_separate():
    from nkisim.cost.merge import adjacent_dma_groups
    x = np.random.default_rng(2).random((128, 8, 224)).astype(np.float16)
    run = nkisim.run_kernel(make_row_dmas(2), (x,), {})
    assert adjacent_dma_groups(run.trace) == []
    assert cost.estimate(run).dma_count == 8


KERNEL_FILE = '''
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def staged(a):
    """Rows through an HBM scratch that is overwritten while its last reader may still run;
    every other load triggered from the Scalar engine."""
    out = nl.ndarray((4, 128, 512), dtype=a.dtype, buffer=nl.hbm)
    scratch = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.hbm)
    for k in range(4):
        t = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[k], engine=nisa.engine.scalar if k % 2 else nisa.engine.sync)
        nisa.dma_copy(dst=scratch, src=t)
        back = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=back, src=scratch)
        nisa.dma_copy(dst=out[k], src=back)
    return out
'''


def test_profile_command_shows_both_dges_and_hazard_waits(tmp_path, capsys):
    import json
    from nkisim.cli import main
    kernel = tmp_path / "staged.py"
    kernel.write_text(KERNEL_FILE)
    svg, js = tmp_path / "t.svg", tmp_path / "t.json"
    assert main(["profile", str(kernel), "--kernel", "staged", "--input", "4x128x512:float32",
                 "--svg", str(svg), "--json", str(js)]) == 0
    out = capsys.readouterr().out
    assert "DGE from Sync" in out and "DGE from Scalar" in out
    assert "hazard waits" in out and "staged.py:" in out.split("hazard waits")[1]
    data = json.loads(js.read_text())
    assert data["hazard_waits"] >= 3 and data["engines"]["DGE-ACT"]["instructions"] == 2
    text = svg.read_text()
    xml.dom.minidom.parseString(text)
    assert ">DGE from Sync<" in text and ">DGE from Scalar<" in text and ">hazard waits<" in text


@nki.jit
def scratch_ping(a, count):
    """`count` round trips of one tile through one HBM scratch: each overwrite of the scratch
    waits for the previous read of it, though its own data is ready from the start."""
    out = nl.ndarray((count, 128, 64), dtype=a.dtype, buffer=nl.hbm)
    scratch = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.hbm)
    t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    for i in range(count):
        nisa.dma_copy(dst=scratch, src=t, engine=nisa.engine.sync)
        back = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=back, src=scratch, engine=nisa.engine.scalar)
        nisa.dma_copy(dst=out[i], src=back, engine=nisa.engine.scalar)
    return out


def test_a_kernel_bound_by_reuse_is_told_so():
    a = np.random.default_rng(3).random((128, 64), dtype=np.float32)
    run = nkisim.run_kernel(scratch_ping, (a, 20), {})
    np.testing.assert_array_equal(run.outputs, np.broadcast_to(a, (20, 128, 64)))
    summary = profile_summary(run.trace, cost.estimate(run))
    assert summary["verdict"].startswith("Latency-bound by reuse: ")
    assert "test_dge_and_hazards.py" in summary["verdict"] and "fresh scratch" in summary["verdict"]


@nki.jit
def poke_and_read(a, count):
    """`count` one-element writes into one HBM tensor, each followed by a read of all of it:
    every write must wait for the reads before it (the hazard scan must stay bounded)."""
    out = nl.ndarray((1, count), dtype=a.dtype, buffer=nl.hbm)
    t = nl.ndarray((1, count), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    for j in range(count):
        nisa.dma_copy(dst=out[0:1, j:j + 1], src=t[0:1, j:j + 1])
        back = nl.ndarray((1, count), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=back, src=out)
    return out


def test_many_overwrites_of_read_memory_wait_for_the_newest_reads_in_bounded_work():
    count = 3000
    run = nkisim.run_kernel(poke_and_read, (np.ones((1, count), np.float32), count), {})
    found = hazards(run.trace, cost.hazard_tracked(run.program.allocs, P))
    writes = [i for i, r in enumerate(run.trace) if r.writes[0].buffer == "hbm"]
    assert all(len(found[i]) <= 32 for i in writes)
    # each write waits for the read of the whole tensor just before it
    assert all(w - 1 in found[w] for w in writes[1:])
