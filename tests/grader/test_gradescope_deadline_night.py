"""What a TA meets on deadline night with a service-mode autograder (found walking the round trip
from docs/gradescope.md), against a real service (test_gradescope_service.py's fixtures: the app
served over HTTP, PostgreSQL, Redis, a Celery worker process, the zip installed by setup.sh):

- the service restarted while an autograder waits for its run: the autograder rides out the
  gap (its run is on the service already) instead of an autograder error that makes the student
  submit again, and again, each a new grade;
- a run submitted on Gradescope after the deadline says why it does not count;
- a student's one-time sign-in link is a Markdown autolink, which no escape breaks."""
from __future__ import annotations

import json
import re
import subprocess
import time

from gradescope_helpers import OPTIMIZED
from test_gradescope_service import (TINY_SPEC, _app, course, gradescope_meta, installed,  # noqa: F401  (fixtures)
                                     service_zip, site)
from grader.gradescope import service


def _serve_on(app, port: int) -> dict:
    """The app served again on the port the stopped service had (the autograder's --server)."""
    import threading
    from werkzeug.serving import make_server
    server = make_server("127.0.0.1", port, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def stop():
        server.shutdown()
        thread.join()
        server.server_close()
    return {"stop": stop}


def test_the_autograder_rides_out_a_service_restart_and_a_late_run_says_why_it_does_not_count(
        db, course, site, installed, celery_worker):
    import datetime as dt
    from sqlalchemy import func, select
    from store.models import GradingRun
    from workers.course_tokens import new_token
    assignment = course["assignment"]
    assignment.deadline = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)
    db.commit()
    token = new_token(db, course["course"], "gradescope")
    db.commit()
    service_zip(installed, site, token, "night.zip", "--service-timeout", "300")
    meta = gradescope_meta(9101)
    meta["created_at"] = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=20)).isoformat()   # late
    (installed.path / "submission").mkdir(exist_ok=True)
    (installed.path / "submission" / "conv2d.py").write_bytes(OPTIMIZED)
    (installed.path / "results").mkdir(exist_ok=True)
    (installed.path / "submission_metadata.json").write_text(json.dumps(meta))
    grading = subprocess.Popen([str(installed.path / "run_autograder")], cwd=installed.path, env=installed.env(),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while db.scalar(select(func.count()).select_from(GradingRun)) == 0:      # no worker yet: it waits queued
            assert grading.poll() is None and time.monotonic() < deadline, "the autograder never submitted"
            time.sleep(0.2)
            db.expire_all()
        site["stop"]()                       # the operator restarts the service...
        time.sleep(5)                        # ...for more than two of the autograder's polls
        again = _serve_on(site["app"], site["port"])
        try:
            celery_worker("sim")
            stdout, _ = grading.communicate(timeout=600)
        finally:
            again["stop"]()
    finally:
        if grading.poll() is None:
            grading.kill()
            grading.wait()
    results = json.loads((installed.path / "results" / "results.json").read_text())
    assert results["score"] == 7.5, stdout
    assert "autograder_error" not in results["extra_data"]
    assert re.search(r"service run \d+: the grading service could not be reached at \S+/api/v1/course/runs/\d+ "
                     r".*; trying again until the 300 s timeout", stdout), stdout
    db.expire_all()
    assert db.scalar(select(func.count()).select_from(GradingRun)) == 1        # one grade, no second
    submitted = dt.datetime.fromisoformat(meta["created_at"]).strftime("%Y-%m-%d %H:%M UTC")
    due = assignment.deadline.strftime("%Y-%m-%d %H:%M UTC")
    assert ("it does not count on the course's own leaderboard: late by 1 day: graded, not counted "
            f"(submitted on Gradescope {submitted}, deadline {due})") in results["output"].replace("\\", ""), \
        results["output"]


def test_the_sign_in_link_is_an_autolink_no_escape_breaks():
    url = "https://grader.example.edu/login/link/ab_cd-EF_gh"
    note = service.sign_in_note(url, 72)
    assert f"<{url}>" in note and "\\" not in note
    # what no autolink can hold is left out rather than shown broken
    for bad in ("https://grader.example.edu/login/link/a b", "https://grader.example.edu/x>y"):
        assert "<" not in service.sign_in_note(bad, 72) and "ask course staff" in service.sign_in_note(bad, 72)
