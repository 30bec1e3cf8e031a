"""A site admin's upload of a problem folder (issue 45 item 3; web/staff/problem_uploads.py): the
folder is checked as `grader problem check` checks it, by a staff task (done here by the
worker's own code, workers/staff_tasks.run; test_browser_problem_folders.py has a Celery worker
do it), and stored in the database under its sha256, so a spec pinning it grades on any worker
without a shared folder. Attacks: a TA, an instructor or a student uploading course code is
refused before anything of it runs; the site's request never runs it either; a folder with a
surprise, or an archive reaching outside its folder, is not stored; a stored folder changed in
the database is refused by its pin."""
from __future__ import annotations

import html
import io
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest
from sqlalchemy import select

import grader
from grader.problems import folder as folders
from store import problem_folders
from store.models import Assignment, Enrollment, ProblemFolder, StaffTask, User
from web import accounts
from problem_archives import zipped_folder as zipped
from webtest_helpers import PASSWORD, csrf_of

OUTSIDE = Path(__file__).resolve().parents[1] / "outside_problems"


def upload(client, data: bytes, filename: str = "softmax.zip"):
    """The upload's response: a redirect to its check's task page, or the refusal of the archive."""
    token = csrf_of(client.get("/staff/").get_data(as_text=True))
    return client.post("/staff/problems", data={"csrf_token": token, "folder": (io.BytesIO(data), filename)},
                       content_type="multipart/form-data")


def checked(client, data: bytes, filename: str = "softmax.zip") -> tuple[str, dict]:
    """Upload, then the check done by the staff worker's code: (the task page's text, its status)."""
    from workers import staff_tasks
    queued = upload(client, data, filename)
    assert queued.status_code == 303 and "/staff/tasks/" in queued.headers["Location"], \
        html.unescape(queued.get_data(as_text=True))[-3000:]
    staff_tasks.run(int(queued.headers["Location"].rsplit("/", 1)[1]))
    page = client.get(queued.headers["Location"])
    assert page.status_code == 200
    return html.unescape(page.get_data(as_text=True)), client.get(queued.headers["Location"] + "/status").get_json()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """Unpacked folders go to a cache of this test's own (a worker's is its user's)."""
    path = tmp_path / "problem-cache"
    monkeypatch.setenv("NKI_GRADER_PROBLEM_CACHE", str(path))
    monkeypatch.delenv("NKI_GRADER_PROBLEM_DIRS", raising=False)
    return path


@pytest.fixture
def marked(tmp_path):
    """The outside folder with a reference.py that leaves a mark when it runs."""
    folder = tmp_path / "marked" / "softmax"
    shutil.copytree(OUTSIDE / "softmax", folder)
    mark = tmp_path / "reference-ran"
    reference = folder / "reference.py"
    reference.write_text(f"open({str(mark)!r}, 'w').close()\n" + reference.read_text())
    return folder, mark


def pinned_spec(sha: str) -> bytes:
    text = (OUTSIDE / "softmax-fall.toml").read_text().replace('problem = "./softmax"', 'problem = "softmax"')
    return text.replace("config_timeout_s = 300", f'config_timeout_s = 300\nproblem_sha256 = {{ softmax = "{sha}" }}'
                        ).encode()


def create_pinned_assignment(admin, sha: str) -> None:
    """CS149's softmax assignment, from the course spec pinning the stored folder `sha`."""
    token = csrf_of(admin.get("/staff/").get_data(as_text=True))
    made = admin.post("/staff/assignments", content_type="multipart/form-data", data={
        "csrf_token": token, "course": "CS149", "name": "softmax", "spec": "asst4-trainium2", "backend": "sim",
        "runs_per_hour": "4", "visibility": "signed_in", "deadline": "",
        "spec_file": (io.BytesIO(pinned_spec(sha)), "softmax-fall.toml")})
    assert made.status_code == 303, html.unescape(made.get_data(as_text=True))[-2000:]


def test_an_admins_upload_is_checked_stored_and_graded_from_the_database(client_for, db, course_setup, cache):
    admin = client_for("ada")
    page, status = checked(admin, zipped(OUTSIDE / "softmax"))
    sha = folders.folder_hash(OUTSIDE / "softmax")
    assert status["status"] == "done" and f"stored, sha256 {sha}" in status["summary"], status
    assert "0 surprises in" in page and "from softmax.zip" in page and "data-surprises" not in page
    assert "No worker alive" not in page                    # done: nothing waits
    assert f"/staff/problems?stored={sha}" in page and status["download"]         # the table as a file too
    db.expire_all()
    row = db.get(ProblemFolder, sha)
    assert row.name == "softmax" and "0 surprises" in row.check_table and row.uploaded_by_id == course_setup["ada"].id
    task = db.scalar(select(StaffTask).where(StaffTask.kind == "problem_check"))
    assert task.upload is None and task.upload_name == "softmax.zip"     # the archive is kept once: stored
    page = admin.get("/staff/problems").get_data(as_text=True)
    assert sha in page and "Problem folders" in admin.get("/staff/").get_data(as_text=True)
    assert f'data-check-task="{task.id}"' in page                          # the latest checks, listed
    again, status = checked(admin, zipped(OUTSIDE / "softmax", prefix=""))   # the same content: one row
    assert status["status"] == "done" and "with this content is stored already" in status["summary"]
    assert len(db.scalars(select(ProblemFolder)).all()) == 1
    # a spec pinning it, without any folder installed on this machine: its starter and its grade
    create_pinned_assignment(admin, sha)
    got = client_for("alice").get("/a/softmax/starter/softmax.py")
    assert got.status_code == 200, html.unescape(got.get_data(as_text=True))[-1500:]
    assert got.data == (OUTSIDE / "softmax" / "template" / "softmax.py").read_bytes()
    spec = grader.spec_from_toml(pinned_spec(sha).decode(), "row")
    kernel = (OUTSIDE / "softmax" / "solutions" / "correct" / "softmax_legacy.py").read_bytes()
    report = grader.grade(grader.submission_from_bytes("softmax.py", kernel, spec),
                          spec, grader.GradeOptions(backend="sim", seed=5))
    assert report.score.total == 10 and report.problem_hashes == {"softmax": sha}


@pytest.mark.parametrize("who", ["tara", "ines", "alice"])
def test_a_ta_an_instructor_or_a_student_cannot_upload_course_code(client_for, db, course_setup, cache, marked, who):
    if who == "ines":           # an instructor of the course who is not a site admin
        ines = User(email="ines@example.edu", name="Ines", role="user", active=True)
        accounts.set_password(ines, PASSWORD)
        db.add_all([ines, Enrollment(user=ines, course=course_setup["course"], role="instructor")])
        db.commit()
    folder, mark = marked
    client = client_for(who)
    token_page = client.get("/a/tiny").get_data(as_text=True)       # any page with a form token
    refused = client.post("/staff/problems", content_type="multipart/form-data", data={
        "csrf_token": csrf_of(token_page), "folder": (io.BytesIO(zipped(folder)), "softmax.zip")})
    assert refused.status_code == 403
    assert client.get("/staff/problems").status_code == 403
    assert not mark.exists()                       # its reference.py never ran
    assert db.scalars(select(ProblemFolder)).all() == [] and db.scalars(select(StaffTask)).all() == []


def test_a_ta_cannot_start_a_problem_check_through_the_assignment_task_route(client_for, db, course_setup, cache):
    """The staff-task route of an assignment starts its rescores and exports; a problem check is a
    site admin's and comes only through the upload, so a TA naming it there gets no task."""
    ta = client_for("tara")
    token = csrf_of(ta.get("/staff/assignments/tiny").get_data(as_text=True))
    refused = ta.post("/staff/assignments/tiny/tasks/problem_check", data={"csrf_token": token})
    assert refused.status_code == 404 and "There is no staff task 'problem_check'" in html.unescape(
        refused.get_data(as_text=True))
    assert db.scalars(select(StaffTask)).all() == []


def test_the_sites_request_never_runs_the_folders_code_the_staff_worker_does(client_for, db, course_setup, cache,
                                                                              marked):
    """reference.py is course code: the upload's request only unpacks it and queues the check;
    the worker runs it. A site admin's check is a site admin's page: a TA of a course is refused it."""
    folder, mark = marked
    admin = client_for("ada")
    queued = upload(admin, zipped(folder))
    assert queued.status_code == 303 and not mark.exists()
    task_url = queued.headers["Location"]
    waiting = html.unescape(admin.get(task_url).get_data(as_text=True))
    assert "Check and store a problem folder" in waiting and "softmax.zip" in waiting and "queued" in waiting
    assert "No worker alive serves the staff queue: this task waits until one starts" in waiting
    assert client_for("tara").get(task_url).status_code == 404
    from workers import staff_tasks
    staff_tasks.run(int(task_url.rsplit("/", 1)[1]))
    assert mark.exists()


def test_a_folder_with_a_surprise_is_not_stored_and_the_table_says_why(client_for, db, course_setup, cache, tmp_path):
    folder = tmp_path / "softmax"
    shutil.copytree(OUTSIDE / "softmax", folder)
    shutil.copy(folder / "solutions" / "correct" / "softmax_legacy.py", folder / "solutions" / "wrong" / "looks_wrong.py")
    page, status = checked(client_for("ada"), zipped(folder))
    assert status["status"] == "failed" and "The folder was not stored" in status["error"]
    assert "found 1 surprise" in status["error"] and "Fix the folder until" in status["error"]
    assert "SURPRISE  wrong/looks_wrong.py" in page                  # the whole table
    assert "<code>wrong/looks_wrong.py</code>: expected" in page     # and the surprise, in words
    assert db.scalars(select(ProblemFolder)).all() == []
    assert db.scalar(select(StaffTask)).upload is None


def test_an_archive_reaching_outside_its_folder_or_holding_a_link_is_refused(client_for, db, course_setup, cache,
                                                                           tmp_path):
    admin = client_for("ada")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("softmax/problem.toml", (OUTSIDE / "softmax" / "problem.toml").read_bytes())
        zf.writestr("../../escaped.py", "print('out')\n")
    refused = upload(admin, buf.getvalue())
    assert refused.status_code == 400 and "would be written outside the folder" in html.unescape(
        refused.get_data(as_text=True))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        link = tarfile.TarInfo("softmax/reference.py")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tf.addfile(link)
    refused = upload(admin, buf.getvalue(), "softmax.tar.gz")
    assert refused.status_code == 400 and "is not a regular file" in html.unescape(refused.get_data(as_text=True))
    assert db.scalars(select(ProblemFolder)).all() == []
    assert db.scalars(select(StaffTask)).all() == []                 # said at once: no check queued


def test_a_stored_folder_changed_in_the_database_is_refused_by_its_pin(client_for, db, course_setup, cache):
    assert checked(client_for("ada"), zipped(OUTSIDE / "softmax"))[1]["status"] == "done"
    sha = folders.folder_hash(OUTSIDE / "softmax")
    db.expire_all()
    row = db.get(ProblemFolder, sha)
    with zipfile.ZipFile(io.BytesIO(row.archive)) as zf:
        files = {n: zf.read(n) for n in zf.namelist()}
    files["reference.py"] += b"\ndef reference(inputs, kwargs):\n    return inputs[0]\n"       # an answer of its own
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, content in files.items():
            zf.writestr(name, content)
    row.archive = buf.getvalue()
    db.commit()
    with pytest.raises(grader.SpecError) as info:
        grader.spec_from_toml(pinned_spec(sha).decode(), "row")
    assert "was changed after its upload" in info.value.reason and "uploads the folder again" in info.value.remedy
    assert not list(cache.rglob("reference.py"))            # nothing of it left where a later lookup would find it
    assert db.scalar(select(Assignment).where(Assignment.name == "softmax")) is None


def remove(client, sha: str):
    token = csrf_of(client.get("/a/tiny").get_data(as_text=True))       # any page with a form token
    return client.post(f"/staff/problems/{sha}/delete", data={"csrf_token": token})


def test_a_folder_no_spec_pins_can_be_removed_by_an_admin_only(client_for, db, course_setup, cache):
    admin = client_for("ada")
    assert checked(admin, zipped(OUTSIDE / "softmax"))[1]["status"] == "done"
    sha = folders.folder_hash(OUTSIDE / "softmax")
    assert f'data-folder="{sha}"' in admin.get("/staff/problems").get_data(as_text=True)
    assert remove(client_for("tara"), sha).status_code == 403              # a TA: course code is not theirs
    db.expire_all()
    assert db.get(ProblemFolder, sha) is not None
    removed = remove(admin, sha)
    assert removed.status_code == 303
    page = admin.get(removed.headers["Location"]).get_data(as_text=True)
    assert "removed: no spec pinned it" in page and f'data-folder="{sha}"' not in page
    db.expire_all()
    assert db.get(ProblemFolder, sha) is None
    again = remove(admin, sha)
    assert again.status_code == 404 and "no stored folder" in again.get_data(as_text=True)


def test_a_folder_a_spec_pins_stays_and_the_page_names_the_assignment(client_for, db, course_setup, cache):
    admin = client_for("ada")
    assert checked(admin, zipped(OUTSIDE / "softmax"))[1]["status"] == "done"
    sha = folders.folder_hash(OUTSIDE / "softmax")
    create_pinned_assignment(admin, sha)
    refused = remove(admin, sha)
    text = html.unescape(refused.get_data(as_text=True))
    assert refused.status_code == 409
    assert "was not removed: the spec of CS149/softmax pins it" in text and "regraded and rescored" in text
    db.expire_all()
    assert db.get(ProblemFolder, sha) is not None
    assert problem_folders.pinned_by(db, sha) == ["the spec of CS149/softmax"]


def test_a_new_upload_of_the_same_graded_files_replaces_the_starters_and_students_get_them(client_for, db,
                                                                                            course_setup, cache,
                                                                                            tmp_path):
    """The sha256 leaves template/ out: before, a fixed starter uploaded again was 'stored already'
    and dropped, so students kept downloading the old one. Now it replaces the stored starters,
    the pin (and so every grade under it) stays, and the next download is the new starter."""
    admin = client_for("ada")
    assert checked(admin, zipped(OUTSIDE / "softmax"))[1]["status"] == "done"
    sha = folders.folder_hash(OUTSIDE / "softmax")
    create_pinned_assignment(admin, sha)
    alice = client_for("alice")
    old = (OUTSIDE / "softmax" / "template" / "softmax.py").read_bytes()
    assert alice.get("/a/softmax/starter/softmax.py").data == old
    fixed = tmp_path / "fixed" / "softmax"
    shutil.copytree(OUTSIDE / "softmax", fixed, ignore=shutil.ignore_patterns("__pycache__"))
    new = b"# starter fixed: a typo in its comments\n" + old
    (fixed / "template" / "softmax.py").write_bytes(new)
    assert folders.folder_hash(fixed) == sha                      # graded files unchanged: the same pin
    said = checked(admin, zipped(fixed))[1]["summary"]
    assert "its starters are now this upload's" in said and "Specs pinning it are unchanged" in said
    db.expire_all()
    assert len(db.scalars(select(ProblemFolder)).all()) == 1
    assert alice.get("/a/softmax/starter/softmax.py").data == new
    same = checked(admin, zipped(fixed))[1]["summary"]             # the same again: nothing to replace
    assert "with this content is stored already" in same
