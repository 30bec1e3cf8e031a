"""Student pages: upload (every input error clear, 4xx, nothing stored), the rate limit and
deadline, live status, reports, history, and what a student may not see."""
from __future__ import annotations

import datetime as dt
import io
import tarfile

import pytest
from sqlalchemy import func, select

from webtest_helpers import OPTIMIZED, csrf_of, multipart, store_graded_run


def upload(client, filename: str, data: bytes, assignment: str = "tiny"):
    token = csrf_of(client.get(f"/a/{assignment}").get_data(as_text=True))
    body, content_type = multipart({"csrf_token": token}, "file", filename, data)
    return client.post(f"/a/{assignment}/submit", data=body, content_type=content_type)


def stored_counts(db) -> tuple[int, int]:
    from store.models import GradingRun, Submission
    db.expire_all()
    return db.scalar(select(func.count()).select_from(Submission)), db.scalar(select(func.count()).select_from(GradingRun))


def traversal_archive() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name in ("part2/conv2d.py", "../../etc/evil.py"):
            info = tarfile.TarInfo(name)
            info.size = len(OPTIMIZED)
            tar.addfile(info, io.BytesIO(OPTIMIZED))
    return buffer.getvalue()


BAD_UPLOADS = {
    "wrong file name": ("solution.py", OPTIMIZED, "conv2d.py"),
    "syntax error": ("conv2d.py", b"def fused_conv2d_maxpool(X, W, bias, pool_size=1)\n    return X\n", "line"),
    "path traversal": ("asst4.tar.gz", traversal_archive(), ".."),
    "oversize": ("conv2d.py", b"#" * (17 * 1024 * 1024 + 10), "16 MiB"),
    "not UTF-8": ("conv2d.py", b"# \xff\xfe caf\xe9\n" + OPTIMIZED, "UTF-8"),
}


@pytest.mark.parametrize("case", list(BAD_UPLOADS))
def test_bad_upload_is_explained_inline_and_nothing_is_stored(client_for, db, case):
    filename, data, expected = BAD_UPLOADS[case]
    response = upload(client_for("alice"), filename, data)
    page = response.get_data(as_text=True)
    assert 400 <= response.status_code < 500
    assert expected in page
    if response.status_code != 413:              # above the request limit the error page says it alone
        assert "data-upload-error" in page        # shown inline, on the upload form
    assert stored_counts(db) == (0, 0)


def test_upload_queues_a_run_and_status_updates_from_the_database(client_for, db, course_setup):
    client = client_for("alice")
    response = upload(client, "conv2d.py", OPTIMIZED)
    assert response.status_code == 303
    run_url = response.headers["Location"]
    page = client.get(run_url).get_data(as_text=True)
    assert "data-run-status" in page and "queued" in page
    run_id = int(run_url.rsplit("/", 1)[1])
    status = client.get(f"/runs/{run_id}/status").get_json()
    assert status == {"run_id": run_id, "status": "queued", "status_title": "queued", "final": False, "queue_position": 1, "done": 0, "total": 0,
                      "tests": [], "estimate_s": None, "score": None, "max_score": None,
                      "score_text": None, "waiting": status["waiting"]}
    assert "No simulated (nkisim) grading worker is running" in status["waiting"]   # why it waits, in words
    assert stored_counts(db) == (1, 1)
    # one in flight at a time: a second upload is refused with the reason, nothing stored
    again = upload(client, "conv2d.py", OPTIMIZED)
    assert again.status_code == 429
    assert "already have a run queued" in again.get_data(as_text=True)
    assert "it passes the static check" in again.get_data(as_text=True)      # only the grading waits
    assert stored_counts(db) == (1, 1)
    # a broken file is said to be broken at once, even with a run in flight; still nothing stored
    broken = upload(client, "conv2d.py", b"def fused_conv2d_maxpool(X, W, bias, pool_size:\n")
    page = broken.get_data(as_text=True)
    assert broken.status_code == 429 and "data-static-check" in page
    assert "would not pass the static check" in page and "syntax error on line 1" in page
    rejected = upload(client, "conv2d.py", OPTIMIZED + b"\nimport subprocess\nsubprocess.run(['true'])\n")
    page = rejected.get_data(as_text=True)
    assert "would not pass the static check" in page and "subprocess" in page
    assert stored_counts(db) == (1, 1)
    assert client.get(f"/runs/{run_id}/report").status_code == 409    # no report before it is graded


def test_hourly_limit_and_deadline(client_for, db, course_setup, tiny_reports):
    alice, assignment = course_setup["alice"], course_setup["assignment"]
    for _ in range(3):                                   # runs_per_hour = 3 in course_setup
        store_graded_run(db, alice, assignment, tiny_reports["relaxed"])
    client = client_for("alice")
    page = client.get("/a/tiny").get_data(as_text=True)
    assert "<strong>0</strong> left this hour" in page
    refused = upload(client, "conv2d.py", OPTIMIZED)
    assert refused.status_code == 429 and "all 3 graded runs" in refused.get_data(as_text=True)
    assignment.deadline = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)
    assignment.late_rule = "none"                        # the refusing rule (test_late_policy.py: the others)
    db.commit()
    late = upload(client_for("bob"), "conv2d.py", OPTIMIZED)
    assert late.status_code == 403 and "deadline" in late.get_data(as_text=True)
    assert stored_counts(db) == (3, 3)


def test_report_history_and_what_others_cannot_see(client_for, db, course_setup, tiny_reports):
    alice = course_setup["alice"]
    run = store_graded_run(db, alice, course_setup["assignment"], tiny_reports["optimized"])
    mine = client_for("alice")
    report = mine.get(f"/runs/{run.id}/report")
    assert report.status_code == 200
    page = report.get_data(as_text=True)
    assert "Correctness: one small image" in page and 'data-chart="p99"' in page
    assert "424242" not in page                                  # the private seed never reaches a student
    assert "data-mfu" in page and "data-hotspots" in page and "conv2d.py:" in page   # the simulated profile
    timeline = mine.get(f"/runs/{run.id}/timeline/perf_tiny.svg")
    assert timeline.mimetype == "image/svg+xml" and timeline.get_data(as_text=True).startswith("<svg")
    assert "default-src 'none'" in timeline.headers["Content-Security-Policy"]
    history = mine.get("/a/tiny").get_data(as_text=True)
    assert f"/runs/{run.id}" in history and "Your score over time" in history
    bob = client_for("bob")
    for path in (f"/runs/{run.id}", f"/runs/{run.id}/report", f"/runs/{run.id}/status",
                 f"/runs/{run.id}/timeline/perf_tiny.svg"):
        assert bob.get(path).status_code == 404, path
    for path in ("/staff/", "/staff/submissions", f"/staff/runs/{run.id}", "/staff/roster", "/staff/nightly",
                 "/staff/assignments/tiny", "/staff/tasks/1"):
        assert bob.get(path).status_code == 403, path
    assert client_for(None).get(f"/runs/{run.id}/report").status_code == 302     # anonymous: sign in first


def test_run_page_fills_in_tests_as_they_finish_with_an_estimate(client_for, db, course_setup, tiny_reports):
    """A running grade shows a progress bar, the tests finished so far (title, status, points, p99)
    and the time left, from the median of recent grades of the same assignment."""
    import datetime as dt
    from grader import render
    from store.models import GradingRun
    alice, assignment = course_setup["alice"], course_setup["assignment"]
    report = tiny_reports["optimized"]
    earlier = store_graded_run(db, course_setup["bob"], assignment, report)
    earlier.started_at = earlier.finished_at - dt.timedelta(seconds=100)         # a typical grade: 100 s
    running = store_graded_run(db, alice, assignment, report)
    finished_tests = [render.test_summary(report.tests[0])]
    running.status, running.score_total, running.report, running.finished_at = "running", None, None, None
    running.started_at = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=30)
    running.progress_done, running.progress_total = 1, len(report.tests)
    running.progress_tests = finished_tests
    db.commit()

    client = client_for("alice")
    status = client.get(f"/runs/{running.id}/status").get_json()
    assert status["status"] == "running" and status["done"] == 1 and status["tests"] == finished_tests
    assert 60 <= status["estimate_s"] <= 70                 # 100 s typical, 30 s already spent
    page = client.get(f"/runs/{running.id}").get_data(as_text=True)
    assert '<progress data-field="progress_bar" max="%d" value="1">' % len(report.tests) in page
    assert len(report.tests) >= 2 and report.tests[0].title in page and report.tests[1].title not in page
    assert "Time left" in page and "about 1 min" in page
    assert db.get(GradingRun, earlier.id).status == "done"

    # Walked as a student: a grade slower than the last one read "Time left: about 0 s" with most
    # of its tests to go. Past the typical grade, the time left is not known, and not said.
    running.started_at = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=130)
    db.commit()
    assert client.get(f"/runs/{running.id}/status").get_json()["estimate_s"] is None
    assert "about 0 s" not in client.get(f"/runs/{running.id}").get_data(as_text=True)


def test_the_run_page_total_shows_the_regular_points_under_extra_credit(client_for, db, course_setup, tiny_reports):
    """Walked as a student: the run page said "Score 65 / 70" for a grade that lost 10 regular
    points and earned 5 of extra credit; it says what the report says."""
    from store.models import TestResultRow
    report = tiny_reports["optimized"]
    run = store_graded_run(db, course_setup["alice"], course_setup["assignment"], report)
    lost = report.score.max_total / 2                       # as if half the regular points were lost
    run.score_total, run.max_total = report.score.max_total - lost + 5, report.score.max_total
    db.add(TestResultRow(run_id=run.id, test_name="ec_extra", kind="extra_credit", status="passed", points=5,
                         max_points=5))
    db.commit()
    total = f"{report.score.max_total - lost + 5:g}/{report.score.max_total:g}"
    expected = f"{total} (regular {report.score.max_total - lost:g}/{report.score.max_total:g} + extra credit 5)"
    client = client_for("alice")
    assert client.get(f"/runs/{run.id}/status").get_json()["score_text"] == expected
    assert expected in client.get(f"/runs/{run.id}").get_data(as_text=True)


def test_a_run_the_grader_gave_up_on_says_so_in_words_not_its_id(client_for, db, course_setup, tiny_reports):
    """Walked as a student: a run whose grading failed on our side read "infra_error" on the run
    page, the assignment page and the staff list."""
    run = store_graded_run(db, course_setup["alice"], course_setup["assignment"], tiny_reports["optimized"])
    run.status, run.report, run.score_total = "infra_error", None, None
    db.commit()
    client = client_for("alice")
    status = client.get(f"/runs/{run.id}/status").get_json()
    assert status["status"] == "infra_error" and status["status_title"] == "grader error" and status["final"]
    for page in (client.get(f"/runs/{run.id}"), client.get("/a/tiny"), client_for("tara").get("/staff/submissions"),
                 client_for("tara").get(f"/staff/runs/{run.id}")):
        text = page.get_data(as_text=True)
        assert ">grader error</span>" in text and ">infra_error<" not in text


def test_report_page_engine_instructions_and_json_download(client_for, db, course_setup, tiny_reports):
    import json
    run = store_graded_run(db, course_setup["alice"], course_setup["assignment"], tiny_reports["optimized"])
    client = client_for("alice")
    page = client.get(f"/runs/{run.id}/report").get_data(as_text=True)
    engines = page.split("<h4>Engines</h4>", 1)[1].split("</table>", 1)[0]
    counts = [row.rsplit('<td class="num">', 1)[1].split("<", 1)[0] for row in engines.split("<tr>")[2:]]
    assert counts and all(c.isdigit() for c in counts) and sum(map(int, counts)) > 0    # no "-" column
    assert f'href="/runs/{run.id}/report.json"' in page
    download = client.get(f"/runs/{run.id}/report.json")
    assert download.status_code == 200 and "attachment" in download.headers["Content-Disposition"]
    data = json.loads(download.get_data(as_text=True))
    assert data["score"]["total"] == tiny_reports["optimized"].score.total and "seed" not in data
    assert client_for("bob").get(f"/runs/{run.id}/report.json").status_code == 404      # not someone else's


def test_the_web_report_shows_the_header_the_terminal_shows(client_for, db, course_setup):
    """A file the static check rejects: the web report lists every line of the terminal's header
    (the rejection and each finding), not an empty error."""
    import grader
    from grader import render
    from webtest_helpers import TINY_SPEC
    spec = grader.load_spec(str(TINY_SPEC))
    source = OPTIMIZED + b"\nimport subprocess\nsubprocess.run(['true'])\n"
    report = grader.grade(grader.submission_from_bytes("conv2d.py", source, spec), spec,
                          grader.GradeOptions(backend="sim", seed=3))
    assert report.rejections
    run = store_graded_run(db, course_setup["alice"], course_setup["assignment"], report, data=source)
    page = client_for("alice").get(f"/runs/{run.id}/report").get_data(as_text=True)
    import html
    import re
    shown = html.unescape(re.sub(r"<[^>]+>", "", page))           # the text, as a reader sees it
    assert "data-report-header" in page
    for line in render.header_lines(report):
        assert line.strip() in shown, line
    # each test of the rejected file says why it did not run, and the flag points at the header
    messages = [row.split("<td data-message>", 1)[1].split("</td>", 1)[0] for row in page.split("<tr data-test=")[1:]]
    assert len(messages) == len(report.tests) and all(m.startswith("not run: its file was rejected") for m in messages)
    assert "listed above" not in shown and "listed at the top of this report" in shown


def test_an_upload_without_a_file_says_its_remedy_once(client_for, db):
    """Finding: the remedy was doubled (the field's error, itself a remedy, was the message and
    another remedy was added under it)."""
    client = client_for("alice")
    token = csrf_of(client.get("/a/tiny").get_data(as_text=True))
    response = client.post("/a/tiny/submit", data={"csrf_token": token})
    page = response.get_data(as_text=True)
    box = page.split("data-upload-error", 1)[1].split("</div>\n</div>", 1)[0]
    assert response.status_code == 400 and "No file was received." in box
    assert box.count("Choose") == 1, box
    assert stored_counts(db) == (0, 0)


def test_the_report_page_draws_units_maxima_and_the_profile_from_the_view(client_for, db, course_setup,
                                                                             tiny_reports):
    """Threshold cells carry their unit, every score its maximum, the profile its roofline limit and
    achieved TFLOP/s, and the page says how to see why a kernel is slow."""
    import html
    import grader
    report = tiny_reports["relaxed"]
    view = grader.view_of(report)
    run = store_graded_run(db, course_setup["alice"], course_setup["assignment"], report)
    page = html.unescape(client_for("alice").get(f"/runs/{run.id}/report").get_data(as_text=True))
    assert "<td class=\"num\">40 us</td>" in page and "<td class=\"num\">60 us</td>" in page
    for group in view.points.groups:
        if group.maximum is not None:
            assert f"{grader.report_view.format_points(group.earned)} <span class=\"muted\">/ " \
                   f"{grader.report_view.format_points(group.maximum)}</span>" in page
    timed = next(t for t in view.tests if t.profile)
    assert "data-tflops" in page and f"{timed.profile.achieved_tflops:.2f} TFLOP/s" in page
    assert f"{timed.profile.roofline_limit}-bound" in page and timed.profile.roofline_limit in ("compute", "memory")
    assert view.slow_hint and "data-slow-hint" in page and "<code>nkisim profile --help</code>" in page


def test_the_upload_form_asks_for_the_assignments_own_files_in_its_dialect(client_for, db, course_setup):
    """The form names the spec's kernel files (the tiny spec: conv2d.py alone, no archive) and its
    NKI dialect; the bundled asst4 spec's two files and an archive of them. Never another
    assignment's file names."""
    from store import specs
    page = client_for("alice").get("/a/tiny").get_data(as_text=True)
    hint = page.split("data-upload-hint>", 1)[1].split("</p>", 1)[0]
    assert "<code>conv2d.py</code>" in hint and "kernels.py" not in hint and "archive" not in hint
    assert "legacy NKI (neuronxcc.nki, NKI 0.1) on Neuron SDK 2.26" in hint
    asst4 = specs.new_assignment(db, "asst4-trainium2-nki06", course=course_setup["course"], name="asst4",
                                 backend="sim")
    db.commit()
    page = client_for("alice").get(f"/a/{asst4.name}").get_data(as_text=True)
    hint = page.split("data-upload-hint>", 1)[1].split("</p>", 1)[0]
    assert "<code>conv2d.py</code>" in hint and "<code>kernels.py</code>" in hint and "an archive of them" in hint
    assert "NKI 0.6 (nki) on Neuron SDK 2.32" in hint
