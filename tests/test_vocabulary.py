"""One vocabulary (grader/vocabulary.py): the grading core and the service's packages name run
statuses, test kinds and statuses, backends, queues and tiers through its types, never as string
literals; the database's CHECK constraints and the pages use the same values."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from grader import vocabulary as v

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("grader", "store", "workers", "web", "service")
WORDS = {m.value for kind in (v.RunStatus, v.TestKind, v.TestStatus, v.ReportStatus, v.Backend, v.Queue, v.Tier,
                              v.StaffTaskStatus) for m in kind} \
    - {"error"}          # also every JSON error field's name: too common to police by spelling

# Literals that are the same spelling but not the word: (file, literal) -> why.
NOT_THE_WORD = {
    ("store/models.py", "nightly"): "a thresholds version's source, not the queue",
    ("workers/nightly.py", "nightly"): "a thresholds version's source, not the queue",
    ("workers/cli.py", "nightly"): "the `grader nightly` command's name",
    ("workers/cli.py", "running"): "a field of `grader queue --json`: the grades running now",
    ("workers/enqueue.py", "running"): "a field of `grader queue --json`: the grades running now",
    ("web/runs.py", "done"): "a field of the status JSON: tests done so far",
    ("web/staff/tasks.py", "done"): "a field of a staff task's status JSON: runs done so far",
    ("web/staff/console.py", "running"): "a field of the queue stats: the grades running now",
    ("web/staff/__init__.py", "staff"): "the staff blueprint's name",
    ("web/staff/assignments.py", "trn2"): "a spec's platform (Trainium2), not the queue",
    ("web/staff/assignments.py", "nightly"): "a thresholds version's source, not the queue",
    ("web/staff/console.py", "trn2"): "a spec's platform (Trainium2), not the queue",
    # the grading core
    ("grader/child.py", "trn2"): "the default platform whose rules the simulator applies",
    ("grader/executor.py", "trn2"): "the default platform whose limits a program is checked against",
    ("grader/grade.py", "trn2"): "a spec's platform, not the queue",
    ("grader/report.py", "trn2"): "the platform the thresholds were set on",
    ("grader/runner.py", "trn2"): "the default platform of a runner job",
    ("grader/spec.py", "trn2"): "a spec's default platform",
    ("grader/neuron/lines.py", "trn2"): "the platform of a Trainium2 instance family the runtime reports",
    ("grader/report_view.py", "trn2"): "the platform that timed a report from before each platform had its model",
    ("workers/nightly.py", "trn2"): "the platform whose Trainium the trn2 queue's workers have",
    ("grader/runner.py", "neuron"): "the job's key for its Neuron SDK settings",
    ("grader/neuron/__main__.py", "neuron"): "the job's key for its Neuron SDK settings",
    ("grader/neuron/current.py", "neuron"): "the job's key for its Neuron SDK settings",
    ("grader/neuron/legacy.py", "neuron"): "the job's key for its Neuron SDK settings",
    ("grader/runner.py", "cancelled"): "a configuration run's outcome (ok, timeout, cancelled...), not a run's status",
    ("grader/sandbox.py", "cancelled"): "why a child was killed, in words",
    ("grader/runner.py", "correctness"): "a runner job's mode (correctness or benchmark), not a test kind",
    ("grader/grade.py", "correctness"): "a runner job's mode (correctness or benchmark), not a test kind",
    ("grader/gradescope/results.py", "passed"): "Gradescope's own test status word (its results.json schema)",
    ("grader/gradescope/results.py", "failed"): "Gradescope's own test status word (its results.json schema)",
    ("grader/gradescope/service.py", "done"): "a field of the service's status JSON: tests done so far",
}


def literals() -> set[tuple[str, str]]:
    found = set()
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if "/migrations/" in rel or rel == "grader/vocabulary.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and node.value in WORDS:
                    found.add((rel, node.value))
    return found


def test_no_vocabulary_word_is_spelled_out_in_the_core_or_the_service():
    unexplained = sorted(literals() - set(NOT_THE_WORD))
    assert unexplained == [], "name these through grader.vocabulary's types"


def test_templates_and_scripts_name_words_through_the_vocabulary():
    """The whole of each page template (its HTML too: a form's <option value="sim"> is a second
    list of backends) and each script (a list of final statuses is a second copy of the types:
    the status JSON says `final`)."""
    quoted = re.compile(r"""['"](%s)['"]""" % "|".join(sorted(WORDS)))
    found = []
    for path in sorted((ROOT / "web" / "templates").rglob("*.html")) + sorted((ROOT / "web" / "static").rglob("*.js")):
        for word in quoted.findall(path.read_text(encoding="utf-8")):
            found.append((path.relative_to(ROOT).as_posix(), word))
    allowed = {("web/templates/staff/nightly.html", "passed"),      # prose: "passed" or "FAILED" beside a night
               ("web/templates/staff/console.html", "trn2"),       # a spec's platform (trn1, trn2), not the queue
               ("web/templates/staff/assignment.html", "nightly")}  # a thresholds version's source, not the queue
    assert sorted(set(found) - allowed) == []


def test_the_database_checks_the_same_values():
    from store import models
    assert models.RUN_STATUSES == v.values(v.RunStatus)
    assert models.BACKENDS == v.values(v.Backend)
    assert set(models.QUEUES) == set(v.QUEUE_FOR_BACKEND.values())
    from sqlalchemy import CheckConstraint
    checks = {str(c.sqltext).split(" IN ")[0]: str(c.sqltext) for c in models.GradingRun.__table__.constraints
              if isinstance(c, CheckConstraint)}
    assert checks["status"] == "status IN (" + ", ".join(f"'{s.value}'" for s in v.RunStatus) + ")"
    assert checks["queue"] == "queue IN ('sim', 'trn2')"           # students' runs never wait in nightly


@pytest.mark.parametrize("word", [*v.RunStatus, *v.TestKind, *v.Backend, *v.Queue, *v.Tier])
def test_a_word_is_its_plain_value_everywhere(word):
    assert word == word.value and f"{word}" == word.value
    assert json.loads(json.dumps({word: word})) == {word.value: word.value}


def test_kinds_and_backends_carry_their_facts():
    assert [k for k in v.TestKind if k.timed] == [v.TestKind.PERFORMANCE, v.TestKind.EXTRA_CREDIT]
    assert v.Backend.NEURON.queue == v.Queue.TRN2 and v.Backend.SIM.queue == v.Queue.SIM
    assert v.Backend.SIM.title == "simulated (nkisim)" and v.TestKind.EXTRA_CREDIT.title == "Extra credit"
    assert [s for s in v.RunStatus if s.final] == list(v.FINAL_RUN_STATUSES)
    assert set(v.IN_FLIGHT_RUN_STATUSES) | set(v.FINAL_RUN_STATUSES) == set(v.RunStatus)
