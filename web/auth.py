"""Signing in and out (password or one-time link) and the account page: nickname, password,
API tokens."""
from __future__ import annotations

from urllib.parse import urlsplit

from flask import Blueprint, abort, current_app, flash, redirect, render_template, request, session as cookie, url_for
from flask_login import current_user, login_required, login_user, logout_user
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from werkzeug.security import check_password_hash

from store.models import ApiToken, User

from . import accounts, db, sessions, throttle
from .cookies import is_plain_loopback
from .leaderboard import standings_changed
from .extensions import login_manager
from .forms import ApiTokenForm, ConfirmForm, LoginForm, NicknameForm, PasswordForm, SimpleActionForm

bp = Blueprint("auth", __name__)


@login_manager.user_loader
def _load_user(session_token: str):
    return sessions.load(db.session(), session_token) if session_token else None


def _sign_in(user: User) -> None:
    """A fresh server-side session for user; whatever the cookie held before is dropped."""
    session = db.session()
    account = sessions.start(session, user, current_app.config["PERMANENT_SESSION_LIFETIME"])
    session.commit()
    cookie.clear()
    login_user(account)


def _safe_next(target: str | None) -> str:
    """Only same-site paths: a login link must not bounce the user to another site. Browsers drop
    tabs and line breaks from URLs ('/\t/evil.example' becomes '//evil.example', another site) and
    a line break in a header is refused, so any whitespace or control character sends the user
    home, as does anything with a scheme, a host, a leading '//' or a backslash."""
    home = url_for("student.home")
    if not target or "\\" in target or any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7f for c in target):
        return home
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//"):
        return home
    return target


@bp.route("/login", methods=["GET", "POST"])
@throttle.sign_in_per_account
@throttle.sign_in_per_address
def login():
    if current_user.is_authenticated:
        return redirect(url_for("student.home"))
    form = LoginForm()
    status = 200
    if form.validate_on_submit():
        user = accounts.check_password(db.session(), form.email.data, form.password.data)
        if user is not None:
            _sign_in(user)
            return redirect(_safe_next(request.args.get("next")))
        flash("That email and password do not match an active account. Use the one-time link "
              "course staff sent you if you have not set a password yet.", "error")
        status = 401
    insecure = not request.is_secure and not is_plain_loopback()
    return render_template("auth/login.html", form=form, insecure=insecure), status


@bp.route("/login/link/<token>", methods=["GET", "POST"])
@throttle.login_links
def login_link(token: str):
    form = ConfirmForm()
    if request.method == "GET":
        return render_template("auth/login_link.html", form=form)
    if not form.validate_on_submit():
        abort(400)
    session = db.session()
    user = accounts.use_login_token(session, token)
    if user is None:
        session.rollback()
        flash("That sign-in link is unknown, expired or already used. Ask course staff for a new one.", "error")
        return render_template("auth/login_link.html", form=form, failed=True), 400
    session.commit()
    _sign_in(user)
    if not user.password_hash:
        flash("Signed in. Set a password below so you can sign in again without a link.", "success")
        return redirect(url_for("auth.account"))
    return redirect(url_for("student.home"))


@bp.route("/logout", methods=["POST"])
@login_required
def logout():
    _signed_out(lambda session: sessions.end(session, current_user.session_token, "signed out"))
    flash("Signed out.", "success")
    return redirect(url_for("auth.login"))


def _signed_out(end) -> int:
    """Ends sessions with `end(db session)` (what it returns is passed on), then this browser's."""
    if not SimpleActionForm().validate_on_submit():
        abort(400)
    session = db.session()
    ended = end(session)
    session.commit()
    logout_user()
    cookie.clear()
    return ended


@bp.route("/account/sessions/end", methods=["POST"])
@login_required
def sign_out_everywhere():
    """Every session of this account ends, this one too (e.g. after using a shared computer)."""
    ended = _signed_out(lambda session: sessions.end_all(session, current_user.id,
                                                         "signed out everywhere by the user"))
    flash(f"Signed out everywhere ({ended} session{'' if ended == 1 else 's'} ended). Sign in again here.", "success")
    return redirect(url_for("auth.login"))


@bp.route("/account", methods=["GET"])
@login_required
def account():
    session = db.session()
    tokens = session.scalars(select(ApiToken).where(ApiToken.user_id == current_user.id,
                                                    ApiToken.revoked_at.is_(None)).order_by(ApiToken.id)).all()
    return _account_page(tokens, None)


def _account_page(tokens, new_token):
    return render_template("auth/account.html", nickname_form=NicknameForm(nickname=current_user.nickname),
                           password_form=PasswordForm(), token_form=ApiTokenForm(), action_form=SimpleActionForm(),
                           tokens=tokens, new_token=new_token,
                           has_password=bool(db.session().get(User, current_user.id).password_hash),
                           live_sessions=sessions.live(db.session(), current_user.id),
                           this_session=accounts.token_hash(current_user.session_token))


@bp.route("/account/nickname", methods=["POST"])
@login_required
def set_nickname():
    form = NicknameForm()
    if not form.validate_on_submit():
        flash(" ".join(form.nickname.errors) or "The nickname was not accepted.", "error")
        return redirect(url_for("auth.account")), 303
    session = db.session()
    session.get(User, current_user.id).nickname = form.nickname.data.strip()
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        flash(f"The nickname {form.nickname.data!r} is taken; choose another.", "error")
        return redirect(url_for("auth.account")), 303
    standings_changed(session, user_id=current_user.id)
    flash("Nickname saved; the leaderboard shows it from now on.", "success")
    return redirect(url_for("auth.account")), 303


@bp.route("/account/password", methods=["POST"])
@login_required
def set_password():
    form = PasswordForm()
    problem = accounts.password_problem(form.password.data or "", form.confirm.data or "") \
        if form.validate_on_submit() else "Fill in both password fields."
    if problem:
        flash(problem, "error")
        return redirect(url_for("auth.account")), 303
    session = db.session()
    user = session.get(User, current_user.id)
    if user.password_hash and not check_password_hash(user.password_hash, form.current.data or ""):
        # a session left open (or stolen) must not be enough to lock the owner out
        flash("Your current password is not right; the password was not changed.", "error")
        return redirect(url_for("auth.account")), 303
    accounts.set_password(user, form.password.data)
    ended = sessions.end_all(session, current_user.id, "password changed", keep=current_user.session_token)
    session.commit()
    flash("Password set." + (f" {ended} other session{'' if ended == 1 else 's'} of yours signed out." if ended else ""),
          "success")
    return redirect(url_for("auth.account")), 303


@bp.route("/account/tokens", methods=["POST"])
@login_required
def create_token():
    form = ApiTokenForm()
    if not form.validate_on_submit():
        abort(400)
    session = db.session()
    token = accounts.new_api_token(session, session.get(User, current_user.id), form.label.data or "")
    session.commit()
    tokens = session.scalars(select(ApiToken).where(ApiToken.user_id == current_user.id,
                                                    ApiToken.revoked_at.is_(None)).order_by(ApiToken.id)).all()
    return _account_page(tokens, token)


@bp.route("/account/tokens/<int:token_id>/revoke", methods=["POST"])
@login_required
def revoke_token(token_id: int):
    if not SimpleActionForm().validate_on_submit():
        abort(400)
    session = db.session()
    row = session.get(ApiToken, token_id)
    if row is None or row.user_id != current_user.id:
        abort(404)
    row.revoked_at = accounts.now()
    session.commit()
    flash("Token revoked.", "success")
    return redirect(url_for("auth.account")), 303

