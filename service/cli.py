"""The `grader` console script: the grading core's own commands (grader/cli.py: grade, doctor,
gradescope) with the service's (workers/cli.py: worker, beat, nightly, submit, queue, migrate,
backup, restore; workers/course_tokens.py: course-token; service/serve.py: serve;
service/admin_link.py: admin-link), composed here by name, not discovered through entry points."""
from __future__ import annotations

import sys

from grader import cli as grader_cli
from workers import cli as workers_cli
from workers import course_tokens

from . import admin_link, serve

COMMANDS = (serve.register, *workers_cli.COMMANDS, course_tokens.register, admin_link.register)


def main(argv: list[str] | None = None) -> int:
    return grader_cli.main(argv, commands=COMMANDS)


if __name__ == "__main__":
    sys.exit(main())
