"""`python -I -m grader.neuron` in a job directory: the trusted process that runs a NEFF on the
real inputs and times it, on the SDK line the grader detected (job.json's neuron.line)."""
from __future__ import annotations


def run(job: dict):
    if job["neuron"]["line"] == "legacy":
        from .legacy import run as run_legacy
        return run_legacy(job)
    from .current import run as run_current
    return run_current(job)


def on_error(err: BaseException, job: dict) -> tuple[dict, list]:
    """The worker's failures are grader errors (faults.py); the rest is the run's verdict."""
    from grader.executor import refused
    from .faults import verdict
    found = verdict(err)
    return (found, []) if found is not None else refused(err, job)


def main() -> None:
    from grader.executor import _write
    from grader.jobs import serve_job
    serve_job(run, _write, on_error)


if __name__ == "__main__":
    main()
