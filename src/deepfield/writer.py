"""Writing pages into a field: frontmatter, filenames, splitting, updates, archiving.

What ``Field.write`` promises lives here: missing frontmatter is filled in, a spec filename is
derived from the title and never overwrites another page, a page carrying an existing uuid
replaces that page (``updated`` changes only when the content does), pages over 8 KB are split
into linked parts (rewrites reuse the parts and archive the ones no longer needed), and only the
files written are re-indexed. Callers hold the field lock.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import sqlite3
from dataclasses import dataclass
from dataclasses import field as dc_field
from pathlib import Path
from typing import Any

from .archive import archive_copy, archive_file
from .errors import (
    DuplicateUuidError,
    IndexStateError,
    InvalidNameError,
    InvalidPageError,
    PageConflictError,
)
from .fsutil import atomic_write, create_new, write_together
from .index import FieldIndex
from .listing import catch_up, refresh_listing
from .page import (
    INTRO_FILE,
    PAGE_LIMIT_BYTES,
    SPECIAL_FILES,
    Page,
    check_name,
    derive_title,
    is_valid_name,
    new_uuid,
    now_iso,
    slugify,
)
from .page_text import check_text, check_utf8, require_text
from .scan import scan_field, source_files
from .split import split_page

MAX_WRITE_BYTES = 16 << 20
"""Largest page text accepted by ``write`` (it is split into 8 KB parts)."""


@dataclass(frozen=True)
class WrittenPage:
    filename: str
    uuid: str
    title: str
    action: str  # "created" | "updated" | "unchanged"
    bytes: int
    previous: str | None = None
    """Where the replaced version went (``archive/…``) when a page was replaced (by name or
    by uuid)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "filename": self.filename, "uuid": self.uuid, "title": self.title,
            "action": self.action, "bytes": self.bytes, "previous": self.previous,
        }


@dataclass
class WriteResult:
    field: str
    pages: list[WrittenPage]
    warnings: list[str] = dc_field(default_factory=list)
    index_error: BaseException | None = dc_field(default=None, repr=False, compare=False)
    """What went wrong indexing pages already stored (Field.write turns it into a warning)."""

    @property
    def filenames(self) -> list[str]:
        return [p.filename for p in self.pages]

    def to_json(self) -> dict[str, Any]:
        return {
            "field": self.field,
            "pages": [p.to_json() for p in self.pages],
            "split": len(self.pages) > 1,
            "warnings": self.warnings,
        }


class PageWriter:
    """Writes pages into one field folder and keeps its index and listing in step."""

    def __init__(self, path: Path, name: str, index: FieldIndex, *, batch: bool = False) -> None:
        self.path = path
        self.name = name
        self.index = index
        self.batch = batch
        """Inside Field.batch(): the index was synced when the batch began, and listing.md is
        rewritten once when it ends, so a write costs O(1) instead of O(pages)."""
        self.keep_previous = False

    def write(self, page: Page, stem: str | None, *, split: bool = True,
              keep_previous: bool = False) -> WriteResult:
        """Store ``page`` (the caller holds the field lock); over 8 KB it is split into linked
        parts unless ``split`` is False (the spec's PUT stores the page it is given, whole,
        and touches no other file). ``keep_previous``: a page replaced by name (``stem``)
        leaves its previous version in ``archive/`` (nothing is ever deleted), and so does a
        page replaced by its uuid: both are the same replacement, reached two ways."""
        self.keep_previous = keep_previous
        if not page.body.strip() and not page.frontmatter:
            raise InvalidPageError("the page is empty (no text, and no frontmatter values)",
                                   "send the page's Markdown")
        check_utf8(page.body, "the page text")  # the frontmatter: page.dump_entry checks it
        if "\x00" in page.body or "\x00" in page.render_frontmatter():
            raise InvalidPageError("the page holds NUL characters, so it would read as binary",
                                   "send Markdown text")
        if stem is not None:
            refuse_special(stem, "choose another --name" + (
                "; edit index.md itself (or `deepfield new --intro`) to change the "
                "introduction" if stem == "index" else ""))
        index = self.index
        if page.uuid and not self.batch:
            # uuid lookups must see pages written by hand since the last sync
            index.sync(scan_field(self.path).files)
        existing_name: str | None = None
        if stem is not None:
            if (self.path / f"{stem}.md").is_symlink():
                # Reading it would follow the link (anywhere on the machine) into archive/;
                # read and search skip links: refused the same way.
                raise PageConflictError(
                    f"{stem}.md in {self.name} is a symbolic link; pages must be regular files",
                    "remove the link, or give another --name")
            if (self.path / f"{stem}.md").exists():
                existing_name = f"{stem}.md"
            if page.uuid:
                owners = [d.filename for d in index.docs_by_uuid(page.uuid)
                          if d.uuid == page.uuid and d.filename != f"{stem}.md"]
                if owners:
                    raise PageConflictError(
                        f"uuid {page.uuid} already belongs to {owners[0]} in {self.name}"
                    )
        elif page.uuid:
            wanted = page.uuid.lower()
            matches = [d for d in index.docs_by_uuid(page.uuid)
                       if (d.uuid or "").lower() == wanted]
            if len(matches) > 1:  # replacing one would leave the other: which is meant?
                raise DuplicateUuidError(
                    f"uuid {page.uuid} belongs to {len(matches)} pages in {self.name}: "
                    f"{', '.join(d.filename for d in matches)}; not written")
            if matches:
                existing_name = matches[0].filename
        existing = None
        if existing_name is not None:
            existing = Page.parse((self.path / existing_name).read_text("utf-8", "replace"))
            if existing.frontmatter_error:
                existing = None
            elif page.uuid and existing.uuid and page.uuid.lower() != existing.uuid.lower():
                # (UUIDs are case-insensitive: the same one in capitals is no conflict)
                raise PageConflictError(
                    f"{existing_name} has uuid {existing.uuid}, the new text has {page.uuid}"
                )
        title = derive_title(page, fallback=stem)
        if page.get("title") in (None, ""):  # a title of another shape (a list, a number) is
            page.set("title", title)          # the author's, kept byte for byte
        normalise_dates(page)
        page.set("uuid", page.uuid or (existing.uuid if existing else None) or new_uuid())
        if not split and existing is not None:
            _keep_part_keys(page, existing)
        now = now_iso()
        if not page.get_str("created"):
            page.set("created", now)
        if not page.get_str("updated"):
            page.set("updated", now)
        base = stem or (existing_name[:-3] if existing_name else None)
        touched: set[str] = set()
        old_parts = self._old_parts(existing_name, existing) if split else []
        written = self._store(page, title, base, existing_name, old_parts, touched, split)
        touched |= {w.filename for w in written}
        try:
            report = index.sync_names(source_files(self.path, touched), touched)
            if not self.batch:
                catch_up(self.path, index, report, touched)
                refresh_listing(self.path, self.name, index, report)
        except (sqlite3.Error, IndexStateError, OSError) as exc:
            # The pages are stored: that is the write. The caller reports this as a warning.
            return WriteResult(self.name, written, [], index_error=exc)
        return WriteResult(self.name, written, report.warnings)

    def _store(
        self,
        page: Page,
        title: str,
        base: str | None,
        existing_name: str | None,
        old_parts: list[str],
        touched: set[str],
        split: bool = True,
    ) -> list[WrittenPage]:
        """Write the page (split if needed and ``split``); names of archived leftover parts go
        to ``touched``."""
        rendered = page.render()
        if not split or len(rendered.encode()) <= PAGE_LIMIT_BYTES:
            target = existing_name or self._free_names(base or _stem_for(title, page), 1)[0]
            written = [self._put(target, page, title, replace=existing_name is not None)]
        else:
            stem = base or _stem_for(title, page)
            reusable = set(old_parts) | ({existing_name} if existing_name else set())
            old_uuids = {name: self._uuid_of(name) for name in old_parts}
            page_uuid = page.uuid or new_uuid()

            def names_for(count: int) -> list[str]:
                return self._free_names(stem, count, reusable=reusable)

            def uuid_for(index: int, filename: str) -> str:
                # Part 1 carries the page's identity; later parts keep theirs across rewrites.
                return page_uuid if index == 1 else old_uuids.get(filename) or new_uuid()

            try:
                parts = split_page(page, title, names_for, uuid_for)
            except ValueError as exc:  # the frontmatter alone leaves no room for text
                size = len(page.render_frontmatter().encode())
                raise InvalidPageError(
                    f"the page is over 8 KB and cannot be split: its frontmatter alone is "
                    f"{size:,} bytes ({exc})",
                    "shorten the frontmatter (a long summary?) well below 8 KB; the body is "
                    "what gets split into parts") from exc
            # All parts are written to temporary files first and renamed in one quick pass
            # (fsutil.write_together): an interruption while they are written, the slow
            # part, leaves no page with some of its parts new and others missing.
            planned = [self._prepare(name, part, part.title or title, name in reusable)
                       for name, part in parts]
            planned = [(self._keep(done) if data is not None and not create else done, data,
                        create) for done, data, create in planned]
            writes = [(self.path / done.filename, data, create)
                      for done, data, create in planned if data is not None]
            landed = write_together(writes)
            if not all(landed):
                # Another program took one of the new part names meanwhile: this call's new
                # files go again (never a page that existed before) and the caller retries.
                for (path, _data, create), ok in zip(writes, landed, strict=True):
                    if create and ok:
                        with contextlib.suppress(OSError):
                            path.unlink()
                raise InvalidPageError("another program created a file named like one of the "
                                       "page's parts while it was written",
                                       "write the page again")
            written = [done for done, _data, _create in planned]
        leftovers = [n for n in old_parts if n not in {w.filename for w in written}]
        for name in leftovers:  # a rewrite needs fewer parts: archive, never delete
            archive_file(self.path, name)
            touched.add(name)
        return written

    def _old_parts(self, existing_name: str | None, existing: Page | None) -> list[str]:
        """Filenames of the other parts of a previously split page (from its ``parts`` key)."""
        if existing_name is None or existing is None:
            return []
        parts = existing.get("parts")
        if existing.get("part") != 1:
            return []
        if isinstance(parts, int) and not isinstance(parts, bool) and 1 < parts <= 100_000:
            base = existing_name.removesuffix(".md")  # split.PARTS_LISTED: named, not listed
            parts = [f"{base}-part-{i}.md" for i in range(2, parts + 1)]
        if not isinstance(parts, list):
            return []
        return [p for p in parts if isinstance(p, str) and p != existing_name
                and is_valid_name(p.removesuffix(".md")) and (self.path / p).is_file()]

    def _uuid_of(self, filename: str) -> str | None:
        return Page.parse((self.path / filename).read_text("utf-8", "replace")).uuid

    def _prepare(self, filename: str, page: Page, title: str,
                 replace: bool) -> tuple[WrittenPage, bytes | None, bool]:
        """What writing ``page`` as ``filename`` does: (the result, the bytes to write or
        None when the file already holds them, whether the name must be new)."""
        path = self.path / filename
        if replace and path.exists():
            current = path.read_text("utf-8", "replace")
            previous = Page.parse(current)
            page.set("created", previous.get_str("created") or page.get_str("created"))
            page.set("updated", previous.get_str("updated") or now_iso())
            if page.render() == current:
                return (WrittenPage(filename, page.uuid or "", title, "unchanged",
                                    len(current.encode())), None, False)
            page.set("updated", now_iso())
            data = page.render().encode("utf-8")
            return WrittenPage(filename, page.uuid or "", title, "updated", len(data)), data, False
        data = page.render().encode("utf-8")
        return WrittenPage(filename, page.uuid or "", title, "created", len(data)), data, True

    def _put(self, filename: str, page: Page, title: str, replace: bool) -> WrittenPage:
        done, data, create = self._prepare(filename, page, title, replace)
        path = self.path / filename
        if data is None:
            return done
        if not create:
            done = self._keep(done)
            atomic_write(path, data)
            return done
        if not create_new(path, data):  # someone outside deepfield took it meanwhile
            filename = self._free_names(filename[:-3], 1)[0]
            if not create_new(self.path / filename, data):
                raise InvalidPageError(f"could not create a new file for {title!r}")
        return WrittenPage(filename, page.uuid or "", title, "created", len(data))

    def _keep(self, done: WrittenPage) -> WrittenPage:
        """Before a page is replaced (``keep_previous``): its current version into archive/."""
        if not self.keep_previous:
            return done
        where = archive_copy(self.path, done.filename)
        return WrittenPage(done.filename, done.uuid, done.title, done.action, done.bytes, where)

    def _free_names(self, stem: str, count: int, reusable: set[str] | None = None) -> list[str]:
        return free_names(self.path, stem, count, reusable)


def free_names(folder: Path, stem: str, count: int = 1,
               reusable: set[str] | None = None) -> list[str]:
    """``count`` unused filenames in ``folder``: stem.md, stem-part-2.md … (suffix -2, -3 on
    collision); names in ``reusable`` count as free."""
    reusable = reusable or set()
    for attempt in range(1, 10_000):
        base = stem if attempt == 1 else f"{stem}-{attempt}"
        names = [f"{base}.md"] + [f"{base}-part-{i}.md" for i in range(2, count + 1)]
        taken = [n for n in names if (folder / n).exists() and n not in reusable]
        if not taken:
            return names
    raise InvalidPageError(f"no free filename for {stem!r}")


def page_to_write(content: str | bytes | Page, name: str | None) -> tuple[Page, str | None]:
    """The page :meth:`Field.write` would store and the stem of its ``name``, once the text,
    its frontmatter and the name pass the checks made before anything is written."""
    if not isinstance(content, str | bytes | Page):
        raise InvalidPageError(f"a page is text, bytes or a Page, not "
                               f"{type(content).__name__}")
    if isinstance(content, Page):
        page = content.copy()
    else:
        data = (require_text(content, "the page text").encode("utf-8")
                if isinstance(content, str) else content)
        page = Page.parse(check_text(data, "page text", MAX_WRITE_BYTES))
    if page.frontmatter_error:
        raise InvalidPageError(
            f"cannot write the page: {page.frontmatter_error}",
            "fix the YAML between the '---' lines, or remove the block",
        )
    return page, check_name(name) if name else None


def refuse_special(name: str, hint: str) -> None:
    """InvalidNameError if ``name`` (with or without ``.md``) is index.md, the field's
    introduction, or listing.md, its generated catalogue: neither is ever a page."""
    filename = f"{name.removesuffix('.md')}.md"
    if filename in SPECIAL_FILES:
        what = "introduction" if filename == INTRO_FILE else "generated catalogue"
        raise InvalidNameError(f"{filename} is not a page name: it is the field's {what}", hint)


def _stem_for(title: str, page: Page) -> str:
    stem = slugify(title) or f"page-{(page.uuid or new_uuid())[:8]}"
    return f"{stem}-page" if f"{stem}.md" in SPECIAL_FILES else stem  # a page titled "Index"


def normalise_dates(page: Page) -> None:
    """Spec: datetimes are quoted strings (YAML would otherwise turn them into objects)."""
    for key in ("created", "updated"):
        value = page.get(key)
        if isinstance(value, dt.datetime):
            moment = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
            text = moment.astimezone(dt.UTC).replace(microsecond=0).isoformat()
            page.set(key, text.replace("+00:00", "Z"))
        elif isinstance(value, dt.date):
            page.set(key, value.isoformat())


def _keep_part_keys(page: Page, existing: Page) -> None:
    """A page written whole over one part of a split page (the spec's PUT of
    ``long-part-2.md``) stays that part when its text names no part of its own: without
    ``split_from``/``part``/``parts`` the parts read as separate pages (as its uuid, kept)."""
    if not existing.get("split_from") or any(
            page.get(key) is not None for key in ("split_from", "part", "parts")):
        return
    for key in ("split_from", "part", "parts"):
        if existing.get(key) is not None:
            page.set(key, existing.get(key))
