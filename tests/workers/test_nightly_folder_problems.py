"""The nightly regression grades the course's conv2d reference kernels; an assignment on a problem
folder of the course's own (matmul here) has none of their kernels. Graded anyway, each reference
was an empty upload and the night failed, every night; it is left out, said in the log, and the
night is done. (The folder's own reference solutions are held to it by `grader problem check`.)"""
from __future__ import annotations

import logging

from sqlalchemy import select

from grader.vocabulary import RunStatus
from store import specs
from store.models import Course, NightlyResult, NightlyRun
from worker_helpers import ROOT
from workers.nightly import references_for, run_nightly

MATMUL_COURSE = ROOT / "tests" / "workers" / "specs" / "matmul_course.toml"


def test_an_assignment_on_a_course_problem_folder_is_left_out_of_the_nightly(db, caplog):
    assignment = specs.new_assignment(db, str(MATMUL_COURSE), course=Course(name="CS149"), name="mm", backend="sim")
    db.commit()
    assert references_for(specs.spec_of(assignment)) == []
    with caplog.at_level(logging.INFO, logger="workers.nightly"):
        night_id = run_nightly(trigger="test", backends=["sim"])
    db.expire_all()
    night = db.get(NightlyRun, night_id)
    assert night.status == RunStatus.DONE
    assert db.scalars(select(NightlyResult).where(NightlyResult.nightly_run_id == night_id)).all() == []
    assert any("matmul-course" in r.getMessage() and "not in the nightly" in r.getMessage() for r in caplog.records)
