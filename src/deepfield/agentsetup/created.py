"""The files and folders ``deepfield setup`` created, so ``--remove`` can leave things as
they were before setup: no file where there was none.

A config file setup created (``.cursor/mcp.json`` in a project that had none) that holds
nothing once deepfield's entry is out (``{}``) is deleted, with the folders setup made for
it, and without a backup (a copy of setup's own text). Setup cannot tell such a file from
one that held ``{}`` before it by the text alone, so it keeps a record, in the user's state
folder (``$XDG_STATE_HOME/deepfield/setup-created.json``, else ``~/.local/state``;
``%LOCALAPPDATA%`` on Windows, ``~/Library/Application Support`` on macOS), never beside the
file: nothing is left in a project for its git to see. Without the record (another machine,
a record lost) a file is kept, as it was before this record existed.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..fsutil import atomic_write
from .agents import Host

RECORD_NAME = "setup-created.json"


def record_path(host: Host) -> Path:
    """Where the record lives on ``host``."""
    if host.platform == "win32":
        base = host._dir_from_env("LOCALAPPDATA") or host.home / "AppData" / "Local"
    elif host.platform == "darwin":
        base = host.home / "Library" / "Application Support"
    else:
        base = host._dir_from_env("XDG_STATE_HOME") or host.home / ".local" / "state"
    return base / "deepfield" / RECORD_NAME


def _key(path: Path) -> str:
    return os.path.abspath(path)


@dataclass
class Created:
    """The record: files and folders setup created and no ``--remove`` has taken out since."""

    path: Path
    files: set[str] = field(default_factory=set)
    folders: set[str] = field(default_factory=set)

    @classmethod
    def load(cls, host: Host) -> Created:
        """The record on ``host``; an absent or unreadable one records nothing (so nothing
        is deleted on its word)."""
        path = record_path(host)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls(path)
        if not isinstance(data, dict):
            return cls(path)

        def names(key: str) -> set[str]:
            value = data.get(key)
            return {v for v in value if isinstance(v, str)} if isinstance(value, list) else set()

        return cls(path, names("files"), names("folders"))

    def made(self, file: Path) -> bool:
        """Whether setup created ``file``."""
        return _key(file) in self.files

    def add(self, file: Path, folders: list[Path]) -> None:
        """Setup created ``file`` and, for it, ``folders``."""
        self.files.add(_key(file))
        self.folders.update(_key(f) for f in folders)

    def forget(self, file: Path) -> None:
        self.files.discard(_key(file))

    def remove_folders_of(self, file: Path) -> None:
        """Delete the folders setup made that held ``file`` and are empty now (deepest
        first); a folder holding anything else stays."""
        mine = sorted((f for f in self.folders if Path(_key(file)).is_relative_to(f)),
                      key=len, reverse=True)
        for folder in mine:
            with contextlib.suppress(OSError):
                os.rmdir(folder)
            if not os.path.isdir(folder):
                self.folders.discard(folder)

    def save(self) -> None:
        """Write the record (atomically). Best effort: a record that cannot be written only
        means a later ``--remove`` keeps the file, as it did before there was a record."""
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            text = json.dumps({"files": sorted(self.files), "folders": sorted(self.folders)},
                              indent=1) + "\n"
            atomic_write(self.path, text.encode("utf-8"))


def missing_folders(folder: Path) -> list[Path]:
    """``folder`` and its ancestors that do not exist yet (what writing a file there makes)."""
    missing = []
    while not folder.exists() and folder.parent != folder:
        missing.append(folder)
        folder = folder.parent
    return missing
