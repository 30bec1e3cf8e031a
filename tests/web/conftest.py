"""Web fixtures on the shared embedded PostgreSQL and Redis (tests/conftest.py): an app, a
test client per role, and rows built through the real code paths (roster import, the real
grader for reports)."""
from __future__ import annotations

import datetime as dt

import pytest

from webtest_helpers import OPTIMIZED, PASSWORD, RELAXED, TINY_SPEC, login


@pytest.fixture
def app(db, broker, tmp_path, monkeypatch):
    monkeypatch.setenv("NKI_GRADER_HOME", str(tmp_path / "instance"))
    import web
    app = web.create_app({"TESTING": True, "SECRET_KEY": "test-secret", "DATABASE_URL": db.get_bind().url
                          .render_as_string(hide_password=False), "LEADERBOARD_CACHE_SECONDS": 0})
    return app


@pytest.fixture
def course_setup(db):
    """A course with the tiny assignment, two students, a TA and an admin (passwords set)."""
    from store import specs
    from store.models import Course, Enrollment, User
    from web import accounts
    course = Course(name="CS149", leaderboard_visibility="signed_in")
    assignment = specs.new_assignment(db, str(TINY_SPEC), course=course, name="tiny", backend="sim", runs_per_hour=3,
                                      deadline=dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=7))
    people = {}
    for key, role, nickname in (("alice", "student", "alice_k"), ("bob", "student", "bobby"),
                                ("tara", "ta", None), ("ada", "admin", None)):
        user = User(email=f"{key}@example.edu", name=key.title(), role="admin" if role == "admin" else "user",
                    nickname=nickname, active=True)
        accounts.set_password(user, PASSWORD)
        db.add(user)
        db.add(Enrollment(user=user, course=course, role="instructor" if role == "admin" else role))
        people[key] = user
    db.add(assignment)
    db.commit()
    return {"assignment": assignment, "course": course, **people}


@pytest.fixture
def client_for(app, course_setup):
    """client_for("alice") -> a test client signed in as that user."""
    def make(who: str | None):
        client = app.test_client()
        if who:
            response = login(client, f"{who}@example.edu")
            assert response.status_code == 302, response.get_data(as_text=True)
        return client
    return make


@pytest.fixture(scope="session")
def tiny_reports():
    """Real reports from the real grader on the tiny spec: the optimized and the relaxed
    reference kernels, graded once per test session (about a second each)."""
    import grader
    spec = grader.load_spec(str(TINY_SPEC))
    reports = {}
    for key, source in (("optimized", OPTIMIZED), ("relaxed", RELAXED)):
        submission = grader.submission_from_bytes("conv2d.py", source, spec)
        reports[key] = grader.grade(submission, spec, grader.GradeOptions(backend="sim", seed=7))
    return reports


@pytest.fixture
def two_courses(db, course_setup):
    """CS149 (course_setup: alice and bob students, tara TA, ada site admin and instructor) and
    CS150 with its own assignment, TA theo, student sam, and carl: a student of CS149 who is a
    TA of CS150."""
    from store.models import Assignment, Course, Enrollment, User
    from web import accounts
    cs150 = Course(name="CS150", leaderboard_visibility="signed_in")
    a = course_setup["assignment"]
    other = Assignment(course=cs150, name="other", title=a.title, spec_name=a.spec_name, spec_row=a.spec_row,
                       backend="sim", runs_per_hour=3)
    people = {}
    for key, roles in (("theo", {cs150: "ta"}), ("sam", {cs150: "student"}),
                       ("carl", {course_setup["course"]: "student", cs150: "ta"}),
                       ("ines", {course_setup["course"]: "instructor"})):
        user = User(email=f"{key}@example.edu", name=key.title(), active=True)
        accounts.set_password(user, PASSWORD)
        db.add(user)
        for course, role in roles.items():
            db.add(Enrollment(user=user, course=course, role=role))
        people[key] = user
    db.add(other)
    db.commit()
    return {**course_setup, "cs150": cs150, "other": other, **people}
