"""Every form of the site, as Flask-WTF forms: each carries a CSRF token checked on POST."""
from __future__ import annotations

from flask_wtf import FlaskForm
from flask_wtf.file import FileField, FileRequired
from wtforms import (BooleanField, DateTimeLocalField, EmailField, IntegerField, PasswordField,
                     StringField, SubmitField, TextAreaField)
from wtforms.validators import AnyOf, DataRequired, Length, NumberRange, Optional, Regexp

from grader.vocabulary import Backend, values

EMAIL = Regexp(r"^[^@\s]+@[^@\s]+\.[^@\s]+$", message="Enter an email address like name@example.edu.")


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
    file = FileField("conv2d.py, kernels.py or the asst4 archive", validators=[FileRequired(
        "Choose a file: conv2d.py, kernels.py, or asst4.tar.gz / .zip with part2/conv2d.py.")])
    submit = SubmitField("Upload and grade")


class RosterForm(FlaskForm):
    course = StringField("Course", validators=[DataRequired(), Length(max=200)])
    csv_file = FileField("Roster CSV (columns: email, name, role; role optional, default student)",
                         validators=[FileRequired("Choose the roster CSV file.")])
    submit = SubmitField("Import roster")


class ExtensionForm(FlaskForm):
    email = EmailField("Student email", validators=[DataRequired(), EMAIL])
    deadline = DateTimeLocalField("New deadline (UTC)", format="%Y-%m-%dT%H:%M", validators=[DataRequired()])
    submit = SubmitField("Grant extension")


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
    course = StringField("Course", validators=[DataRequired(), Length(max=200)])
    name = StringField("Assignment name (used in URLs)", validators=[
        DataRequired(), Length(max=100), Regexp(r"^[a-z0-9][a-z0-9_.-]*$", message="Lower-case letters, digits, _ . -")])
    spec = StringField("Grader spec", validators=[DataRequired()])     # one of grader.available_specs()
    backend = StringField("Graded on", validators=[AnyOf(values(Backend))])
    deadline = DateTimeLocalField("Deadline (UTC)", format="%Y-%m-%dT%H:%M", validators=[Optional()])
    runs_per_hour = IntegerField("Graded runs per student per hour", default=6,
                                 validators=[NumberRange(min=1, max=1000)])
    visibility = StringField("Leaderboard visible to", validators=[AnyOf(["signed_in", "public"])])
    submit = SubmitField("Create assignment")


class VisibilityForm(FlaskForm):
    visibility = StringField("Leaderboard visible to", validators=[AnyOf(["signed_in", "public"])])
    submit = SubmitField("Set")


class SimpleActionForm(FlaskForm):
    """CSRF token only: rerun, unflag, rescore, cancel, revoke."""
    submit = SubmitField("Go")
