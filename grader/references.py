"""The course's reference kernels as grading uses them (the nightly regression, `grader doctor`):
which reference stands for which threshold tier, its file for each kernel function a spec asks
for, which tests it must pass, and a submission archive of it. Written once here; the kernels
themselves are in reference_kernels/, those of each NKI dialect in its own folder under the
same file names (reference_kernels/nki06/ for NKI 0.6), so a spec's dialect picks them."""
from __future__ import annotations

import importlib.util
import io
import tarfile
from pathlib import Path

from nkisim.dialects import CURRENT, LEGACY

from .vocabulary import TestKind, Tier

TIER_OF_REFERENCE = {"conv2d_optimized": Tier.OPTIMIZED, "conv2d_relaxed": Tier.RELAXED}
# reference -> {kernel function a spec asks for: its file in reference_kernels/}
FILES = {
    "conv2d_optimized": {"fused_conv2d_maxpool": "conv2d_optimized.py", "matrix_transpose": "transpose.py"},
    "conv2d_relaxed": {"fused_conv2d_maxpool": "conv2d_relaxed.py", "matrix_transpose": "transpose.py"},
}
REFERENCE_OF_TIER = {tier: reference for reference, tier in TIER_OF_REFERENCE.items()}
# the folder under reference_kernels/ of each NKI dialect's references
FOLDER_OF_DIALECT = {LEGACY.name: ".", CURRENT.name: "nki06"}


def stands_for(reference: str, test) -> bool:
    """Which tests a reference kernel must pass: the optimized one every test; the relaxed one
    (a plain kernel, the relaxed tier's yardstick) all but extra credit, which it is not meant
    to reach. A failure outside these is no regression."""
    return TIER_OF_REFERENCE.get(reference) == Tier.OPTIMIZED or test.kind != TestKind.EXTRA_CREDIT


def reference_dir(dialect: str = LEGACY.name) -> Path:
    """The folder of a dialect's references, found without importing the package (the kernel
    modules import NKI)."""
    spec = importlib.util.find_spec("reference_kernels")
    return (Path(list(spec.submodule_search_locations)[0]) / FOLDER_OF_DIALECT[dialect]).resolve()


def archive(spec, reference: str) -> bytes:
    """A submission archive holding this reference's kernels, in the spec's dialect, at the
    spec's archive paths."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for fs in spec.files.values():
            name = next((FILES[reference][fn] for fn in fs.functions if fn in FILES[reference]), None)
            if name is None:
                continue
            data = (reference_dir(spec.dialect) / name).read_bytes()
            info = tarfile.TarInfo(fs.archive_path)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()
