"""A TA's page of a run graded on both backends (a borderline = "hardware" submission timed again
on Trainium) holds the simulator against the hardware: per timed test the simulated p99 with its
band, the measured p99 and the simulator's error, on both runs' pages, each linking the other.
The assignment's export of these pairs (a staff task) names kernels by sha256 and runs by id, not
students. The hardware grade is a real one through the Neuron SDK's contract doubles
(tests/doubles: the Trn2 worker's Python, compile, libnrt, neuron-profile), of the same kernel the
simulated run graded."""
from __future__ import annotations

import csv
import html
import io
import os
import re
import sys
import tomllib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "doubles"))

from fixtures import grade_on, sdk  # noqa: E402,F401
from webtest_helpers import OPTIMIZED, TINY_SPEC, export_in_process, store_graded_run  # noqa: E402

import grader  # noqa: E402


def test_a_run_graded_on_both_backends_holds_the_simulator_against_the_hardware(client_for, db, course_setup,
                                                                               tiny_reports, sdk, tmp_path):
    simulated = tiny_reports["optimized"]
    measured = grader.Report.from_json(grade_on(sdk, "legacy", tomllib.loads(TINY_SPEC.read_text()), OPTIMIZED,
                                                tmp_path, seed=7))
    assert measured.backend == "neuron"
    sim_run = store_graded_run(db, course_setup["alice"], course_setup["assignment"], simulated)
    hw_run = store_graded_run(db, course_setup["alice"], course_setup["assignment"], measured,
                              submission=sim_run.submission)
    sim_test = grader.view_of(simulated).test("perf_tiny")
    hw_test = grader.view_of(measured).test("perf_tiny")
    assert sim_test.band is not None and hw_test.band is None          # a measured p99 has no band
    error = sim_test.p99_us / hw_test.p99_us - 1

    ta = client_for("tara")
    for run, other in ((sim_run, hw_run), (hw_run, sim_run)):
        page = html.unescape(ta.get(f"/staff/runs/{run.id}").get_data(as_text=True))
        card = page.split(f'data-against-run="{other.id}"')[1].split("</table>")[0]
        assert f'<a href="/staff/runs/{other.id}">run #{other.id}</a>' in card
        row = re.search(r"<tr[^>]*><td>Performance: one small image, float16</td>.*?</tr>", card, re.S).group(0)
        assert f"{sim_test.p99_us:.1f} us" in row and f"{hw_test.p99_us:.1f} us" in row
        assert f"+/-{sim_test.band * 100:.0f}%" in row and f"{error * 100:+.1f}%" in row
        within = abs(error) <= sim_test.band
        assert ("data-outside-band" in row) is not within
        assert f"<strong data-within>{int(within)} of 1</strong>" in card

    # a run graded on one backend only has no such card
    alone = store_graded_run(db, course_setup["bob"], course_setup["assignment"], simulated)
    assert "data-against-run" not in ta.get(f"/staff/runs/{alone.id}").get_data(as_text=True)
    # and a student's own pages never show it (the staff's reading of the cost model)
    assert "data-against-run" not in client_for("alice").get(f"/runs/{sim_run.id}/report").get_data(as_text=True)

    # the assignment's export: the submission graded on both, one line per timed test; bob's
    # simulated-only run is not in it, and no line names a student
    text = export_in_process(ta, "tiny", "agreement_csv").decode()
    lines = list(csv.DictReader(io.StringIO(text)))
    assert [(r["submission_sha256"], r["simulated_run_id"], r["hardware_run_id"], r["test"]) for r in lines] == [
        (sim_run.submission.sha256, str(sim_run.id), str(hw_run.id), "perf_tiny")]
    line = lines[0]
    assert float(line["simulated_p99_us"]) == round(sim_test.p99_us, 3)
    assert float(line["measured_p99_us"]) == round(hw_test.p99_us, 3)
    assert float(line["error"]) == round(error, 4) and line["bound"] == sim_test.bound
    assert line["within_band"] == ("yes" if abs(error) <= sim_test.band else "no")
    assert "alice" not in text and "bob" not in text and "@" not in text
