"""What `pip install .` installs (not the editable checkout the tests run from) holds every data
file our packages read at run time: specs, problem folders' problem.toml, templates, the
fidelity bands, migrations. A file missing there breaks every non-editable install, Docker's
image among them, while every test here still passes."""
from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("grader", "nkisim", "store", "workers", "web", "service", "reference_kernels", "student_template")
CODE = {".py", ".pyc"}


def _checkout(into: Path) -> list[str]:
    """The files git tracks (or would: new, not ignored) copied to a fresh folder, so no build
    folder left by an earlier build hides a file the package data misses. Their paths."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    for path in files:
        source = ROOT / path
        if source.is_file():
            (into / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / path)
    return files


def test_the_wheel_holds_every_data_file_of_our_packages(tmp_path):
    tree, out = tmp_path / "tree", tmp_path / "wheel"
    files = _checkout(tree)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(tree)],
                   check=True, capture_output=True, timeout=600)
    (wheel,) = out.glob("nki_grader-*.whl")
    inside = set(zipfile.ZipFile(wheel).namelist())
    tracked = [path for path in files if path.split("/")[0] in PACKAGES]
    data = [path for path in tracked if Path(path).suffix not in CODE and not path.endswith("README.md")]
    assert data, "no data files found: is this a git checkout?"
    assert [path for path in data if path not in inside] == []
