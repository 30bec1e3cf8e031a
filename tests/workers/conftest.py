"""Rows the worker tests need: a course, an assignment on the tiny spec, a student."""
from __future__ import annotations

import pytest

from worker_helpers import TINY_SPEC


@pytest.fixture
def assignment(db):
    from store import specs
    from store.models import Course
    a = specs.new_assignment(db, str(TINY_SPEC), course=Course(name="CS149"), name="tiny", backend="sim")
    db.commit()
    return a


@pytest.fixture
def student(db):
    from store.models import User
    user = User(email="student@example.edu", name="A Student", nickname="ada")
    db.add(user)
    db.commit()
    return user

