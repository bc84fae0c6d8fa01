"""A field's ``archive/`` folder: nothing is ever deleted, pages go there instead.

``rm`` and ``forget`` move a page there, a page replaced by name or uuid leaves its previous
version there, and a rewrite that needs fewer parts archives the rest; ``restore`` brings one
back. Names never clash: a second ``x.md`` becomes ``x--archived-<UTC time>-2.md``. A file's
mtime in the archive is when it was archived, so ``restore x`` can bring back the newest.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from dataclasses import field as dc_field
from pathlib import Path
from typing import Any

from .errors import InvalidNameError, PageConflictError, PageNotFoundError
from .fsutil import create_new, move_new
from .page import SPECIAL_FILES, Page, check_name, is_valid_name
from .page_text import decode_page_file

ARCHIVE_DIR = "archive"

_STAMPED = re.compile(r"--archived-(\d{8}T\d{6})-(\d+)\.md$")
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)


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
    # A rename keeps the page's mtime; the archive's says when it went there instead (which
    # of several archived versions is the newest: archived_versions).
    os.utime(target)
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


def original_name(archived: str) -> str:
    """The page filename an archived file was archived from (``x--archived-…-2.md`` → x.md)."""
    return archived.split("--archived-")[0].removesuffix(".md") + ".md"


class Shelf:
    """A field's ``archive/`` as a restore reads and empties it: a folder here; a bucket
    field (deepfield.bucket) gives its bucket's listing and objects the same way."""

    def __init__(self, folder: Path, field_name: str) -> None:
        self.folder = folder
        self.field_name = field_name

    def names(self) -> list[str]:
        """The archived files, sorted."""
        return archived_pages(self.folder)

    def archived_at(self, name: str) -> float:
        """When ``name`` was archived (0.0: unknown)."""
        try:
            return (self.folder / ARCHIVE_DIR / name).stat().st_mtime
        except OSError:
            return 0.0

    def page(self, name: str) -> Page | None:
        """Archived file ``name`` parsed, or None (gone, unreadable, malformed)."""
        return read_page(self.folder / ARCHIVE_DIR / name)

    def is_live(self, filename: str) -> bool:
        """Whether a page (or anything) of that name is at the field root."""
        return (self.folder / filename).exists()

    def take(self, archived: str, target: str, uuid: str | None = None) -> str:
        """Move ``archived`` to ``target`` at the field root (restore_exact)."""
        return restore_exact(self.folder, self.field_name, archived, target, uuid)


def archived_versions(shelf: Shelf, filename: str) -> list[str]:
    """The archived files of page ``filename``, newest first (by when they were archived)."""

    def when(name: str) -> tuple[float, str, int]:
        stamped = _STAMPED.search(name)  # equal times (coarse clocks): the name's own order
        return (shelf.archived_at(name), stamped.group(1) if stamped else "",
                int(stamped.group(2)) if stamped else 1)

    found = [n for n in shelf.names() if original_name(n) == filename]
    return sorted(found, key=when, reverse=True)


def pick_archived(shelf: Shelf, field_name: str, name: str) -> tuple[str, list[str]]:
    """Which archived file ``restore name`` means, and the page's other archived versions.

    ``x`` or ``x.md`` is the newest archived version of x.md (the most recently removed or
    replaced one); ``x--archived-…`` or ``archive/x.md`` is exactly that file; a page's
    uuid is its newest archived file holding that uuid."""
    exact = name.startswith(f"{ARCHIVE_DIR}/") or "--archived-" in name
    archived = Path(name if name.endswith(".md") else f"{name}.md").name  # never a path
    if exact:
        versions = [archived] if archived in shelf.names() else []
    else:
        versions = archived_versions(shelf, archived)
    if not versions and not exact and _UUID.match(name.strip()):
        # `rm FIELD UUID` takes the page's uuid, so `restore FIELD UUID` does too: the
        # archived files holding that uuid, newest first.
        wanted = name.strip().lower()
        versions = sorted((n for n in shelf.names()
                           if (found := shelf.page(n)) is not None
                           and str(found.uuid or "").lower() == wanted),
                          key=shelf.archived_at, reverse=True)
    if not versions:
        raise PageNotFoundError(
            f"no archived page {name!r} in {field_name}",
            "list archived pages with `deepfield ls FIELD --archived`",
        )
    others = [] if exact else versions[1:]
    return versions[0], others


def restore_target(field_name: str, archived: str, as_name: str | None) -> str:
    """The filename an archived file is restored as: ``as_name`` (a spec name that is not
    index.md or listing.md), else the name it was archived from."""
    if not as_name:
        return original_name(archived)
    target = f"{check_name(as_name)}.md"
    if target in SPECIAL_FILES:
        raise InvalidNameError(
            f"{target} is not a page name: it is the field's "
            + ("introduction" if target == "index.md" else "generated catalogue"),
            f"restore it to {field_name} under another name with --as NAME")
    return target


@dataclass
class ArchiveResult:
    """What ``rm`` did: the archive paths (the page asked for first, then the other parts of
    a split page), and pages no longer marked superseded because their successor went."""

    field: str
    archived: list[str]
    unsuperseded: list[str] = dc_field(default_factory=list)
    warnings: list[str] = dc_field(default_factory=list)
    settled: list[str] = dc_field(default_factory=list)
    """Review items naming the page, closed as obsolete (they could never be resolved)."""

    def to_json(self) -> dict[str, Any]:
        return {"field": self.field, "archived": self.archived[0], "parts": self.archived,
                "unsuperseded": self.unsuperseded, "warnings": self.warnings,
                "settled_reviews": self.settled}


@dataclass
class RestoreResult:
    """What ``restore`` did: the page's filename, the archived file it came from, every
    filename restored (all parts of a split page), the page's other archived versions, and a
    fresh uuid when a copy restored under another name would have shared a live page's."""

    field: str
    filename: str
    source: str
    restored: list[str]
    others: list[str] = dc_field(default_factory=list)
    new_uuid: str | None = None
    relinked: list[str] = dc_field(default_factory=list)
    warnings: list[str] = dc_field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"field": self.field, "restored": self.filename, "from": self.source,
                "parts": self.restored, "other_versions": [f"{ARCHIVE_DIR}/{n}"
                                                           for n in self.others],
                "new_uuid": self.new_uuid, "superseded_again": self.relinked,
                "warnings": self.warnings}


def read_page(path: Path) -> Page | None:
    try:
        page = Page.parse(path.read_text("utf-8", "replace"))
    except OSError:
        return None
    return None if page.frontmatter_error else page


def part_names(page: Page, filename: str) -> list[str] | None:
    """All part filenames of the split page ``filename`` (a part, as split.py writes them:
    ``split_from``, ``part``, ``parts``) in order, else None (not a part)."""
    part, parts = page.get("part"), page.get("parts")
    if not isinstance(part, int) or isinstance(part, bool) or not page.get("split_from"):
        return None
    if isinstance(parts, list):
        names = [p for p in parts if isinstance(p, str) and p.endswith(".md")
                 and is_valid_name(p[:-3])]
    elif isinstance(parts, int) and not isinstance(parts, bool) and 1 < parts <= 100_000:
        stem = filename[:-3]  # split.PARTS_LISTED: first.md, first-part-2.md …
        if part != 1 and not stem.endswith(f"-part-{part}"):
            return None
        base = stem if part == 1 else stem.removesuffix(f"-part-{part}")
        names = [f"{base}.md"] + [f"{base}-part-{i}.md" for i in range(2, parts + 1)]
    else:
        return None
    return names if filename in names else None


def split_parts(folder: Path, filename: str) -> list[str]:
    """The live pages to archive with ``filename``: itself, then, for a part of a split page,
    its other parts (those at the field root carrying the same ``split_from``), in order."""
    page = read_page(folder / filename)
    names = part_names(page, filename) if page is not None else None
    if page is None or names is None:
        return [filename]
    origin = page.get("split_from")
    siblings = [n for n in names if n != filename and (other := read_page(folder / n)) is not None
                and other.get("split_from") == origin]
    return [filename, *siblings]


@dataclass
class RestorePlan:
    """The moves a restore makes, decided (and checked) before any file moves."""

    source: str
    moves: list[tuple[str, str]]  # (archived filename, target filename), the page's first
    others: list[str]
    uuid: str | None
    warnings: list[str]


def plan_restore(shelf: Shelf, field_name: str, name: str, as_name: str | None) -> RestorePlan:
    """Which archived files ``restore name`` moves where: the newest archived version (see
    pick_archived) and, for a part of a split page, the newest archived version of each
    other part with the same ``split_from``. Refuses a target that is taken, and ``as_name``
    for a split page (its parts link each other by name)."""
    source, others = pick_archived(shelf, field_name, name)
    target = restore_target(field_name, source, as_name)
    page = shelf.page(source)
    original = original_name(source)
    names = part_names(page, original) if page is not None else None
    moves, warnings = [(source, target)], []
    if page is not None and names is not None:
        if as_name:
            raise InvalidNameError(
                f"{source} is part of a page split into {len(names)} linked parts, which "
                "link each other by name", "restore it without --as (all parts come back)")
        origin = page.get("split_from")
        for part in names:
            if part == original:
                continue
            match = next((v for v in archived_versions(shelf, part)
                          if (p := shelf.page(v)) is not None
                          and p.get("split_from") == origin), None)
            if match is not None:
                moves.append((match, part))
            elif not shelf.is_live(part):
                warnings.append(f"part {part} of the page is not in {ARCHIVE_DIR}/; "
                                "its link leads nowhere")
    taken = [t for _a, t in moves if shelf.is_live(t)]
    if taken:
        raise PageConflictError(
            f"a page named {taken[0]} already exists in {field_name}",
            "restore it under another name with --as NAME" if len(moves) == 1 else
            "archive or rename that page first (`deepfield rm`), then restore again")
    return RestorePlan(source, moves, others, page.uuid if page is not None else None,
                       warnings)


def restore_exact(folder: Path, field_name: str, archived: str, target: str,
                  uuid: str | None = None) -> str:
    """Move ``archive/<archived>`` to ``target`` at the field root, never over a page; with
    ``uuid``, the page comes back carrying that uuid instead of its own."""
    source = folder / ARCHIVE_DIR / archived
    if uuid is None:
        moved = move_new(source, folder / target)
    else:
        text, layout = decode_page_file(source.read_bytes(), f"{ARCHIVE_DIR}/{archived}")
        page = Page.parse(text)
        page.set("uuid", uuid)
        moved = create_new(folder / target, layout.encode(page.render()))
        if moved:
            source.unlink()
    if not moved:
        raise PageConflictError(
            f"a page named {target} already exists in {field_name}",
            "restore it under another name with --as NAME",
        )
    return target
