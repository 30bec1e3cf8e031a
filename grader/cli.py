"""`grader` command line: grade a submission and print the report.

    grader grade conv2d.py [--assignment asst4-trainium2] [--backend auto|sim|neuron]
                 [--json OUT] [--gradescope OUT] [--seed N] [--jobs N] [--no-precheck]

Exit status: 0 when grading completed, whatever the score; 2 for bad input (the reason on stderr).
"""
from __future__ import annotations

import argparse
import os
import sys

from . import render, spec as specs
from .grade import BackendUnavailable, GradeOptions, choose_backend, grade
from .submission import SubmissionError, load_submission


def _grade(args) -> int:
    try:
        spec = specs.load(args.assignment)
    except specs.SpecError as err:
        print(f"grader: {err}", file=sys.stderr)
        return 2
    try:
        submission = load_submission(args.path, spec)
    except SubmissionError as err:
        print(f"grader: {args.path}: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"grader: cannot read {args.path}: {err.strerror or err}", file=sys.stderr)
        return 2
    if args.jobs < 1:
        print("grader: --jobs must be at least 1", file=sys.stderr)
        return 2
    for flag, out in (("--json", args.json), ("--gradescope", args.gradescope)):
        folder = os.path.dirname(os.path.abspath(out)) if out else None
        if folder and not (os.path.isdir(folder) and os.access(folder, os.W_OK)):
            # said now, not after minutes of grading
            print(f"grader: {flag} {out}: the folder {folder} does not exist or is not writable", file=sys.stderr)
            return 2
    try:
        choose_backend(args.backend)
    except BackendUnavailable as err:
        print(f"grader: {err}", file=sys.stderr)
        return 2
    options = GradeOptions(backend=args.backend, seed=args.seed, jobs=args.jobs,
                           run_precheck=False if args.no_precheck else None,
                           progress=lambda line: print(line, file=sys.stderr, flush=True))
    report = grade(submission, spec, options)
    print(render.render_terminal(report, color=sys.stdout.isatty()))
    if args.json:
        render.write_json(report, args.json)
    if args.gradescope:
        render.write_gradescope(report, args.gradescope)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="grader", description="Grade NKI kernel submissions")
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("grade", help="grade a conv2d.py, kernels.py or asst4.tar.gz / .zip")
    g.add_argument("path")
    g.add_argument("--assignment", default="asst4-trainium2", help=f"one of {', '.join(specs.available())}")
    g.add_argument("--backend", default="auto", choices=("auto", "sim", "neuron"))
    g.add_argument("--json", help="write the JSON report here")
    g.add_argument("--gradescope", help="write Gradescope's results.json here")
    g.add_argument("--seed", type=int, help="public seed (local runs); by default a fresh secret seed")
    g.add_argument("--jobs", type=int, default=1, help="tests to run in parallel")
    g.add_argument("--no-precheck", action="store_true", help="skip the static check of the source")
    g.set_defaults(func=_grade)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
