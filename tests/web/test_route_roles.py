"""Every route of the site, tried by every kind of visitor: the access each gets must be the one
written down here (and in docs/security.md, which holds this table as the test prints it). A new
route without a row fails the suite, so no page ships without someone deciding who may open it.

Visitors: anonymous; a student of another course (sam); a student of the course (alice, who owns
the run and the API token the routes name); a TA of another course (theo); a TA of the course
(tara); an instructor of it (ines); a site admin (ada). Routes under /api/ are tried with each
visitor's API token instead of a browser session. "Allowed" means the request got past the
access rules (any answer but 401, 403, 404 or a redirect to the sign-in page); an empty form then
gets its 400. CSRF is off here (tests/web/test_auth.py checks it) so that empty forms reach the
access rules; throttling is off too (tests/web/test_security.py checks it)."""
from __future__ import annotations

from pathlib import Path

import pytest

from webtest_helpers import PASSWORD, store_graded_run

ROLES = ("anonymous", "other_student", "student", "other_ta", "ta", "instructor", "admin")
WHO = {"other_student": "sam", "student": "alice", "other_ta": "theo", "ta": "tara", "instructor": "ines",
       "admin": "ada"}

EVERYONE = set(ROLES)
SIGNED_IN = EVERYONE - {"anonymous"}
COURSE = {"student", "ta", "instructor", "admin"}
ANY_STAFF = {"other_ta", "ta", "instructor", "admin"}
COURSE_STAFF = {"ta", "instructor", "admin"}
INSTRUCTOR = {"instructor", "admin"}
ADMIN = {"admin"}
OWNER = {"student"} | COURSE_STAFF          # alice's run: alice and her course's staff

# (endpoint, method): who is allowed
EXPECTED: dict[tuple[str, str], set[str]] = {
    ("static", "GET"): EVERYONE,
    ("auth.login", "GET"): EVERYONE,
    ("auth.login", "POST"): EVERYONE,
    ("auth.login_link", "GET"): EVERYONE,
    ("auth.login_link", "POST"): EVERYONE,
    ("auth.logout", "POST"): SIGNED_IN,
    ("auth.account", "GET"): SIGNED_IN,
    ("auth.set_nickname", "POST"): SIGNED_IN,
    ("auth.set_password", "POST"): SIGNED_IN,
    ("auth.sign_out_everywhere", "POST"): SIGNED_IN,
    ("auth.create_token", "POST"): SIGNED_IN,
    ("auth.revoke_token", "POST"): {"student"},
    ("student.home", "GET"): SIGNED_IN,
    ("student.assignment", "GET"): COURSE,
    ("student.upload", "POST"): COURSE,
    ("student.starter_file", "GET"): COURSE,
    ("student.run_page", "GET"): OWNER,
    ("student.run_status", "GET"): OWNER,
    ("student.report", "GET"): OWNER,
    ("student.report_json", "GET"): OWNER,
    ("student.timeline", "GET"): OWNER,
    ("leaderboard.board", "GET"): COURSE,
    # contest pages (web/contest.py; tests/web/test_contest.py has their rules on a contest): the
    # table's assignment is a course assignment, where they answer 404 to everyone
    ("leaderboard.code", "GET"): set(),
    ("leaderboard.participant", "GET"): set(),
    ("leaderboard.disqualify", "POST"): set(),
    ("leaderboard.settings", "POST"): COURSE_STAFF,     # turns an assignment into a contest (here: refused, no mode)
    ("api.submit", "POST"): COURSE,
    ("api.run_status", "GET"): OWNER,
    ("api.run_report", "GET"): OWNER,
    ("api.leaderboard", "GET"): COURSE,
    ("api.contest_code", "GET"): set(),             # a contest's only (tests/web/test_contest_api_exports.py)
    ("api.course_assignment", "GET"): set(),        # a course token only (tests/grader/test_gradescope_service.py)
    ("api.course_submit", "POST"): set(),
    ("api.course_run_status", "GET"): set(),
    ("api.course_run_report", "GET"): set(),
    ("staff.console", "GET"): ANY_STAFF,            # each sees only their own courses in it
    ("staff.submissions", "GET"): ANY_STAFF,
    ("staff.nightly", "GET"): ANY_STAFF,            # reference kernels only: no student's data
    ("staff.roster_page", "GET"): ANY_STAFF,
    ("staff.import_roster", "POST"): ANY_STAFF,     # the course and roles in the file decide (test_security)
    ("staff.add_person", "POST"): ANY_STAFF,        # the same rules as a roster of one line
    ("staff.create_course", "POST"): ADMIN,
    # a problem folder's reference.py runs on the grader's trusted side: site admins only
    ("staff.problems_page", "GET"): ADMIN,
    ("staff.upload_problem", "POST"): ADMIN,
    ("staff.delete_problem", "POST"): ADMIN,
    ("staff.create_assignment", "POST"): ADMIN,     # or an instructor naming their own course
    ("staff.assignment", "GET"): COURSE_STAFF,
    ("staff.adopt_thresholds", "POST"): COURSE_STAFF,
    ("staff.start_task", "POST"): COURSE_STAFF,     # rescore, regrade, exports: a worker does them
    ("staff.task_page", "GET"): COURSE_STAFF,
    ("staff.task_status", "GET"): COURSE_STAFF,
    ("staff.task_download", "GET"): COURSE_STAFF,
    ("staff.grant_extension", "POST"): COURSE_STAFF,
    ("staff.set_visibility", "POST"): INSTRUCTOR,
    ("staff.set_deadline", "POST"): INSTRUCTOR,     # the deadline and late rule (test_late_policy.py)
    ("staff.set_title", "POST"): COURSE_STAFF,
    ("staff.run_detail", "GET"): COURSE_STAFF,
    ("staff.run_file", "GET"): COURSE_STAFF,
    ("staff.run_gradescope", "GET"): COURSE_STAFF,
    ("staff.rerun", "POST"): COURSE_STAFF,
    ("staff.cancel", "POST"): COURSE_STAFF,
    ("staff.flag", "POST"): COURSE_STAFF,
    ("staff.unflag", "POST"): COURSE_STAFF,
    ("staff.new_link", "POST"): COURSE_STAFF,       # alice: a student of the TA's own course
    ("staff.sign_out_user", "POST"): COURSE_STAFF,
    ("staff.set_site_admin", "POST"): ADMIN,
}

DOCS = Path(__file__).resolve().parents[2] / "docs" / "security.md"


def table(rows: dict[tuple[str, str], set[str]], rules: dict[str, str]) -> str:
    """The table as docs/security.md holds it (markdown)."""
    head = "| route | method | " + " | ".join(r.replace("_", " ") for r in ROLES) + " |"
    lines = [head, "|" + "---|" * (len(ROLES) + 2)]
    for (endpoint, method), allowed in sorted(rows.items(), key=lambda kv: (rules[kv[0][0]], kv[0][1])):
        marks = " | ".join("yes" if role in allowed else "-" for role in ROLES)
        lines.append(f"| `{rules[endpoint]}` | {method} | {marks} |")
    return "\n".join(lines)


@pytest.fixture
def table_app(db, broker, tmp_path, monkeypatch):
    monkeypatch.setenv("NKI_GRADER_HOME", str(tmp_path / "instance"))
    import web
    return web.create_app({"TESTING": True, "SECRET_KEY": "test-secret", "WTF_CSRF_ENABLED": False,
                           "RATELIMIT_ENABLED": False, "LEADERBOARD_CACHE_SECONDS": 0,
                           "DATABASE_URL": db.get_bind().url.render_as_string(hide_password=False)})


def test_every_route_answers_each_role_as_written(table_app, db, two_courses, tiny_reports, capsys):
    from web import accounts
    alice = two_courses["alice"]
    run = store_graded_run(db, alice, two_courses["assignment"], tiny_reports["optimized"])
    timed = next(t.name for t in tiny_reports["optimized"].tests if t.p99_us is not None)
    api_tokens = {role: accounts.new_api_token(db, two_courses[who], role) for role, who in WHO.items()}
    from store.models import ProblemFolder, StaffTask
    db.add(ProblemFolder(sha256="0" * 64, name="softmax", title="Softmax", archive=b"", check_table=""))  # no spec pins it
    task = StaffTask(kind="grades_csv", assignment_id=two_courses["assignment"].id, status="done",
                     result=b"email\n", result_name="tiny-grades.csv", result_type="text/csv")
    db.add(task)
    db.commit()
    alice_token_id = max(t.id for t in alice_tokens(db, alice.id))
    values = {"name": "tiny", "run_id": run.id, "user_id": alice.id, "token": "not-a-link", "token_id": alice_token_id,
              "test_name": timed, "filename": "style.css", "file": "conv2d.py",
              "task_id": task.id, "kind": "grades_csv", "sha": "0" * 64}
    rules = {r.endpoint: r.rule for r in table_app.url_map.iter_rules()}
    routes = sorted({(r.endpoint, m) for r in table_app.url_map.iter_rules() for m in r.methods - {"HEAD", "OPTIONS"}},
                    key=lambda em: (em[1] == "POST", em))        # every GET first: they change nothing
    unlisted = [em for em in routes if em not in EXPECTED]
    assert not unlisted, f"routes without an access rule in this table (add them, and to docs/security.md): {unlisted}"

    clients = {}

    def client(role):
        if role not in clients:
            clients[role] = table_app.test_client()
            if role != "anonymous":
                answer = clients[role].post("/login", data={"email": f"{WHO[role]}@example.edu", "password": PASSWORD})
                assert answer.status_code == 302, role
        return clients[role]

    seen: dict[tuple[str, str], set[str]] = {}
    with table_app.test_request_context():
        from flask import url_for
        urls = {endpoint: url_for(endpoint, **{k: values[k] for k in rule_args(table_app, endpoint)})
                for endpoint, _ in routes}
    for endpoint, method in routes:
        for role in ROLES:
            headers = {}
            if endpoint.startswith("api.") and role != "anonymous":
                headers["Authorization"] = f"Bearer {api_tokens[role]}"
            visitor = table_app.test_client() if endpoint.startswith("api.") else client(role)
            answer = visitor.open(urls[endpoint], method=method, headers=headers, data={})
            answer.close()                       # a static file's response holds the file open
            assert answer.status_code < 500, (endpoint, method, role, answer.get_data(as_text=True)[:500])
            denied = answer.status_code in (401, 403, 404) or (
                answer.status_code == 302 and "/login?next=" in answer.headers.get("Location", ""))
            if not denied:
                seen.setdefault((endpoint, method), set()).add(role)
            if method == "POST" and role in clients and clients[role].get("/account").status_code != 200:
                clients.pop(role)                # the POST signed the visitor out: sign in afresh
        seen.setdefault((endpoint, method), set())
    printed = table(seen, rules)
    with capsys.disabled():
        print("\n" + printed)
    wrong = {em: (sorted(seen[em]), sorted(EXPECTED[em])) for em in routes if seen[em] != EXPECTED[em]}
    assert not wrong, f"(seen, expected) per route: {wrong}"
    assert table(EXPECTED, rules) in DOCS.read_text(), "docs/security.md's table differs from this test's: paste it"


def alice_tokens(db, user_id):
    from sqlalchemy import select
    from store.models import ApiToken
    return db.scalars(select(ApiToken).where(ApiToken.user_id == user_id)).all()


def rule_args(app, endpoint):
    return next(r.arguments for r in app.url_map.iter_rules() if r.endpoint == endpoint)
