"""The nightly page and the assignment page after a real nightly run in which the relaxed
reference is too close to the optimized one on one test (issue 46 item 5): both say why its
relaxed threshold is not proposed, and the adopt form keeps the one in force."""
from __future__ import annotations

import html
import json
import re

from sqlalchemy import select

from store import specs
from store.models import NightlyResult
from webtest_helpers import ROOT
from workers.nightly import run_nightly

CLOSE_TIERS = ROOT / "tests" / "workers" / "specs" / "close_tiers.toml"


def test_the_nightly_and_assignment_pages_say_why_a_relaxed_threshold_is_not_proposed(client_for, db, course_setup):
    course_setup["assignment"].active = False            # only this spec's references tonight
    # spec_name as the nightly's results name it (a spec given by path would be named by its path)
    close = specs.new_assignment(db, str(CLOSE_TIERS), course=course_setup["course"], name="close", backend="sim",
                                 spec_name="tiny-conv-close-tiers")
    db.commit()
    night = run_nightly(trigger="manual", backends=["sim"])
    relaxed = db.scalar(select(NightlyResult).where(NightlyResult.nightly_run_id == night,
                                                    NightlyResult.reference_kernel == "conv2d_relaxed"))
    optimized = db.scalar(select(NightlyResult).where(NightlyResult.nightly_run_id == night,
                                                      NightlyResult.reference_kernel == "conv2d_optimized"))
    why = relaxed.not_proposed["perf_224_float32"]
    assert "relaxed threshold not proposed" in why

    ta = client_for("tara")
    page = html.unescape(ta.get("/staff/nightly").get_data(as_text=True))
    card = page.split('data-nightly="tiny-conv-close-tiers/conv2d_relaxed/sim"')[1].split("</table>")[0]
    row = re.search(r"<tr><td>Performance: 224x224, float32</td>.*?</tr>", card).group(0)
    assert f"<td data-not-proposed>{why}</td>" in row
    tiny_row = re.search(r"<tr><td>Performance: one small image, float16</td>.*?</tr>", card).group(0)
    assert "data-not-proposed" not in tiny_row and "<td></td></tr>" in tiny_row       # a gap that is real
    optimized_card = page.split('data-nightly="tiny-conv-close-tiers/conv2d_optimized/sim"')[1].split("</table>")[0]
    assert "data-not-proposed" not in optimized_card

    assignment_page = html.unescape(ta.get(f"/staff/assignments/{close.name}").get_data(as_text=True))
    assert f"<p class=\"muted\" data-not-proposed-note>Performance: 224x224, float32: {why}.</p>" in assignment_page
    prefilled = json.loads(re.search(r'<textarea[^>]*name="thresholds"[^>]*>(.*?)</textarea>', assignment_page,
                                     re.S).group(1))
    assert prefilled["perf_224_float32"] == {"optimized": optimized.implied_thresholds["perf_224_float32"],
                                             "relaxed": 1500}          # the relaxed threshold in force stays
    assert prefilled["perf_tiny"] == {"optimized": optimized.implied_thresholds["perf_tiny"],
                                      "relaxed": relaxed.implied_thresholds["perf_tiny"]}
