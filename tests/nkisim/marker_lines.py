"""Kernels in the simulator's tests mark the lines an error must point at with a trailing
comment `# <tag>`; `line_of = marker_lines(__file__)` finds them in the test's own file."""
from __future__ import annotations

from pathlib import Path
from typing import Callable


def marker_lines(path: str) -> Callable[[str], int]:
    lines = Path(path).read_text().splitlines()

    def line_of(tag: str) -> int:
        """The line of the file that ends with the marker comment `# <tag>`."""
        hits = [n for n, text in enumerate(lines, 1) if text.rstrip().endswith(f"# <{tag}>")]
        assert len(hits) == 1, f"marker <{tag}> found {len(hits)} times"
        return hits[0]
    return line_of
