"""Service mode: forward the submission to the course's grading service and bring its report
back as results.json. The student, named by Gradescope's submission metadata (email, name,
student id), gets a run in the service's store, so TAs see it in their console and it counts
on the service's leaderboard. The course submit token (`grader course-token create`) allows
exactly that: submitting for the students of its course. Gradescope's submission id and time go
with the upload: the run counts by Gradescope's time, and a regrade (or a retry after an
autograder error) of the same Gradescope submission is answered with the grade it already has
or replaces it, never adds one.

Every URL the autograder calls is its configured server URL plus a path: links the service
answers with are read for their path only, so a reverse proxy's upstream host name never
matters, and the token never goes to a host the service named.

Any failure that is not the student's (the service down, a bad token, a grade that takes too
long) becomes an autograder error in results.json with what to do, never a crash."""
from __future__ import annotations

import dataclasses
import datetime as dt
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

from .. import render
from ..errors import GraderInputError
from ..events import CancelToken
from ..report import Report
from ..submission import submission_from_bytes
from ..vocabulary import FINAL_RUN_STATUSES, RunStatus
from . import results, upload
from .config import Config
from .layout import Layout

FINAL = FINAL_RUN_STATUSES
REQUEST_TIMEOUT_S = 60.0


class ServiceError(Exception):
    """The service could not be used; `reason` for the student, `what_to_do` for them too."""

    def __init__(self, reason: str, what_to_do: str, *, status: int | None = None, body: dict | None = None):
        super().__init__(reason)
        self.reason, self.what_to_do, self.status, self.body = reason, what_to_do, status, body or {}


def submitter(layout: Layout) -> dict:
    """{email, name, sid} of the submitting student from submission_metadata.json."""
    try:
        meta = json.loads(layout.metadata.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ServiceError(f"Gradescope's submission metadata could not be read ({err})",
                           "Submit again; if it persists, tell course staff.") from None
    users = meta.get("users") if isinstance(meta, dict) else None
    first = users[0] if isinstance(users, list) and users and isinstance(users[0], dict) else {}
    email = str(first.get("email") or "").strip()
    if "@" not in email:
        raise ServiceError("Gradescope's submission metadata names no submitter email",
                           "Tell course staff: the grading service files runs under the student's email.")
    return {"email": email, "name": str(first.get("name") or ""), "sid": str(first.get("sid") or ""),
            "gradescope_submission_id": str(meta.get("id") or ""), "created_at": str(meta.get("created_at") or "")}


def group_size(layout: Layout) -> int:
    """How many people Gradescope's metadata lists for this submission (1 unless a group's)."""
    try:
        users = json.loads(layout.metadata.read_text(encoding="utf-8")).get("users")
    except (OSError, ValueError, AttributeError):
        return 1
    return len(users) if isinstance(users, list) and users else 1


def sentence(text: str) -> str:
    """Capitalised, with one full stop at the end (service messages often bring their own)."""
    text = text.strip()
    text = text[:1].upper() + text[1:]
    return text if text.endswith(("?", "!")) else text.rstrip(".") + "."


def _multipart(fields: dict[str, str], filename: str, data: bytes) -> tuple[bytes, str]:
    boundary = f"nki-{uuid.uuid4().hex}"
    parts = []
    for key, value in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n{value}\r\n'.encode())
    safe = filename.replace('"', "").replace("\r", "").replace("\n", "")
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{safe}"\r\n'
                 f"Content-Type: application/octet-stream\r\n\r\n".encode() + data + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


class Client:
    """The service's course API over HTTP (the standard library's, nothing to install)."""

    def __init__(self, url: str, token: str):
        self.url, self.token = url.rstrip("/"), token

    def resolve(self, link: str) -> str:
        """The configured server URL plus the link's path (and query): a path as the service
        answers, or an absolute link an older service built from its Host header, whose host
        may be a proxy's upstream name that only the proxy can resolve."""
        parts = urllib.parse.urlsplit(link)
        path = parts.path if parts.path.startswith("/") else "/" + parts.path
        return self.url + path + (f"?{parts.query}" if parts.query else "")

    def _call(self, method: str, path_or_url: str, body: bytes | None = None, content_type: str = "") -> dict:
        url = self.resolve(path_or_url)
        request = urllib.request.Request(url, data=body, method=method,
                                         headers={"Authorization": f"Bearer {self.token}", "Accept": "application/json",
                                                  **({"Content-Type": content_type} if content_type else {})})
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as answer:
                return json.loads(answer.read().decode("utf-8"))
        except urllib.error.HTTPError as err:
            try:
                data = json.loads(err.read().decode("utf-8"))
            except ValueError:
                data = {}
            raise ServiceError(f"the grading service answered HTTP {err.code} to {method} {url}: "
                               f"{data.get('error') or err.reason}", data.get("remedy") or "", status=err.code,
                               body=data) from None
        except (urllib.error.URLError, OSError, ValueError) as err:
            why = getattr(err, "reason", err)
            raise ServiceError(f"the grading service could not be reached at {url} ({why})",
                               "Submit again in a few minutes. If it fails again, tell course staff: the grading "
                               f"service must be running at {self.url}; once it is, they can regrade all "
                               "submissions on Gradescope.") from None

    def submit(self, assignment: str, who: dict, filename: str, data: bytes) -> dict:
        body, content_type = _multipart(who, filename, data)
        return self._call("POST", f"/api/v1/course/assignments/{urllib.request.quote(assignment, safe='')}"
                                  "/submissions", body, content_type)

    def get(self, url: str) -> dict:
        return self._call("GET", url)


def check_service(service, spec) -> str:
    """At build time: the service reachable with the token, the assignment there, its spec the
    zip's (or derived from it). A mismatch raises GraderInputError; a service that cannot be
    reached or asked gives a warning line (the zip may be built before the service is up)."""
    client = Client(service.url, service.token)
    name = urllib.request.quote(service.assignment, safe="")
    try:
        found = client.get(f"/api/v1/course/assignments/{name}")
    except ServiceError as err:
        if err.status in (401, 403, 404):
            raise GraderInputError(f"the grading service refuses this zip's settings: {err.reason}",
                                   err.what_to_do or "Check --server, --token and --service-assignment.") from None
        return (f"warning: could not check the service assignment {service.assignment!r} ({err.reason}); "
                f"the zip is built, and each submission is checked against the service's spec when it runs")
    accepts = found.get("accepts") if isinstance(found.get("accepts"), list) else [found.get("spec_hash")]
    if spec.spec_hash not in accepts:
        raise GraderInputError(
            f"the zip's spec ({spec.assignment} v{spec.spec_version}, sha256 {spec.spec_hash[:12]}) is not the spec "
            f"of {service.assignment!r} on the grading service ({found.get('spec_name')} v{found.get('spec_version')}, "
            f"sha256 {str(found.get('spec_hash'))[:12]}): every submission would be refused",
            "Build with the service assignment's spec, or point --service-assignment at an assignment on this spec.")
    return (f"checked: the service at {service.url} has {service.assignment!r} on this spec "
            f"(sha256 {spec.spec_hash[:12]}), and the token is the course's")


def grade(layout: Layout, config: Config, spec, cancel: CancelToken) -> dict:
    service = config.service
    extra = {"mode": "service", "service": service.url}
    try:
        filename, data = upload.collect(layout.submission, spec)
        submission_from_bytes(filename, data, spec)     # the student's mistakes, said without the network
    except GraderInputError as err:
        return results.unreadable_submission(spec, err.reason, err.remedy or "", extra=extra)
    try:
        who = submitter(layout)
        client = Client(service.url, service.token)
        who.update(spec_hash=spec.spec_hash, spec_name=spec.assignment, spec_version=spec.spec_version)
        created = _submit(client, service.assignment, who, filename, data, spec, extra)
        if isinstance(created, dict) and "score" in created:      # refused as unreadable: results already
            return created
        extra["run_id"] = created["run_id"]
        if created.get("same_run"):
            print(f"service run {created['run_id']}: this Gradescope submission's grade on the service "
                  f"(no new grade started)", flush=True)
        state = _wait(client, created, service, cancel)
        if state["status"] != RunStatus.DONE:
            raise ServiceError(f"the grading service ended run {created['run_id']} as {state['status']}",
                               "Submit again; if it happens again, tell course staff, who can see the run in the "
                               "grading service's console.")
        # a sign-in link only for a submission no one else sees (a group's members would all see it)
        alone = group_size(layout) == 1
        answered = client.get(created["report_url"] + ("?sign_in_link=1" if alone else ""))
        report = Report.from_json(answered)
    except ServiceError as err:
        print(f"service error: {err.reason}", file=sys.stdout, flush=True)
        return results.autograder_error(sentence(err.reason),
                                        sentence(err.what_to_do or "Submit again; if it persists, tell course staff"),
                                        extra=extra)
    notes = (f"Graded by the course's grading service (run {created['run_id']}, backend {report.backend}); "
             + counted_note(created["run_id"], state.get("counted"),
                            owner=created.get("student") if group_size(layout) > 1 else None,
                            lateness=state.get("lateness")),)
    data = render.to_gradescope(report, visibility=dataclasses.asdict(config.visibility), notes=notes,
                                extra_data=extra)
    if isinstance(answered.get("sign_in_path"), str):
        data["output"] += "\n\n" + sign_in_note(client.resolve(answered["sign_in_path"]),
                                                  answered.get("sign_in_hours", 72))
    return data


def sign_in_note(url: str, hours) -> str:
    """The one-time sign-in link as Markdown a student can click: a CommonMark autolink, inside
    which no backslash escape is read (the notes above are escaped, and a URL escaped there,
    `\\_` for each `_` of the token, is not one link in a renderer that links bare URLs). A URL
    an autolink cannot hold is left out, since a broken link would only confuse."""
    if any(ch.isspace() or ch in "<>" or ord(ch) < 32 for ch in url):
        return ("_You have no password on the course's grading site yet: ask course staff for a sign-in link "
                "(the roster page sends one) to choose your leaderboard nickname and set a password._")
    return (f"You have no password on the course's grading site yet: sign in once at <{url}> (one use, for "
            f"{hours} hours; a later submission shows a new link) to choose your leaderboard nickname and set a "
            "password.")


def counted_note(run_id: int, counted: dict | None, owner: str | None = None, lateness: dict | None = None) -> str:
    """What the course's own leaderboard makes of this run, as the service's best-run rule said.
    `owner`: the account a group submission is filed under (every member reads this note);
    `lateness`: the service's lateness of the run (by Gradescope's time), which says why a late
    run does not count."""
    prefix, whose, best = "", "your", "your best so far"
    if owner:
        prefix = f"this group submission is graded once, under {owner}'s account on the course's service: "
        whose, best = f"{owner}'s", "their best so far"
    if not isinstance(counted, dict):
        return prefix + "the course's leaderboard counts each student's best run."
    if counted.get("this_run"):
        return prefix + f"it is {whose} counted run on the course's own leaderboard ({best})."
    if counted.get("run_id") is not None:
        total, most = counted.get("total"), counted.get("max_total")
        score = f" ({total:g}/{most:g})" if isinstance(total, (int, float)) and isinstance(most, (int, float)) else ""
        return (prefix + f"{whose} counted run on the course's own leaderboard stays run {counted['run_id']}{score}, "
                f"which is better than run {run_id} or as good and earlier.")
    if isinstance(lateness, dict) and lateness.get("late") and lateness.get("note"):
        when = _utc(lateness.get("submitted_at")), _utc(lateness.get("deadline"))
        times = f" (submitted on Gradescope {when[0]}, deadline {when[1]})" if all(when) else ""
        return prefix + f"it does not count on the course's own leaderboard: {lateness['note']}{times}."
    return prefix + ("it does not count on the course's own leaderboard (held for staff review, or submitted "
                     "on Gradescope after the course's deadline there).")


def _utc(text) -> str:
    """An ISO time from the service as 'YYYY-MM-DD HH:MM UTC' ('' when it is not one)."""
    try:
        when = dt.datetime.fromisoformat(str(text))
    except ValueError:
        return ""
    return when.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC") if when.tzinfo else ""


def _submit(client: Client, assignment: str, who: dict, filename: str, data: bytes, spec, extra: dict):
    try:
        return client.submit(assignment, who, filename, data)
    except ServiceError as err:
        if err.status == 400:           # the service refused the upload itself: the student's to fix
            return results.unreadable_submission(spec, err.body.get("error") or err.reason,
                                                 err.body.get("remedy") or "", extra=extra)
        if err.status in (401, 404):
            raise ServiceError(err.reason, "Tell course staff: the autograder's course token or assignment name "
                                           "is wrong or revoked. They must rebuild the autograder with a valid "
                                           "token, then regrade all submissions.") from None
        if err.status in (403, 409, 422, 429) and err.what_to_do:      # the service says whose it is to fix
            raise ServiceError(err.reason, err.what_to_do, status=err.status, body=err.body) from None
        raise


TRANSIENT_HTTP = (502, 503, 504)     # a proxy whose upstream is restarting, or a service starting up


def _wait(client: Client, created: dict, service, cancel: CancelToken) -> dict:
    """Polls the run's status until it is final. The run is on the service already, so a poll
    that cannot reach it (a restart of the service on deadline night, a proxy's 502) is tried
    again until the timeout rather than failing the submission at once: a failed one makes
    students submit again, and each new Gradescope submission is another grade."""
    deadline = time.monotonic() + service.timeout_s
    last = None
    while True:
        try:
            state = client.get(created["status_url"])
        except ServiceError as err:
            if (err.status is not None and err.status not in TRANSIENT_HTTP) or time.monotonic() > deadline \
                    or cancel.event.is_set():
                raise
            if last != "unreachable":
                print(f"service run {created['run_id']}: {err.reason}; trying again until the "
                      f"{service.timeout_s:.0f} s timeout", flush=True)
                last = "unreachable"
            time.sleep(service.poll_s)
            continue
        line = f"{state.get('status')} {state.get('done') or 0}/{state.get('total') or 0}"
        if line != last:
            print(f"service run {created['run_id']}: {line}", flush=True)
            last = line
        if state.get("status") in FINAL:
            return state
        if time.monotonic() > deadline or cancel.event.is_set():
            raise ServiceError(
                f"the grading service had not finished run {created['run_id']} after {service.timeout_s:.0f} s "
                f"(it is {state.get('status')})",
                "The run goes on in the service: course staff can see it there, and regrade this submission on "
                "Gradescope once the service's queue is shorter. You may also submit again later.")
        time.sleep(service.poll_s)
