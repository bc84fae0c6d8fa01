"""A field's ``archive/`` folder: nothing is ever deleted, pages go there instead.

``rm`` and ``forget`` move a page there, a page replaced by name leaves its previous version
there, and a rewrite that needs fewer parts archives the rest; ``restore`` brings one back.
Names never clash: a second ``x.md`` becomes ``x--archived-<UTC time>-2.md``.
"""

from __future__ import annotations

import time
from pathlib import Path

from .errors import PageConflictError, PageNotFoundError
from .fsutil import create_new, move_new
from .page import check_name

ARCHIVE_DIR = "archive"


def archive_file(folder: Path, filename: str) -> str:
    """Move a page into ``archive/`` under a free name; returns its path in the archive."""
    archive = folder / ARCHIVE_DIR
    archive.mkdir(exist_ok=True)
    target = archive / filename
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    counter = 1
    while not move_new(folder / filename, target):
        counter += 1
        target = archive / f"{filename[:-3]}--archived-{stamp}-{counter}.md"
    return f"{ARCHIVE_DIR}/{target.name}"


def archive_copy(folder: Path, filename: str) -> str:
    """A copy of a page in ``archive/`` under a free name (the page stays); returns its path
    in the archive."""
    archive = folder / ARCHIVE_DIR
    archive.mkdir(exist_ok=True)
    data = (folder / filename).read_bytes()
    target = archive / filename
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    counter = 1
    while not create_new(target, data):
        counter += 1
        target = archive / f"{filename[:-3]}--archived-{stamp}-{counter}.md"
    return f"{ARCHIVE_DIR}/{target.name}"


def archived_pages(folder: Path) -> list[str]:
    """Filenames of the pages in a field's ``archive/``, sorted."""
    archive = folder / ARCHIVE_DIR
    if not archive.is_dir():
        return []
    return sorted(p.name for p in archive.iterdir() if p.suffix == ".md" and p.is_file())


def restore_file(folder: Path, field_name: str, name: str, as_name: str | None) -> str:
    """Move an archived page back to the field root (under ``as_name`` if given, else its
    original name, never over an existing page); returns its filename."""
    archived = Path(name if name.endswith(".md") else f"{name}.md").name  # never a path
    source = folder / ARCHIVE_DIR / archived
    if not source.is_file():
        raise PageNotFoundError(
            f"no archived page {name!r} in {field_name}",
            "list archived pages with `deepfield ls FIELD --archived`",
        )
    original = archived.split("--archived-")[0].removesuffix(".md") + ".md"
    target = f"{check_name(as_name)}.md" if as_name else original
    if not move_new(source, folder / target):
        raise PageConflictError(
            f"a page named {target} already exists in {field_name}",
            "restore it under another name with --as NAME",
        )
    return target
