"""Issue 46's rough edges, through the site's own routes (the browser's view of them is in
test_browser_rough_edges.py): course-first guidance on a fresh site, an assignment title of its
own, starter files to download, a confirmed regrade marked in the history, a warning when no
worker serves the backend, a kernel error shown once, graded leaderboard columns first, and the
one name of a student without a nickname."""
from __future__ import annotations

import datetime as dt
import html
import io
import re
import zipfile

from sqlalchemy import select

import grader
from webtest_helpers import OPTIMIZED, PASSWORD, ROOT, TINY_SPEC, csrf_of, login, store_graded_run

# a kernel that breaks the partition limit on every configuration: the same error in each test
BROKEN = (b"import neuronxcc.nki as nki\nimport neuronxcc.nki.language as nl\n\n\n@nki.jit\n"
          b"def fused_conv2d_maxpool(X, W, bias, pool_size=1):\n"
          b"    t = nl.ndarray((256, 4), dtype=X.dtype, buffer=nl.sbuf)\n    return t\n")


def post_form(client, page_url: str, action: str, data: dict):
    token = csrf_of(client.get(page_url).get_data(as_text=True))
    return client.post(action, data={"csrf_token": token, **data})


def text_of(response) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", response.get_data(as_text=True)))


def lone_admin(db):
    """A fresh site's first admin: no course, no assignment."""
    from store.models import User
    from web import accounts
    admin = User(email="root@example.edu", name="Root", role="admin", active=True)
    accounts.set_password(admin, PASSWORD)
    db.add(admin)
    db.commit()
    return admin


def test_a_fresh_site_says_to_create_a_course_first(app, db):
    lone_admin(db)
    admin = app.test_client()
    assert login(admin, "root@example.edu").status_code == 302
    console = admin.get("/staff/").get_data(as_text=True)
    assert "data-no-course" in console and "create a course first" in console
    link = re.search(r'<a class="button" href="([^"]+)" data-create-course-first>Create a course</a>', console)[1]
    assert html.unescape(link) == "/staff/?create=course#create-course"
    assert 'action="/staff/assignments"' not in console            # no form that could only fail
    opened = admin.get("/staff/?create=course").get_data(as_text=True)
    assert '<details class="card" id="create-course" open>' in opened
    roster = admin.get("/staff/roster").get_data(as_text=True)
    assert "data-no-course" in roster and "create a course first" in roster
    # once there is a course, the form is there and the guidance is gone
    made = post_form(admin, "/staff/", "/staff/courses", {"course_name": "CS149"})
    assert made.status_code == 303
    console = admin.get("/staff/").get_data(as_text=True)
    assert "data-no-course" not in console and 'action="/staff/assignments"' in console


def test_an_assignment_has_a_title_of_its_own(client_for, db, course_setup):
    from store.models import Assignment
    admin = client_for("ada")
    spec_title = grader.load_spec("asst4-trainium2").title
    console = admin.get("/staff/").get_data(as_text=True)
    assert f'value="{html.escape(spec_title, quote=True)}"' in console      # the form starts at the spec's title
    data = {"course": "CS149", "spec": "asst4-trainium2", "backend": "sim", "runs_per_hour": "4",
            "visibility": "signed_in", "deadline": ""}
    assert post_form(admin, "/staff/", "/staff/assignments", {**data, "name": "fall26",
                                                             "title": "Fall 2026: fused conv2d"}).status_code == 303
    assert post_form(admin, "/staff/", "/staff/assignments", {**data, "name": "plain", "title": " "}).status_code == 303
    db.expire_all()
    assert db.scalar(select(Assignment.title).where(Assignment.name == "fall26")) == "Fall 2026: fused conv2d"
    assert db.scalar(select(Assignment.title).where(Assignment.name == "plain")) == spec_title    # blank: the spec's
    # a TA of the course changes the tiny assignment's title later; students read it everywhere
    ta = client_for("tara")
    changed = post_form(ta, "/staff/assignments/tiny", "/staff/assignments/tiny/title", {"title": "Warm-up, fall 2026"})
    assert changed.status_code == 303
    refused = post_form(ta, "/staff/assignments/tiny", "/staff/assignments/tiny/title", {"title": "  "})
    assert refused.status_code == 400 and "title was not changed" in text_of(refused)
    alice = client_for("alice")
    run = store_graded_run(db, course_setup["alice"], course_setup["assignment"],
                           grader.grade(grader.submission_from_bytes("conv2d.py", OPTIMIZED, grader.load_spec(
                               str(TINY_SPEC))), grader.load_spec(str(TINY_SPEC)),
                               grader.GradeOptions(backend="sim", seed=5)))
    for url in ("/", "/a/tiny", "/leaderboard/tiny", f"/runs/{run.id}", f"/runs/{run.id}/report"):
        assert "Warm-up, fall 2026" in text_of(alice.get(url)), url
    staff_page = text_of(ta.get("/staff/assignments/tiny"))
    assert "Warm-up, fall 2026" in staff_page and "Tiny fused conv2d (service tests)" in staff_page   # and the spec's
    # the report keeps the spec's own title: it is what was graded
    assert "(Tiny fused conv2d (service tests))" in text_of(alice.get(f"/runs/{run.id}/report"))


def test_students_download_the_starter_files_of_the_specs_dialect(client_for, db, course_setup):
    from store import specs
    alice = client_for("alice")
    page = alice.get("/a/tiny").get_data(as_text=True)
    assert 'href="/a/tiny/starter/conv2d.py" download' in page
    got = alice.get("/a/tiny/starter/conv2d.py")
    assert got.status_code == 200 and got.data == (ROOT / "student_template" / "conv2d.py").read_bytes()
    assert got.headers["Content-Disposition"] == 'attachment; filename="conv2d.py"'
    missing = alice.get("/a/tiny/starter/kernels.py")               # the tiny spec asks for conv2d.py only
    assert missing.status_code == 404 and "Download one of: conv2d.py" in text_of(missing)
    # an NKI 0.6 spec with two files: its own dialect's templates, and both in one zip at their archive paths
    specs.new_assignment(db, "asst4-trainium2-nki06", course=course_setup["course"], name="nki06", backend="sim",
                         deadline=dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=7))
    db.commit()
    page = alice.get("/a/nki06").get_data(as_text=True)
    assert "/a/nki06/starter/kernels.py" in page and "/a/nki06/starter/nki06-starter.zip" in page
    assert alice.get("/a/nki06/starter/kernels.py").data == (ROOT / "student_template" / "nki06" / "kernels.py").read_bytes()
    archive = zipfile.ZipFile(io.BytesIO(alice.get("/a/nki06/starter/nki06-starter.zip").data))
    assert sorted(archive.namelist()) == ["part1/kernels.py", "part2/conv2d.py"]
    assert archive.read("part2/conv2d.py") == (ROOT / "student_template" / "nki06" / "conv2d.py").read_bytes()
    # the zip is an upload the site reads: the same files, where the spec looks for them
    submission = grader.submission_from_bytes("nki06-starter.zip", alice.get("/a/nki06/starter/nki06-starter.zip").data,
                                              grader.load_spec("asst4-trainium2-nki06"))
    assert sorted(submission.filenames.values()) == ["part1/kernels.py", "part2/conv2d.py"]


def test_a_course_problem_folders_template_is_its_starter(tmp_path):
    """A course folder's template/ is the starter of the file its problem is graded in; a template
    that does not define the spec's function is not offered."""
    import importlib.util
    from web import starter
    found = importlib.util.spec_from_file_location("problem_folders", ROOT / "tests" / "grader" / "test_problem_folders.py")
    course = importlib.util.module_from_spec(found)
    found.loader.exec_module(course)                  # its course folder, as a course writes one
    course.write_folder(tmp_path)
    spec_path = tmp_path / "hw1.toml"
    spec_path.write_text(course.spec_text("./scaled-add"))
    files = starter.starters(grader.load_spec(str(spec_path)))
    assert [(s.filename, s.archive_path, s.data.decode()) for s in files] == [
        ("scaled_add.py", "hw1/scaled_add.py", course.TEMPLATE)]
    (tmp_path / "scaled-add" / "template" / "scaled_add.py").write_text("def something_else():\n    pass\n")
    assert starter.starters(grader.load_spec(str(spec_path))) == []


def test_the_console_and_the_assignment_page_warn_when_no_worker_serves_the_backend(client_for, db, course_setup):
    from store.models import WorkerHeartbeat
    ta, admin = client_for("tara"), client_for("ada")
    page = text_of(ta.get("/staff/assignments/tiny"))
    assert "No worker alive serves the sim queue" in page and "grader worker --queue sim" in page
    console = admin.get("/staff/").get_data(as_text=True)
    assert 'data-no-worker-for="neuron" hidden' in console and "(no worker alive for it now)" in console
    db.add(WorkerHeartbeat(name="grader-sim-1@host", queues="sim,staff", pid=4242,
                           seen_at=dt.datetime.now(dt.timezone.utc)))
    db.commit()
    page = ta.get("/staff/assignments/tiny").get_data(as_text=True)
    assert "data-no-worker" not in page
    console = admin.get("/staff/").get_data(as_text=True)
    assert 'data-no-worker-for="sim"' not in console and 'data-no-worker-for="neuron"' in console
    assert "Trainium2 hardware (no worker alive for it now)" in console


def broken_report():
    """The course's spec graded on BROKEN: its four conv2d correctness tests end in one error."""
    spec = grader.load_spec("asst4-trainium2")
    return grader.grade(grader.submission_from_bytes("conv2d.py", BROKEN, spec), spec,
                        grader.GradeOptions(backend="sim", seed=3))


def test_a_kernel_error_is_shown_once_with_the_tests_it_stopped(client_for, db, course_setup):
    from store import specs
    report = broken_report()
    errored = [t for t in report.tests if t.status == "error"]
    assert len(errored) == 4 and len({t.message.split(": ", 1)[1] for t in errored}) == 1    # one error, four tests
    asst4 = specs.new_assignment(db, "asst4-trainium2", course=course_setup["course"], name="asst4", backend="sim")
    db.commit()
    run = store_graded_run(db, course_setup["alice"], asst4, report, data=BROKEN)
    page = client_for("alice").get(f"/runs/{run.id}/report").get_data(as_text=True)
    blocks = re.findall(r'<pre class="error-text" data-error-text>(.*?)</pre>', page, re.S)
    assert len(blocks) == 1
    text = html.unescape(blocks[0])
    # the grader's lines, line breaks and indentation kept, once
    assert text.startswith("HardwareLimitError: [err_num_partition_exceed_arch_limit]")
    assert "\n  at conv2d.py:7\n  fix: " in text and '\n  File "conv2d.py", line 7' in text
    assert page.count("number of partitions 256") == 1
    refs = re.findall(r'<td data-message data-error-ref="1">(.*?)</td>', page, re.S)
    assert len(refs) == 4 and all("HardwareLimitError" in r and 'href="#error-1"' in r for r in refs)
    listed = re.search(r"<ul data-error-tests>(.*?)</ul>", page, re.S)[1]
    assert all(t.title in listed for t in errored)


def test_the_leaderboards_graded_columns_come_before_extra_credit(client_for, db, course_setup):
    from store import specs
    specs.new_assignment(db, "asst4-trainium2", course=course_setup["course"], name="asst4", backend="sim")
    db.commit()
    page = client_for("alice").get("/leaderboard/asst4").get_data(as_text=True)
    groups = re.findall(r'<th class="group" colspan="\d+">(.*?) p99', page)
    assert groups == ["Performance", "Extra credit"]
    heads = re.findall(r'<th class="num" title="([^"]+)">', page)
    assert heads and all(h.startswith("Performance") for h in heads[:4]) and heads[4].startswith("Extra credit")


def test_a_student_without_a_nickname_has_the_name_the_docs_give(client_for, db, course_setup, tiny_reports):
    from web.leaderboard import pseudonym
    bob = course_setup["bob"]
    bob.nickname = None                      # a student who never chose one
    db.commit()
    store_graded_run(db, bob, course_setup["assignment"], tiny_reports["optimized"])
    board = client_for("alice").get("/leaderboard/tiny").get_data(as_text=True)
    assert f"<td data-nickname>{pseudonym(bob.id)}</td>" in board
    said = pseudonym(987654).replace("987654", "N")                  # how the docs write it
    for doc in ("gradescope.md", "students.md", "staff.md"):
        text = (ROOT / "docs" / doc).read_text()
        assert f'"{said}"' in text and "anonymous" not in text.lower(), doc
