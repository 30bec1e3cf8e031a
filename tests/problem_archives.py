"""Problem folders packed as a site admin uploads them, for the web and worker tests of uploads
(a module of its own in tests/, which both kinds of test import from)."""
from __future__ import annotations

import io
import zipfile
from pathlib import Path

OUTSIDE = Path(__file__).resolve().parent / "outside_problems"     # the softmax folder of tests/


def zipped_folder(folder: Path, prefix: str = "softmax/") -> bytes:
    """`folder` as `zip -r softmax.zip softmax/` packs it (prefix "" packs its files at the top)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                zf.writestr(prefix + path.relative_to(folder).as_posix(), path.read_bytes())
    return buf.getvalue()
