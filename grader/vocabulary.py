"""The words the grader, the store, the workers and the web share, as types: a run's status, a
test's kind (and which kinds are timed), a test's status, a report's status, the backend a
kernel runs on, the queue a grade waits in, and the threshold tiers.

Each is a StrEnum: a member is its string (`RunStatus.DONE == "done"`, JSON and the database
store the plain value), so rows and reports written before these types existed read the same.
Code names a word through its type, never as a string literal (tests/test_vocabulary.py);
the CHECK constraints of store/models.py are built from these tuples."""
from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """A grading run's life: queued -> running -> done | failed | infra_error | cancelled."""
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"                  # graded: it has a report and a score
    FAILED = "failed"              # the submission could not be graded (the student's to fix)
    INFRA_ERROR = "infra_error"    # ours: retried, then given up
    CANCELLED = "cancelled"

    @property
    def final(self) -> bool:
        return self in FINAL_RUN_STATUSES

    @property
    def title(self) -> str:
        """What a page calls it: the value itself, except for the one that is an id."""
        return RUN_STATUS_TITLES.get(self, self.value)


FINAL_RUN_STATUSES = (RunStatus.DONE, RunStatus.FAILED, RunStatus.INFRA_ERROR, RunStatus.CANCELLED)
RUN_STATUS_TITLES = {RunStatus.INFRA_ERROR: "grader error"}      # ours, not the student's: retried, then given up
IN_FLIGHT_RUN_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING)


class StaffTaskStatus(StrEnum):
    """A staff task's life (a rescore, regrade or export a TA started): queued -> running -> done | failed."""
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"

    @property
    def final(self) -> bool:
        return self in (StaffTaskStatus.DONE, StaffTaskStatus.FAILED)


class TestKind(StrEnum):
    __test__ = False               # not a pytest test class
    CORRECTNESS = "correctness"
    PERFORMANCE = "performance"
    EXTRA_CREDIT = "extra_credit"

    @property
    def timed(self) -> bool:
        """Timed kinds have thresholds, a p99 and a tier; correctness tests only compare values."""
        return self in TIMED_KINDS

    @property
    def title(self) -> str:
        return KIND_TITLES[self]


TIMED_KINDS = (TestKind.PERFORMANCE, TestKind.EXTRA_CREDIT)
KIND_TITLES = {TestKind.CORRECTNESS: "Correctness", TestKind.PERFORMANCE: "Performance",
               TestKind.EXTRA_CREDIT: "Extra credit"}


class TestStatus(StrEnum):
    __test__ = False
    PASSED = "passed"
    PARTIAL = "partial"            # a timed test in the relaxed tier
    FAILED = "failed"
    ERROR = "error"                # the kernel raised or broke a rule
    SKIPPED = "skipped"            # not run: gated, rejected file, time budget spent


class ReportStatus(StrEnum):
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"


class Backend(StrEnum):
    SIM = "sim"                    # nkisim and its cost model
    NEURON = "neuron"              # neuronx-cc and a NeuronCore of a Trn2

    @property
    def title(self) -> str:
        return BACKEND_TITLES[self]

    @property
    def queue(self) -> "Queue":
        return QUEUE_FOR_BACKEND[self]


BACKEND_TITLES = {Backend.SIM: "simulated (nkisim)", Backend.NEURON: "Trainium2 hardware"}


class Queue(StrEnum):
    SIM = "sim"
    TRN2 = "trn2"
    NIGHTLY = "nightly"            # the reference regression, never ahead of a student's grade
    STAFF = "staff"                # rescores, regrades and exports TAs start (workers/staff_tasks.py)


QUEUE_FOR_BACKEND = {Backend.SIM: Queue.SIM, Backend.NEURON: Queue.TRN2}
GRADING_QUEUES = tuple(QUEUE_FOR_BACKEND.values())     # where students' runs wait
# the generation each hardware queue's workers run on: the one hardware queue is Trn2's
# (`grader worker --queue trn2`); a spec of another platform has no hardware to run on yet
PLATFORM_OF_QUEUE = {Queue.TRN2: "trn2"}


class Tier(StrEnum):
    """A timed test's threshold levels: at or under optimized, full points; under relaxed, partial."""
    OPTIMIZED = "optimized"
    RELAXED = "relaxed"


TIERS = tuple(Tier)


class Borderline(StrEnum):
    """What a simulated p99 earns when a threshold lies within the model's error band of it
    (the spec's `borderline`): today's rule, the higher tier flagged for staff, or today's rule
    as a provisional score while the run is timed again on a Trainium worker."""
    STRICT = "strict"
    CREDIT = "credit"
    HARDWARE = "hardware"
class TimedFlag(StrEnum):
    """What a timed test's verdict may flag for staff (scoring.timed_flags), stored as
    '<flag>:<test name>' in a report's flags."""
    BORDERLINE_CREDIT = "borderline_credit"
    BORDERLINE_HARDWARE = "borderline_hardware"
    IMPLAUSIBLY_FAST = "implausibly_fast"

    def of(self, test_name: str) -> str:
        return f"{self}:{test_name}"

    @property
    def prefix(self) -> str:
        return f"{self}:"


# the optimized threshold is this times the optimized reference kernel's p99 (the relaxed one,
# the relaxed reference's): nightly proposes thresholds with it, scoring infers the reference
THRESHOLD_FACTOR = 1.2
# the nightly proposes a relaxed threshold only from a relaxed reference at least this much slower
# than the optimized one (p99 over p99, less 1). The course's own fp32 tiers are 8% apart
# (4596 / 4964 us) and fp16's 36%; a reference within 5% draws a partial tier narrower than the
# simulator's best error band (8.5%) and half the nightly's drift limit (10%): a kernel just
# missing optimized would land in it by noise, so the tier would stand for no kernel.
RELAXED_MIN_GAP = 0.05


def values(words) -> tuple[str, ...]:
    """The plain strings of a vocabulary type or tuple of its members, in order (for CHECK
    constraints, SQL parameters and forms)."""
    return tuple(member.value for member in words)


# what web templates may name (web/__init__.py puts these in every page's globals)
TEMPLATE_NAMES = {"RunStatus": RunStatus, "TestKind": TestKind, "TestStatus": TestStatus, "Backend": Backend,
                  "Tier": Tier, "FINAL_RUN_STATUSES": FINAL_RUN_STATUSES,
                  "IN_FLIGHT_RUN_STATUSES": IN_FLIGHT_RUN_STATUSES, "TIMED_KINDS": TIMED_KINDS}
