"""Local folders and local ``.memoryfield.zip`` files as transports.

A folder's timestamps are file mtimes (spec: local files and sync-based transports). A zip is
pin-checked and checked whole (zipsafe.py) when opened, every entry read through once as
``unpack`` does, and refused without a page; its timestamps are the entries' own
(the exact UTC time ``deepfield pack`` stores, else the DOS time) and its version tokens the
entries' CRC-32 and size.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

from ...errors import RemoteUnavailableError
from ..zipsafe import (
    DEFAULT_LIMITS,
    ZipLimits,
    check_has_pages,
    checked_members,
    close_zip,
    entry_mtime,
    open_zip,
    read_member,
    verify_members,
)
from .base import MAX_FILE_BYTES, RemoteFile, Transport, check_file_name


class LocalTransport(Transport):
    name = "local"

    def __init__(self, source: str, workdir: Path, pin: str | None = None) -> None:
        super().__init__(source, workdir, pin)
        self.folder = Path(source)

    def field_name(self) -> str:
        from ...page import is_valid_name, slugify

        stem = self.folder.resolve().name
        return stem if is_valid_name(stem) else slugify(stem) or "field"

    def list_files(self) -> list[RemoteFile]:
        if not self.folder.is_dir():
            raise RemoteUnavailableError(f"no folder {self.folder}", "check the path")
        files = []
        with os.scandir(self.folder) as entries:
            for entry in entries:
                if entry.is_file(follow_symlinks=False):
                    info = entry.stat()
                    files.append(RemoteFile(entry.name, info.st_size, info.st_mtime,
                                            f"{info.st_mtime_ns}-{info.st_size}"))
        return sorted(files, key=lambda f: f.name)

    def fetch(self, name: str) -> bytes:
        path = self.folder / check_file_name(name, self.label)
        if path.is_symlink() or path.stat().st_size > MAX_FILE_BYTES:
            raise RemoteUnavailableError(f"{path} is a link or too large to read")
        return path.read_bytes()


class ZipTransport(Transport):
    """A memoryfield zip on disk (also used for one downloaded over HTTP)."""

    name = "zip"
    accepts_pin = True

    def __init__(
        self, source: str, workdir: Path, pin: str | None = None,
        limits: ZipLimits = DEFAULT_LIMITS, display: str | None = None,
    ) -> None:
        super().__init__(source, workdir, pin)
        self.path = Path(source)
        self.limits = limits
        # What messages call the zip: the file's name, or for a download the URL it came
        # from (its file in the workdir is an implementation detail nobody asked for).
        self.display = display
        self._shown = display or self.path.name
        self.sha256: str | None = None
        self._archive: zipfile.ZipFile | None = None
        self._members: dict[str, zipfile.ZipInfo] = {}

    @property
    def label(self) -> str:
        return self.display or self.source

    def field_name(self) -> str:
        from ..archive import field_name_for

        return field_name_for(self.path)

    def _open(self) -> zipfile.ZipFile:
        if self._archive is None:
            archive, self.sha256 = open_zip(self.path, self.pin, self._shown)
            try:
                infos = checked_members(archive, self._shown, self.limits)
                # As strict as unpack: an empty zip must not empty the mirror, and a damaged
                # entry is refused even where the mirror would not read it.
                check_has_pages(infos, self._shown)
                verify_members(archive, infos, self._shown)
            except BaseException:
                close_zip(archive)
                raise
            self._archive = archive
            self._members = {i.filename: i for i in infos if "/" not in i.filename}
        return self._archive

    def list_files(self) -> list[RemoteFile]:
        self._open()
        return [
            RemoteFile(name, info.file_size, entry_mtime(info),
                       f"{info.CRC:08x}-{info.file_size}")
            for name, info in sorted(self._members.items())
        ]

    def fetch(self, name: str) -> bytes:
        archive = self._open()
        info = self._members.get(name)
        if info is None:
            raise RemoteUnavailableError(f"{self._shown} has no file {name!r}")
        return read_member(archive, info, self._shown)

    def close(self) -> None:
        if self._archive is not None:
            close_zip(self._archive)
            self._archive = None
