"""The Gradescope autograder in service mode against a real service: the web app served over
HTTP on loopback, real PostgreSQL, Redis and a Celery worker process. run_autograder forwards
the submission with a course submit token; the student named in Gradescope's metadata gets a
run in the store (so TAs see it and it counts on the leaderboard), and the report comes back
as results.json. A service that is down, a bad token or a grade that takes too long is an
autograder error in results.json, never a crash."""
from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import threading

import pytest

from gradescope_helpers import OPTIMIZED, REPO, GradescopeRoot, asst4_tar, build, metadata
from grader.gradescope import results as gs_results

TINY_SPEC = REPO / "tests" / "workers" / "specs" / "tiny.toml"
PASSWORD = "correct horse battery"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """ROOT with the grader installed by setup.sh (service mode needs it too: the client)."""
    zips = tmp_path_factory.mktemp("zips")
    place = GradescopeRoot()
    build(zips / "setup.zip", "--assignment", str(TINY_SPEC), "--mode", "service", "--server", "http://127.0.0.1:9",
          "--token", "nkic_placeholder-for-install")
    place.unpack(zips / "setup.zip")
    place.setup()
    place.zips = zips
    yield place
    place.remove()


@pytest.fixture
def course(db):
    from store import specs
    from store.models import Course, Enrollment, User
    from web import accounts
    course = Course(name="CS149", leaderboard_visibility="public")
    assignment = specs.new_assignment(db, str(TINY_SPEC), course=course, name="tiny", backend="sim", runs_per_hour=1)
    other = specs.new_assignment(db, str(TINY_SPEC), course=Course(name="Other course"), name="elsewhere")
    ta = User(email="tara@example.edu", name="Tara")
    accounts.set_password(ta, PASSWORD)
    db.add_all([ta, Enrollment(user=ta, course=course, role="ta")])
    db.commit()
    return {"course": course, "assignment": assignment, "other": other}


@pytest.fixture
def site(db, broker, tmp_path, monkeypatch):
    from werkzeug.serving import make_server
    import web
    monkeypatch.setenv("NKI_GRADER_HOME", str(tmp_path / "instance"))
    app = web.create_app({"SECRET_KEY": "test-secret", "LEADERBOARD_CACHE_SECONDS": 0,
                          "DATABASE_URL": db.get_bind().url.render_as_string(hide_password=False)})
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def stop():
        if thread.is_alive():
            server.shutdown()
            thread.join()
            server.server_close()
    yield {"url": f"http://127.0.0.1:{server.server_port}", "app": app, "stop": stop}
    stop()


def service_zip(installed, site, token: str, name: str, *extra: str):
    path = installed.zips / name
    build(path, "--assignment", str(TINY_SPEC), "--mode", "service", "--server", site["url"], "--token", token,
          "--service-assignment", "tiny", *extra)
    installed.unpack(path)


def staff_page(app, path: str) -> str:
    client = app.test_client()
    page = client.get("/login").get_data(as_text=True)
    token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', page).group(1)
    signed_in = client.post("/login", data={"email": "tara@example.edu", "password": PASSWORD, "csrf_token": token})
    assert signed_in.status_code == 302
    response = client.get(path)
    assert response.status_code == 200
    return response.get_data(as_text=True)


def test_service_mode_grades_on_the_service(db, course, site, installed, celery_worker):
    from sqlalchemy import select
    from store.models import Enrollment, GradingRun, Submission, User
    from web import standings
    from workers.course_tokens import new_token
    token = new_token(db, course["course"], "gradescope")
    db.commit()

    # a grade that does not finish in time (no worker yet): an autograder error saying so
    service_zip(installed, site, token, "slow.zip", "--service-timeout", "2")
    results, _ = installed.run({"conv2d.py": OPTIMIZED}, meta=metadata("slow@example.edu"))
    assert gs_results.problems(results) == []
    assert results["score"] == 0 and results["extra_data"]["autograder_error"] is True
    assert "had not finished run" in results["output"] and "regrade" in results["output"]

    celery_worker("sim")
    service_zip(installed, site, token, "service.zip", "--service-timeout", "300")
    results, stdout = installed.run({"asst4.tar.gz": asst4_tar(kernels=None)},
                                    meta=metadata("New.Student@Example.edu", "New Student", "S42"))
    assert gs_results.problems(results) == [], results
    assert results["score"] == 7.5 and results["extra_data"]["mode"] == "service"
    assert [e["name"] for e in results["leaderboard"]] == ["Total", "Performance: one small image, float16 p99 (us)"]
    assert "Graded by the course's grading service" in results["output"]
    run_id = results["extra_data"]["run_id"]
    assert f"service run {run_id}: done" in stdout

    db.expire_all()
    user = db.scalar(select(User).where(User.email == "new.student@example.edu"))
    assert user is not None and user.name == "New Student" and user.role == "user"
    assert db.scalar(select(Enrollment).where(Enrollment.user_id == user.id,
                                              Enrollment.course_id == course["course"].id)) is not None
    run = db.get(GradingRun, run_id)
    assert run.status == "done" and run.score_total == 7.5
    assert db.get(Submission, run.submission_id).user_id == user.id
    assert results["extra_data"]["submission_sha256"] == db.get(Submission, run.submission_id).sha256

    # TAs see it in their console; it counts on the course's leaderboard
    assert "new.student@example.edu" in staff_page(site["app"], "/staff/submissions")
    assert f"#{run_id}" in staff_page(site["app"], "/staff/submissions?assignment=tiny")
    board = standings.compute(db, course["assignment"].id, "sim")
    # (the slow run went on in the service once a worker was up, as its error message said)
    assert (user.id, 7.5) in [(s.user_id, s.total) for s in board]
    assert 'data-rank="1"' in staff_page(site["app"], "/leaderboard/tiny")

    # a second submission of the same student: no hourly limit or in-flight rule (Gradescope regrades)
    again, _ = installed.run({"conv2d.py": OPTIMIZED}, meta=metadata("new.student@example.edu"))
    assert again["score"] == 7.5 and again["extra_data"]["run_id"] != run_id
    # each says what the course's leaderboard counts, by the service's one best-run rule
    from store import runs as store_runs
    assert "it is your counted run on the course's own leaderboard" in results["output"]
    db.expire_all()
    counted = store_runs.best_run(db, course["assignment"].id, "sim", user.id)
    if counted.run_id == again["extra_data"]["run_id"]:
        assert "it is your counted run" in again["output"]
    else:
        assert counted.run_id == run_id and f"stays run {run_id} (7.5/7.5)" in again["output"]

    # the student's own mistake is said as such, without an autograder error
    broken, _ = installed.run({"asst4.tar.gz": b"not an archive"})
    assert broken["score"] == 0 and "could not be graded" in broken["output"]
    assert "autograder_error" not in broken["extra_data"]


def test_bad_token_and_wrong_course_are_autograder_errors(db, course, site, installed):
    from workers.course_tokens import new_token
    service_zip(installed, site, "nkic_not-a-real-token", "bad-token.zip")
    results, _ = installed.run({"conv2d.py": OPTIMIZED})
    assert gs_results.problems(results) == []
    assert results["score"] == 0 and results["extra_data"]["autograder_error"] is True
    assert "unknown or revoked" in results["output"] and "rebuild the autograder" in results["output"]

    token = new_token(db, course["course"], "gradescope")
    db.commit()
    path = installed.zips / "elsewhere.zip"
    build(path, "--assignment", str(TINY_SPEC), "--mode", "service", "--server", site["url"], "--token", token,
          "--service-assignment", "elsewhere")
    installed.unpack(path)
    results, _ = installed.run({"conv2d.py": OPTIMIZED})
    assert results["extra_data"]["autograder_error"] is True and "no assignment called 'elsewhere'" in results["output"]


def test_service_stopped_is_an_autograder_error_with_what_to_do(db, course, site, installed):
    from workers.course_tokens import new_token
    token = new_token(db, course["course"], "gradescope")
    db.commit()
    service_zip(installed, site, token, "stopped.zip")
    site["stop"]()
    results, _ = installed.run({"conv2d.py": OPTIMIZED})
    assert gs_results.problems(results) == []
    assert results["score"] == 0 and results["extra_data"]["autograder_error"] is True
    assert results["output"].startswith(gs_results.ERROR_HEADING)
    assert "could not be reached" in results["output"]
    assert "Submit again in a few minutes" in results["output"] and "regrade all submissions" in results["output"]


def test_a_course_token_reaches_only_its_own_course(db, course, site):
    from workers.course_tokens import new_token
    mine = new_token(db, course["course"], "gradescope")
    theirs = new_token(db, course["other"].course, "gradescope")
    db.commit()
    client = site["app"].test_client()
    created = client.post("/api/v1/course/assignments/tiny/submissions", headers={"Authorization": f"Bearer {mine}"},
                          data={"email": "bo@example.edu", "file": (io.BytesIO(OPTIMIZED), "conv2d.py")})
    assert created.status_code == 201, created.get_data(as_text=True)
    run_id = created.get_json()["run_id"]
    assert client.get(f"/api/v1/course/runs/{run_id}", headers={"Authorization": f"Bearer {mine}"}).status_code == 200
    other = client.get(f"/api/v1/course/runs/{run_id}", headers={"Authorization": f"Bearer {theirs}"})
    assert other.status_code == 404 and "no run" in other.get_json()["error"]
    refused = client.post("/api/v1/course/assignments/tiny/submissions", headers={"Authorization": f"Bearer {theirs}"},
                          data={"email": "bo@example.edu", "file": (io.BytesIO(OPTIMIZED), "conv2d.py")})
    assert refused.status_code == 404
    # a user token is not a course token, and a course token is not a user token
    assert client.get("/api/v1/assignments/tiny/leaderboard",
                      headers={"Authorization": f"Bearer {mine}"}).status_code == 401
    no_email = client.post("/api/v1/course/assignments/tiny/submissions", headers={"Authorization": f"Bearer {mine}"},
                           data={"file": (io.BytesIO(OPTIMIZED), "conv2d.py")})
    assert no_email.status_code == 400 and "email" in no_email.get_json()["remedy"]


def test_course_token_command(db, course):
    from workers.course_tokens import course_for_token
    run = [sys.executable, "-m", "service.cli", "course-token"]
    env = dict(os.environ)
    created = subprocess.run([*run, "create", "--course", "CS149"], cwd=REPO, env=env, capture_output=True,
                             text=True, timeout=300)
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()
    assert token.startswith("nkic_") and course_for_token(db, token).course_id == course["course"].id
    listed = subprocess.run([*run, "list", "--course", "CS149"], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=300)
    token_id = int(listed.stdout.split("\t", 1)[0])
    assert "active" in listed.stdout and token not in listed.stdout
    revoked = subprocess.run([*run, "revoke", str(token_id)], cwd=REPO, env=env, capture_output=True, text=True,
                             timeout=300)
    assert revoked.returncode == 0
    db.expire_all()
    assert course_for_token(db, token) is None
    unknown = subprocess.run([*run, "create", "--course", "Nope"], cwd=REPO, env=env, capture_output=True, text=True,
                             timeout=300)
    assert unknown.returncode == 2 and "no course named 'Nope'" in unknown.stderr
