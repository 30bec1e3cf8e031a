"""The one base of every bad-input error: a caller (CLI, web, worker) catches GraderInputError
and shows the user what is wrong and how to fix it, without knowing which part raised it. And
the one base of the grader's own failures (GraderFault), which are never the student's."""
from __future__ import annotations


class GraderInputError(ValueError):
    """Input the grader cannot use (an upload, a spec, a backend choice). `reason` says what is
    wrong, `remedy` how to fix it; str(err) is both, as one paragraph."""

    def __init__(self, reason: str, remedy: str = ""):
        super().__init__(reason, remedy)      # both in args: the error pickles (Celery results)
        self.reason = reason
        self.remedy = remedy

    def __str__(self) -> str:
        reason = self.reason.rstrip()
        if not self.remedy:
            return reason
        if not reason.endswith((".", "!", "?")):
            reason += "."
        return f"{reason} {self.remedy}"


class GraderFault(RuntimeError):
    """The grader's own failure, never the student's: nkisim failing on a valid program, a
    trusted process of the grade killed from outside. grade() raises it instead of scoring a
    test; a worker retries the run, then gives it up as a grader error (never a 0), and a
    Gradescope autograder error says it was not caused by the submission."""
