"""A course's own spec on the create form (issue 45, the operator path): an instructor or a site
admin uploads a spec naming a problem folder an operator installed (NKI_GRADER_PROBLEM_DIRS),
pinned by its sha256, and students download that folder's starter in the spec's dialect. A spec
is data: one naming a folder by path, or an installed folder unpinned, is refused, and a TA or a
student may not create assignments at all."""
from __future__ import annotations

import html
import io
import shutil
from pathlib import Path

import pytest
from sqlalchemy import select

from grader import problems
from grader.problems import folder as folders
from store.models import Assignment
from webtest_helpers import csrf_of

OUTSIDE = Path(__file__).resolve().parents[1] / "outside_problems"


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """The outside softmax folder as an operator installs it."""
    root = tmp_path / "problems"
    shutil.copytree(OUTSIDE / "softmax", root / "softmax")
    monkeypatch.setenv(problems.INSTALLED_ENV, str(root))
    return root / "softmax"


def course_spec(pin: str | None, problem: str = "softmax", dialect: str | None = None) -> bytes:
    text = (OUTSIDE / "softmax-fall.toml").read_text().replace('problem = "./softmax"', f'problem = "{problem}"')
    if pin:
        text = text.replace("config_timeout_s = 300", f'config_timeout_s = 300\nproblem_sha256 = {{ softmax = "{pin}" }}')
    if dialect:
        text = text.replace('platform = "trn2"', f'platform = "trn2"\ndialect = "{dialect}"')
    return text.encode()


def create(client, name: str, spec: bytes, filename: str = "softmax-fall.toml"):
    token = csrf_of(client.get("/staff/").get_data(as_text=True))
    data = {"csrf_token": token, "course": "CS149", "name": name, "spec": "asst4-trainium2", "backend": "sim",
            "runs_per_hour": "4", "visibility": "signed_in", "deadline": "",
            "spec_file": (io.BytesIO(spec), filename)}
    return client.post("/staff/assignments", data=data, content_type="multipart/form-data")


def test_an_instructor_creates_an_assignment_from_a_course_spec_naming_an_installed_folder(
        client_for, db, course_setup, installed):
    pin = folders.folder_hash(installed)
    admin = client_for("ada")
    assert 'name="spec_file"' in admin.get("/staff/").get_data(as_text=True)
    made = create(admin, "softmax06", course_spec(pin, dialect="nki-0.6"))
    assert made.status_code == 303, made.get_data(as_text=True)[-2000:]
    db.expire_all()
    assignment = db.scalar(select(Assignment).where(Assignment.name == "softmax06"))
    assert assignment.spec_name == "softmax-fall" and pin in assignment.spec_row.toml
    # the student's starter is the installed folder's, in the spec's dialect (template/nki06/)
    alice = client_for("alice")
    got = alice.get("/a/softmax06/starter/softmax.py")
    assert got.status_code == 200 and got.data == (installed / "template" / "nki06" / "softmax.py").read_bytes()
    made = create(admin, "softmax", course_spec(pin))
    assert made.status_code == 303
    assert alice.get("/a/softmax/starter/softmax.py").data == (installed / "template" / "softmax.py").read_bytes()


@pytest.mark.parametrize("spec, filename, said", [
    (lambda pin: course_spec(None), "softmax-fall.toml", "must pin it"),
    (lambda pin: course_spec(pin, problem="../../softmax"), "softmax-fall.toml", "is a folder path"),
    (lambda pin: course_spec(pin, problem="softmax-typo"), "softmax-fall.toml", "problem installed in NKI_GRADER_PROBLEM_DIRS"),
    (lambda pin: course_spec(pin), "softmax-fall.py", "is not a spec file"),
    (lambda pin: b"\xff\xfe not text", "softmax-fall.toml", "is not UTF-8 text"),
])
def test_a_course_spec_that_cannot_be_graded_from_the_site_is_refused_with_its_remedy(
        client_for, db, course_setup, installed, spec, filename, said):
    refused = create(client_for("ada"), "softmax", spec(folders.folder_hash(installed)), filename)
    page = html.unescape(refused.get_data(as_text=True))
    assert refused.status_code == 400 and said in page
    db.expire_all()
    assert db.scalar(select(Assignment).where(Assignment.name == "softmax")) is None


@pytest.mark.parametrize("who", ["tara", "alice"])
def test_a_ta_or_a_student_cannot_create_an_assignment_from_a_spec_of_their_own(
        client_for, db, course_setup, installed, who):
    refused = create(client_for(who), "mine", course_spec(folders.folder_hash(installed)))
    assert refused.status_code == 403
    db.expire_all()
    assert db.scalar(select(Assignment).where(Assignment.name == "mine")) is None
