"""Rows the worker tests need: a course, an assignment on the tiny spec, a student."""
from __future__ import annotations

import pytest

from worker_helpers import TINY_SPEC


@pytest.fixture
def assignment(db):
    from store.models import Assignment, Course
    from workers import specs
    toml, spec = specs.read_spec_file(str(TINY_SPEC))
    a = Assignment(course=Course(name="CS149"), name="tiny", title=spec.title, spec_name=str(TINY_SPEC),
                   spec_version=spec.spec_version, thresholds_version=spec.thresholds_version,
                   spec_hash=specs.spec_hash(toml), spec_toml=toml, backend="sim")
    db.add(a)
    db.commit()
    return a


@pytest.fixture
def student(db):
    from store.models import User
    user = User(email="student@example.edu", name="A Student", nickname="ada")
    db.add(user)
    db.commit()
    return user

