"""`grader` command line: grade a submission and print the report.

    grader grade PATH [--assignment NAME|SPEC.toml|PROBLEM_DIR] [--backend auto|sim|neuron]
                 [--json OUT] [--gradescope OUT] [--seed N] [--jobs N] [--time-budget S]
                 [--no-precheck]
    grader problem check DIR

PATH is a conv2d.py, a kernels.py, or an archive (.tar.gz, .tgz, .tar, .zip) holding
part1/kernels.py and/or part2/conv2d.py; a part not sent scores 0 under its own tests.
--assignment may also be a problem folder (or a bundled problem's name, matmul say): the
submission is then graded under the folder's own tests, as `grader problem check` grades the
folder's solutions.
"""
from __future__ import annotations

import argparse
import faulthandler
import os
import signal
import sys
import threading
from pathlib import Path

from . import render, spec as specs
from .errors import GraderFault, GraderInputError
from .events import CancelToken, ConfigEvent, ProgressEvent
from .vocabulary import Backend, ReportStatus

EXIT_OK = 0              # grading completed, whatever the score
EXIT_BAD_INPUT = 2       # bad input: unreadable, not UTF-8, too large, syntax error, wrong signature, bad spec ...
EXIT_REJECTED = 3        # the static check rejected a submitted file: its tests scored 0, the report says why
EXIT_GRADER_FAULT = 4    # the grader failed, not the submission (GraderFault): no report; grade again
EXIT_STATUS_HELP = """exit status:
  0    grading completed, whatever the score
  2    bad input (the reason and the fix on stderr): unreadable or oversized upload, not UTF-8,
       syntax error, missing function or wrong signature, unsafe archive, unknown or malformed
       spec, unavailable backend, unwritable report folder
  3    grading completed, but the static check rejected a submitted file (every violation is
       listed in the report's header; that file's tests score 0)
  4    the grader itself failed, not the submission (a process of the grade killed from outside,
       the simulator failing on a valid program, a job it could not contain): the reason on
       stderr, no report written; grade again
  130  interrupted by Ctrl-C (SIGINT), 143 by SIGTERM: children killed, job files removed,
       "grading interrupted" on stderr, no report written"""


def _fail(message: str) -> int:
    print(f"grader: {render.escape_control(message)}", file=sys.stderr)
    return EXIT_BAD_INPUT


def format_progress(event: ProgressEvent) -> str:
    """One line per finished test (the same line `grader submit` prints from the service)."""
    return render.format_test_line(event.done, event.total, render.test_summary(event.result))


def format_config(event: ConfigEvent) -> str | None:
    """A line per finished configuration of a test that has several (a test of one configuration
    has only its test line), so a long test shows it is moving."""
    if event.count < 2:
        return None
    return render.escape_control(f"      {event.test}: configuration {event.index}/{event.count} ({event.label}) "
                                 f"{event.status} ({event.seconds:.1f} s)")


def _print_config(event: ConfigEvent) -> None:
    line = format_config(event)
    if line:
        print(line, file=sys.stderr, flush=True)


def _prepare(args):
    """Everything that can be wrong with the input, checked before any grading starts."""
    from .grade import GradeOptions, choose_backend
    from .submission import load_submission
    if args.jobs < 1:
        raise GraderInputError("--jobs must be at least 1", "Give --jobs 1 or more.")
    if args.time_budget is not None and not args.time_budget > 0:
        raise GraderInputError(f"--time-budget must be positive, got {args.time_budget:g}",
                               "Give the budget in seconds, above 0.")
    spec = assignment_spec(args.assignment, args.path)
    for warning in spec.tolerance_warnings():
        print(f"grader: warning: spec {spec.assignment}: {warning}", file=sys.stderr)
    submission = load_submission(args.path, spec)
    for flag, out in (("--json", args.json), ("--gradescope", args.gradescope)):
        folder = os.path.dirname(os.path.abspath(out)) if out else None
        if folder and not (os.path.isdir(folder) and os.access(folder, os.W_OK)):
            # said now, not after minutes of grading
            raise GraderInputError(f"{flag} {out}: the folder {folder} does not exist or is not writable",
                                   "Create the folder or write the report somewhere else.")
    choose_backend(args.backend)
    options = GradeOptions(backend=args.backend, seed=args.seed, jobs=args.jobs, time_budget_s=args.time_budget,
                           run_precheck=False if args.no_precheck else None,
                           on_progress=lambda event: print(format_progress(event), file=sys.stderr, flush=True),
                           on_config=_print_config)
    return spec, submission, options


def problem_folder(name_or_path: str) -> Path | None:
    """The problem folder `name_or_path` means (a folder holding problem.toml, that problem.toml
    itself, or a bundled problem's name that is no bundled spec's), or None: a spec."""
    from .problems import BUNDLED, BUNDLED_DIR
    from .problems.folder import PROBLEM_FILE
    path = Path(name_or_path)
    if path.name == PROBLEM_FILE and path.is_file():
        return path.parent
    if path.is_dir():
        return path
    if name_or_path in BUNDLED and name_or_path not in specs.available() and not path.exists():
        return BUNDLED_DIR / name_or_path
    return None


def assignment_spec(name_or_path: str, submission_path: str | None = None):
    """--assignment as a spec: a bundled spec, a spec file, or a problem folder's own tests (the
    spec `grader problem check` grades its solutions with), in the dialect the submitted .py file
    imports when the folder accepts it (else the folder's first; the static check then says
    which dialect the file should be in)."""
    folder = problem_folder(name_or_path)
    if folder is None:
        return specs.load(name_or_path)
    from nkisim.dialects import DIALECTS
    from .problems import BUNDLED_DIR
    from .problems import folder as folders
    if not (folder / folders.PROBLEM_FILE).is_file():
        raise specs.SpecError(f"--assignment {name_or_path} is a folder without {folders.PROBLEM_FILE}",
                              f"Give a problem folder (holding {folders.PROBLEM_FILE} and {folders.REFERENCE_FILE}), "
                              f"a spec .toml file, or a bundled assignment ({', '.join(specs.available())}).")
    from .problems.check import dialect_of_file, spec_for
    loaded = folders.load(folder, bundled=folder.resolve().parent == BUNDLED_DIR.resolve())
    accepted = tuple(loaded.problem.dialects or DIALECTS)
    dialect = accepted[0]
    if submission_path and submission_path.endswith(".py"):
        try:
            found = dialect_of_file(Path(submission_path))
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            found = None            # load_submission says what is wrong with the file
        if found in accepted:
            dialect = found
    return spec_for(loaded, dialect)


def _grade(args) -> int:
    token = CancelToken()
    caught: list[int] = []

    def stop(signum, _frame):
        # the grade kills its children and cleans up, then returns; the exit status says why
        caught.append(signum)
        token.cancel(ReportStatus.INTERRUPTED)

    # signal handlers can only be set from the main thread (a caller may run main() elsewhere)
    signals = (signal.SIGINT, signal.SIGTERM) if threading.current_thread() is threading.main_thread() else ()
    previous = {sig: signal.signal(sig, stop) for sig in signals}
    if signals:     # SIGUSR2 prints every thread's stack on stderr: where a grade that will not stop is (as a worker's)
        faulthandler.register(signal.SIGUSR2, file=sys.__stderr__, all_threads=True)
    try:
        try:
            spec, submission, options = _prepare(args)
            options.cancel = token
            from .grade import grade
            # grade() refuses, too, what it finds before grading starts (a spec this SDK line cannot compile)
            report = None if caught else grade(submission, spec, options)
        except GraderInputError as err:
            if not caught:               # a signal during the grade is what ended it, whatever grade() raised
                return _fail(str(err))
        except GraderFault as err:
            if not caught:
                _fail(f"the grader failed, not the submission: {err}")
                return EXIT_GRADER_FAULT
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if signals:
            faulthandler.unregister(signal.SIGUSR2)
    if caught:
        print("grader: grading interrupted", file=sys.stderr)
        return 128 + caught[0]
    from .report_view import view_of
    view = view_of(report)                  # built once, drawn three ways
    print(render.render_terminal(view, color=sys.stdout.isatty()))
    if args.json:
        render.write_json(view, args.json)
    if args.gradescope:
        render.write_gradescope(view, args.gradescope)
    return EXIT_REJECTED if view.header.rejections else EXIT_OK


def _doctor(args) -> int:
    from .neuron.doctor import main as doctor
    return doctor(args)


def _problem_check(args) -> int:
    """Validate a problem folder and grade its solutions: 0 when all is as expected, 1 on any
    surprise (the table says which), 2 when the folder cannot be read as a problem at all."""
    from .problems.check import check, table
    try:
        loaded, rows = check(problem_folder(args.folder) or args.folder)
    except GraderInputError as err:
        return _fail(str(err))
    except GraderFault as err:
        _fail(f"the grader failed, not the problem folder: {err}")
        return EXIT_GRADER_FAULT
    print("\n".join(render.escape_control(line) for line in table(loaded, rows).splitlines()))
    return 0 if all(r.ok for r in rows) else 1


def main(argv: list[str] | None = None, commands=()) -> int:
    """`commands`: functions that each add a subcommand to the parser (service/cli.py gives the
    service's: serve, worker, submit, ...); alone, this is the grading core's own command, as the
    Gradescope autograder installs it."""
    args = build_parser(commands).parse_args(argv)
    return args.func(args)


def build_parser(commands=()) -> argparse.ArgumentParser:
    """The whole `grader` command line (main's; tests walk it for options without help)."""
    parser = argparse.ArgumentParser(prog="grader", description="Grade NKI kernel submissions")
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser(
        "grade", help="grade a conv2d.py, kernels.py or asst4.tar.gz / .zip",
        description="Grade one submission: a conv2d.py, a kernels.py, or an archive (.tar.gz, .tgz, .tar, "
                    ".zip) holding part1/kernels.py and/or part2/conv2d.py. A part not sent scores 0 under its "
                    "own tests; the maximum is always the assignment's.",
        epilog=EXIT_STATUS_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    g.add_argument("path", help="the submission: conv2d.py, kernels.py or an archive")
    g.add_argument("--assignment", default="asst4-trainium2",
                   help=f"a bundled assignment ({', '.join(specs.available())}; default asst4-trainium2), the "
                        "path of a spec .toml file (a changed spec must bump spec_version, and thresholds_version "
                        "when a threshold changes), or a problem folder (or a bundled problem's name): graded "
                        "under the folder's own tests")
    g.add_argument("--backend", default="auto", choices=("auto", Backend.SIM.value, Backend.NEURON.value),
                   help="sim: nkisim and its cost model; neuron: neuronx-cc on a Trn2; auto (default): neuron "
                        "when available, else sim")
    g.add_argument("--json", metavar="OUT", help="write the JSON report here")
    g.add_argument("--gradescope", metavar="OUT", help="write Gradescope's results.json here")
    g.add_argument("--seed", type=int, help="public seed (local runs); by default a fresh secret seed")
    g.add_argument("--jobs", type=int, default=1, help="tests to run in parallel (default 1)")
    g.add_argument("--time-budget", type=float, metavar="SECONDS",
                   help="wall time for the whole grade (default: the spec's time_budget_s); a kernel that "
                        "times out fails its later tests at once")
    g.add_argument("--no-precheck", action="store_true", help="skip the static check of the source")
    g.set_defaults(func=_grade)
    d = sub.add_parser("doctor", help="check a Trainium worker: NeuronCores, SDK line, generation, reference "
                       "kernels vs the spec",
                       description="On a Trainium worker: the NeuronCores the runtime sees, the SDK line, the "
                                   "generation (a spec of another generation's platform is refused), and a table "
                                   "of the reference kernels' p99 on every timed configuration beside the spec's "
                                   "reference latencies and thresholds. Exit 0 only when all is well; 1 when a "
                                   "reference fails, misses its threshold or is >10% off; 2 when this machine "
                                   "cannot grade on a NeuronCore, or not this spec (why, on one line).")
    d.add_argument("--assignment", help="a bundled assignment or a spec .toml path (default: the SDK line's: "
                                        "asst4-trainium2 on the legacy line, asst4-trainium2-nki06 on the current)")
    d.add_argument("--core", type=int, default=0, help="the NeuronCore to time on (default 0)")
    d.add_argument("--json", metavar="OUT", help="also write the table as JSON here")
    d.set_defaults(func=_doctor)
    problem = sub.add_parser("problem", help="course staff: check a problem folder",
                             description="Problem folders (problem.toml, reference.py, template/, solutions/): "
                                         "see docs/staff.md, 'Problem folders'.")
    problem_sub = problem.add_subparsers(dest="problem_command", required=True)
    pc = problem_sub.add_parser(
        "check", help="validate a problem folder and grade every solution in it",
        description="Check a problem folder: its problem.toml, its reference's determinism for a seed, the output "
                    "shape and dtype it declares, its tolerances, and every solution graded on the simulator with "
                    "the folder's own tests (each correct one must earn full correctness and pass every timed "
                    "test; each wrong one and each starter must earn nothing [solutions.may_pass] does not allow). "
                    "Prints a table and the folder's sha256 (what a spec pins as problem_sha256).",
        epilog="exit status: 0 all as expected; 1 a surprise (marked SURPRISE in the table); 2 the folder cannot "
               "be read as a problem (the reason and the fix on stderr); 4 the grader failed",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    pc.add_argument("folder", help="the problem folder (holding problem.toml), or a bundled problem's name "
                                   "(matmul)")
    pc.set_defaults(func=_problem_check)
    from .gradescope.cli import register as register_gradescope
    register_gradescope(sub)           # `grader gradescope build|run|check`
    for register in commands:          # the service's, from its composition root; grader/ imports none
        register(sub)
    return parser


if __name__ == "__main__":
    sys.exit(main())
