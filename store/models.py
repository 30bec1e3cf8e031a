"""Everything the grading service and the web site keep, as SQLAlchemy 2 models.

One Alembic revision (store/migrations/versions/0001_initial.py) creates exactly these tables;
tests/store/test_migrations.py keeps the two equal. Choices are strings with CHECK constraints
(not native enums) so adding a value is a one-line change in both places."""
from __future__ import annotations

import datetime as dt

from sqlalchemy import (BigInteger, Boolean, CheckConstraint, DateTime, Float, ForeignKey, Index,
                        Integer, LargeBinary, MetaData, String, Text, UniqueConstraint, func, text)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from grader.vocabulary import FINAL_RUN_STATUSES, GRADING_QUEUES, Backend, RunStatus, StaffTaskStatus, values

SITE_ROLES = ("user", "admin")                    # users.role: an admin runs the whole site
COURSE_ROLES = ("student", "ta", "instructor")     # enrollments.role: what a person is in one course
COURSE_ROLE_TITLES = {"student": "student", "ta": "TA", "instructor": "instructor"}   # as people read them
VISIBILITIES = ("public", "signed_in")
RUN_STATUSES = values(RunStatus)
FINAL_STATUSES = FINAL_RUN_STATUSES
BACKENDS = values(Backend)
QUEUES = GRADING_QUEUES
THRESHOLD_SOURCES = ("spec", "nightly")
ASSIGNMENT_MODES = ("course", "contest")          # assignments.mode (revision 0008_contests; web/contest.py)
# assignments.late_rule (revision 0009_late_policy; store/runs.py counts by it, docs/staff.md explains it)
LATE_RULES = ("none", "graded-not-counted", "credit-steps", "late-days")
DEFAULT_LATE_RULE = "graded-not-counted"

# Stable constraint names, so the migration and autogenerate agree.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def _one_of(column: str, values: tuple[str, ...]) -> CheckConstraint:
    listed = ", ".join(f"'{v}'" for v in values)
    return CheckConstraint(f"{column} IN ({listed})", name=f"{column}_valid")


def _now() -> Mapped[dt.datetime]:
    return mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class User(Base):
    __tablename__ = "users"
    __table_args__ = (_one_of("role", SITE_ROLES),)

    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(320), unique=True)        # stored lower-case
    name: Mapped[str] = mapped_column(String(200), default="")
    role: Mapped[str] = mapped_column(String(16), default="user")       # site role; course roles are on enrollments
    password_hash: Mapped[str | None] = mapped_column(String(255))
    nickname: Mapped[str | None] = mapped_column(String(64), unique=True)   # shown on leaderboards
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[dt.datetime] = _now()

    enrollments: Mapped[list["Enrollment"]] = relationship(back_populates="user")


class LoginToken(Base):
    """One-time sign-in link; only the hash of the token is kept."""
    __tablename__ = "login_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(128), unique=True)
    expires_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
    used_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))   # a newer link was made or used
    created_at: Mapped[dt.datetime] = _now()

    user: Mapped[User] = relationship()


class UserSession(Base):
    """A signed-in browser session, kept on the server: the cookie holds only a random token
    whose hash is here, so logout, a password change or an admin can end it for good."""
    __tablename__ = "user_sessions"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(128), unique=True)
    created_at: Mapped[dt.datetime] = _now()
    last_seen_at: Mapped[dt.datetime] = _now()
    expires_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_why: Mapped[str | None] = mapped_column(String(100))
    client: Mapped[str] = mapped_column(String(200), default="")        # address and browser, for the account page

    user: Mapped[User] = relationship()


class ApiToken(Base):
    """Per-user bearer token for the JSON API (`grader submit --token`); only the hash is kept."""
    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(128), unique=True)
    label: Mapped[str] = mapped_column(String(100), default="")
    created_at: Mapped[dt.datetime] = _now()
    last_used_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))

    user: Mapped[User] = relationship()


class Course(Base):
    __tablename__ = "courses"
    __table_args__ = (_one_of("leaderboard_visibility", VISIBILITIES),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    leaderboard_visibility: Mapped[str] = mapped_column(String(16), default="signed_in")
    created_at: Mapped[dt.datetime] = _now()
    # revision 0009_late_policy: each student's late days for the course's late-days assignments
    late_days: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))

    assignments: Mapped[list["Assignment"]] = relationship(back_populates="course")


class Enrollment(Base):
    __tablename__ = "enrollments"
    __table_args__ = (UniqueConstraint("user_id", "course_id", name="uq_enrollments_user_course"),
                      _one_of("role", COURSE_ROLES))

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    course_id: Mapped[int] = mapped_column(ForeignKey("courses.id", ondelete="CASCADE"), index=True)
    role: Mapped[str] = mapped_column(String(16), default="student")    # student | ta | instructor

    user: Mapped[User] = relationship(back_populates="enrollments")
    course: Mapped[Course] = relationship()


class StoredSpec(Base):
    """One assignment spec's TOML text, kept once and named by its content hash (the sha256 of
    the text, the spec_hash every report records). Rows are never changed: adopting thresholds
    adds a new row (derived_from the old) and points the assignment at it. Load one as the
    grader's typed spec with store.specs.spec_of (revision 0006_specs)."""
    __tablename__ = "specs"

    hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    spec_version: Mapped[str] = mapped_column(String(50))
    thresholds_version: Mapped[str] = mapped_column(String(50))
    toml: Mapped[str] = mapped_column(Text, deferred=True)      # read only when the spec is not cached
    derived_from: Mapped[str | None] = mapped_column(ForeignKey("specs.hash"))
    created_at: Mapped[dt.datetime] = _now()


class ProblemFolder(Base):
    """A course problem folder a site admin uploaded (web/staff/problem_uploads.py), kept as a zip
    of what grades (problem.toml, its top-level .py files) and its template/, named by the folder's
    sha256 (grader.problems.folder.folder_hash), which a spec pins: every worker, on any machine,
    gets it from here (store/problem_folders.py) and checks the hash again before using it. Rows
    are never changed; a new version of a folder is a new row (revision 0011_problem_folders), and a row
    no stored spec pins may be removed (store.problem_folders.delete)."""
    __tablename__ = "problem_folders"

    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(40), index=True)
    title: Mapped[str] = mapped_column(String(200))
    archive: Mapped[bytes] = mapped_column(LargeBinary, deferred=True)
    check_table: Mapped[str] = mapped_column(Text)           # what `grader problem check` printed for it
    uploaded_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    uploaded_at: Mapped[dt.datetime] = _now()


class Assignment(Base):
    """A course's use of one grader spec. The spec in force is the `specs` row named by
    spec_hash, so a grade can be reproduced after the bundled spec file changed; `name` is what
    URLs and the API use; `spec_name` is the bundled spec (or file) it was created from."""
    __tablename__ = "assignments"
    __table_args__ = (_one_of("backend", BACKENDS), _one_of("mode", ASSIGNMENT_MODES),
                      _one_of("late_rule", LATE_RULES))

    id: Mapped[int] = mapped_column(primary_key=True)
    course_id: Mapped[int] = mapped_column(ForeignKey("courses.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    title: Mapped[str] = mapped_column(String(200), default="")
    spec_name: Mapped[str] = mapped_column(String(200))
    spec_hash: Mapped[str] = mapped_column(ForeignKey("specs.hash"), index=True)
    backend: Mapped[str] = mapped_column(String(16), default=Backend.SIM.value)      # where its runs are graded
    deadline: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    runs_per_hour: Mapped[int] = mapped_column(Integer, default=6)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[dt.datetime] = _now()
    # bumped by every write that can change the leaderboard (a finished grade, a flag, a rescore, a
    # nickname): each web process compares it with its cached standings' and recomputes when it moved
    standings_changed_at: Mapped[dt.datetime] = _now()
    # revision 0008_contests: a contest ranks by the geometric mean of its benchmark p99s and
    # reveals every ranked run's code once contest_ends_at has passed (web/contest.py)
    mode: Mapped[str] = mapped_column(String(16), default="course", server_default=text("'course'"))
    contest_ends_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    # revision 0009_late_policy: what a run uploaded after the deadline earns (store/runs.py);
    # late_factors are credit-steps' per-day factors, [0.9, 0.8]: a day late earns 90%, two 80%
    late_rule: Mapped[str] = mapped_column(String(24), default=DEFAULT_LATE_RULE,
                                           server_default=text(f"'{DEFAULT_LATE_RULE}'"))
    late_factors: Mapped[list] = mapped_column(JSONB, default=list, server_default=text("'[]'::jsonb"))

    course: Mapped[Course] = relationship(back_populates="assignments")
    spec_row: Mapped[StoredSpec] = relationship(lazy="joined")
    thresholds_versions: Mapped[list["ThresholdsVersion"]] = relationship(back_populates="assignment")

    @property
    def spec_version(self) -> str:
        return self.spec_row.spec_version

    @property
    def thresholds_version(self) -> str:
        return self.spec_row.thresholds_version


class ThresholdsVersion(Base):
    """Thresholds an assignment used or may adopt: from the spec, or implied by a nightly run."""
    __tablename__ = "thresholds_versions"
    __table_args__ = (UniqueConstraint("assignment_id", "version", name="uq_thresholds_versions_assignment_version"),
                      _one_of("source", THRESHOLD_SOURCES))

    id: Mapped[int] = mapped_column(primary_key=True)
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignments.id", ondelete="CASCADE"))
    version: Mapped[str] = mapped_column(String(50))
    thresholds: Mapped[dict] = mapped_column(JSONB)     # {test name: {"optimized": us, "relaxed": us}}
    source: Mapped[str] = mapped_column(String(16), default="spec")
    adopted_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))   # None: proposed only
    created_at: Mapped[dt.datetime] = _now()

    assignment: Mapped[Assignment] = relationship(back_populates="thresholds_versions")


class DeadlineExtension(Base):
    __tablename__ = "deadline_extensions"
    __table_args__ = (UniqueConstraint("user_id", "assignment_id", name="uq_deadline_extensions_user_assignment"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignments.id", ondelete="CASCADE"), index=True)
    deadline: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
    granted_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[dt.datetime] = _now()


class Submission(Base):
    """The uploaded bytes exactly as received; grading runs refer to it."""
    __tablename__ = "submissions"
    __table_args__ = (Index("ix_submissions_assignment_user", "assignment_id", "user_id"),
                      UniqueConstraint("assignment_id", "gradescope_submission_id",
                                       name="uq_submissions_assignment_gradescope"))

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignments.id", ondelete="CASCADE"))
    filename: Mapped[str] = mapped_column(String(255))
    data: Mapped[bytes] = mapped_column(LargeBinary)
    sha256: Mapped[str] = mapped_column(String(64))
    size: Mapped[int] = mapped_column(Integer)
    uploaded_at: Mapped[dt.datetime] = _now()
    # from a Gradescope autograder in service mode (revision 0007_gradescope_submissions): Gradescope's
    # submission id (a regrade of it grades this row again) and its time, which the deadline is held to
    gradescope_submission_id: Mapped[str | None] = mapped_column(String(64))
    gradescope_created_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))

    user: Mapped[User] = relationship()
    assignment: Mapped[Assignment] = relationship()

    @property
    def submitted_at(self) -> dt.datetime:
        """The time the deadline is held to: Gradescope's for its submissions, else the upload's."""
        return self.gradescope_created_at or self.uploaded_at
    runs: Mapped[list["GradingRun"]] = relationship(back_populates="submission", order_by="GradingRun.id")


class GradingRun(Base):
    """One attempt to grade a submission. Rows move queued -> running -> done | failed |
    infra_error | cancelled; only the worker that claimed a row (status running, `attempts`
    matching its claim) may write its result, which makes redelivered tasks harmless."""
    __tablename__ = "grading_runs"
    __table_args__ = (_one_of("status", RUN_STATUSES), _one_of("backend", BACKENDS), _one_of("queue", QUEUES),
                      Index("ix_grading_runs_status_queued_at", "status", "queued_at"))

    id: Mapped[int] = mapped_column(primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"), index=True)
    status: Mapped[str] = mapped_column(String(16), default=RunStatus.QUEUED.value)
    backend: Mapped[str] = mapped_column(String(16), default=Backend.SIM.value)
    queue: Mapped[str] = mapped_column(String(16), default=Backend.SIM.queue.value)
    worker: Mapped[str | None] = mapped_column(String(200))          # hostname/pid that holds it
    attempts: Mapped[int] = mapped_column(Integer, default=0)        # claims so far (infra retries included)
    heartbeat_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    queued_at: Mapped[dt.datetime] = _now()
    started_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    seed: Mapped[int | None] = mapped_column(BigInteger)             # PRIVATE: staff only, never in student views
    report: Mapped[dict | None] = mapped_column(JSONB)               # Report.to_json() without the seed
    score_total: Mapped[float | None] = mapped_column(Float)
    max_total: Mapped[float | None] = mapped_column(Float)
    thresholds_version: Mapped[str | None] = mapped_column(String(50))
    flagged: Mapped[bool] = mapped_column(Boolean, default=False)
    flag_reason: Mapped[str | None] = mapped_column(Text)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    celery_task_id: Mapped[str | None] = mapped_column(String(64))
    progress_done: Mapped[int] = mapped_column(Integer, default=0)
    progress_total: Mapped[int] = mapped_column(Integer, default=0)
    progress_tests: Mapped[list] = mapped_column(JSONB, default=list, server_default=text("'[]'::jsonb"))  # finished tests' summaries, as they finish
    error: Mapped[str | None] = mapped_column(Text)                  # why failed / infra_error (staff view)
    # revision 0008_contests: staff took this run out of a contest; shown on its board with the reason
    disqualified_reason: Mapped[str | None] = mapped_column(Text)
    disqualified_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    disqualified_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))

    submission: Mapped[Submission] = relationship(back_populates="runs")
    test_results: Mapped[list["TestResultRow"]] = relationship(back_populates="run", order_by="TestResultRow.id",
                                                               cascade="all, delete-orphan")


class TestResultRow(Base):
    """One test of one run, denormalised from the report for leaderboards and exports."""
    __test__ = False
    __tablename__ = "test_results"
    __table_args__ = (UniqueConstraint("run_id", "test_name", name="uq_test_results_run_test"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("grading_runs.id", ondelete="CASCADE"))
    test_name: Mapped[str] = mapped_column(String(100))
    kind: Mapped[str] = mapped_column(String(20))
    status: Mapped[str] = mapped_column(String(16))
    points: Mapped[float] = mapped_column(Float)
    max_points: Mapped[float] = mapped_column(Float)
    p99_us: Mapped[float | None] = mapped_column(Float)

    run: Mapped[GradingRun] = relationship(back_populates="test_results")


class NightlyRun(Base):
    """One night's regression: every reference kernel of every active spec on every backend."""
    __tablename__ = "nightly_runs"

    id: Mapped[int] = mapped_column(primary_key=True)
    started_at: Mapped[dt.datetime] = _now()
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    status: Mapped[str] = mapped_column(String(16), default=RunStatus.RUNNING.value)    # running | done | failed
    trigger: Mapped[str] = mapped_column(String(16), default="beat")      # beat | manual

    results: Mapped[list["NightlyResult"]] = relationship(back_populates="nightly_run", order_by="NightlyResult.id")


class NightlyResult(Base):
    __tablename__ = "nightly_results"
    __table_args__ = (Index("ix_nightly_results_spec_kernel_backend", "spec_name", "reference_kernel", "backend"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    nightly_run_id: Mapped[int] = mapped_column(ForeignKey("nightly_runs.id", ondelete="CASCADE"), index=True)
    spec_name: Mapped[str] = mapped_column(String(200))
    spec_version: Mapped[str] = mapped_column(String(50))
    thresholds_version: Mapped[str] = mapped_column(String(50))
    reference_kernel: Mapped[str] = mapped_column(String(100))       # e.g. "conv2d_optimized"
    backend: Mapped[str] = mapped_column(String(16))
    p99_us: Mapped[dict] = mapped_column(JSONB)                      # {test name: us}
    passed: Mapped[bool] = mapped_column(Boolean)
    drift: Mapped[bool] = mapped_column(Boolean, default=False)
    drift_reason: Mapped[str | None] = mapped_column(Text)
    implied_thresholds: Mapped[dict] = mapped_column(JSONB)          # {test name: us}: 120% of this p99
    thresholds_in_force: Mapped[dict] = mapped_column(JSONB)         # {test name: {"optimized": us, "relaxed": us}}
    # on a relaxed reference's result: {test name: why its relaxed threshold is not proposed}
    # (workers/nightly.py note_relaxed_gaps: too close to the optimized reference's p99)
    not_proposed: Mapped[dict] = mapped_column(JSONB, default=dict, server_default=text("'{}'::jsonb"))
    score_total: Mapped[float | None] = mapped_column(Float)
    report: Mapped[dict | None] = mapped_column(JSONB)
    created_at: Mapped[dt.datetime] = _now()

    nightly_run: Mapped[NightlyRun] = relationship(back_populates="results")


class WorkerHeartbeat(Base):
    """Each worker process says it is alive here; `grader queue` and the TA console count them."""
    __tablename__ = "worker_heartbeats"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)      # celery hostname
    queues: Mapped[str] = mapped_column(String(100))
    pid: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[dt.datetime] = _now()
    seen_at: Mapped[dt.datetime] = _now()


# ---- web section -----------------------------------------------------------------------------
# Columns and tables the web site adds go below this line (and into 0001_initial).
# ---- end of web section ----------------------------------------------------------------------


# ---- course submit tokens (Gradescope service mode; revision 0003_course_submit_tokens) ------

GRADESCOPE_RUNS_PER_HOUR = 600     # a course token's default: a whole class's "Regrade All" fits in an hour

class CourseSubmitToken(Base):
    """A course's bearer token for an outside system (a Gradescope autograder) that submits for
    any student of the course, named by email; only the hash is kept (web/course_api.py)."""
    __tablename__ = "course_submit_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    course_id: Mapped[int] = mapped_column(ForeignKey("courses.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(128), unique=True)
    label: Mapped[str] = mapped_column(String(100), default="")
    created_at: Mapped[dt.datetime] = _now()
    last_used_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    # revision 0007_gradescope_submissions: an unknown email becomes a new student of the course (else
    # only its roster's students), and the course's Gradescope runs an hour this token may start
    creates_students: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))
    runs_per_hour: Mapped[int] = mapped_column(Integer, default=GRADESCOPE_RUNS_PER_HOUR,
                                               server_default=text(str(GRADESCOPE_RUNS_PER_HOUR)))

    course: Mapped[Course] = relationship()


# ---- staff tasks (revisions 0005_staff_tasks, 0012_problem_checks) ----------------------------

ASSIGNMENT_TASK_KINDS = ("rescore", "regrade", "grades_csv", "gradescope_zip", "agreement_csv")
SITE_TASK_KINDS = ("problem_check",)          # a site admin's, about no assignment
STAFF_TASK_KINDS = ASSIGNMENT_TASK_KINDS + SITE_TASK_KINDS
STAFF_TASK_STATUSES = values(StaffTaskStatus)


class StaffTask(Base):
    """Work staff start that may take long (rescore or regrade every run, an export, the check of
    an uploaded problem folder): done by a Celery worker, never inside a web request; its page
    shows the progress, and an export's file (a check's table) is kept here for download."""
    __tablename__ = "staff_tasks"
    __table_args__ = (_one_of("kind", STAFF_TASK_KINDS), _one_of("status", STAFF_TASK_STATUSES),
                      CheckConstraint(f"(kind IN ({', '.join(repr(k) for k in SITE_TASK_KINDS)})) = "
                                      "(assignment_id IS NULL)", name="assignment_for_kind"))

    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(String(20))
    assignment_id: Mapped[int | None] = mapped_column(ForeignKey("assignments.id", ondelete="CASCADE"), index=True)
    requested_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    status: Mapped[str] = mapped_column(String(16), default=StaffTaskStatus.QUEUED.value)
    progress_done: Mapped[int] = mapped_column(Integer, default=0)
    progress_total: Mapped[int] = mapped_column(Integer, default=0)
    summary: Mapped[str | None] = mapped_column(Text)                 # what it did, in a sentence
    error: Mapped[str | None] = mapped_column(Text)
    result: Mapped[bytes | None] = mapped_column(LargeBinary)          # an export's file
    result_name: Mapped[str | None] = mapped_column(String(255))
    result_type: Mapped[str | None] = mapped_column(String(100))
    upload: Mapped[bytes | None] = mapped_column(LargeBinary)          # a problem check's archive, until checked
    upload_name: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[dt.datetime] = _now()
    started_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    heartbeat_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))   # its worker is alive
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))

    assignment: Mapped[Assignment | None] = relationship()
