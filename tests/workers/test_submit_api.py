"""`grader submit PATH --server URL --token T` against the real site (the web app served over
HTTP on loopback) and a real worker: enqueued through the JSON API, followed, report printed."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading

import pytest

from worker_helpers import OPTIMIZED, ROOT


@pytest.fixture
def site(db, broker, tmp_path, monkeypatch):
    from werkzeug.serving import make_server
    import web
    monkeypatch.setenv("NKI_GRADER_HOME", str(tmp_path / "instance"))
    app = web.create_app({"SECRET_KEY": "test-secret",
                          "DATABASE_URL": db.get_bind().url.render_as_string(hide_password=False)})
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join()
    server.server_close()


def test_submit_through_the_json_api(db, assignment, student, celery_worker, site, tmp_path):
    from store.models import Enrollment
    from web import accounts
    db.add(Enrollment(user=student, course=assignment.course, role="student"))
    token = accounts.new_api_token(db, student, "cli")
    db.commit()
    celery_worker("sim")
    path = tmp_path / "conv2d.py"
    path.write_bytes(OPTIMIZED)
    out = subprocess.run([sys.executable, "-m", "service.cli", "submit", str(path), "--server", site,
                          "--token", token, "--assignment", assignment.name, "--json", str(tmp_path / "r.json")],
                         cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "Total" in out.stdout and "7.5/7.5" in out.stdout
    assert f"talking to the site at {site}" in out.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["score"]["total"] == 7.5 and report.get("seed") is None
    # followed with the per-test lines `grader grade` prints: each test once, in order, with its title
    tests = report["tests"]
    test_lines = [line for line in out.stderr.splitlines() if line.startswith("[")]
    assert len(test_lines) == len(tests)
    for i, (line, test) in enumerate(zip(test_lines, tests), start=1):
        assert line.startswith(f"[{i}/{len(tests)}] {test['title'] or test['name']}: {test['status']} "), line

    bad = tmp_path / "bad" / "conv2d.py"
    bad.parent.mkdir()
    bad.write_bytes(b"def fused_conv2d_maxpool(X, W, bias, pool_size:\n")
    refused = subprocess.run([sys.executable, "-m", "service.cli", "submit", str(bad), "--server", site,
                              "--token", token, "--assignment", assignment.name],
                             cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=600)
    assert refused.returncode == 2 and "syntax" in refused.stderr.lower()
    said = refused.stderr.strip().splitlines()[-1]
    assert said.count("conv2d.py has a syntax error") == 1 and said.count("py_compile") == 1, said
    wrong_token = subprocess.run([sys.executable, "-m", "service.cli", "submit", str(path), "--server", site,
                                  "--token", "nope", "--assignment", assignment.name],
                                 cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=600)
    assert wrong_token.returncode == 2 and "token" in wrong_token.stderr.lower()
    said = wrong_token.stderr.strip().splitlines()[-1]
    assert said.startswith("grader: token: The API token is unknown or revoked.") and "conv2d.py" not in said
    assert said.count("Create a new token") == 1

    with socket.socket() as closed:                   # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{closed.getsockname()[1]}"
    unreachable = subprocess.run([sys.executable, "-m", "service.cli", "submit", str(path), "--server", nowhere,
                                  "--token", token, "--assignment", assignment.name],
                                 cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=600)
    said = unreachable.stderr.strip().splitlines()[-1]
    assert unreachable.returncode == 2
    assert said.startswith(f"grader: server: cannot reach {nowhere}: no connection could be made"), said
    assert "urllib3" not in unreachable.stderr and "HTTPConnectionPool" not in unreachable.stderr
