"""Reading a ``.memoryfield.zip`` someone else made, without trusting it.

A zip is checked whole before any member is used: its sha256 against a pin (when one is
given), then every entry's name and size. Refused, with a clear error: path traversal (``..``),
absolute paths, backslashes and drive letters, symbolic links, encrypted or duplicate entries,
``.md`` files inside sub-folders (a memoryfield is flat), names no file system can hold (a
component over 255 bytes, a file that is also a folder) or that only some can (two names that
differ only in case), a root folder named like a page or an index file (``listing.md/x``: the
field's own file would be a folder), and zip bombs (too many entries, an
entry or a total too large, or a compression ratio no Markdown reaches, per entry or for the
whole archive). Members are then read with running byte counts, so a header that lies about
sizes cannot get more out than it declared (nor less: that entry is damaged).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
import struct
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ..errors import ArchiveError, PinMismatchError, UnsafeArchiveError
from ..page import SPECIAL_FILES, is_debris

ZIP_SUFFIX = ".memoryfield.zip"
UT_EXTRA_ID = 0x5455
"""Info-ZIP "extended timestamp" extra field: the exact UTC mtime (DOS times are local, 2 s)."""
_READ_BLOCK = 1 << 20
SIDECAR_SUFFIXES = (".sqlite3-wal", ".sqlite3-shm", ".sqlite3-journal")
INDEX_SUFFIXES = (".sqlite3", *SIDECAR_SUFFIXES)
"""An index file and the files SQLite keeps beside it while it is open."""
MAX_NAME_BYTES = 255
"""Longest file or folder name common file systems hold (ext4, APFS, NTFS)."""


@dataclass(frozen=True)
class ZipLimits:
    """What a zip may hold before it is treated as hostile (generous for real fields)."""

    max_entries: int = 200_000
    max_entry_bytes: int = 1 << 30
    max_total_bytes: int = 4 << 30
    max_ratio: float = 200.0
    """Uncompressed/compressed size above which an entry is a bomb. Markdown deflates ~3-10x;
    a bomb of zeros reaches ~1000x."""
    ratio_min_bytes: int = 1 << 20
    """Entries smaller than this skip the ratio test (tiny repetitive files compress well and
    cannot do harm; the totals still bound them)."""


DEFAULT_LIMITS = ZipLimits()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_READ_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def normalize_pin(pin: str) -> str:
    """The 64 lowercase hex digits of a pin (``sha256:`` prefix allowed), or ArchiveError."""
    value = pin.strip().lower().removeprefix("sha256:").strip()
    if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise ArchiveError(
            f"{pin!r} is not a sha256 pin", "a pin is the 64 hex digits `deepfield pack` printed"
        )
    return value


def verify_pin(path: Path, pin: str | None, handle: IO[bytes] | None = None,
               label: str | None = None) -> str:
    """The file's sha256; raises PinMismatchError when ``pin`` is given and differs.

    With ``handle`` (the open file that will be read next) the bytes hashed are the bytes
    used: swapping the file after the check changes nothing. ``label`` names the zip in
    messages (a download's URL rather than its temporary file); default the file's name."""
    expected = normalize_pin(pin) if pin is not None else None
    if handle is not None:
        digest = hashlib.sha256()
        handle.seek(0)
        while block := handle.read(_READ_BLOCK):
            digest.update(block)
        handle.seek(0)
        actual = digest.hexdigest()
    else:
        try:
            actual = sha256_file(path)
        except FileNotFoundError:
            raise ArchiveError(f"no file {path}", "check the path of the zip") from None
    if expected is not None and not hmac.compare_digest(actual, expected):
        raise PinMismatchError(f"{label or path.name} has sha256 {actual}, "
                               f"not the pinned {expected}")
    return actual


def open_zip(path: Path, pin: str | None,
             label: str | None = None) -> tuple[zipfile.ZipFile, str]:
    """Open ``path`` once, check its pin on that open file, and read it as a zip (``label``
    names it in messages, as for verify_pin)."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise ArchiveError(f"no file {path}", "check the path of the zip") from None
    except IsADirectoryError:
        raise ArchiveError(f"{path} is a folder, not a zip", "give the .zip file") from None
    try:
        digest = verify_pin(path, pin, handle, label)
        archive = _OwnedZip(handle)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError) as exc:
        handle.close()
        raise ArchiveError(f"{label or path.name} is not a readable zip file ({exc})") from None
    except BaseException:
        handle.close()
        raise
    return archive, digest


class _OwnedZip(zipfile.ZipFile):
    """A ZipFile over a file object that it closes too (ZipFile leaves passed files open)."""

    def __init__(self, handle: IO[bytes]) -> None:
        self._handle = handle  # first: a failing __init__ still runs close() from __del__
        super().__init__(handle)

    def close(self) -> None:
        super().close()
        self._handle.close()


def close_zip(archive: zipfile.ZipFile) -> None:
    archive.close()


def check_name(name: str, *, flat: bool = True) -> str | None:
    """Why an entry name is unsafe (None when it is fine); ``flat=False`` leaves out the
    memoryfield rule that ``.md`` pages sit at the root (for debris, which is skipped)."""
    if not name or name.startswith("/") or "\\" in name or ":" in name:
        return "an absolute path, backslash or drive letter"
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "control characters in the name"
    parts = name.rstrip("/").split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "a '..', '.' or empty path component (path traversal)"
    if any(len(part.encode("utf-8")) > MAX_NAME_BYTES for part in parts):
        return f"a name with a component over {MAX_NAME_BYTES} bytes"
    if flat and len(parts) > 1 and parts[-1].endswith(".md") and not name.endswith("/"):
        return "a .md page inside a sub-folder (memoryfields are flat: pages at the zip's root)"
    if flat and (len(parts) > 1 or name.endswith("/")) and parts[0].endswith((".md",
                                                                              *INDEX_SUFFIXES)):
        # A folder listing.md or <model>.sqlite3 takes the place of the field's own file:
        # every command would then fail on it ("Is a directory").
        return "inside a folder named like a page or an index file"
    return None


def is_page_member(name: str) -> bool:
    """A page: a ``.md`` entry at the zip's root other than index.md and listing.md."""
    return "/" not in name and name.endswith(".md") and name not in SPECIAL_FILES


def check_has_pages(infos: list[zipfile.ZipInfo], label: str) -> None:
    """ArchiveError unless the entries hold a page: a memoryfield holds at least one (an
    empty zip must neither unpack into an empty field nor empty a remote mirror)."""
    if not any(is_page_member(i.filename) for i in infos if not i.is_dir()):
        raise ArchiveError(f"{label} holds no pages",
                           "a memoryfield zip holds at least one .md page at its root")


def is_symlink(info: zipfile.ZipInfo) -> bool:
    return stat.S_ISLNK(info.external_attr >> 16)


def is_ignored(name: str) -> bool:
    """Entries a reader skips, as the spec says of debris: macOS Finder's ``__MACOSX/``
    resource forks, ``Thumbs.db``, ``desktop.ini``, editor backups and sync conflicts."""
    parts = name.rstrip("/").split("/")
    return parts[0] == "__MACOSX" or is_debris(parts[-1])


def is_hidden(name: str) -> bool:
    """Dot-files and dot-folders (``.deepfield/`` caches, ``.DS_Store``) are skipped, not used."""
    return any(part.startswith(".") for part in name.split("/"))


def checked_members(
    archive: zipfile.ZipFile, label: str, limits: ZipLimits
) -> list[zipfile.ZipInfo]:
    """The file entries of ``archive`` after checking every entry; raises UnsafeArchiveError."""
    infos = archive.infolist()
    if len(infos) > limits.max_entries:
        raise UnsafeArchiveError(f"{label}: {len(infos)} entries (limit {limits.max_entries})")
    seen: set[str] = set()
    folded: set[str] = set()
    total = 0
    files: list[zipfile.ZipInfo] = []
    for info in infos:
        name = info.filename
        if is_ignored(name) and check_name(name, flat=False) is None:
            continue  # safe to skip: debris is never extracted, whatever folder it is in
        problem = check_name(name)
        if problem is None and is_symlink(info):
            problem = "a symbolic link"
        if problem is None and info.flag_bits & 0x1:
            problem = "an encrypted entry"
        if problem is None and name in seen:
            problem = "a duplicate entry"
        if problem is None and not info.is_dir() and name.casefold() in folded:
            # p.md and P.md: two files on Linux, a clash on macOS and Windows
            problem = "the name of another entry in another case"
        if problem is not None:
            raise UnsafeArchiveError(f"{label}: entry {name!r} is {problem}")
        seen.add(name)
        if not info.is_dir():
            folded.add(name.casefold())
        if info.is_dir():
            continue
        if info.file_size > limits.max_entry_bytes:
            raise UnsafeArchiveError(
                f"{label}: entry {name!r} unpacks to {info.file_size} bytes "
                f"(limit {limits.max_entry_bytes})"
            )
        if info.file_size >= limits.ratio_min_bytes:
            ratio = info.file_size / max(info.compress_size, 1)
            if ratio > limits.max_ratio:
                raise UnsafeArchiveError(
                    f"{label}: entry {name!r} has compression ratio {ratio:.0f}:1 "
                    f"(limit {limits.max_ratio:.0f}:1), a zip bomb"
                )
        total += info.file_size
        if total > limits.max_total_bytes:
            raise UnsafeArchiveError(
                f"{label}: unpacks to more than {limits.max_total_bytes} bytes in all"
            )
        if not is_hidden(name):
            files.append(info)
    _check_folders(seen, label)
    _check_total_ratio(archive, total, label, limits)
    return files


def _check_folders(names: set[str], label: str) -> None:
    """Refuse a file that is also a folder of other entries (``a`` and ``a/b``): extracting
    it would fail half-way, or on a case-insensitive file system, overwrite."""
    files = {n.casefold() for n in names if not n.endswith("/")}
    for name in sorted(names):
        parts = name.rstrip("/").split("/")
        for depth in range(1, len(parts) + name.endswith("/")):
            folder = "/".join(parts[:depth])
            if folder.casefold() in files:
                raise UnsafeArchiveError(
                    f"{label}: entry {folder!r} is a file and also a folder of {name!r}"
                )


def _check_total_ratio(archive: zipfile.ZipFile, total: int, label: str,
                       limits: ZipLimits) -> None:
    """Many small entries (each under the per-entry test) or entries that share their
    compressed bytes add up to a bomb too: compare the total with the archive's own size."""
    if total < limits.ratio_min_bytes:
        return
    size = _archive_size(archive)
    if size and total / size > limits.max_ratio:
        raise UnsafeArchiveError(
            f"{label}: unpacks to {total} bytes from {size} ({total / size:.0f}:1, limit "
            f"{limits.max_ratio:.0f}:1), a zip bomb"
        )


def _archive_size(archive: zipfile.ZipFile) -> int:
    handle = archive.fp
    if handle is None:
        return 0
    try:
        return os.fstat(handle.fileno()).st_size
    except (AttributeError, OSError, ValueError):  # an in-memory zip: its buffer's length
        getbuffer = getattr(handle, "getbuffer", None)
        return len(getbuffer()) if getbuffer is not None else 0


@contextmanager
def open_checked(
    path: Path, *, pin: str | None = None, limits: ZipLimits = DEFAULT_LIMITS
) -> Iterator[tuple[zipfile.ZipFile, list[zipfile.ZipInfo], str]]:
    """Verify the pin, open the zip and check every entry: (zip, file entries, sha256)."""
    archive, digest = open_zip(path, pin)
    try:
        yield archive, checked_members(archive, path.name, limits), digest
    finally:
        close_zip(archive)


def copy_member(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, out: IO[bytes], label: str
) -> int:
    """Stream one checked entry into ``out``; never more bytes than its header declared."""
    written = 0
    try:
        with archive.open(info) as source:
            while block := source.read(_READ_BLOCK):
                written += len(block)
                if written > info.file_size:
                    raise UnsafeArchiveError(
                        f"{label}: entry {info.filename!r} holds more than it declares"
                    )
                out.write(block)
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, NotImplementedError) as exc:
        if isinstance(exc, OSError) and exc.filename:
            raise
        raise ArchiveError(f"{label}: entry {info.filename!r} is damaged ({exc})") from None
    if written != info.file_size:  # zipfile checks the CRC, but not a size declared too large
        raise ArchiveError(f"{label}: entry {info.filename!r} is damaged (it holds {written} "
                           f"bytes, its header declares {info.file_size})")
    return written


def verify_members(archive: zipfile.ZipFile, infos: list[zipfile.ZipInfo], label: str) -> None:
    """Read every checked entry through once, as unpacking does: a damaged entry (a bad
    CRC-32, a size its header misstates) is refused before any of the zip is used, not
    when (or if) that entry is read."""
    with open(os.devnull, "wb") as sink:  # the bytes are checked, not kept
        for info in infos:
            if not info.is_dir():
                copy_member(archive, info, sink, label)


def read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, label: str) -> bytes:
    import io

    buffer = io.BytesIO()
    copy_member(archive, info, buffer, label)
    return buffer.getvalue()


def entry_mtime(info: zipfile.ZipInfo) -> float:
    """Seconds since the epoch: the exact UTC time when the entry has one, else its DOS time."""
    extra = info.extra
    offset = 0
    while offset + 4 <= len(extra):
        tag, size = struct.unpack_from("<HH", extra, offset)
        body = extra[offset + 4 : offset + 4 + size]
        if tag == UT_EXTRA_ID and len(body) >= 5 and body[0] & 1:
            return float(struct.unpack_from("<i", body, 1)[0])  # signed: before 1970 too
        offset += 4 + size
    try:
        return time.mktime((*info.date_time, 0, 0, -1))
    except (OverflowError, ValueError):
        return 0.0


def ut_extra(mtime: float) -> bytes:
    """The extended-timestamp extra field for ``mtime`` (what ``entry_mtime`` reads back)."""
    # Info-ZIP's field is a signed 32-bit count: 1901 to 2038 exactly, clamped beyond.
    return struct.pack("<HHBi", UT_EXTRA_ID, 5, 1, max(-(2**31), min(int(mtime), 2**31 - 1)))
