"""Helpers the web tests share: signing in through the real form, CSRF tokens from pages,
and finished runs stored as the worker stores them."""
from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TINY_SPEC = ROOT / "tests" / "workers" / "specs" / "tiny.toml"
OPTIMIZED = (ROOT / "reference_kernels" / "conv2d_optimized.py").read_bytes()
RELAXED = (ROOT / "reference_kernels" / "conv2d_relaxed.py").read_bytes()
PASSWORD = "correct horse battery"


def login(client, email: str, password: str = PASSWORD):
    page = client.get("/login")
    token = csrf_of(page.get_data(as_text=True))
    return client.post("/login", data={"email": email, "password": password, "csrf_token": token})


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', html) or \
        re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match, "page has no CSRF token"
    return match.group(1)


def store_graded_run(db, user, assignment, report, filename="conv2d.py", data=OPTIMIZED, flagged=False,
                     seed=424242, finished_at=None, submission=None):
    """A finished run as the worker stores one (store.lifecycle.finish writes the same columns);
    of `submission` when given (a second grade of the same upload), else of a new one."""
    import hashlib
    from grader.vocabulary import Backend
    from store import lifecycle
    from store.models import GradingRun, Submission
    submission = submission or Submission(user_id=user.id, assignment_id=assignment.id, filename=filename, data=data,
                                          sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    stored = report.to_json(include_seed=False)
    run = GradingRun(submission=submission, status="done", backend=report.backend,
                     queue=Backend(report.backend).queue.value, attempts=1,
                     seed=seed, **lifecycle.report_columns(stored), flagged=flagged,
                     flag_reason="flagged in test" if flagged else None,
                     finished_at=finished_at or dt.datetime.now(dt.timezone.utc),
                     progress_done=len(report.tests), progress_total=len(report.tests))
    run.test_results = lifecycle.result_rows(stored)
    db.add(run)
    db.commit()
    return run


def multipart(fields: dict[str, str], file_field: str, filename: str, data: bytes) -> tuple[bytes, str]:
    """A multipart/form-data body as bytes. (The test client's own encoder spools big bodies to
    a temporary file that it never closes when the server refuses the request unread.)"""
    boundary = "----webtest-boundary-7f3a"
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
             for k, v in fields.items()]
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{file_field}"; filename="{filename}"\r\n'
                 f"Content-Type: application/octet-stream\r\n\r\n".encode() + data + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def measured(base_report, p99_us: float | None, spec_path=TINY_SPEC, correct: bool = True):
    """`base_report` (a real report of the tiny spec) as the grader scores a kernel that is
    correct and measured at p99_us: the scoring itself is grader.rescore's."""
    import dataclasses
    import grader
    tests = []
    for t in base_report.tests:
        if t.kind == "correctness":
            tests.append(dataclasses.replace(t, status="passed" if correct else "failed",
                                             points=t.max_points if correct else 0.0))
        else:
            tests.append(dataclasses.replace(t, status="failed" if p99_us else "skipped", p99_us=p99_us))
    return grader.rescore(dataclasses.replace(base_report, tests=tests, flags=[]), grader.load_spec(str(spec_path)))


def finish_task(client, response, timeout: float = 300) -> dict:
    """Follows a staff task the response redirected to until a worker has done it; its status."""
    from service_waits import wait_for
    assert response.status_code == 303 and "/staff/tasks/" in response.headers["Location"], response.status_code
    url = response.headers["Location"] + "/status"

    def finished():
        status = client.get(url).get_json()
        return status if status["status"] in ("done", "failed") else None
    status = wait_for(finished, timeout, f"the staff task at {url}")
    assert status["status"] == "done", status
    return status


def start_task(client, name: str, kind: str):
    """A TA presses a staff task's button on the assignment page; the response redirects to it."""
    page = f"/staff/assignments/{name}"
    token = csrf_of(client.get(page).get_data(as_text=True))
    return client.post(f"{page}/tasks/{kind}", data={"csrf_token": token})


def export(client, name: str, kind: str) -> bytes:
    """An assignment's export as a TA gets it: start the task, wait for the worker, download."""
    return client.get(finish_task(client, start_task(client, name, kind))["download"]).data


def export_in_process(client, name: str, kind: str) -> bytes:
    """As export(), with the staff task done here by the worker's own code instead of a Celery
    worker process (tests of what an export holds; test_staff.py runs them through a worker)."""
    from workers import staff_tasks
    started = start_task(client, name, kind)
    assert started.status_code == 303, started.get_data(as_text=True)
    staff_tasks.run(int(started.headers["Location"].rsplit("/", 1)[1]))
    return client.get(finish_task(client, started, timeout=0)["download"]).data
