"""The site against its own staff and a patient attacker (issue 18's findings, each as the attack
a red team ran): per-course roles, sessions that end, throttled sign-in and uploads, no way to
mint a link for someone above you."""
from __future__ import annotations

import html
import io
import re

import pytest
from sqlalchemy import select

from store.models import LoginToken, User
from webtest_helpers import PASSWORD, csrf_of, login, multipart, store_graded_run


def post_form(client, page_url: str, url: str, data: dict | None = None, **kwargs):
    token = csrf_of(client.get(page_url).get_data(as_text=True))
    return client.post(url, data={"csrf_token": token, **(data or {})}, **kwargs)


# ----- a TA becomes admin in one request: two ways ------------------------------------------------

def test_a_ta_cannot_get_a_sign_in_link_for_anyone_above_or_beside_them(app, client_for, two_courses):
    tara = client_for("tara")
    for target in ("ada", "ines", "carl"):        # the admin, the instructor, a student who is a TA elsewhere
        response = post_form(tara, "/staff/roster", f"/staff/users/{two_courses[target].id}/login-link")
        assert response.status_code == 403, target
        assert "/login/link/" not in response.get_data(as_text=True)
    ok = post_form(tara, "/staff/roster", f"/staff/users/{two_courses['alice'].id}/login-link")
    assert ok.status_code == 200 and "/login/link/" in ok.get_data(as_text=True)       # her own student


def test_a_roster_imported_by_a_ta_makes_no_admin_and_no_instructor(app, client_for, db, two_courses):
    tara = client_for("tara")
    for line, why in (("mallory@uni.edu,Mallory,admin", "role 'admin' is not one of student, ta, instructor"),
                      ("mallory@uni.edu,Mallory,instructor", "you may not enroll or change mallory@uni.edu as instructor"),
                      ("mallory@uni.edu,Mallory,ta", "you may not enroll or change mallory@uni.edu as ta"),
                      ("ines@example.edu,Ines,student", "ines@example.edu (now instructor)")):
        body = f"email,name,role\nnew@uni.edu,New,student\n{line}\n".encode()
        response = post_form(tara, "/staff/roster", "/staff/roster", content_type="multipart/form-data",
                             data={"course": "CS149", "csv_file": (io.BytesIO(body), "roster.csv")})
        assert response.status_code in (400, 403) and why in html.unescape(response.get_data(as_text=True)), line
        db.expire_all()
        assert db.scalar(select(User).where(User.email.in_(["mallory@uni.edu", "new@uni.edu"]))) is None
    # into another course, or a course that does not exist: refused
    for course in ("CS150", "CS999"):
        response = post_form(tara, "/staff/roster", "/staff/roster", content_type="multipart/form-data",
                             data={"course": course, "csv_file": (io.BytesIO(b"email\nnew@uni.edu\n"), "r.csv")})
        assert response.status_code == 403, course


def test_a_roster_gives_no_link_for_an_existing_account_the_importer_may_not_act_for(app, client_for, db, two_courses):
    """Importing the admin's address as a student would have handed the TA the admin's link."""
    tara = client_for("tara")
    body = b"email,role\nada@example.edu,student\nnew@uni.edu,student\n"
    # ada is an instructor of CS149: a TA may not change her; into CS149 as a student is refused
    response = post_form(tara, "/staff/roster", "/staff/roster", content_type="multipart/form-data",
                         data={"course": "CS149", "csv_file": (io.BytesIO(body), "r.csv")})
    assert response.status_code == 403
    # an instructor imports sam (a student of CS150 only) into CS149: enrolled, but no link to sam's account
    ines = client_for("ines")
    body = b"email,role\nsam@example.edu,student\nnew@uni.edu,student\n"
    response = post_form(ines, "/staff/roster", "/staff/roster", content_type="multipart/form-data",
                         data={"course": "CS149", "csv_file": (io.BytesIO(body), "r.csv")})
    page = response.get_data(as_text=True)
    assert response.status_code == 200 and page.count("/login/link/") == 1
    assert "none: they already have an account" in page


def test_only_a_site_admin_makes_a_site_admin(app, client_for, db, two_courses):
    ines = client_for("ines")
    assert post_form(ines, "/staff/roster", f"/staff/users/{two_courses['alice'].id}/site-admin",
                     {"admin": "yes"}).status_code == 403
    ada = client_for("ada")
    assert post_form(ada, "/staff/roster", f"/staff/users/{two_courses['ines'].id}/site-admin",
                     {"admin": "yes"}).status_code == 303
    db.expire_all()
    assert db.get(User, two_courses["ines"].id).role == "admin"


# ----- staff roles are per course ------------------------------------------------------------------

def test_a_ta_of_one_course_sees_nothing_of_another(app, client_for, db, two_courses, tiny_reports):
    from store.models import StaffTask
    run = store_graded_run(db, two_courses["alice"], two_courses["assignment"], tiny_reports["optimized"])
    export = StaffTask(kind="grades_csv", assignment_id=two_courses["assignment"].id, status="done",
                       result=b"email,total\nalice@example.edu,7.5\n", result_name="tiny-grades.csv")
    db.add(export)
    db.commit()
    theo = client_for("theo")                     # TA of CS150 only
    for url in ("/staff/assignments/tiny", f"/staff/tasks/{export.id}", f"/staff/tasks/{export.id}/status",
                f"/staff/tasks/{export.id}/download", f"/staff/runs/{run.id}", f"/staff/runs/{run.id}/file",
                f"/staff/runs/{run.id}/results.json", f"/runs/{run.id}", f"/runs/{run.id}/report"):
        assert theo.get(url).status_code in (403, 404), url
    for kind in ("grades_csv", "gradescope_zip", "rescore", "regrade"):
        assert post_form(theo, "/staff/assignments/other", f"/staff/assignments/tiny/tasks/{kind}").status_code == 403
    listing = theo.get("/staff/submissions").get_data(as_text=True)
    assert "alice@example.edu" not in listing and "tiny" not in listing
    console = theo.get("/staff/").get_data(as_text=True)
    assert "/staff/assignments/other" in console and "/staff/assignments/tiny" not in console
    people = theo.get("/staff/roster").get_data(as_text=True)
    assert "sam@example.edu" in people and "alice@example.edu" not in people
    # their own course's pages open
    assert theo.get("/staff/assignments/other").status_code == 200
    assert post_form(theo, "/staff/assignments/other", "/staff/assignments/other/tasks/grades_csv").status_code == 303
    # and a student of another course does not see this course's board or assignment
    sam = client_for("sam")
    assert sam.get("/leaderboard/tiny").status_code == 403
    assert sam.get("/a/tiny").status_code == 403


# ----- sessions end ------------------------------------------------------------------------------

def test_a_cookie_copied_before_logout_signs_in_no_more(app, course_setup):
    client = app.test_client()
    assert login(client, "alice@example.edu").status_code == 302
    stolen = client.get_cookie("session").value
    assert post_form(client, "/account", "/logout").status_code == 302
    thief = app.test_client()
    thief.set_cookie("session", stolen)
    assert thief.get("/account").status_code == 302                     # to the sign-in page
    assert thief.post("/account/tokens", data={"label": "mine"}).status_code in (302, 400)
    assert "nkig_" not in thief.get("/account").get_data(as_text=True)


def test_a_password_change_ends_every_other_session(app, course_setup):
    laptop, phone = app.test_client(), app.test_client()
    assert login(laptop, "alice@example.edu").status_code == 302
    assert login(phone, "alice@example.edu").status_code == 302
    response = post_form(laptop, "/account", "/account/password", {"current": PASSWORD, "password": "a new long password",
                                                                  "confirm": "a new long password"})
    assert response.status_code == 303
    assert laptop.get("/account").status_code == 200                    # the session that changed it stays
    assert phone.get("/account").status_code == 302                     # the other one is gone


def test_sign_out_everywhere_and_an_admin_signing_someone_out(app, client_for, db, course_setup):
    from store.models import ApiToken
    from web import accounts
    one, two = client_for("alice"), client_for("alice")
    token = accounts.new_api_token(db, course_setup["alice"], "cli")
    db.commit()
    assert "this browser" in one.get("/account").get_data(as_text=True)
    assert post_form(one, "/account", "/account/sessions/end").status_code == 302
    assert one.get("/account").status_code == 302 and two.get("/account").status_code == 302
    three = client_for("alice")
    ada = client_for("ada")
    assert post_form(ada, "/staff/roster", f"/staff/users/{course_setup['alice'].id}/sign-out").status_code == 303
    assert three.get("/account").status_code == 302
    db.expire_all()
    assert db.scalar(select(ApiToken).where(ApiToken.user_id == course_setup["alice"].id)).revoked_at is not None
    assert app.test_client().get("/api/v1/runs/1", headers={"Authorization": f"Bearer {token}"}).status_code == 401


def test_a_disabled_account_is_signed_out_at_its_next_request(app, client_for, db, course_setup):
    client = client_for("bob")
    db.get(User, course_setup["bob"].id).active = False
    db.commit()
    assert client.get("/account").status_code == 302


def test_a_newer_sign_in_link_revokes_the_older_ones(app, db, course_setup):
    from web import accounts
    alice = course_setup["alice"]
    old = accounts.new_login_token(db, alice, 72)
    db.commit()
    new = accounts.new_login_token(db, alice, 72)
    db.commit()

    def use(token):
        client = app.test_client()
        page = client.get(f"/login/link/{token}").get_data(as_text=True)
        return client.post(f"/login/link/{token}", data={"csrf_token": csrf_of(page)}).status_code

    assert use(old) == 400                      # replaced by the newer link
    # using a link revokes any other link of the user made meanwhile
    other = accounts.new_login_token(db, alice, 72)
    db.commit()
    db.execute(LoginToken.__table__.update().where(LoginToken.token_hash == accounts.token_hash(other))
               .values(revoked_at=None))        # as if made in another tab before `new` was
    db.commit()
    assert use(new) == 400                      # `other` was newer, so `new` was revoked when it was made
    assert use(other) == 302


# ----- throttling ---------------------------------------------------------------------------------

def test_sign_in_is_throttled_per_account_and_the_right_password_waits_too(app, course_setup):
    attacker = app.test_client()
    codes = [login(attacker, "bob@example.edu", "wrong password!").status_code for _ in range(6)]
    assert codes[:5] == [401] * 5 and codes[5] == 429
    refused = login(attacker, "bob@example.edu")
    assert refused.status_code == 429
    assert int(refused.headers["Retry-After"]) > 0
    assert re.search(r"Try again in \d+ s", refused.get_data(as_text=True))
    # from another address too: the count is the account's
    other = app.test_client()
    page = other.get("/login", environ_base={"REMOTE_ADDR": "10.0.0.9"})
    assert other.post("/login", data={"email": "bob@example.edu", "password": PASSWORD,
                                      "csrf_token": csrf_of(page.get_data(as_text=True))},
                      environ_base={"REMOTE_ADDR": "10.0.0.9"}).status_code == 429
    # another account is not held up, and a right password never counts
    assert login(app.test_client(), "alice@example.edu").status_code == 302


def test_sign_in_is_throttled_per_address_across_accounts(app, course_setup):
    app.config["RATELIMIT_SIGN_IN_PER_ADDRESS"] = "3 per minute"
    client = app.test_client()
    codes = [login(client, f"nobody{i}@example.edu", "wrong password!").status_code for i in range(4)]
    assert codes == [401, 401, 401, 429]


def test_uploads_are_counted_whether_accepted_or_refused(app, client_for, course_setup):
    app.config["RATELIMIT_UPLOADS"] = "4 per minute"
    alice = client_for("alice")
    codes = []
    for _ in range(5):
        codes.append(post_form(alice, "/a/tiny", "/a/tiny/submit", content_type="multipart/form-data",
                               data={"file": (io.BytesIO(b"not python ("), "conv2d.py")}).status_code)
    assert codes[:4] == [400] * 4 and codes[4] == 429


def test_one_time_links_are_throttled(app, course_setup):
    app.config["RATELIMIT_LOGIN_LINKS"] = "3 per minute"
    client = app.test_client()
    page = client.get("/login/link/guess").get_data(as_text=True)
    codes = [client.post(f"/login/link/guess{i}", data={"csrf_token": csrf_of(page)}).status_code for i in range(4)]
    assert codes == [400, 400, 400, 429]


# ----- uploads over the limit -----------------------------------------------------------------------

def test_an_oversized_upload_gets_a_413_page(app, client_for, course_setup):
    alice = client_for("alice")
    token = csrf_of(alice.get("/a/tiny").get_data(as_text=True))
    body, content_type = multipart({"csrf_token": token}, "file", "conv2d.py", b"x" * (20 * 1024 * 1024))
    response = alice.post("/a/tiny/submit", data=body, content_type=content_type)
    assert response.status_code == 413
    assert "larger than the 16 MiB" in response.get_data(as_text=True)


def test_the_console_describes_only_the_visitors_own_courses_grades(app, client_for, db, two_courses, tiny_reports):
    import datetime as dt
    from store.models import GradingRun
    run = store_graded_run(db, two_courses["alice"], two_courses["assignment"], tiny_reports["optimized"],
                           filename="alice-secret-name.py")
    db.get(GradingRun, run.id).status = "running"
    db.get(GradingRun, run.id).started_at = dt.datetime.now(dt.timezone.utc)
    db.commit()
    assert "alice-secret-name.py" in client_for("tara").get("/staff/").get_data(as_text=True)
    assert "alice-secret-name.py" not in client_for("theo").get("/staff/").get_data(as_text=True)
