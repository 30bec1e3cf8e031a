"""Signing in with a password or a one-time link, CSRF on forms, session cookies, the
account page (nickname, password, API tokens)."""
from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from webtest_helpers import PASSWORD, csrf_of, login


def test_password_sign_in_and_wrong_password(app, course_setup):
    client = app.test_client()
    assert client.get("/").status_code == 302                      # anonymous: to the sign-in page
    bad = login(client, "alice@example.edu", "not the password")
    assert bad.status_code == 401
    assert "do not match an active account" in bad.get_data(as_text=True)
    good = login(client, "alice@example.edu")
    assert good.status_code == 302
    home = client.get("/")
    assert "Tiny fused conv2d" in home.get_data(as_text=True) and "Alice" in home.get_data(as_text=True)
    assert "script-src 'self'" in home.headers["Content-Security-Policy"]
    assert home.headers["Referrer-Policy"] == "same-origin" and home.headers["X-Frame-Options"] == "DENY"


@pytest.mark.parametrize("target", [
    "/%09/evil.example/", "/%0a/evil.example/", "/%0d%0aSet-Cookie:%20x=y", "//evil.example/",
    "/\\evil.example/", "https://evil.example/", "javascript:alert(1)", "/%20/evil.example", "evil.example",
    "/%7f/evil.example"])
def test_sign_in_never_redirects_off_site_and_never_fails_on_next(app, course_setup, target):
    """`next` after sign-in: only a same-site path survives; anything a browser could read as
    another site (a tab or line break it drops, a scheme, a host) goes home, never a 500."""
    client = app.test_client()
    page = client.get(f"/login?next={target}")
    assert page.status_code == 200
    answer = client.post(f"/login?next={target}", data={"email": "alice@example.edu", "password": PASSWORD,
                                                       "csrf_token": csrf_of(page.get_data(as_text=True))})
    assert answer.status_code == 302, answer.status_code
    assert answer.headers["Location"] == "/", answer.headers["Location"]


def test_sign_in_keeps_a_same_site_next(app, course_setup):
    client = app.test_client()
    page = client.get("/login?next=/a/tiny?x=1")
    answer = client.post("/login?next=/a/tiny?x=1", data={"email": "alice@example.edu", "password": PASSWORD,
                                                        "csrf_token": csrf_of(page.get_data(as_text=True))})
    assert answer.headers["Location"] == "/a/tiny?x=1"


def test_forms_refuse_posts_without_csrf_token(app, course_setup):
    client = app.test_client()
    response = client.post("/login", data={"email": "alice@example.edu", "password": PASSWORD})
    assert response.status_code == 400
    assert "Reload the page" in response.get_data(as_text=True)


def test_one_time_link_signs_in_once_and_only_on_post(app, db, course_setup):
    from web.accounts import new_login_token
    token = new_login_token(db, course_setup["bob"], hours=1)
    db.commit()
    client = app.test_client()
    page = client.get(f"/login/link/{token}")
    assert page.status_code == 200 and client.get("/").status_code == 302     # a GET signs nobody in
    signed_in = client.post(f"/login/link/{token}", data={"csrf_token": csrf_of(page.get_data(as_text=True))})
    assert signed_in.status_code == 302 and client.get("/").status_code == 200
    other = app.test_client()
    again = other.post(f"/login/link/{token}",
                       data={"csrf_token": csrf_of(other.get(f"/login/link/{token}").get_data(as_text=True))})
    assert again.status_code == 400
    assert "already used" in again.get_data(as_text=True)


def test_session_cookie_is_httponly_lax_and_secure_off_loopback(app, course_setup):
    local = login(app.test_client(), "alice@example.edu")
    cookie = session_cookie(local)
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" not in cookie
    remote = app.test_client()
    page = remote.get("/login", base_url="https://grader.example.edu")
    response = remote.post("/login", base_url="https://grader.example.edu",
                           data={"email": "alice@example.edu", "password": PASSWORD,
                                 "csrf_token": csrf_of(page.get_data(as_text=True))})
    assert "Secure" in session_cookie(response)


def session_cookie(response) -> str:
    return next(c for c in response.headers.getlist("Set-Cookie") if c.startswith("session="))


def test_account_nickname_password_and_api_tokens(client_for, db, course_setup):
    from store.models import ApiToken, User
    alice = client_for("alice")
    page = alice.get("/account").get_data(as_text=True)
    token = csrf_of(page)
    taken = alice.post("/account/nickname", data={"nickname": "bobby", "csrf_token": token}, follow_redirects=True)
    assert "is taken" in taken.get_data(as_text=True)
    bad = alice.post("/account/nickname", data={"nickname": "<script>", "csrf_token": token}, follow_redirects=True)
    assert "Use letters, digits" in bad.get_data(as_text=True)
    alice.post("/account/nickname", data={"nickname": "kernel queen", "csrf_token": token})
    short = alice.post("/account/password", data={"password": "short", "confirm": "short", "csrf_token": token},
                       follow_redirects=True)
    assert "at least 12 characters" in short.get_data(as_text=True)
    wrong = alice.post("/account/password", data={"current": "not my password", "password": "a new long password",
                                                  "confirm": "a new long password", "csrf_token": token},
                       follow_redirects=True)
    assert "current password is not right" in wrong.get_data(as_text=True)
    alice.post("/account/password", data={"current": PASSWORD, "password": "a new long password",
                                          "confirm": "a new long password", "csrf_token": token})
    made = alice.post("/account/tokens", data={"label": "laptop", "csrf_token": token}).get_data(as_text=True)
    shown = re.search(r"data-new-token>([^<]+)<", made).group(1)
    db.expire_all()
    user = db.scalar(select(User).where(User.email == "alice@example.edu"))
    assert user.nickname == "kernel queen"
    row = db.scalar(select(ApiToken).where(ApiToken.user_id == user.id))
    assert row.token_hash != shown and len(row.token_hash) == 64          # only the hash is kept
    assert login(client_for(None), "alice@example.edu", "a new long password").status_code == 302
    revoke = alice.post(f"/account/tokens/{row.id}/revoke", data={"csrf_token": token})
    assert revoke.status_code == 303
    db.expire_all()
    assert db.get(ApiToken, row.id).revoked_at is not None


def test_first_admin_link_for_grader_serve(app, db):
    from web.bootstrap import first_admin_login_link
    link = first_admin_login_link(db, "http://127.0.0.1:8000/")
    assert link.startswith("http://127.0.0.1:8000/login/link/")
    again = first_admin_login_link(db, "http://127.0.0.1:8000")          # same admin, a fresh link
    client = app.test_client()
    path = again.removeprefix("http://127.0.0.1:8000")
    client.post(path, data={"csrf_token": csrf_of(client.get(path).get_data(as_text=True))})
    assert client.get("/staff/").status_code == 200
    from store.models import User
    assert [u.email for u in db.scalars(select(User))] == ["admin@localhost"]
