"""`python -I -m grader.neuron` in a job directory: the trusted process that runs a NEFF on the
real inputs and times it, on the SDK line the grader detected (job.json's neuron.line)."""
from __future__ import annotations


def run(job: dict):
    if job["neuron"]["line"] == "legacy":
        from .legacy import run as run_legacy
        return run_legacy(job)
    from .current import run as run_current
    return run_current(job)


def main() -> None:
    from grader.executor import _write, refused
    from grader.jobs import serve_job
    serve_job(run, _write, refused)


if __name__ == "__main__":
    main()
