"""What every process the grader starts in a job directory does around its work: confine itself
(sandbox.enter) before anything else, read job.json, do the job, write the outcome to the
inherited result pipe (GRADER_RESULT_FD), and exit at once, without cleanup handlers that code
it ran could have registered. Used by grader.child, grader.executor and grader.neuron."""
from __future__ import annotations

import json
import os
import sys
from typing import Callable


def serve_job(run: Callable[[dict], tuple], write: Callable[..., None],
              on_error: Callable[[BaseException, dict], tuple]) -> None:
    from grader.sandbox import enter
    fd = int(os.environ.pop("GRADER_RESULT_FD"))
    enter()
    with open("job.json") as fh:
        job = json.load(fh)
    try:
        outcome = run(job)
    except BaseException as err:      # a verdict for this run, never a silent death
        outcome = on_error(err, job)
    write(fd, *outcome)
    sys.stdout.flush()
    os._exit(0)
