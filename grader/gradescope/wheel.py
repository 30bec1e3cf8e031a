"""A wheel of the grading core, built from the installed tree, for setup.sh to install in
Gradescope's container: grader, nkisim and the NumPy ground truth, and nothing a student
must not read (no reference kernels: in a container without namespaces a student's process
can read every installed file). Pure Python, so one py3-none-any wheel serves every image."""
from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import io
import zipfile
from pathlib import Path

import grader

PACKAGES = ("grader", "nkisim")
# the simulator's error bands (grader.bands) ride with the grading core they are read by
EXTRA_FILES = ("reference_kernels/__init__.py", "reference_kernels/numpy_reference.py", "grader/fidelity_bands.json")
RUNTIME_REQUIREMENTS = ("numpy", "ml_dtypes", "threadpoolctl", "executing", "sortedcontainers", "pyseccomp")
EPOCH = (1980, 1, 1, 0, 0, 0)


def _source_root() -> Path:
    return Path(grader.__file__).resolve().parent.parent


def version() -> str:
    try:
        return importlib.metadata.version("nki-grader")
    except importlib.metadata.PackageNotFoundError:
        return "0.0.0"


def pinned_requirements() -> list[str]:
    """The runtime dependencies at the versions this grader runs with (the thresholds were
    checked against them), for requirements.txt."""
    pins = []
    for name in RUNTIME_REQUIREMENTS:
        try:
            pins.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            raise RuntimeError(f"{name} is not installed here, so its version cannot be pinned; "
                               f"install nki-grader with its dependencies first") from None
    return pins


def _files() -> list[tuple[str, bytes]]:
    root = _source_root()
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*")):
            rel = path.relative_to(root).as_posix()
            if path.is_file() and "__pycache__" not in rel and path.suffix in (".py", ".toml"):
                found.append((rel, path.read_bytes()))
    for rel in EXTRA_FILES:
        found.append((rel, (root / rel).read_bytes()))
    return found


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build() -> tuple[str, bytes]:
    """(file name, bytes) of the wheel."""
    ver = version()
    dist = f"nki_grader-{ver}.dist-info"
    metadata = "\n".join(["Metadata-Version: 2.1", "Name: nki-grader", f"Version: {ver}",
                          "Summary: NKI kernel grader (grading core for a Gradescope autograder)",
                          "Requires-Python: >=3.11", *(f"Requires-Dist: {r}" for r in RUNTIME_REQUIREMENTS)]) + "\n"
    entries = [*_files(),
               (f"{dist}/METADATA", metadata.encode()),
               (f"{dist}/WHEEL", b"Wheel-Version: 1.0\nGenerator: nki-grader\nRoot-Is-Purelib: true\n"
                                 b"Tag: py3-none-any\n"),
               (f"{dist}/entry_points.txt", b"[console_scripts]\ngrader = grader.cli:main\nnkisim = nkisim.cli:main\n"),
               (f"{dist}/top_level.txt", b"grader\nnkisim\nreference_kernels\n")]
    record = "".join(f"{name},{_digest(data)},{len(data)}\n" for name, data in entries) + f"{dist}/RECORD,,\n"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in [*entries, (f"{dist}/RECORD", record.encode())]:
            info = zipfile.ZipInfo(name, EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return f"nki_grader-{ver}-py3-none-any.whl", out.getvalue()
