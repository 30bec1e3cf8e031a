"""Roster import and the people of the site, with fresh one-time login links on demand."""
from __future__ import annotations

from flask import current_app, render_template, url_for
from sqlalchemy import select

from store.models import Course, User

from .. import db, roster
from ..accounts import new_login_token
from ..errors import UserError
from ..forms import RosterForm, SimpleActionForm
from . import bp


def _link(token: str) -> str:
    return url_for("auth.login_link", token=token, _external=True)


@bp.route("/roster", methods=["GET"])
def roster_page():
    session = db.session()
    users = session.scalars(select(User).order_by(User.role.desc(), User.email)).all()
    courses = session.scalars(select(Course.name).order_by(Course.name)).all()
    return render_template("staff/roster.html", form=RosterForm(), users=users, courses=courses,
                           action_form=SimpleActionForm(), imported=None, error=None)


@bp.route("/roster", methods=["POST"])
def import_roster():
    session = db.session()
    form = RosterForm()
    users = session.scalars(select(User).order_by(User.role.desc(), User.email)).all()
    courses = session.scalars(select(Course.name).order_by(Course.name)).all()
    try:
        if not form.validate_on_submit():
            problems = "; ".join(" ".join(e) for e in form.errors.values())
            raise UserError(f"The roster was not imported: {problems}.", "Fill in the course and choose the CSV file.")
        lines = roster.parse(form.csv_file.data.read())
        imported = roster.import_roster(session, form.course.data.strip(), lines,
                                        current_app.config["LOGIN_LINK_HOURS"])
        session.commit()
    except UserError as err:
        session.rollback()
        return render_template("staff/roster.html", form=form, users=users, courses=courses,
                               action_form=SimpleActionForm(), imported=None, error=err), err.status
    links = [(person, _link(person.token)) for person in imported]
    users = session.scalars(select(User).order_by(User.role.desc(), User.email)).all()
    return render_template("staff/roster.html", form=RosterForm(), users=users, courses=courses,
                           action_form=SimpleActionForm(), imported=links, error=None)


@bp.route("/users/<int:user_id>/login-link", methods=["POST"])
def new_link(user_id: int):
    if not SimpleActionForm().validate_on_submit():
        raise UserError("The form was incomplete.", "Use the button on the roster page.")
    session = db.session()
    user = session.get(User, user_id)
    if user is None:
        raise UserError(f"There is no user {user_id}.", "Pick one from the roster.", 404)
    token = new_login_token(session, user, current_app.config["LOGIN_LINK_HOURS"])
    session.commit()
    return render_template("staff/login_link.html", user=user, link=_link(token),
                           hours=current_app.config["LOGIN_LINK_HOURS"])
