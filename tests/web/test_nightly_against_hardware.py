"""The nightly page holds the simulator against Trainium2 where both ran the same references: each
timed test's simulated p99 with the band its report states, the measured p99, the simulator's
error, and whether the error is within the band. The simulated side is a real nightly run; the
hardware side is the row a Trn2 worker's nightly stores (no Trainium here), its p99s set so that
one reference lands within its band and the other outside. The page is read as served, then
in a real browser at 1280 px (test_browser_report.py's fixtures)."""
from __future__ import annotations

import html
import re

from sqlalchemy import select

import grader
from store.models import NightlyResult, NightlyRun
from test_browser_report import chromium, shot, signed_in, site  # noqa: F401  (fixtures)
from workers.nightly import run_nightly


def test_the_nightly_page_holds_the_simulator_against_the_hardware(client_for, db, course_setup, site, chromium):
    night = run_nightly(trigger="manual", backends=["sim"])
    simulated = {r.reference_kernel: r for r in db.scalars(select(NightlyResult).where(
        NightlyResult.nightly_run_id == night))}
    assert set(simulated) == {"conv2d_optimized", "conv2d_relaxed"}
    bands = {}
    for kernel, row in simulated.items():
        test = next(t for t in grader.view_of(grader.Report.from_json(row.report)).tests if t.name == "perf_tiny")
        assert test.band is not None and 0 < test.band < 1, (kernel, test.band)      # a simulated p99 has a band
        bands[kernel] = test.band
    ta = client_for("tara")
    alone = html.unescape(ta.get("/staff/nightly").get_data(as_text=True))
    assert "data-against-hardware" not in alone                   # no hardware night yet: nothing to hold against

    # what a Trn2 worker's nightly stores for the same references: the optimized one measured a
    # little faster than simulated (within its band), the relaxed one twice its band away
    hardware = NightlyRun(status="done", trigger="beat")
    db.add(hardware)
    factors = {"conv2d_optimized": 1 + bands["conv2d_optimized"] / 2, "conv2d_relaxed": 1 + 2 * bands["conv2d_relaxed"]}
    for kernel, row in simulated.items():
        measured = row.p99_us["perf_tiny"] / factors[kernel]
        db.add(NightlyResult(nightly_run=hardware, spec_name=row.spec_name, spec_version=row.spec_version,
                             thresholds_version=row.thresholds_version, reference_kernel=kernel, backend="neuron",
                             p99_us={"perf_tiny": measured}, passed=True, drift=False,
                             implied_thresholds={"perf_tiny": round(1.2 * measured, 1)},
                             thresholds_in_force=row.thresholds_in_force, score_total=row.score_total))
    db.commit()
    page = html.unescape(ta.get("/staff/nightly").get_data(as_text=True))
    for kernel, within in (("conv2d_optimized", True), ("conv2d_relaxed", False)):
        card = page.split(f'data-against-hardware="{simulated[kernel].spec_name}/{kernel}"')[1].split("</table>")[0]
        assert f"{kernel} · simulator against Trainium2</h2>" in card
        assert f"<strong data-within>{int(within)} of 1</strong> timed tests within the simulator's band" in card
        row = re.search(r"<tr[^>]*><td>Performance: one small image, float16</td>.*?</tr>", card, re.S).group(0)
        error = factors[kernel] - 1
        assert f"{simulated[kernel].p99_us['perf_tiny']:.1f} us" in row
        assert f"+/-{bands[kernel] * 100:.0f}%" in row and f"+{error * 100:.1f}%" in row
        assert ("data-outside-band" in row) is not within and ("outside" in row) is not within
    assert "spec versions differ" not in page
    assert "conv2d_optimized · Trainium2 hardware</h2>" in page          # the hardware night's own history too

    browser = signed_in(chromium, site, "tara")
    browser.goto(f"{site}/staff/nightly")
    outside = browser.locator("[data-against-hardware] tr[data-outside-band]")
    assert outside.count() == 1 and "outside" in outside.inner_text()
    shot(browser, "nightly-against-hardware")                        # fits a 1280 px window
