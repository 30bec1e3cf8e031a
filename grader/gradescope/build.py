"""`grader gradescope build`: the autograder zip Gradescope runs per submission.

    setup.sh              installs the grader below (Gradescope runs it once per image)
    run_autograder        grades one submission into results/results.json
    nki_gradescope.json   the mode and its settings (config.py)
    spec.toml             the assignment's spec, byte for byte (its sha256 is in every report)
    requirements.txt      the runtime dependencies, pinned to the versions this grader runs with
    wheels/nki_grader-*.whl   the grading core (wheel.py)
"""
from __future__ import annotations

import datetime as dt
import io
import json
import os
import secrets
import zipfile
from pathlib import Path, PurePosixPath

from .. import spec as specs
from ..errors import GraderInputError
from . import config as configs
from . import scripts, wheel
from .config import Config, ServiceConfig, Visibility

EPOCH = (1980, 1, 1, 0, 0, 0)


def spec_source(name_or_path: str) -> tuple[bytes, object]:
    """The spec's TOML bytes and the loaded spec (a bundled name or a file path)."""
    spec = specs.load(name_or_path)
    return spec.toml.encode("utf-8"), spec          # the file's bytes: its hash is the spec's


def spec_visibility(spec) -> Visibility:
    """Visibility from the spec's optional [gradescope] table:

        [gradescope]
        visibility = "visible"                  # the default of every test
        stdout_visibility = "hidden"
        tests = { perf_224_pool1_float16 = "after_due_date" }
    """
    table = spec.gradescope
    tests = dict(table.get("tests", {}))
    unknown = sorted(set(tests) - {t.name for t in spec.tests})
    if unknown:
        raise GraderInputError(f"[gradescope] tests names tests the spec does not have: {', '.join(unknown)}",
                               f"Use the spec's test names ({', '.join(t.name for t in spec.tests)}).")
    return Visibility(table.get("visibility", "visible"), tests, table.get("stdout_visibility", "hidden"))


def make_config(args, spec) -> Config:
    visibility = spec_visibility(spec)
    if args.visibility:
        visibility.default = args.visibility
    if args.stdout_visibility:
        visibility.stdout = args.stdout_visibility
    for item in args.test_visibility or ():
        name, _, value = item.partition("=")
        if name not in {t.name for t in spec.tests}:
            raise GraderInputError(f"--test-visibility {item}: the spec has no test {name!r}",
                                   f"Use one of {', '.join(t.name for t in spec.tests)}.")
        visibility.tests[name] = value
    service = None
    if args.mode == "service":
        token = args.token or os.environ.get("NKI_GRADER_COURSE_TOKEN", "")
        if not args.server or not token:
            raise GraderInputError("service mode needs the service's URL and a course submit token",
                                   "Pass --server URL and --token TOKEN (or set NKI_GRADER_COURSE_TOKEN); an admin "
                                   "creates the token on the service with `grader course-token create --course NAME`.")
        service = ServiceConfig(args.server.rstrip("/"), token, args.service_assignment or spec.assignment,
                                args.service_timeout)
    data = Config(mode=args.mode, assignment=spec.assignment, time_budget_s=args.time_budget,
                  config_timeout_s=args.config_timeout, seed=secrets.randbits(62) if args.fixed_seed else None,
                  jobs=args.jobs, child_memory_mb=args.child_memory_mb, visibility=visibility, service=service,
                  grader_version=wheel.version(),
                  built_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")).to_json()
    return configs.parse(data)      # the same checks run_autograder makes: a bad option fails here


def problem_members(spec) -> list[tuple[str, bytes, int]]:
    """The course problem folders the spec names by path, in the zip where the spec finds them
    (beside spec.toml, at the same relative path): problem.toml and the top-level .py files,
    what the grader reads and the folder's sha256 covers; never its solutions or template. A
    problem installed on this machine by name is refused: the autograder's container lacks it."""
    from .. import problems
    from ..spec import read_toml
    refs = sorted({t["problem"] for t in read_toml(spec.toml, spec.assignment).get("tests", [])
                   if isinstance(t, dict) and isinstance(t.get("problem"), str)} - set(problems.BUNDLED))
    members = []
    for ref in refs:
        rel = PurePosixPath(ref.replace(os.sep, "/"))
        if not problems.is_path(ref):
            raise GraderInputError(f"the spec's problem {ref!r} is a folder installed on this machine "
                                   f"(NKI_GRADER_PROBLEM_DIRS), which the autograder's container does not have",
                                   "Name the folder by its path relative to the spec file: the build puts it in "
                                   "the zip.")
        if rel.is_absolute() or ".." in rel.parts or not spec.base:
            raise GraderInputError(f"the spec's problem folder {ref!r} is not inside the spec file's folder, so "
                                   f"the zip cannot hold it where the spec looks",
                                   "Move the folder under the spec file's folder and name it by a relative path "
                                   "without '..'.")
        folder = Path(spec.base) / ref
        for file in [folder / "problem.toml", *sorted(p for p in folder.glob("*.py") if p.is_file())]:
            members.append((str(PurePosixPath(*[part for part in rel.parts if part != "."]) / file.name),
                            file.read_bytes(), 0o644))
    return members


def make_zip(config: Config, raw_spec: bytes, spec=None) -> bytes:
    wheel_name, wheel_bytes = wheel.build()
    members = [("setup.sh", scripts.SETUP_SH.encode(), 0o755),
               ("run_autograder", scripts.RUN_AUTOGRADER.encode(), 0o755),
               (configs.SPEC_NAME, raw_spec, 0o644),
               ("nki_gradescope.json", (json.dumps(config.to_json(), indent=2) + "\n").encode(), 0o600),
               ("requirements.txt", ("\n".join(wheel.pinned_requirements()) + "\n").encode(), 0o644),
               (f"wheels/{wheel_name}", wheel_bytes, 0o644)]
    if spec is not None:
        members += problem_members(spec)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data, mode in members:
            info = zipfile.ZipInfo(name, EPOCH)
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return out.getvalue()
