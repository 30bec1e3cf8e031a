"""A course's own problem folder on the site, in a real browser (Debian's Chromium driven by
Playwright, the app served in this process: test_browser_report.py's fixtures), at 1280 px, as
the staff walk it (docs/staff.md, "A course folder on the site"): a site admin uploads a zip of
the outside softmax folder on the Problem folders page, follows its check (a staff worker's task)
and reads its table and its sha256 (a folder with a surprise is refused, the surprise said, and
nothing stored); an instructor who is
not a site admin creates an assignment from the course's spec, naming that folder and pinning it
(a spec naming it by path, or unpinned, is refused with the pin to write); a student downloads
the NKI 0.6 starter and gets a correct kernel graded by a real Celery worker, which reads the
folder from the database; a TA is refused the Problem folders page."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import grader
from grader.problems import folder as folders
from test_browser_report import chromium, shot, signed_in, site  # noqa: F401  (fixtures)
from webtest_helpers import PASSWORD

OUTSIDE = Path(__file__).resolve().parents[1] / "outside_problems"
GRADE_TIMEOUT_MS = 240 * 1000          # the softmax spec's three tests, on a busy 2-core machine
CHECK_TIMEOUT_MS = 300 * 1000          # a folder's check: its reference, then its five kernels graded


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """Unpacked folders go to a cache of this test's own, the worker's too (it inherits the
    environment); no installed folders, so the worker can only read the upload from the database."""
    path = tmp_path / "problem-cache"
    monkeypatch.setenv("NKI_GRADER_PROBLEM_CACHE", str(path))
    monkeypatch.delenv("NKI_GRADER_PROBLEM_DIRS", raising=False)
    return path


@pytest.fixture
def instructor(db, course_setup):
    """Ines: an instructor of CS149 who is not a site admin."""
    from store.models import Enrollment, User
    from web import accounts
    ines = User(email="ines@example.edu", name="Ines", role="user", active=True)
    accounts.set_password(ines, PASSWORD)
    db.add_all([ines, Enrollment(user=ines, course=course_setup["course"], role="instructor")])
    db.commit()
    return ines


def zipped(folder: Path, into: Path) -> Path:
    """The folder packed as an admin packs it (`zip -r softmax.zip softmax/`)."""
    return Path(shutil.make_archive(str(into / folder.name), "zip", root_dir=folder.parent, base_dir=folder.name))


def course_spec(problem: str, pin: str | None) -> bytes:
    """The outside spec for NKI 0.6, naming the problem as `problem` and pinning it when `pin`."""
    text = (OUTSIDE / "softmax-fall.toml").read_text().replace('problem = "./softmax"', f'problem = "{problem}"')
    text = text.replace('platform = "trn2"', 'platform = "trn2"\ndialect = "nki-0.6"')
    if pin:
        text = text.replace("config_timeout_s = 300",
                            f'config_timeout_s = 300\nproblem_sha256 = {{ softmax = "{pin}" }}')
    return text.encode()


def upload_folder(page, base: str, archive: Path) -> None:
    """Upload on the Problem folders page, then follow the check's page until the staff worker is
    done (the page draws itself again with the check's table)."""
    page.goto(f"{base}/staff/problems")
    page.set_input_files("#folder", str(archive))
    with page.expect_navigation():
        page.click("button:has-text('Check and store')")
    assert re.search(r"/staff/tasks/\d+$", page.url), page.inner_text("main")
    assert page.inner_text("h1") == "Check and store a problem folder"
    assert page.locator("[data-no-worker]").count() == 0        # a staff worker is alive
    page.wait_for_selector("[data-check]", timeout=CHECK_TIMEOUT_MS)


def create_from_spec(page, base: str, name: str, spec: bytes) -> None:
    page.goto(f"{base}/staff/")
    page.click("summary:has-text('Create an assignment')")
    page.select_option("#course", "CS149")
    page.fill("#name", name)
    page.set_input_files("#spec_file", files=[{"name": "softmax-fall.toml", "mimeType": "application/toml",
                                               "buffer": spec}])
    assert page.input_value("#title") == ""          # not the bundled spec's title: the file's own
    with page.expect_navigation():
        page.click("input[type=submit][value='Create assignment']")


def test_a_course_folder_from_upload_to_a_graded_run(site, chromium, db, course_setup, instructor, cache, tmp_path,
                                                     celery_worker):
    from sqlalchemy import select
    from store.models import Assignment, ProblemFolder
    sha = folders.folder_hash(OUTSIDE / "softmax")      # what `grader problem check` prints to pin

    # a surprise first: a wrong solution filed under correct/; refused, the row said, nothing stored
    surprising = tmp_path / "surprising" / "softmax"
    shutil.copytree(OUTSIDE / "softmax", surprising, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(surprising / "solutions" / "wrong" / "wrong_axis.py", surprising / "solutions" / "correct")
    celery_worker("staff")                  # the check of an upload is a staff task
    admin = signed_in(chromium, site, "ada")
    admin.goto(f"{site}/staff/")
    with admin.expect_navigation():
        admin.click("a:has-text('Problem folders')")            # the console links to it
    assert admin.inner_text("h1") == "Problem folders"
    upload_folder(admin, site, zipped(surprising, tmp_path / "surprising"))
    assert admin.inner_text("[data-field=status]") == "failed"
    error = admin.inner_text("[data-field=error]")
    assert "The folder was not stored" in error and "found 1 surprise" in error
    assert "Fix the folder until `grader problem check` passes" in error
    assert "correct/wrong_axis.py: expected full correctness" in admin.inner_text("[data-surprises]")  # in words
    surprise = admin.locator("[data-check] [data-check-rows] tr[data-surprise]")
    assert surprise.count() == 1 and surprise.locator("td").all_inner_texts()[:3] == [
        "SURPRISE", "correct/wrong_axis.py", "full correctness, every timed test passed, no flag"]
    got_cell = surprise.locator("td").nth(3)             # the reason, wrapped in the window, not cut off
    assert "correctness 0/2" in got_cell.inner_text()
    box = got_cell.bounding_box()
    assert box["x"] + box["width"] <= 1280
    assert "from softmax.zip" in admin.inner_text("[data-check]")         # the upload, not a scratch path
    shot(admin, "problems-refused-surprise")          # the wide table scrolls in its box, not the page
    with admin.expect_navigation():
        admin.click("main a:has-text('Problem folders')")
    assert admin.is_visible("[data-no-folders]")
    assert "failed" in admin.inner_text("[data-problem-checks]")     # the latest checks, this one among them
    assert db.scalars(select(ProblemFolder)).all() == []

    # the folder as it is: stored, its check open, its sha256 the one to pin
    archive = zipped(OUTSIDE / "softmax", tmp_path)
    upload_folder(admin, site, archive)
    assert admin.inner_text("[data-field=status]") == "done"
    assert f"sha256 {sha}" in admin.inner_text("[data-field=summary]")
    assert f'problem_sha256 = {{ softmax = "{sha}" }}' in admin.inner_text("[data-field=summary]")
    assert "0 surprises in" in admin.inner_text("[data-check]")
    shot(admin, "problem-check-done")
    with admin.expect_navigation():
        admin.click("[data-stored-link]")
    row = admin.locator(f"[data-problem-folders] tr[data-folder='{sha}']")
    assert row.locator("[data-sha256]").inner_text() == sha and "Row softmax" in row.inner_text()
    check = admin.locator(f"[data-stored-check='{sha}']")          # open: the one just stored
    assert check.locator("[data-check-rows]").is_visible() and "0 surprises in" in check.inner_text()
    assert f"sha256 {sha}" in check.inner_text() and "from softmax.zip" in check.inner_text()
    assert check.locator("[data-check-rows] tbody tr").count() > 10 and check.locator("[data-surprise]").count() == 0
    shot(admin, "problems-stored")

    # the instructor: a spec by path, then one unpinned, each refused with the pin to write
    ines = signed_in(chromium, site, "ines")
    ines.goto(f"{site}/staff/")
    assert ines.locator("a:has-text('Problem folders')").count() == 0          # a site admin's page
    pin_line = f'problem_sha256 = {{ softmax = "{sha}" }}'
    for problem, pin, said in (("./softmax", sha, "problem './softmax' is a folder path"),
                               ("softmax", None, "got 'softmax'")):
        create_from_spec(ines, site, "softmax06", course_spec(problem, pin))
        assert ines.inner_text("h1").startswith("The spec was not accepted:") and said in ines.inner_text("h1")
        remedy = ines.inner_text("main h1 + p")
        assert 'problem = "softmax"' in remedy and pin_line in remedy, remedy
        shot(ines, f"course-spec-refused-{'path' if pin else 'unpinned'}")
    assert db.scalar(select(Assignment).where(Assignment.name == "softmax06")) is None

    # by name and pinned: created, under the spec file's own title, on the console
    create_from_spec(ines, site, "softmax06", course_spec("softmax", sha))
    ines.wait_for_url(re.compile(r"/staff/assignments/softmax06$"))
    spec = grader.spec_from_toml(course_spec("softmax", sha).decode(), "softmax-fall.toml")
    assert ines.inner_text("h1").startswith(spec.title)
    ines.goto(f"{site}/staff/")
    listed = ines.locator("tr", has=ines.locator("a:has-text('softmax06')"))
    assert spec.title in listed.inner_text() and "softmax-fall" in listed.inner_text()
    shot(ines, "console-with-course-spec-assignment")

    # the student: the NKI 0.6 starter, then a correct kernel graded by a worker from the database
    celery_worker("sim")
    student = signed_in(chromium, site, "alice")
    student.goto(f"{site}/a/softmax06")
    with student.expect_download() as got:
        student.click("[data-starters] a:has-text('softmax.py')")
    starter = tmp_path / "starter.py"
    got.value.save_as(starter)
    assert starter.read_bytes() == (OUTSIDE / "softmax" / "template" / "nki06" / "softmax.py").read_bytes()
    shot(student, "softmax06-assignment")
    kernel = (OUTSIDE / "softmax" / "solutions" / "correct" / "softmax_nki06.py").read_bytes()
    student.set_input_files("input[type=file]", files=[{"name": "softmax.py", "mimeType": "text/x-python",
                                                        "buffer": kernel}])   # saved as the starter's name
    with student.expect_navigation():
        student.click("input[type=submit][value='Upload and grade']")
    assert re.search(r"/runs/\d+$", student.url), student.inner_text("main")
    student.wait_for_selector("[data-field=status].done", timeout=GRADE_TIMEOUT_MS)
    full = sum(t.points for t in spec.tests)
    assert student.inner_text("[data-field=score]").startswith(f"{full:g}/{full:g}"), \
        student.inner_text("main")
    shot(student, "softmax06-graded")
    run_id = int(student.url.rsplit("/", 1)[1])
    student.goto(f"{site}/runs/{run_id}/report")
    assert f"problems softmax {sha[:12]}" in student.inner_text("[data-provenance]")    # graded with that folder

    # a TA may not see the page, let alone upload
    ta = signed_in(chromium, site, "tara")
    response = ta.goto(f"{site}/staff/problems")
    assert response.status == 403 and "Only a site admin uploads problem folders" in ta.inner_text("h1")
    assert ta.locator("input[name=folder]").count() == 0
    shot(ta, "problems-refused-ta")
