"""What a running grade tells its caller (progress events) and how the caller stops it (a
cancel token). Both are plain objects, so a Celery task, a web page or the CLI can use them."""
from __future__ import annotations

import threading
from dataclasses import dataclass

from .report import TestResult
from .vocabulary import ReportStatus


@dataclass(frozen=True)
class ProgressEvent:
    done: int              # tests finished so far, this one included
    total: int             # tests in the spec
    result: TestResult     # the test that just finished


@dataclass(frozen=True)
class ConfigEvent:
    """One configuration of a test has finished (a long test has several): for a terminal that
    should not sit silent through a test's minutes."""
    test: str              # the test's title
    index: int             # this configuration, from 1
    count: int             # configurations in the test
    label: str             # the configuration as a student reads it
    status: str            # its TestStatus
    seconds: float         # its wall time


class CancelToken:
    """Set from any thread (a signal handler, a Celery revoke, a TA's button). The grade stops
    between configurations, kills running children at once and returns a report whose status
    is the token's reason: "cancelled" (a person asked) or "interrupted" (a signal)."""

    REASONS = (ReportStatus.CANCELLED, ReportStatus.INTERRUPTED)

    def __init__(self) -> None:
        self.event = threading.Event()       # handed to the sandbox, which kills children when set
        self.reason = ReportStatus.CANCELLED

    def cancel(self, reason: str = ReportStatus.CANCELLED) -> None:
        if reason not in self.REASONS:
            raise ValueError(f"reason must be one of {self.REASONS}, got {reason!r}")
        if not self.event.is_set():
            self.reason = reason
        self.event.set()

    @property
    def cancelled(self) -> bool:
        return self.event.is_set()
