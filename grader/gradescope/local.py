"""Local mode: grade inside Gradescope's container on the simulator.

Gradescope runs everything as root. Before any student code runs, everything in the autograder's
folder but the installed grader becomes root-only: the autograder's own files (source/, holding
the config and a fixed secret seed if there is one), the results folder, the submission
metadata (earlier runs' hidden results), the upload itself (the grader hands the kernel its
own copy). Then the strongest isolation the container allows is chosen and probed
(isolation.py), and grading is refused if a student's process could still reach any of it."""
from __future__ import annotations

import dataclasses
import os
import stat
import sys

from .. import render
from ..errors import GraderInputError
from ..events import CancelToken, ProgressEvent
from ..sandbox import Limits
from ..vocabulary import Backend
from . import isolation, results, upload
from .config import Config
from .layout import Layout

STAFF_FIX = ("Tell course staff. They can rebuild the autograder in service mode (`grader gradescope build "
             "--mode service`), which grades on the course's own service, then regrade this submission.")


def secrets(layout: Layout) -> list:
    """What a student's process may never read: the config (its seed) and the submission
    metadata (earlier submissions' results, hidden and after-due-date tests included)."""
    return [layout.config, layout.metadata]


def private(layout: Layout) -> list:
    """What a student's process has no need of: everything in the autograder's folder but the
    installed grader (symbolic links are left alone: a mode change would follow them)."""
    return sorted(entry for entry in layout.root.iterdir() if entry.name != layout.venv.name and not entry.is_symlink())


def lock_down(layout: Layout) -> None:
    """Everything in the autograder's folder but the installed grader: root's alone (the
    autograder's files, the results folder, Gradescope's submission metadata, which holds
    earlier runs' hidden results, and whatever else Gradescope puts there). The root folder
    stays traversable, as the installed grader below it must be readable by a student's process."""
    if os.geteuid() != 0:
        return      # not root: nothing to drop to; the probe decides whether grading may go on
    os.makedirs(layout.results_dir, exist_ok=True)
    for entry in private(layout):
        os.chown(entry, 0, 0)
        os.chmod(entry, stat.S_IMODE(os.lstat(entry).st_mode) & 0o700)
    for folder in (layout.source, layout.results_dir):
        os.chmod(folder, 0o700)
    for secret in secrets(layout):
        if secret.exists():
            os.chown(secret, 0, 0)
            os.chmod(secret, 0o600)
    mode = os.stat(layout.root).st_mode
    os.chmod(layout.root, stat.S_IMODE(mode) | 0o011)


def grade(layout: Layout, config: Config, spec, cancel: CancelToken) -> dict:
    lock_down(layout)
    iso = isolation.establish(secrets(layout), layout.results_dir, private=private(layout))
    extra = {"mode": "local", "isolation": iso.to_json()}
    print(f"isolation: {iso.level} ({iso.confinement}); probe: {iso.probe}", flush=True)
    if iso.refused:
        return results.autograder_error(
            f"The autograder will not run student code in this container: {iso.refused}.", STAFF_FIX, extra=extra)
    try:
        submission = upload.read_upload(layout.submission, spec)
    except GraderInputError as err:
        return results.unreadable_submission(spec, err.reason, err.remedy or "", extra=extra)
    from ..grade import GradeOptions, grade as run_grade
    limits = Limits()
    if config.child_memory_mb:
        limits = dataclasses.replace(limits, memory_bytes=config.child_memory_mb * 2**20)
    options = GradeOptions(backend=Backend.SIM, seed=config.seed, jobs=config.jobs, cancel=cancel,
                           time_budget_s=config.time_budget_s, config_timeout_s=config.config_timeout_s,
                           limits=limits, hide_paths=(str(layout.source), str(layout.results_dir)),
                           on_progress=_progress)
    report = run_grade(submission, spec, options)
    if config.seed is not None:
        report.seed_kind = "secret"      # the zip's seed: fixed, but the student's to never see
    notes = (iso.sentence, f"Graded on the simulator in Gradescope's container (isolation level {iso.level}).")
    return render.to_gradescope(report, visibility=dataclasses.asdict(config.visibility), notes=notes,
                                extra_data=extra)


def _progress(event: ProgressEvent) -> None:
    """One line per test in run_autograder's stdout (instructors see it, students do not)."""
    r = event.result
    print(render.escape_control(f"[{event.done}/{event.total}] {r.name}: {r.status} "
                                f"{render.format_points(r.points)}/{render.format_points(r.max_points)}"),
          file=sys.stdout, flush=True)
