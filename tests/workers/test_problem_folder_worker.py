"""A course problem folder a site admin stored in the database (store/problem_folders.py) grades
on a worker that has nothing of it: its own empty home, no NKI_GRADER_PROBLEM_DIRS, an empty
cache (issue 46: nothing a worker needs lives only on the first machine). A worker that cannot
read a stored spec's problem (its row changed in the database, so its files no longer have the
pinned sha256) fails nobody's kernel: the run is the grader's error, after its attempts."""
from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from service_waits import wait_for_run

import grader
from grader.problems import folder as folders
from grader.problems import check as checks
from grader.vocabulary import RunStatus
from store import problem_folders
from store.models import ProblemFolder
from workers import enqueue

OUTSIDE = Path(__file__).resolve().parents[1] / "outside_problems"
CORRECT = (OUTSIDE / "softmax" / "solutions" / "correct" / "softmax_legacy.py").read_bytes()


@pytest.fixture
def stored_softmax(db, tmp_path, monkeypatch):
    """The outside folder stored as an admin's upload stores it, and an assignment pinning it."""
    from store import specs
    from store.models import Course
    monkeypatch.setenv("NKI_GRADER_PROBLEM_CACHE", str(tmp_path / "test-cache"))
    monkeypatch.delenv("NKI_GRADER_PROBLEM_DIRS", raising=False)
    problem_folders.install(db.get_bind())
    loaded, rows = checks.check(OUTSIDE / "softmax")
    assert all(r.ok for r in rows)
    row, _ = problem_folders.save(db, OUTSIDE / "softmax", checks.table(loaded, rows), None)
    db.commit()
    text = (OUTSIDE / "softmax-fall.toml").read_text().replace('problem = "./softmax"', 'problem = "softmax"')
    text = text.replace("config_timeout_s = 300", f'config_timeout_s = 300\nproblem_sha256 = {{ softmax = "{row.sha256}" }}')
    a = specs.new_assignment(db, grader.spec_from_toml(text, "softmax-fall.toml"), course=Course(name="CS149"),
                             name="softmax", backend="sim")
    db.commit()
    return a, row.sha256


def bare_worker(celery_worker, tmp_path, name: str, **env):
    home = tmp_path / f"{name}-home"
    home.mkdir()
    return celery_worker("sim", HOME=str(home), NKI_GRADER_HOME=str(home / "instance"), NKI_GRADER_PROBLEM_DIRS="",
                         NKI_GRADER_PROBLEM_CACHE=str(home / "problem-cache"), **env)


def test_a_worker_with_nothing_of_the_folder_grades_it_from_the_database(db, stored_softmax, student, celery_worker,
                                                                          tmp_path):
    assignment, sha = stored_softmax
    bare_worker(celery_worker, tmp_path, "bare")
    run = enqueue.submit(db, student, assignment, "softmax.py", CORRECT)
    run = wait_for_run(db, run.id, (RunStatus.DONE, RunStatus.FAILED, RunStatus.INFRA_ERROR), timeout=300)
    assert run.status == RunStatus.DONE, run.error
    assert run.score_total == 10 and run.report["problem_hashes"] == {"softmax": sha}
    unpacked = list((tmp_path / "bare-home" / "problem-cache").glob(f"{sha}-*/softmax/reference.py"))
    assert len(unpacked) == 1, unpacked               # the worker's own copy, named by the pin (and its archive)


def test_a_stored_folder_changed_in_the_database_is_a_grader_error_not_the_students(db, stored_softmax, student,
                                                                                     celery_worker, tmp_path):
    assignment, sha = stored_softmax
    row = db.get(ProblemFolder, sha)
    with zipfile.ZipFile(io.BytesIO(row.archive)) as zf:
        files = {n: zf.read(n) for n in zf.namelist()}
    files["reference.py"] += b"\n# changed after the upload\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, content in files.items():
            zf.writestr(name, content)
    row.archive = buf.getvalue()
    db.commit()
    bare_worker(celery_worker, tmp_path, "tampered", NKI_MAX_ATTEMPTS=1)
    run = enqueue.submit(db, student, assignment, "softmax.py", CORRECT)
    run = wait_for_run(db, run.id, (RunStatus.DONE, RunStatus.FAILED, RunStatus.INFRA_ERROR), timeout=300)
    assert run.status == RunStatus.INFRA_ERROR and run.score_total is None, (run.status, run.error)
    assert "was changed after its upload" in run.error and sha in run.error
    assert folders.folder_hash(OUTSIDE / "softmax") == sha          # the folder itself is untouched
