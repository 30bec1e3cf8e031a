"""One run lifecycle (store/lifecycle.py): a run's status changes only there, only along
TRANSITIONS, and a finished run never moves again (a late or duplicate worker cannot touch it)."""
from __future__ import annotations

import ast
import datetime as dt
from pathlib import Path

from grader.vocabulary import RunStatus
from store import lifecycle, specs
from store.models import Course, GradingRun, Submission, User

ROOT = Path(__file__).resolve().parents[2]


def _updated_table(call: ast.Call) -> str | None:
    """The table name of the update(...) a .values(...) call hangs from, if there is one."""
    node = call.func.value if isinstance(call.func, ast.Attribute) else None
    while node is not None:
        if isinstance(node, ast.Call):
            if getattr(node.func, "id", "") == "update" and node.args and isinstance(node.args[0], ast.Name):
                return node.args[0].id
            node = node.func.value if isinstance(node.func, ast.Attribute) else None
        elif isinstance(node, ast.Attribute):
            node = node.value
        else:
            return None
    return None


def _status_writes(path: Path) -> list[int]:
    """Lines that set a grading run's status: .values(status=...) (or **{"status": ...}),
    GradingRun(status=...), or `<a run>.status = ...` (a name with "run" in it: an HTTP error's or
    a test result's status is no run's)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in ("values", "GradingRun") and _updated_table(node) in (None, "GradingRun"):
                if any(k.arg == "status" for k in node.keywords):
                    lines.append(node.lineno)
        if isinstance(node, ast.Dict) and any(isinstance(k, ast.Constant) and k.value == "status" for k in node.keys) \
                and any(isinstance(v, ast.Attribute) and getattr(v.value, "id", "") == "RunStatus" for v in node.values):
            lines.append(node.lineno)
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for el in (t.elts if isinstance(t, ast.Tuple) else [t]):
                    if isinstance(el, ast.Attribute) and el.attr == "status" and "run" in getattr(el.value, "id", ""):
                        lines.append(node.lineno)
    return lines


def test_no_other_module_writes_a_run_status():
    found = []
    for package in ("store", "workers", "web", "service"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel == "store/lifecycle.py" or "/migrations/" in rel:
                continue
            found += [f"{rel}:{line}" for line in _status_writes(path)]
    assert found == [], "change a run's status through store/lifecycle.py"


def test_the_checker_sees_each_way_of_writing_a_status(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("update(GradingRun).values(status=RunStatus.DONE)\nGradingRun(status='queued')\n"
                      "s.execute(q.values(**{'status': RunStatus.QUEUED}))\nrun.status = 'done'\n"
                      "night.status = RunStatus.DONE\nself.status = 404\nrow.status = 'passed'\n"
                      "update(StaffTask).where(StaffTask.id == 1).values(status='done')\n")
    assert sorted(_status_writes(module)) == [1, 2, 3, 4]


def _report(total: float) -> dict:
    """A stored report (Report.to_json) with no tests and `total` points of 1."""
    from grader.report import Report, Score
    return Report(assignment="a", spec_version="1", thresholds_version="t", backend="sim", submission_sha256="",
                  score=Score(total, 0.0, 0.0, total, 1.0), flags=[], tests=[]).to_json()


def test_every_status_has_its_moves_and_finished_ones_have_none():
    assert set(lifecycle.TRANSITIONS) == set(RunStatus)
    for status, moves in lifecycle.TRANSITIONS.items():
        assert (moves == ()) == status.final


def _run(db) -> GradingRun:
    course = Course(name="CS149")
    assignment = specs.new_assignment(db, "asst4-trainium2", course=course, name="asst4")
    submission = Submission(user=User(email="s@x.edu"), assignment=assignment, filename="conv2d.py", data=b"",
                            sha256="a" * 64, size=0)
    run = lifecycle.new_run(submission, "neuron", "task-1")
    db.add(run)
    db.commit()
    return run


def _status(db, run_id: int) -> RunStatus:
    db.expire_all()
    return RunStatus(db.get(GradingRun, run_id).status)


def test_a_run_moves_only_along_the_transitions(db):
    run = _run(db)
    assert run.queue == "trn2" and _status(db, run.id) == RunStatus.QUEUED
    seen = [RunStatus.QUEUED]

    def step(expected: RunStatus) -> None:
        now = _status(db, run.id)
        assert now == expected and now in lifecycle.TRANSITIONS[seen[-1]], (seen[-1], now)
        seen.append(now)

    claim = lifecycle.claim(db, run.id, "w1", "task-1", stale_after_s=90)
    step(RunStatus.RUNNING)
    assert lifecycle.release(db, claim, "our fault")
    step(RunStatus.QUEUED)
    second = lifecycle.claim(db, run.id, "w2", "task-1", stale_after_s=90)
    step(RunStatus.RUNNING)
    assert not lifecycle.finish(db, claim, _report(0.0), seed=1)   # the first claim is stale
    db.query(GradingRun).filter_by(id=run.id).update({"heartbeat_at": lifecycle.now() - dt.timedelta(hours=1)})
    db.commit()
    assert lifecycle.reap(db, run.id, second.attempt, "w2", lifecycle.now(), give_up=False)     # w2 went silent
    db.commit()
    step(RunStatus.QUEUED)
    third = lifecycle.claim(db, run.id, "w3", "task-1", stale_after_s=90)
    step(RunStatus.RUNNING)
    assert lifecycle.finish(db, third, _report(1.0), seed=7)
    step(RunStatus.DONE)
    # finished: nothing moves it any more
    assert lifecycle.claim(db, run.id, "w4", "task-2", stale_after_s=0) is None
    lifecycle.cancel(db, run.id)
    assert not lifecycle.fail(db, third, RunStatus.INFRA_ERROR, "late")
    assert _status(db, run.id) == RunStatus.DONE


def test_a_queued_run_is_cancelled_at_once_and_never_claimed(db):
    run = _run(db)
    lifecycle.cancel(db, run.id)
    assert _status(db, run.id) == RunStatus.CANCELLED
    assert lifecycle.claim(db, run.id, "w1", "task-1", stale_after_s=90) is None
