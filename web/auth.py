"""Signing in and out (password or one-time link) and the account page: nickname, password,
API tokens."""
from __future__ import annotations

from urllib.parse import urlsplit

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from flask_login import current_user, login_required, login_user, logout_user
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from store.models import ApiToken, User

from . import accounts, db
from .cookies import is_plain_loopback
from .leaderboard import standings_changed
from .extensions import login_manager
from .forms import ApiTokenForm, ConfirmForm, LoginForm, NicknameForm, PasswordForm, SimpleActionForm

bp = Blueprint("auth", __name__)


@login_manager.user_loader
def _load_user(user_id: str):
    user = db.session().get(User, int(user_id)) if user_id.isdigit() else None
    return accounts.Account(user) if user is not None and user.active else None


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
def login():
    if current_user.is_authenticated:
        return redirect(url_for("student.home"))
    form = LoginForm()
    status = 200
    if form.validate_on_submit():
        user = accounts.check_password(db.session(), form.email.data, form.password.data)
        if user is not None:
            login_user(accounts.Account(user))
            return redirect(_safe_next(request.args.get("next")))
        flash("That email and password do not match an active account. Use the one-time link "
              "course staff sent you if you have not set a password yet.", "error")
        status = 401
    insecure = not request.is_secure and not is_plain_loopback()
    return render_template("auth/login.html", form=form, insecure=insecure), status


@bp.route("/login/link/<token>", methods=["GET", "POST"])
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
    login_user(accounts.Account(user))
    if not user.password_hash:
        flash("Signed in. Set a password below so you can sign in again without a link.", "success")
        return redirect(url_for("auth.account"))
    return redirect(url_for("student.home"))


@bp.route("/logout", methods=["POST"])
@login_required
def logout():
    if not SimpleActionForm().validate_on_submit():
        abort(400)
    logout_user()
    flash("Signed out.", "success")
    return redirect(url_for("auth.login"))


@bp.route("/account", methods=["GET"])
@login_required
def account():
    session = db.session()
    tokens = session.scalars(select(ApiToken).where(ApiToken.user_id == current_user.id,
                                                    ApiToken.revoked_at.is_(None)).order_by(ApiToken.id)).all()
    return render_template("auth/account.html", nickname_form=NicknameForm(nickname=current_user.nickname),
                           password_form=PasswordForm(), token_form=ApiTokenForm(), action_form=SimpleActionForm(),
                           tokens=tokens, new_token=None)


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
    accounts.set_password(session.get(User, current_user.id), form.password.data)
    session.commit()
    flash("Password set.", "success")
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
    return render_template("auth/account.html", nickname_form=NicknameForm(nickname=current_user.nickname),
                           password_form=PasswordForm(), token_form=ApiTokenForm(), action_form=SimpleActionForm(),
                           tokens=tokens, new_token=token)


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

