"""An archive nobody vouches for, read into memory within caps: a student's submission
(grader.submission) and a site admin's problem folder (grader.problems.archive) both go through
here, each with its own caps and its own words for a refusal.

A .zip, or a tar that is plain or compressed with gzip, bzip2 or xz (told by its first bytes,
not its name). Nothing is extracted: each member comes back with its path split into safe
parts and a reader that never returns more than the caller's cap. Refused, before anything is
read past it: a compressed stream inflating past the cap (a compression bomb), more members
than allowed, members declaring more bytes together than allowed, a link, device or FIFO, an
absolute path or one with '..', an encrypted zip member (when read).
"""
from __future__ import annotations

import bz2
import gzip
import io
import lzma
import re
import stat
import tarfile
import zipfile
import zlib
from dataclasses import dataclass
from typing import Callable, Protocol

_MIB = 1024 * 1024
# A decompressed tar stream holds headers and padding besides member data: a few hundred members
# with long-name and pax headers stay far below this slack.
TAR_STREAM_SLACK = 1 * _MIB


@dataclass(frozen=True)
class Limits:
    members: int            # every entry counts, directories included
    unpacked_bytes: int     # all members together, uncompressed


class Refusals(Protocol):
    """The caller's exceptions for each way an archive is refused (what is wrong, how to fix it)."""

    def corrupt(self, detail: str) -> Exception: ...
    def too_many_members(self) -> Exception: ...
    def too_large_unpacked(self, detail: str) -> Exception: ...
    def bad_member_type(self, name: str, kind: str) -> Exception: ...
    def absolute_path(self, name: str) -> Exception: ...
    def parent_path(self, name: str) -> Exception: ...
    def encrypted(self, name: str) -> Exception: ...


@dataclass
class Member:
    name: str               # as stored in the archive, escaped by show()
    parts: tuple            # normalised path components
    size: int               # declared uncompressed size (0 for a folder)
    read: Callable[[int], bytes] | None     # read(cap): at most cap bytes; None for a folder. Corrupt
    # member data (a CRC error, a truncated stream) is the caller's corrupt() refusal


def read_members(data: bytes, limits: Limits, refuse: Refusals) -> list[Member]:
    head = data[:6]
    if head.startswith(b"PK"):
        return _zip_members(data, limits, refuse)
    if head.startswith(b"\x1f\x8b"):
        raw = _decompress(gzip.GzipFile(fileobj=io.BytesIO(data)), limits, refuse)
    elif head.startswith(b"BZh"):
        raw = _decompress(bz2.BZ2File(io.BytesIO(data)), limits, refuse)
    elif head.startswith(b"\xfd7zXZ\x00"):
        raw = _decompress(lzma.LZMAFile(io.BytesIO(data)), limits, refuse)
    else:
        raw = data
    return _tar_members(raw, limits, refuse)


def show(name: str) -> str:
    """A name safe to print and to store as JSON: control characters and undecodable bytes
    (tarfile keeps them as lone surrogates) become backslash escapes."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in name)


def describe(err: BaseException) -> str:
    text = str(err).strip()
    return text or type(err).__name__


def _decompress(stream, limits: Limits, refuse: Refusals) -> bytes:
    cap = limits.unpacked_bytes + TAR_STREAM_SLACK
    try:
        raw = stream.read(cap + 1)         # never more than the cap: compression bombs stop here
    except (OSError, EOFError, zlib.error, lzma.LZMAError, ValueError) as err:
        raise refuse.corrupt(describe(err)) from None
    if len(raw) > cap:
        raise refuse.too_large_unpacked(f"more than {cap // _MIB} MiB")
    return raw


def _tar_members(raw: bytes, limits: Limits, refuse: Refusals) -> list[Member]:
    try:
        tf = tarfile.open(fileobj=io.BytesIO(raw), mode="r:")
    except (tarfile.TarError, EOFError, OSError, ValueError) as err:
        raise refuse.corrupt(describe(err)) from None
    members, total = [], 0
    while True:
        try:
            info = tf.next()               # one header at a time: the member cap holds as it reads
        except (tarfile.TarError, EOFError, OSError, ValueError) as err:
            raise refuse.corrupt(describe(err)) from None
        if info is None:
            break
        if len(members) >= limits.members:
            raise refuse.too_many_members()
        parts = _safe_parts(info.name, refuse)
        if not (info.isreg() or info.isdir()):
            raise refuse.bad_member_type(info.name, _tar_kind(info))
        size = info.size if info.isreg() else 0
        total += size
        if total > limits.unpacked_bytes:
            raise refuse.too_large_unpacked("its members declare more than that")
        members.append(Member(show(info.name), parts, size,
                              _guarded(lambda cap, i=info: tf.extractfile(i).read(cap), show(info.name), refuse)
                              if info.isreg() else None))
    return members


def _zip_members(data: bytes, limits: Limits, refuse: Refusals) -> list[Member]:
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError,
            NotImplementedError) as err:
        raise refuse.corrupt(describe(err)) from None
    if len(infos) > limits.members:
        raise refuse.too_many_members()
    members, total = [], 0
    for info in infos:
        parts = _safe_parts(info.filename, refuse)
        mode = info.external_attr >> 16
        kind = _mode_kind(mode) if mode else None     # no type bits: a plain file
        if kind is not None:
            raise refuse.bad_member_type(info.filename, kind)
        total += info.file_size
        if total > limits.unpacked_bytes:
            raise refuse.too_large_unpacked("its members declare more than that")
        is_dir = info.is_dir()
        members.append(Member(show(info.filename), parts, 0 if is_dir else info.file_size,
                              None if is_dir else _zip_reader(zf, info, refuse)))
    return members


def _zip_reader(zf: zipfile.ZipFile, info: zipfile.ZipInfo, refuse: Refusals):
    def inflate(cap: int) -> bytes:
        with zf.open(info) as f:   # zipfile checks the CRC once the member is read to its end
            return f.read(cap)
    guarded = _guarded(inflate, show(info.filename), refuse)

    def read(cap: int) -> bytes:
        if info.flag_bits & 0x1:
            raise refuse.encrypted(info.filename)
        return guarded(cap)
    return read


def _guarded(read: Callable[[int], bytes], name: str, refuse: Refusals) -> Callable[[int], bytes]:
    """`read`, with whatever corrupt member data raises turned into the caller's refusal."""
    def guarded(cap: int) -> bytes:
        try:
            return read(cap)
        except Exception as err:
            raise refuse.corrupt(f"{name} cannot be read ({describe(err)})") from None
    return guarded


def _safe_parts(name: str, refuse: Refusals) -> tuple:
    path = name.replace("\\", "/")
    if path.startswith("/") or re.match(r"[A-Za-z]:", path):
        raise refuse.absolute_path(name)
    parts = tuple(p for p in path.split("/") if p not in ("", "."))
    if ".." in parts:
        raise refuse.parent_path(name)
    return parts


def _tar_kind(info: tarfile.TarInfo) -> str:
    if info.issym():
        return f"a symbolic link (to {info.linkname!r})"
    if info.islnk():
        return f"a hard link (to {info.linkname!r})"
    if info.ischr() or info.isblk():
        return "a device file"
    if info.isfifo():
        return "a FIFO"
    return f"an entry of unsupported type {info.type!r}"


def _mode_kind(mode: int) -> str | None:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device file"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return None
