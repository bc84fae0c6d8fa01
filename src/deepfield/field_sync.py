"""Bringing a field's derived index up to date with its folder: a full index or rebuild, the
changes since the last look (deepfield.freshness says which pages), and a page moved into or
out of the folder (archive, restore). The Markdown is canonical; what fails here leaves the
pages as they are and a notice, and the next sync tries again.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Any

from .archive import Shelf
from .errors import EmbeddingError, IndexCorruptError, IndexStateError
from .field_backends import FieldBackends
from .fsutil import field_lock, remove_stale_temp_files
from .index import SyncReport
from .index.budget import SEARCH_BUDGET_S, Deadline
from .index.health import damage, healing
from .listing import refresh_listing
from .scan import SourceFile, is_page_name, scan_field, source_files

AUTO_EMBED_SECONDS = SEARCH_BUDGET_S
"""A search's budget (index/budget.py): it embeds new chunks only as far as it allows."""


class FieldSync(FieldBackends):
    """The index side of a Field (deepfield.field): sync, embed, listing."""

    def index(
        self,
        *,
        verify: bool = True,
        embed: bool = True,
        progress: Callable[[int], None] | None = None,
        embed_progress: Callable[[int], None] | None = None,
    ) -> SyncReport:
        """Bring the index up to date with the folder and (``embed``) compute what is
        pending (latent terms not in fast mode). ``verify`` re-hashes every page and also
        has SQLite check the whole index file, so damage no search has met yet is found,
        and healed, here."""

        def run() -> SyncReport:
            scan = scan_field(self.path)
            if verify and (problem := damage(self.index_handle().conn, thorough=False)):
                raise IndexCorruptError(f"{problem}", damaged=True)
            report = self.index_handle().sync(scan.files, verify=verify, progress=progress)
            report.warnings = scan.warnings + report.warnings + self.index_handle().uuid_warnings()
            self._listing(report, explicit=True)
            self._fresh.synced(self.path, None, scan.inodes)
            return report

        with field_lock(self.path):  # no live writer is among a split page's renames
            remove_stale_temp_files(self.path)
        report = healing([self], run)
        if embed and self.embedder is not None:
            done = self.embed(progress=embed_progress)
            report.chunks_embedded, report.pages_embedded = done.chunks, done.pages
            report.warnings += done.warnings
            report.pending_vectors = self.with_index(lambda index: index.pending_vectors())
        report.warnings = self.take_notices() + report.warnings
        self._refresh_backend(None if embed else 0.0)
        return report

    def reindex(self, **options: Any) -> SyncReport:
        """Drop every index row and rebuild from the Markdown alone."""
        self.clear_index()
        return self.index(**options)

    def _sync_changes(self, embed: bool, deadline: Deadline | None = None) -> SyncReport:
        """ensure_synced (field_index.py) without the healing: every file, or only the pages
        that changed (deepfield.freshness says which). New chunks are embedded, on one
        thread, until ``deadline`` (default: AUTO_EMBED_SECONDS from now); the rest stays
        pending. If the embedder fails (an endpoint down), the text is still indexed and the
        failure becomes a warning."""
        self.index_handle()  # a replaced index file resets what was synced
        deadline = deadline or Deadline(AUTO_EMBED_SECONDS, strict=True)
        # A derived backend (LanceDB) embeds what it writes within what is left of it.
        backend_budget = 0.0 if not embed else max(0.0, min(deadline.left(), AUTO_EMBED_SECONDS))
        check = self._fresh.check(self.path)
        if check is None:
            self._refresh_backend(backend_budget)
            return SyncReport()
        index = self.index_handle()
        if check.names is not None:
            report = index.sync_names(source_files(self.path, check.names), check.names)
            inodes = check.listed
        else:
            scan = scan_field(self.path)
            report = index.sync(scan.files)
            inodes = scan.inodes
        if embed and (report.changed or index.pending_chunk_vectors()):
            try:
                # Page vectors derived from the chunks' (no encoder pass), so the spec's
                # `pages` table other readers use lists the pages searches find.
                done = self.embed(deadline=deadline, pages=self.page_vectors != "whole",
                                  latent=False, threads=1)
            except EmbeddingError as exc:
                report.warnings.append(f"new chunks could not be embedded: {exc.message}")
            else:
                report.chunks_embedded = done.chunks
                report.warnings += done.warnings
        self._listing(report)
        self._fresh.synced(self.path, check, inodes)
        self._refresh_backend(0.0 if not embed else max(0.0, min(deadline.left(),
                                                                 backend_budget)))
        return report

    def reread(self, names: Iterable[str]) -> SyncReport:
        """Read the pages ``names`` again whatever their size and mtime say: a file watcher saw
        them change, and an edit that kept both (``cp -p``, ``rsync -t``, ``touch -r``) is
        found only so."""
        wanted = {name for name in names if is_page_name(name)}

        def run() -> SyncReport:
            files = source_files(self.path, wanted)
            report = self.index_handle().sync_names(files, wanted, verify=True)
            self._listing(report)
            return report

        return healing([self], run) if wanted else SyncReport()

    def mark_changed(self, names: Iterable[str] | None = None) -> None:
        """Pages changed where the folder's mtime does not show it (a file watcher saw an edit
        in place): the next :meth:`ensure_synced` reads the ``names`` (file names at the
        field's root), or checks every file whatever its rate limit says."""
        self._fresh.changed(names)

    # How a restore reads and moves files (manage.removal); a bucket field has its own.

    def archive_shelf(self) -> Shelf:
        return Shelf(self.path, self.name)

    def moving(self) -> AbstractContextManager[object]:
        """The lock writers hold, held while whole pages move in or out (``rm``,
        ``restore``): the field lock (re-entrant, fsutil.field_lock)."""
        return field_lock(self.path)

    def restored(self, targets: list[str]) -> None:
        self.after_move(set(targets), source_files(self.path, set(targets)))

    def after_move(self, names: set[str], files: list[SourceFile]) -> None:
        """Index a page moved into or out of the folder; the move is done, so an index that
        fails now leaves a notice (take_notices), not an error."""
        self._fresh.changed(names)
        try:
            self._listing(self.index_handle().sync_names(files, names))
        except (sqlite3.Error, IndexStateError, OSError) as exc:
            self.index_failed(exc, "the page was moved")

    def _listing(self, report: SyncReport, *, explicit: bool = False) -> None:
        refresh_listing(self.path, self.name, self.index_handle(), report, explicit=explicit)
