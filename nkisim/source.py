"""Finding the kernel author's own file:line for error messages and trace records."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


@dataclass(frozen=True, slots=True)
class SourceSite:
    filename: str
    lineno: int

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno}"

    @property
    def short(self) -> str:
        return f"{os.path.basename(self.filename)}:{self.lineno}"


_internal: dict[str, bool] = {}


def _is_internal(filename: str) -> bool:
    try:
        return _internal[filename]
    except KeyError:
        result = _internal[filename] = filename.startswith(_PACKAGE_DIR) or filename.startswith("<frozen")
        return result


def user_frame(skip: int = 1):
    """The innermost stack frame outside nkisim: the kernel's frame that called us."""
    frame = sys._getframe(skip)
    while frame is not None:
        if not _is_internal(frame.f_code.co_filename):
            return frame
        frame = frame.f_back
    return None


_sites: dict[tuple[str, int], SourceSite] = {}


def user_site(skip: int = 1) -> SourceSite | None:
    """The line of the kernel that called us (the innermost frame outside nkisim)."""
    return site_of_frame(sys._getframe(skip))


# (id of a code object, bytecode offset) -> (the code object, its SourceSite): a frame's f_lineno
# scans the code's line table from its start (~4 us at line 300 of a kernel); the offset of the
# call instruction is read directly. The entry holds the code object, so its id stays its own.
SITE_AT_OFFSET: dict[tuple[int, int], tuple] = {}


def site_of_frame(frame) -> SourceSite | None:
    """The line of the innermost frame outside nkisim, from `frame` outward: user_frame's walk
    and user_site's lookup in one function (tracing asks once per instruction). A frame found at
    a call offset seen before is outside nkisim (only those are kept): its filename is not
    looked at again."""
    internal = _internal
    while frame is not None:
        code = frame.f_code
        traced = frame.f_trace is not None      # a tracer (debugger, coverage) may set f_lineno itself
        if not traced:
            found = SITE_AT_OFFSET.get((id(code), frame.f_lasti))
            if found is not None and found[0] is code:
                return found[1]
        filename = code.co_filename
        inside = internal.get(filename)
        if inside is None:
            inside = _is_internal(filename)
        if not inside:
            site = _site(filename, frame.f_lineno)
            if not traced and len(SITE_AT_OFFSET) < 1 << 16:
                SITE_AT_OFFSET[(id(code), frame.f_lasti)] = (code, site)
            return site
        frame = frame.f_back
    return None


def _site(filename: str, lineno: int) -> SourceSite:
    """One object per line (equal by value, so sharing it changes nothing)."""
    key = (filename, lineno)
    site = _sites.get(key)
    if site is None:
        site = SourceSite(filename, lineno)
        if len(_sites) < 1 << 16:
            _sites[key] = site
    return site
