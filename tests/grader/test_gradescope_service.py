"""The Gradescope autograder in service mode against a real service: the web app served over
HTTP on loopback, real PostgreSQL, Redis and a Celery worker process. run_autograder forwards
the submission with a course submit token; the student named in Gradescope's metadata gets a
run in the store (so TAs see it and it counts on the leaderboard), and the report comes back
as results.json. A service that is down, a bad token, a grade that takes too long, a person
the token may not submit for or the course's hourly limit is an autograder error in
results.json, never a crash. A stand-in reverse proxy passes its upstream's host name, as
nginx does by default; the round trip works through it."""
from __future__ import annotations

import http.client
import http.server
import io
import json
import os
import re
import subprocess
import sys
import threading

import pytest

from gradescope_helpers import OPTIMIZED, REPO, SMALL_SPEC, GradescopeRoot, asst4_tar, build, metadata
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
    ada = User(email="ada@example.edu", name="Ada L")            # on the roster: metadata()'s default submitter
    db.add_all([ta, Enrollment(user=ta, course=course, role="ta"), ada, Enrollment(user=ada, course=course)])
    db.commit()
    return {"course": course, "assignment": assignment, "other": other}


def _serve(app) -> dict:
    from werkzeug.serving import make_server
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def stop():
        if thread.is_alive():
            server.shutdown()
            thread.join()
            server.server_close()
    return {"url": f"http://127.0.0.1:{server.server_port}", "port": server.server_port, "app": app, "stop": stop}


def _app(db, **config):
    import web
    return web.create_app({"SECRET_KEY": "test-secret", "LEADERBOARD_CACHE_SECONDS": 0,
                           "DATABASE_URL": db.get_bind().url.render_as_string(hide_password=False), **config})


@pytest.fixture
def site(db, broker, tmp_path, monkeypatch):
    monkeypatch.setenv("NKI_GRADER_HOME", str(tmp_path / "instance"))
    served = _serve(_app(db))
    yield served
    served["stop"]()


def gradescope_meta(gradescope_id: int, *emails: str) -> dict:
    """Gradescope's metadata of submission `gradescope_id` by these people (a group: several)."""
    meta = metadata(*(emails[:1] or ("ada@example.edu",)))
    meta["id"] = gradescope_id
    meta["users"] += [{"email": e, "id": 100 + i, "name": e.split("@")[0], "sid": ""} for i, e in enumerate(emails[1:])]
    return meta


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
    token = new_token(db, course["course"], "gradescope", creates_students=True)
    db.commit()

    # a grade that does not finish in time (no worker yet): an autograder error saying so
    service_zip(installed, site, token, "slow.zip", "--service-timeout", "2")
    results, _ = installed.run({"conv2d.py": OPTIMIZED}, meta=gradescope_meta(5001, "slow@example.edu"))
    assert gs_results.problems(results) == []
    assert results["score"] == 0 and results["extra_data"]["autograder_error"] is True
    assert "had not finished run" in results["output"] and "regrade" in results["output"]
    slow_run = results["extra_data"]["run_id"]

    celery_worker("sim")
    service_zip(installed, site, token, "service.zip", "--service-timeout", "300")
    # staff regrade it on Gradescope: the same Gradescope submission, so the same run, no second grade
    retried, stdout = installed.run({"conv2d.py": OPTIMIZED}, meta=gradescope_meta(5001, "slow@example.edu"))
    assert retried["score"] == 7.5 and retried["extra_data"]["run_id"] == slow_run
    assert f"service run {slow_run}: this Gradescope submission's grade on the service (no new grade started)" in stdout
    db.expire_all()
    assert len(db.get(GradingRun, slow_run).submission.runs) == 1

    meta = gradescope_meta(5002, "New.Student@Example.edu")
    meta["users"][0].update(name="New Student", sid="S42")
    results, stdout = installed.run({"asst4.tar.gz": asst4_tar(kernels=None)}, meta=meta)
    assert gs_results.problems(results) == [], results
    assert results["score"] == 7.5 and results["extra_data"]["mode"] == "service"
    assert [e["name"] for e in results["leaderboard"]] == ["Total", "Performance: one small image, float16 p99 (us)"]
    assert "Graded by the course's grading service" in results["output"]
    # the token made her account, which has no password: her own report carries a one-time sign-in link
    link = re.search(r"sign in once at <(\S+/login/link/[^>\s]+)> \(one use", results["output"])
    assert link is not None and link.group(1).startswith(site["url"]), results["output"]
    assert "\\" not in link.group(1)          # an autolink: the token's "_" never escaped
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

    # results.json passes `grader gradescope check` in the zip's own environment (setup.sh installed jsonschema)
    (installed.path / "copy.json").write_text(json.dumps(results))
    checked = subprocess.run([str(installed.path / "nki-venv" / "bin" / "grader"), "gradescope", "check",
                              str(installed.path / "copy.json")], capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    # a second submission of the same student: no hourly limit or in-flight rule (Gradescope regrades)
    again, _ = installed.run({"conv2d.py": OPTIMIZED}, meta=gradescope_meta(5003, "new.student@example.edu"))
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

    # a group submission: every member reads the same note, naming whose account the run is under
    group, _ = installed.run({"conv2d.py": OPTIMIZED},
                             meta=gradescope_meta(5004, "new.student@example.edu", "partner@example.edu"))
    assert group["score"] == 7.5
    assert "this group submission is graded once, under new.student@example.edu's account" in group["output"]
    assert "your counted run" not in group["output"]
    assert "sign in once" not in group["output"]          # a link every member would see: never

    # the student's own mistake is said as such, without an autograder error, its fix once
    broken, _ = installed.run({"asst4.tar.gz": b"not an archive"}, meta=gradescope_meta(5005))
    assert broken["score"] == 0 and "could not be graded" in broken["output"]
    assert "autograder_error" not in broken["extra_data"]
    syntax, _ = installed.run({"conv2d.py": b"def fused_conv2d_maxpool(:\n"}, meta=gradescope_meta(5006))
    assert "syntax error on line 1" in syntax["output"] and syntax["output"].count("compile conv2d.py") == 1


def test_the_build_checks_the_service_and_refuses_a_zip_it_would_refuse(db, course, site, installed):
    """`grader gradescope build --mode service` asks the service first: a bad token, an assignment
    it does not have, or another spec than the assignment's refuses the build with what to fix;
    the right settings say so; a service that cannot be reached only warns."""
    from workers.course_tokens import new_token
    token = new_token(db, course["course"], "gradescope")
    db.commit()

    def attempt(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "grader.cli", "gradescope", "build", "-o",
                               str(installed.zips / "checked.zip"), "--mode", "service", *args], cwd=REPO,
                              capture_output=True, text=True, timeout=300)
    ours = ("--assignment", str(TINY_SPEC), "--server", site["url"])
    bad = attempt(*ours, "--token", "nkic_not-a-real-token", "--service-assignment", "tiny")
    assert bad.returncode == 2 and "refuses this zip's settings" in bad.stderr and "unknown or revoked" in bad.stderr
    missing = attempt(*ours, "--token", token, "--service-assignment", "elsewhere")
    assert missing.returncode == 2 and "no assignment called 'elsewhere'" in missing.stderr
    other = attempt("--assignment", str(SMALL_SPEC), "--server", site["url"], "--token", token,
                    "--service-assignment", "tiny")
    assert other.returncode == 2 and "is not the spec of 'tiny' on the grading service" in other.stderr
    assert "every submission would be refused" in other.stderr
    assert not (installed.zips / "checked.zip").exists()               # nothing written for a refused build
    good = attempt(*ours, "--token", token, "--service-assignment", "tiny")
    assert good.returncode == 0 and "has 'tiny' on this spec" in good.stdout, good.stderr
    away = attempt("--assignment", str(TINY_SPEC), "--server", "http://127.0.0.1:9", "--token", token,
                   "--service-assignment", "tiny")
    assert away.returncode == 0 and "warning: could not check the service assignment 'tiny'" in away.stderr


def test_bad_token_and_wrong_course_are_autograder_errors(db, course, site, installed):
    """Settings that went bad after the build (a token revoked, an assignment renamed, a spec
    changed): autograder errors that say what staff must do."""
    from workers.course_tokens import new_token
    service_zip(installed, site, "nkic_not-a-real-token", "bad-token.zip", "--no-service-check")
    results, _ = installed.run({"conv2d.py": OPTIMIZED})
    assert gs_results.problems(results) == []
    assert results["score"] == 0 and results["extra_data"]["autograder_error"] is True
    assert "unknown or revoked" in results["output"] and "rebuild the autograder" in results["output"]
    assert ".." not in results["output"]

    token = new_token(db, course["course"], "gradescope")
    db.commit()
    path = installed.zips / "elsewhere.zip"
    build(path, "--assignment", str(TINY_SPEC), "--mode", "service", "--server", site["url"], "--token", token,
          "--service-assignment", "elsewhere", "--no-service-check")
    installed.unpack(path)
    results, _ = installed.run({"conv2d.py": OPTIMIZED})
    assert results["extra_data"]["autograder_error"] is True and "no assignment called 'elsewhere'" in results["output"]

    # a zip on another spec than the service assignment's: an autograder error naming both
    path = installed.zips / "other-spec.zip"
    build(path, "--assignment", str(SMALL_SPEC), "--mode", "service", "--server", site["url"], "--token", token,
          "--service-assignment", "tiny", "--no-service-check")
    installed.unpack(path)
    results, _ = installed.run({"conv2d.py": OPTIMIZED}, meta=gradescope_meta(4001))
    assert results["extra_data"]["autograder_error"] is True
    assert "The autograder's spec (" in results["output"] and "is not the spec of tiny on the grading service (" \
        in results["output"] and "rebuild the autograder" in results["output"], results["output"]


def test_who_the_token_may_not_submit_for_and_its_hourly_limit_are_autograder_errors(db, course, site, installed):
    """A TA testing the autograder, a student not on the service's roster, the course's hourly
    limit reached: the service's own words on what staff must do, never the student's fault."""
    from workers.course_tokens import new_token
    token = new_token(db, course["course"], "gradescope", runs_per_hour=1)
    db.commit()
    service_zip(installed, site, token, "limits.zip", "--service-timeout", "2")
    for gradescope_id, email, said, remedy in (
            (6001, "tara@example.edu", "tara@example.edu is a TA of CS149 on the grading service, not a student",
             "a course token grades students only"),
            (6002, "nobody@example.edu", "nobody@example.edu is not a student on CS149's roster",
             "add nobody@example.edu to the course's roster")):
        results, _ = installed.run({"conv2d.py": OPTIMIZED}, meta=gradescope_meta(gradescope_id, email))
        assert results["extra_data"]["autograder_error"] is True, results["output"]
        assert said in results["output"] and remedy in results["output"], results["output"]
        assert ".." not in results["output"]
    first, _ = installed.run({"conv2d.py": OPTIMIZED}, meta=gradescope_meta(6003), timeout=900)
    assert "autograder_error" not in first["extra_data"] or "had not finished" in first["output"]
    limited, _ = installed.run({"conv2d.py": OPTIMIZED}, meta=gradescope_meta(6004))
    assert limited["extra_data"]["autograder_error"] is True
    assert "its course token's limit is 1 an hour" in limited["output"] and "--runs-per-hour" in limited["output"]


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
    assert f"{site['url']}/api/v1/course/assignments/tiny/submissions" in results["output"]   # the URL that failed
    assert "Submit again in a few minutes" in results["output"] and "regrade all submissions" in results["output"]
    assert ".." not in results["output"]


class StandInProxy:
    """A reverse proxy on loopback that passes its upstream's name as Host (nginx's default,
    `proxy_set_header Host $proxy_host`) and the client's in X-Forwarded-Host/Proto/For. The
    upstream name resolves nowhere (.invalid), as a name only the proxy's network knows."""
    UPSTREAM = "grader-upstream.invalid"

    def __init__(self, upstream_port: int):
        proxy = self
        self.hosts_sent: list[str] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def _forward(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                headers.update({"Host": f"{proxy.UPSTREAM}:{upstream_port}", "X-Forwarded-Host": self.headers["Host"],
                                "X-Forwarded-Proto": "http", "X-Forwarded-For": self.client_address[0]})
                proxy.hosts_sent.append(headers["Host"])
                upstream = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=120)
                upstream.request(self.command, self.path, body, headers)
                answer = upstream.getresponse()
                data = answer.read()
                upstream.close()
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _forward

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.thread.join()
        self.server.server_close()


def test_the_round_trip_works_behind_a_proxy_that_passes_its_upstreams_host_name(db, course, site, installed,
                                                                                 celery_worker):
    from sqlalchemy import select
    from store.models import User
    from web import accounts
    from workers.course_tokens import new_token
    token = new_token(db, course["course"], "gradescope")
    db.commit()
    proxy = StandInProxy(site["port"])
    try:
        path = installed.zips / "proxied.zip"
        build(path, "--assignment", str(TINY_SPEC), "--mode", "service", "--server", proxy.url, "--token", token,
              "--service-assignment", "tiny", "--service-timeout", "300")
        installed.unpack(path)
        celery_worker("sim")
        results, stdout = installed.run({"conv2d.py": OPTIMIZED}, meta=gradescope_meta(7001))
        assert results["score"] == 7.5, results["output"]
        assert "Name or service not known" not in stdout
        assert len(proxy.hosts_sent) >= 3 and set(proxy.hosts_sent) == {f"{proxy.UPSTREAM}:{site['port']}"}
    finally:
        proxy.stop()

    # TRUST_PROXY_HEADERS: the site's own absolute links (the user API's, say) take X-Forwarded-Host
    trusting = _serve(_app(db, TRUST_PROXY_HEADERS=True))
    proxy = StandInProxy(trusting["port"])
    try:
        api_token = accounts.new_api_token(db, db.scalar(select(User).where(User.email == "ada@example.edu")), "cli")
        db.commit()
        body, content_type = _multipart_file(OPTIMIZED)
        answer = _request(proxy.url + "/api/v1/assignments/tiny/submissions", body,
                          {"Authorization": f"Bearer {api_token}", "Content-Type": content_type})
        assert answer["status_url"].startswith(proxy.url + "/api/v1/runs/"), answer
    finally:
        proxy.stop()
        trusting["stop"]()


def _multipart_file(data: bytes) -> tuple[bytes, str]:
    boundary = "nki-test-boundary"
    body = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="conv2d.py"\r\n'
            f"Content-Type: application/octet-stream\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def _request(url: str, body: bytes, headers: dict) -> dict:
    import urllib.request
    with urllib.request.urlopen(urllib.request.Request(url, data=body, method="POST", headers=headers),
                                timeout=120) as answer:
        return json.loads(answer.read())


def test_a_course_token_reaches_only_its_own_course(db, course, site):
    from workers.course_tokens import new_token
    mine = new_token(db, course["course"], "gradescope")
    theirs = new_token(db, course["other"].course, "gradescope")
    db.commit()
    client = site["app"].test_client()
    created = client.post("/api/v1/course/assignments/tiny/submissions", headers={"Authorization": f"Bearer {mine}"},
                          data={"email": "ada@example.edu", "file": (io.BytesIO(OPTIMIZED), "conv2d.py")})
    assert created.status_code == 201, created.get_data(as_text=True)
    run_id = created.get_json()["run_id"]
    assert client.get(f"/api/v1/course/runs/{run_id}", headers={"Authorization": f"Bearer {mine}"}).status_code == 200
    other = client.get(f"/api/v1/course/runs/{run_id}", headers={"Authorization": f"Bearer {theirs}"})
    assert other.status_code == 404 and "no run" in other.get_json()["error"]
    refused = client.post("/api/v1/course/assignments/tiny/submissions", headers={"Authorization": f"Bearer {theirs}"},
                          data={"email": "ada@example.edu", "file": (io.BytesIO(OPTIMIZED), "conv2d.py")})
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


def test_links_resolve_against_the_configured_server_url():
    """A path (as the service answers) goes under the configured URL, its prefix kept; an absolute
    link an older service built from a proxy's upstream Host keeps only its path and query."""
    from grader.gradescope.service import Client
    client = Client("https://grader.example.edu/nki/", "nkic_x")
    assert client.resolve("/api/v1/course/runs/5") == "https://grader.example.edu/nki/api/v1/course/runs/5"
    assert (client.resolve("http://grader-upstream.invalid:8000/api/v1/course/runs/5/report?x=1")
            == "https://grader.example.edu/nki/api/v1/course/runs/5/report?x=1")
