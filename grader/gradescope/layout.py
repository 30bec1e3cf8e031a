"""Where things are in Gradescope's container. Gradescope uses /autograder; tests and local
trials set NKI_GRADESCOPE_ROOT to another folder laid out the same way."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

ROOT_ENV = "NKI_GRADESCOPE_ROOT"
DEFAULT_ROOT = "/autograder"
CONFIG_NAME = "nki_gradescope.json"


@dataclass(frozen=True)
class Layout:
    root: Path

    @classmethod
    def from_env(cls) -> "Layout":
        return cls(Path(os.environ.get(ROOT_ENV) or DEFAULT_ROOT))

    @property
    def source(self) -> Path:           # the unpacked zip
        return self.root / "source"

    @property
    def submission(self) -> Path:       # the student's files, as uploaded
        return self.root / "submission"

    @property
    def results_dir(self) -> Path:
        return self.root / "results"

    @property
    def results(self) -> Path:
        return self.results_dir / "results.json"

    @property
    def metadata(self) -> Path:         # who submitted, when, the assignment's dates
        return self.root / "submission_metadata.json"

    @property
    def config(self) -> Path:
        return self.source / CONFIG_NAME

    @property
    def venv(self) -> Path:             # setup.sh installs the grader here (outside source/, which is root-only)
        return self.root / "nki-venv"
