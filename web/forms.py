"""Every form of the site, as Flask-WTF forms: each carries a CSRF token checked on POST."""
from __future__ import annotations

import datetime as dt

from flask_wtf import FlaskForm
from flask_wtf.file import FileField, FileRequired
from wtforms import (BooleanField, EmailField, IntegerField, PasswordField, SelectField, StringField, SubmitField,
                     TextAreaField)
from wtforms.fields.choices import SelectChoice
from wtforms.validators import AnyOf, DataRequired, Length, NumberRange, Optional, Regexp

from grader.vocabulary import Backend, values
from store.models import COURSE_ROLE_TITLES, COURSE_ROLES

EMAIL = Regexp(r"^[^@\s]+@[^@\s]+\.[^@\s]+$", message="Enter an email address like name@example.edu.")


class UTCDateTimeField(StringField):
    """A date and time in UTC typed as YYYY-MM-DD HH:MM. Not a datetime-local picker: browsers
    show that in the viewer's local format and it reads as local time, whatever its label says."""
    FORMAT = "%Y-%m-%d %H:%M"
    HINT = "YYYY-MM-DD HH:MM, in UTC"

    def __init__(self, label=None, validators=None, **kwargs):
        kwargs.setdefault("render_kw", {"placeholder": "YYYY-MM-DD HH:MM", "autocomplete": "off",
                                        "pattern": r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}( ?UTC|Z)?",
                                        "title": self.HINT, "size": 18})
        super().__init__(label, validators, **kwargs)

    def process_formdata(self, valuelist):
        self.data, text = None, (valuelist[0] if valuelist else "").strip()
        self.typed = text
        if text[-3:].upper() == "UTC":
            text = text[:-3].strip()
        elif text[-1:] in ("Z", "z"):
            text = text[:-1]
        if not text:
            return
        try:
            self.data = dt.datetime.strptime(text.replace("T", " "), self.FORMAT).replace(tzinfo=dt.timezone.utc)
        except ValueError:
            raise ValueError(f"{self.typed!r} is not a date and time written {self.HINT} "
                             f"(for example {dt.datetime.now(dt.timezone.utc):%Y-%m-%d} 23:59)") from None

    def _value(self) -> str:
        if self.data is not None:
            return self.data.strftime(self.FORMAT)
        return getattr(self, "typed", "")


class LoginForm(FlaskForm):
    email = EmailField("Email", validators=[DataRequired(), EMAIL])
    password = PasswordField("Password", validators=[DataRequired()])
    submit = SubmitField("Sign in")


class ConfirmForm(FlaskForm):
    """A bare POST button: one-time links sign in on POST, so mail scanners that fetch the
    link do not use it up."""
    submit = SubmitField("Continue")


class NicknameForm(FlaskForm):
    nickname = StringField("Leaderboard nickname", validators=[
        DataRequired(), Length(min=2, max=32),
        Regexp(r"^[A-Za-z0-9_.-]+( [A-Za-z0-9_.-]+)*$",
               message="Use letters, digits, spaces, '_', '.' or '-' (2 to 32 characters).")])
    submit = SubmitField("Save nickname")


class PasswordForm(FlaskForm):
    current = PasswordField("Current password", validators=[Optional()])    # asked once a password is set
    password = PasswordField("New password", validators=[DataRequired()])
    confirm = PasswordField("Repeat it", validators=[DataRequired()])
    submit = SubmitField("Set password")


class ApiTokenForm(FlaskForm):
    label = StringField("What the token is for", validators=[Optional(), Length(max=100)])
    submit = SubmitField("Create API token")


class UploadForm(FlaskForm):
    # which files an assignment takes is its spec's (web/student.py upload_hint): said by the page
    file = FileField("The assignment's kernel file, or an archive of its files",
                     validators=[FileRequired("No file was chosen.")])
    submit = SubmitField("Upload and grade")


class RosterForm(FlaskForm):
    # the viewer's courses (the view sets the choices); whether they may import into it is checked there
    course = SelectField("Course", validators=[DataRequired()], validate_choice=False)
    csv_file = FileField("Roster CSV (columns: email, name, role; role optional, default student)",
                         validators=[FileRequired("Choose the roster CSV file.")])
    submit = SubmitField("Import roster")


class ExtensionForm(FlaskForm):
    email = EmailField("Student email", validators=[DataRequired(), EMAIL])
    deadline = UTCDateTimeField("New deadline (UTC)", validators=[DataRequired()])
    submit = SubmitField("Grant extension")


class PersonForm(FlaskForm):
    """One person into a course (a late joiner), without a one-line CSV. Made with
    prefix=PERSON: it shares the roster page with the import form."""
    course = SelectField("Course", validators=[DataRequired()], validate_choice=False)
    email = EmailField("Email", validators=[DataRequired(), EMAIL])
    name = StringField("Name", validators=[Optional(), Length(max=200)])
    role = SelectField("Role", choices=[SelectChoice(r, COURSE_ROLE_TITLES[r]) for r in COURSE_ROLES], default="student")
    submit = SubmitField("Add to the course")


class CourseForm(FlaskForm):
    course_name = StringField("New course name", validators=[DataRequired(), Length(max=200)])
    submit = SubmitField("Create course")


class ThresholdsForm(FlaskForm):
    version = StringField("Version name", validators=[DataRequired(), Length(max=50),
                                                      Regexp(r"^[A-Za-z0-9_.:-]+$", message="Letters, digits and _ . : - only.")])
    thresholds = TextAreaField("Thresholds JSON: {test name: {\"optimized\": us, \"relaxed\": us}}",
                               validators=[DataRequired()])
    rescore = BooleanField("Rescore every graded run with them now", default=True)
    submit = SubmitField("Adopt thresholds")


class FlagForm(FlaskForm):
    reason = StringField("Reason", validators=[Optional(), Length(max=500)])
    submit = SubmitField("Flag")


class AssignmentForm(FlaskForm):
    # a course that exists (the view sets the choices): a typo cannot make a new course
    course = SelectField("Course", validators=[DataRequired()], validate_choice=False)
    name = StringField("Assignment name (used in URLs)", validators=[
        DataRequired(), Length(max=100), Regexp(r"^[a-z0-9][a-z0-9_.-]*$", message="Lower-case letters, digits, _ . -")])
    spec = StringField("Grader spec", validators=[DataRequired()])     # one of grader.available_specs()
    # what students read (blank: the spec's title); its own, so two terms' assignments tell apart
    title = StringField("Title (shown to students)", validators=[Optional(), Length(max=200)])
    backend = StringField("Graded on", validators=[AnyOf(values(Backend))])
    deadline = UTCDateTimeField("Deadline (UTC)", validators=[Optional()])
    runs_per_hour = IntegerField("Graded runs per student per hour", default=6,
                                 validators=[NumberRange(min=1, max=1000)])
    visibility = StringField("Leaderboard visible to", validators=[AnyOf(["signed_in", "public"])])
    submit = SubmitField("Create assignment")


class TitleForm(FlaskForm):
    title = StringField("Title (shown to students)", validators=[DataRequired(), Length(max=200)])
    submit = SubmitField("Save title")


class VisibilityForm(FlaskForm):
    visibility = StringField("Leaderboard visible to", validators=[AnyOf(["signed_in", "public"])])
    submit = SubmitField("Set")


class SimpleActionForm(FlaskForm):
    """CSRF token only: rerun, unflag, rescore, cancel, revoke."""
    submit = SubmitField("Go")
