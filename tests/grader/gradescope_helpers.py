"""Running an autograder zip the way Gradescope does, in a folder standing in for /autograder:
the zip unpacked to ROOT/source, setup.sh run there as root, run_autograder copied to
ROOT/run_autograder and run from ROOT with the submission's files in ROOT/submission."""
from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SMALL_SPEC = REPO / "tests" / "grader" / "gradescope_specs" / "small.toml"
NO_NAMESPACES = REPO / "tests" / "grader" / "no_namespaces.py"
OPTIMIZED = (REPO / "reference_kernels" / "conv2d_optimized.py").read_bytes()
TRANSPOSE = (REPO / "reference_kernels" / "transpose.py").read_bytes()


def system_python() -> str:
    """An interpreter every user may run (Gradescope's is /usr/bin/python3): a student's process
    in the no-namespace fallback runs under another uid and must read its standard library."""
    for candidate in ("/usr/bin/python3.13", "/usr/bin/python3.12", "/usr/bin/python3.11", "/usr/bin/python3"):
        if os.path.exists(candidate) and subprocess.run(
                [candidate, "-c", "import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))"],
                capture_output=True).returncode == 0:
            return candidate
    return sys.executable


def build(out: Path, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "grader.cli", "gradescope", "build", "-o", str(out), *args],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done


def asst4_tar(conv2d: bytes | None = OPTIMIZED, kernels: bytes | None = TRANSPOSE) -> bytes:
    """asst4.tar.gz as the handout's script packs it."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for path, data in (("part2/conv2d.py", conv2d), ("part1/kernels.py", kernels)):
            if data is not None:
                info = tarfile.TarInfo(path)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def metadata(email: str = "ada@example.edu", name: str = "Ada L", sid: str = "S123") -> dict:
    """/autograder/submission_metadata.json, the fields Gradescope documents."""
    return {"id": 123456, "created_at": "2026-11-20T10:00:00.000000-08:00", "submission_method": "upload",
            "assignment": {"id": 42, "title": "asst4", "due_date": "2026-12-01T23:59:00.000000-08:00",
                           "late_due_date": None, "release_date": "2026-11-01T00:00:00.000000-08:00",
                           "total_points": "70.0", "group_size": None, "group_submission": False, "course_id": 7},
            "users": [{"email": email, "id": 99, "name": name, "sid": sid}], "previous_submissions": []}


class GradescopeRoot:
    """One stand-in for /autograder, world-traversable as Gradescope's is."""

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="nki-gradescope-", dir="/tmp"))
        os.chmod(self.path, 0o755)
        self.installed = False

    def env(self, **extra) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NKI_", "PYTHON"))}
        env.update(NKI_GRADESCOPE_ROOT=str(self.path), **extra)
        return env

    def unpack(self, zip_path: Path) -> None:
        """A new zip in source/ (as Gradescope rebuilds the image); the installed grader stays."""
        source = self.path / "source"
        shutil.rmtree(source, ignore_errors=True)
        source.mkdir()
        with zipfile.ZipFile(zip_path) as zf:
            for info in zf.infolist():
                zf.extract(info, source)
                os.chmod(source / info.filename, (info.external_attr >> 16) & 0o777 or 0o644)
        shutil.copy2(source / "run_autograder", self.path / "run_autograder")

    def setup(self) -> subprocess.CompletedProcess:
        done = subprocess.run(["bash", "setup.sh"], cwd=self.path / "source", capture_output=True, text=True,
                              env=self.env(NKI_GRADESCOPE_PYTHON=system_python()), timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        self.installed = True
        return done

    def run(self, files: dict[str, bytes], *, meta: dict | None = None, no_namespaces: bool = False,
            timeout: float = 900) -> tuple[dict, str]:
        """run_autograder on these submission files; (results.json, its stdout)."""
        for name in ("submission", "results"):
            shutil.rmtree(self.path / name, ignore_errors=True)
        (self.path / "submission").mkdir()
        (self.path / "results").mkdir()
        for name, data in files.items():
            target = self.path / "submission" / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        (self.path / "submission_metadata.json").write_text(json.dumps(meta or metadata()))
        command = [str(self.path / "run_autograder")]
        if no_namespaces:
            command = [sys.executable, str(NO_NAMESPACES), *command]
        done = subprocess.run(command, cwd=self.path, env=self.env(), capture_output=True, text=True,
                              timeout=timeout)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return json.loads((self.path / "results" / "results.json").read_text()), done.stdout + done.stderr

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
