"""`python -m grader.gradescope.run`: what run_autograder runs, from the autograder's root.

Always ends with a results.json, whatever happens: a graded report, an unreadable submission
(the student's to fix, score 0), or an autograder error (score 0, the student's fault never,
with what to do). A watchdog writes the autograder error itself if a grade overruns its time
budget by a wide margin, so Gradescope's own timeout (which keeps nothing) is never what ends
a run."""
from __future__ import annotations

import os
import sys
import threading
import time
import traceback

from ..errors import GraderInputError
from ..events import CancelToken
from ..vocabulary import ReportStatus
from . import config as configs
from . import results
from .layout import Layout

GRACE_S = 60.0          # past the grade's budget: cancel it; twice this: give up and write the error


class _Once:
    """results.json is written once, by whoever gets there first (the grade or the watchdog)."""

    def __init__(self, layout: Layout, started: float):
        self.layout, self.started, self.lock, self.done = layout, started, threading.Lock(), False

    def write(self, data: dict) -> bool:
        with self.lock:
            if self.done:
                return False
            data.setdefault("execution_time", max(0, int(round(time.monotonic() - self.started))))
            results.write(data, self.layout.results)
            self.done = True
            return True


def _watchdog(writer: _Once, cancel: CancelToken, budget_s: float) -> None:
    def fire():
        cancel.cancel(ReportStatus.INTERRUPTED)
        time.sleep(GRACE_S)
        from .. import sandbox
        sandbox.kill_all_children()
        if writer.write(results.autograder_error(
                f"Grading did not finish within its time budget of {budget_s:.0f} s plus {2 * GRACE_S:.0f} s.",
                "Submit again; if it happens again, tell course staff (the autograder may need a longer "
                "budget, or the container more CPU: `grader gradescope build` prints the settings).")):
            print("watchdog: grading overran its budget; autograder error written", flush=True)
            os._exit(0)
    timer = threading.Timer(budget_s + GRACE_S, fire)
    timer.daemon = True
    timer.start()


def _spec(layout: Layout, config):
    from ..spec import load
    return load(layout.source / config.spec_file)


def grade(layout: Layout, writer: _Once) -> dict:
    cancel = CancelToken()
    try:
        config = configs.load(layout.config)
        spec = _spec(layout, config)
    except GraderInputError as err:
        return results.autograder_error(f"The autograder is misconfigured: {err}",
                                        f"Tell course staff. {err.remedy}".strip())
    print(f"nki-grader {config.grader_version} gradescope autograder: mode {config.mode}, assignment "
          f"{spec.assignment} spec_version {spec.spec_version} thresholds {spec.thresholds_version}", flush=True)
    if config.mode == "local":
        from . import local
        _watchdog(writer, cancel, config.time_budget_s or spec.time_budget_s)
        return local.grade(layout, config, spec, cancel)
    from . import service
    _watchdog(writer, cancel, config.service.timeout_s)
    return service.grade(layout, config, spec, cancel)


def main() -> int:
    started = time.monotonic()
    layout = Layout.from_env()
    writer = _Once(layout, started)
    try:
        data = grade(layout, writer)
    except Exception as err:      # noqa: BLE001 - never a crash without results.json
        traceback.print_exc(file=sys.stdout)
        data = results.autograder_error(f"The autograder failed: {type(err).__name__}: {err}",
                                        "Submit again; if it fails again, tell course staff (the autograder's "
                                        "output has the details).")
    if writer.write(data):
        print(f"results.json written: score {data.get('score')}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
