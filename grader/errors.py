"""The one base of every bad-input error: a caller (CLI, web, worker) catches GraderInputError
and shows the user what is wrong and how to fix it, without knowing which part raised it."""
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
