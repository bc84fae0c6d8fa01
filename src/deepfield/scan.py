"""Which files of a field folder are pages, following the spec's container rules.

Pages are the ``*.md`` files at the field root, except the introduction (``index.md``) and the
catalogue (``listing.md``). Debris from sync tools and editors, dot-files, non-Markdown files
and everything in sub-folders is ignored; a sub-folder that holds pages earns a warning, since
the spec forbids indexing it and its author may not know.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Container
from dataclasses import dataclass, field
from pathlib import Path

from .page import (
    SPECIAL_FILES,
    is_conflict_copy,
    is_debris,
    is_valid_name,
    iso_from_timestamp,
    slugify,
)

# Sub-folders deepfield itself keeps inside a field; they never hold pages to warn about.
OWN_SUBDIRS = frozenset({"archive", ".deepfield"})


@dataclass(frozen=True)
class SourceFile:
    """A page file as the index sees it; ``last_modified`` is the transport's timestamp."""

    name: str
    folder: str
    mtime_ns: int
    size: int
    timestamp: str | None = None
    """The transport's own last-modified time (git committer date, S3 Last-Modified);
    None means the file's mtime, the rule for local folders."""

    @property
    def path(self) -> Path:
        return Path(self.folder, self.name)

    @property
    def last_modified(self) -> str:
        # Computed on demand: formatting a timestamp per file doubled the cost of a scan.
        return self.timestamp or iso_from_timestamp(self.mtime_ns // 1_000_000_000)


@dataclass(frozen=True)
class ScanResult:
    files: list[SourceFile]
    warnings: list[str]
    inodes: dict[str, int] = field(default_factory=dict)
    """Each page's inode number: see :func:`page_inodes`."""


def is_page_name(name: str) -> bool:
    """Whether a file of this name at a field's root is a page (if it is a regular file)."""
    return (name.endswith(".md") and name not in SPECIAL_FILES and not name.startswith(".")
            and not is_debris(name))


def scan_field(directory: Path) -> ScanResult:
    """List a field's pages (sorted by name) and what is wrong with the folder's layout."""
    files: list[SourceFile] = []
    warnings: list[str] = []
    inodes: dict[str, int] = {}
    folder = os.fspath(directory)
    with os.scandir(directory) as entries:
        for entry in entries:
            name = entry.name
            if entry.is_dir(follow_symlinks=False):
                if (not name.startswith(".") and not is_debris(name)
                        and name not in OWN_SUBDIRS and _holds_pages(Path(entry.path))):
                    warnings.append(
                        f"{name}/: sub-folder holds .md pages, which memoryfields never index; "
                        "move them to the field root or into a field of their own"
                    )
                continue
            if is_conflict_copy(name) and name.lower().endswith(".md"):
                warnings.append(f"{name}: a sync or merge tool's conflict copy, not indexed; "
                                "merge what it adds into the page, then delete it")
                continue
            if not is_page_name(name):
                if (name[-3:].lower() == ".md" and name[-3:] != ".md" and not name.startswith(".")
                        and not is_debris(name) and entry.is_file(follow_symlinks=False)):
                    # Editors on Windows and macOS save "Notes.MD": say why it is not found.
                    warnings.append(f"{name}: not indexed (a page's name ends in lowercase "
                                    f".md); rename it to {slugify(name[:-3]) or 'a-page'}.md")
                continue
            if entry.is_symlink():
                warnings.append(f"{name}: symbolic link skipped (pages must be regular files)")
                continue
            if not entry.is_file():
                continue
            stem = name[:-3]
            if not is_valid_name(stem):
                better = slugify(stem) or "a-valid-name"
                warnings.append(
                    f"{name}: not a spec filename (lowercase letters, digits, hyphens); "
                    f"indexed anyway, rename it to {better}.md"
                )
            info = entry.stat()
            files.append(SourceFile(name, folder, info.st_mtime_ns, info.st_size))
            inodes[name] = info.st_ino
    files.sort(key=lambda f: f.name)
    return ScanResult(files, warnings, inodes)


def page_inodes(directory: Path, known: Container[str] = ()) -> dict[str, int]:
    """Each page's inode number, from the directory listing alone (~6 ms at 10k pages where a
    scan with ``stat`` takes ~55 ms). Compared with an earlier listing it names the pages
    created, deleted or atomically replaced since (a replace is a rename: a new inode), which
    is how deepfield and most editors save. Edits in place keep the inode: a file watcher or
    a full scan finds those. Names in ``known`` (an earlier listing's) are pages already."""
    with os.scandir(directory) as entries:  # one tight pass: this runs before searches
        listed = {e.name: e.inode() for e in entries
                  if e.name.endswith(".md") and e.is_file(follow_symlinks=False)}
    return {name: inode for name, inode in listed.items()
            if name in known or is_page_name(name)}


def source_files(directory: Path, names: set[str]) -> list[SourceFile]:
    """The SourceFile of each named page that exists (for syncing just what was written)."""
    found = []
    for name in sorted(names):
        try:
            info = os.lstat(directory / name)
        except (FileNotFoundError, NotADirectoryError):
            continue
        # As scan_field: a symbolic link, a FIFO or a folder named like a page is no page
        # (and reading a FIFO would wait forever).
        if stat.S_ISREG(info.st_mode):
            found.append(SourceFile(name, os.fspath(directory), info.st_mtime_ns, info.st_size))
    return found


def _holds_pages(directory: Path) -> bool:
    try:
        with os.scandir(directory) as entries:
            return any(e.name.endswith(".md") and e.is_file() for e in entries)
    except OSError:
        return False
