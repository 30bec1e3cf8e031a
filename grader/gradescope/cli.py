"""`grader gradescope build | run | check`."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ..errors import GraderInputError
from .config import VISIBILITIES


def register(sub) -> None:
    g = sub.add_parser("gradescope", help="make and run a Gradescope autograder",
                       description="A course collecting submissions on Gradescope gets our grades: build the "
                                   "autograder zip, try it outside Gradescope, check a results.json.")
    commands = g.add_subparsers(dest="gradescope_command", required=True)
    b = commands.add_parser("build", help="make the autograder zip for an assignment",
                            description="Make the autograder zip (setup.sh, run_autograder, the spec, a config). "
                                        "local: grade in Gradescope's container on the simulator; service: forward "
                                        "each submission to the course's grading service. Prints the Gradescope "
                                        "settings the assignment needs.")
    b.add_argument("--assignment", default="asst4-trainium2", help="a bundled assignment or a spec .toml file")
    b.add_argument("--mode", required=True, choices=("local", "service"),
                   help="local: grade inside Gradescope's container on the simulator; service: forward each "
                        "submission to this course's grading service")
    b.add_argument("-o", "--output", required=True, metavar="ZIP", help="where to write the zip")
    b.add_argument("--time-budget", type=float, metavar="SECONDS", help="local: the whole grade's wall time "
                   "(default: the spec's time_budget_s)")
    b.add_argument("--config-timeout", type=float, metavar="SECONDS", help="local: one configuration's wall time")
    b.add_argument("--jobs", type=int, default=1, help="local: tests run in parallel (default 1)")
    b.add_argument("--child-memory-mb", type=int, metavar="MB",
                   help="local: address-space limit of each sandboxed child (default 8192)")
    b.add_argument("--fixed-seed", action="store_true",
                   help="local: one secret seed kept in the zip, so a regrade gives the same result "
                        "(default: a fresh secret seed per run)")
    b.add_argument("--visibility", choices=VISIBILITIES, help="when students see the tests (default: the spec's "
                   "[gradescope] visibility, else visible)")
    b.add_argument("--test-visibility", action="append", metavar="TEST=VISIBILITY",
                   help="one test's visibility, by its spec name (repeatable)")
    b.add_argument("--stdout-visibility", choices=VISIBILITIES, help="when students see the autograder's "
                   "stdout (default hidden)")
    b.add_argument("--server", metavar="URL", help="service: the grading service's URL")
    b.add_argument("--token", help="service: a course submit token (or set NKI_GRADER_COURSE_TOKEN)")
    b.add_argument("--service-assignment", metavar="NAME",
                   help="service: the assignment's name on the service (default: the spec's)")
    b.add_argument("--service-timeout", type=float, default=420.0, metavar="SECONDS",
                   help="service: how long to wait for the service's grade (default 420: with the grader's "
                        "margins, Gradescope's default 10-minute timeout)")
    b.add_argument("--no-service-check", action="store_true",
                   help="service: build without asking the service whether the token, the assignment and its spec "
                        "are right (by default a mismatch refuses the build; a service that cannot be reached "
                        "only warns)")
    b.set_defaults(func=_build)
    r = commands.add_parser("run", help="grade the submission at $NKI_GRADESCOPE_ROOT (what run_autograder does)")
    r.set_defaults(func=_run)
    c = commands.add_parser("check", help="check a results.json against Gradescope's documented format")
    c.add_argument("path", help="the results.json to check")
    c.set_defaults(func=_check)


def _fail(err: GraderInputError) -> int:
    print(f"grader: {err}", file=sys.stderr)
    return 2


def _build(args) -> int:
    from . import build, fit
    for item in args.test_visibility or ():
        if "=" not in item or item.partition("=")[2] not in VISIBILITIES:
            return _fail(GraderInputError(f"--test-visibility {item}: expected TEST=VISIBILITY",
                                          f"VISIBILITY is one of {', '.join(VISIBILITIES)}."))
    out = Path(args.output)
    if not out.parent.resolve().is_dir():
        return _fail(GraderInputError(f"-o {out}: the folder {out.parent} does not exist",
                                      "Create it or write the zip somewhere else."))
    try:
        raw, spec = build.spec_source(args.assignment)
        config = build.make_config(args, spec)
        checked = ""
        if config.service is not None and not args.no_service_check:
            from .service import check_service
            checked = check_service(config.service, spec)
        data = build.make_zip(config, raw, spec)
    except GraderInputError as err:
        return _fail(err)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(out)
    print(f"wrote {out} ({len(data) / 1e6:.1f} MB): {config.mode} mode, assignment {spec.assignment} "
          f"spec_version {spec.spec_version} thresholds {spec.thresholds_version}")
    if checked:
        print(checked, file=sys.stderr if checked.startswith("warning") else sys.stdout)
    for line in fit.advice(spec, config):
        print(line)
    return 0


def _run(_args) -> int:
    from . import run
    return run.main()


def _check(args) -> int:
    from . import results
    try:
        data = json.loads(Path(args.path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        print(f"grader: cannot read {args.path}: {err}", file=sys.stderr)
        return 2
    try:
        found = results.problems(data)
    except ImportError:
        print("grader: checking needs the jsonschema package: pip install jsonschema", file=sys.stderr)
        return 2
    for line in found:
        print(line)
    print(f"{args.path}: {'valid' if not found else f'{len(found)} problems'}")
    return 1 if found else 0
