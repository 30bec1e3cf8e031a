"""Roster import and the people of the staff member's courses, with fresh one-time sign-in
links, "sign out everywhere", and (site admins only) the site admin role."""
from __future__ import annotations

from collections import defaultdict

from flask import current_app, flash, redirect, render_template, request, url_for
from flask_login import current_user
from sqlalchemy import select

from store.models import COURSE_ROLE_TITLES, Course, Enrollment, User

from .. import db, roster, sessions
from ..accounts import may_act_for, new_login_token
from ..errors import UserError
from ..forms import PersonForm, RosterForm, SimpleActionForm
from . import bp

PERSON = "person"          # the add-one-person form's field prefix (the import form has a course field too)


def _link(token: str) -> str:
    return url_for("auth.login_link", token=token, _external=True)


def _people(session):
    """(user, {course name: role}, may act for them) for everyone enrolled in a course where the
    viewer is staff (a site admin: everyone), and the names of those courses."""
    courses = select(Course).order_by(Course.name)
    if not current_user.is_admin:
        courses = courses.where(Course.id.in_(current_user.staff_course_ids))
    courses = session.scalars(courses).all()
    roles: dict[int, dict[str, str]] = defaultdict(dict)          # user -> {course name: role}, shown
    by_id: dict[int, dict[int, str]] = defaultdict(dict)          # user -> {course id: role}, for may_act_for
    for user_id, course_id, name, role in session.execute(
            select(Enrollment.user_id, Course.id, Course.name, Enrollment.role).join(Course, Course.id == Enrollment.course_id)):
        roles[user_id][name] = role
        by_id[user_id][course_id] = role
    users = select(User).order_by(User.email)
    if not current_user.is_admin:
        users = users.where(User.id.in_(select(Enrollment.user_id).where(
            Enrollment.course_id.in_(current_user.staff_course_ids))))
    people = [(u, roles.get(u.id, {}), may_act_for(session, current_user, u, by_id.get(u.id, {})))
              for u in session.scalars(users)]
    return people, [c.name for c in courses]


def _page(form, imported=None, error=None, status=200, person_form=None, added=False):
    people, courses = _people(db.session())
    person_form = person_form or PersonForm(prefix=PERSON)
    for f in (form, person_form):
        f.course.choices = list(courses)
    return render_template("staff/roster.html", form=form, person_form=person_form, people=people,
                           action_form=SimpleActionForm(), imported=imported, added=added, error=error,
                           role_titles=COURSE_ROLE_TITLES), status


@bp.route("/roster", methods=["GET"])
def roster_page():
    return _page(RosterForm())


@bp.route("/roster/person", methods=["POST"])
def add_person():
    """One person into one course (a late joiner): the roster import with one line, so the same
    rules hold (who may give which role, and a sign-in link only for whom the importer may act)."""
    session = db.session()
    form = PersonForm(prefix=PERSON)
    try:
        if not form.validate_on_submit():
            problems = "; ".join(f"{form[name].label.text}: {' '.join(e)}" for name, e in form.errors.items())
            raise UserError(f"No one was added: {problems}.", "Choose the course and give the person's email.")
        line = roster.RosterLine(form.email.data.strip().lower(), (form.name.data or "").strip(), form.role.data)
        imported = roster.import_roster(session, current_user, form.course.data, [line],
                                        current_app.config["LOGIN_LINK_HOURS"])
        session.commit()
    except UserError as err:
        session.rollback()
        return _page(RosterForm(), error=err, status=err.status, person_form=form)
    return _page(RosterForm(), imported=[(p, _link(p.token) if p.token else None) for p in imported], added=True)


@bp.route("/roster", methods=["POST"])
def import_roster():
    session = db.session()
    form = RosterForm()
    try:
        if not form.validate_on_submit():
            problems = "; ".join(" ".join(e) for e in form.errors.values())
            raise UserError(f"The roster was not imported: {problems}.", "Fill in the course and choose the CSV file.")
        lines = roster.parse(form.csv_file.data.read())
        imported = roster.import_roster(session, current_user, form.course.data.strip(), lines,
                                        current_app.config["LOGIN_LINK_HOURS"])
        session.commit()
    except UserError as err:
        session.rollback()
        return _page(form, error=err, status=err.status)
    return _page(RosterForm(), imported=[(p, _link(p.token) if p.token else None) for p in imported])


def _person(user_id: int, action: str) -> User:
    """The user an action on the roster page names, if the viewer may act for them."""
    session = db.session()
    user = session.get(User, user_id)
    if user is None:
        raise UserError(f"There is no user {user_id}.", "Pick one from the roster.", 404)
    if not may_act_for(session, current_user, user):
        raise UserError(f"You may not {action} for {user.email}.",
                        "Staff act only for people below them in every course those people are in; "
                        "ask a site admin.", 403)
    if not SimpleActionForm().validate_on_submit():
        raise UserError("The form was incomplete.", "Use the buttons on the roster page.")
    return user


@bp.route("/users/<int:user_id>/login-link", methods=["POST"])
def new_link(user_id: int):
    user = _person(user_id, "make a sign-in link")
    session = db.session()
    token = new_login_token(session, user, current_app.config["LOGIN_LINK_HOURS"])
    session.commit()
    return render_template("staff/login_link.html", user=user, link=_link(token),
                           hours=current_app.config["LOGIN_LINK_HOURS"])


@bp.route("/users/<int:user_id>/sign-out", methods=["POST"])
def sign_out_user(user_id: int):
    """Ends every session and API token of the user (a lost laptop, a shared password)."""
    user = _person(user_id, "sign out")
    session = db.session()
    ended = sessions.end_all(session, user.id, f"signed out by {current_user.email}", api_tokens=True)
    session.commit()
    flash(f"{user.email} is signed out everywhere ({ended} session{'' if ended == 1 else 's'} ended, "
          "API tokens revoked).", "success")
    return redirect(url_for("staff.roster_page"), 303)


@bp.route("/users/<int:user_id>/site-admin", methods=["POST"])
def set_site_admin(user_id: int):
    if not current_user.is_admin:
        raise UserError("Only a site admin makes or unmakes site admins.", "Ask a site admin.", 403)
    user = _person(user_id, "change the site role")
    make = request.form.get("admin") == "yes"
    if not make and user.id == current_user.id:
        raise UserError("You cannot remove your own site admin role.", "Ask another site admin.", 400)
    session = db.session()
    user.role = "admin" if make else "user"
    sessions.end_all(session, user.id, "site role changed")      # the next sign-in carries the new role
    session.commit()
    flash(f"{user.email} is {'now a site admin' if make else 'no longer a site admin'}.", "success")
    return redirect(url_for("staff.roster_page"), 303)
