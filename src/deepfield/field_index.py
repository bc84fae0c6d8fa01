"""How a field holds its derived index: opened on first use, reopened when the file was
replaced, and healed when it is damaged.

A field's index is derived data, so a damaged one never stops the field: the damaged file is
moved aside (index/health.py), a new one is opened and the next sync fills it from the pages.
What happened is said once, in one line, through :meth:`IndexHolder.take_notices` (search,
index and write results carry it among their warnings; the CLI prints any left over).
Another process, or another connection of a server, may heal or delete the file while this
one holds it open: the file is checked at most every ``REPLACED_CHECK_S`` seconds and a
replaced one is reopened, so no reader goes on searching a file that is no longer the index.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from .embed.base import Embedder
from .errors import DeepfieldError, IndexCorruptError, IndexStateError, UnknownFieldError
from .freshness import Freshness
from .index import FieldIndex, SyncReport
from .index.budget import Deadline
from .index.db import KEYWORD_ONLY_CODE, index_filename
from .index.health import (
    CORRUPT_MARK,
    damage,
    file_id,
    healing,
    is_corruption,
    is_schema_error,
    quarantine,
)
from .index.vectors import EmbedReport, embed_pending
from .scan import scan_field

T = TypeVar("T")
REPLACED_CHECK_S = 0.5
"""How often an open index checks that its file is still the index (one ``stat``)."""


class IndexHolder:
    """The part of :class:`deepfield.Field` that owns its index connection."""

    path: Path
    name: str
    embedder: Embedder | None
    page_vectors: str
    windows: str
    fast: bool

    def _init_index(self, index_dir: Path | None) -> None:
        self._index_dir = index_dir
        self._index: FieldIndex | None = None
        self._fresh = Freshness()
        self._notices: list[str] = []
        self._next_replaced_check = 0.0
        self._seen_file: tuple[int, int] | None = None
        self._opening = threading.Lock()
        """Held while the index is opened: threads sharing the Field open it once."""

    def index_path(self) -> Path:
        """Where the field's index file is (or will be)."""
        folder = self._index_dir
        if folder is None and not os.access(self.path, os.W_OK):
            folder = _cache_dir_for(self.path)
        code = self.embedder.model_code if self.embedder else KEYWORD_ONLY_CODE
        return (folder or self.path) / index_filename(code)

    def index_handle(self, *, rebuild: bool = False) -> FieldIndex:
        """The field's index (opened on first use; its file lives in the field folder).
        ``rebuild``: opened to drop every row, so vectors of another size are no error."""
        index = self._index
        if index is not None:
            now = time.monotonic()
            if now >= self._next_replaced_check:
                self._next_replaced_check = now + REPLACED_CHECK_S
                if index.replaced():
                    self._drop_index()
        if self._index is None:
            with self._opening:
                if self._index is None:
                    self._open_index(rebuild)
        opened = self._index
        assert opened is not None
        opened.windows = self.windows
        opened.page_vectors = self.page_vectors
        return opened

    def _open_index(self, rebuild: bool) -> None:
        if not self.path.is_dir():  # deleted under us: never make an index elsewhere
            raise UnknownFieldError(f"the field folder {self.path} is gone",
                                    "list fields with `deepfield ls`")
        path = self.index_path()
        self._seen_file = file_id(path)
        self._index = FieldIndex(self.path, self.embedder, path.parent, rebuild=rebuild)
        self._next_replaced_check = time.monotonic() + REPLACED_CHECK_S

    def _drop_index(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None
        self._fresh = Freshness()  # a new file: the next sync reads every page

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None

    def _sync_changes(self, embed: bool, deadline: Deadline | None = None) -> SyncReport:
        raise NotImplementedError  # deepfield.Field's

    def ensure_synced(self, *, embed: bool = True,
                      deadline: Deadline | None = None) -> SyncReport:
        """Sync cheaply before a search: every file, or only the pages that changed
        (Field._sync_changes); new chunks are embedded until ``deadline`` at most. A damaged
        index is moved aside and rebuilt from the pages, which the report's warnings say."""
        try:
            report = healing([self], lambda: self._sync_changes(embed, deadline))
        except FileNotFoundError:
            if self.path.is_dir():
                raise
            # Deleted under us (a server's search of a field just removed): what the index
            # says of a gone folder, not a 500 with the folder's FileNotFoundError.
            raise UnknownFieldError(f"the field folder {self.path} is gone",
                                    "list fields with `deepfield ls`") from None
        report.warnings = self.take_notices() + report.warnings
        return report

    def index_failed(self, exc: BaseException, done: str) -> None:
        """An index failure after pages were stored or moved (``done`` says what): a notice,
        never an error, since a caller retrying an "error" would write the page twice. A
        damaged index is healed and rebuilt from the pages now."""
        if is_corruption(exc):
            try:
                self.heal_index(exc)
            except (sqlite3.Error, DeepfieldError, OSError) as again:
                self._notices.append(f"{self.index_path().name}: damaged and not rebuilt yet "
                                     f"({again}); {done}: run `deepfield reindex`")
            return
        self._notices.append(f"{self.index_path().name}: not updated ({exc}); {done}, and the "
                             "next search or `deepfield index` indexes it")

    def embed(
        self,
        *,
        budget: float | None = None,
        deadline: Deadline | None = None,
        pages: bool = True,
        latent: bool | None = None,
        threads: int | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> EmbedReport:
        """Compute pending vectors: chunks first, then (``pages``) page vectors and latent
        terms (``latent``, default: unless the field is in fast mode), within ``budget``
        seconds or before ``deadline`` (neither: all of it). ``threads`` caps the model's
        CPU threads (1 for work a search waits for)."""
        def run(index: FieldIndex) -> EmbedReport:
            if index.embedder is None:
                return EmbedReport()
            return embed_pending(
                index.conn, index.embedder, self.path,
                deadline=deadline or Deadline(budget), pages=pages,
                latent=not self.fast if latent is None else latent,
                page_vectors=self.page_vectors, windows=self.windows, threads=threads,
                progress=progress,
            )

        return self.with_index(run)

    def clear_index(self) -> None:
        """Drop every index row. A damaged index file (overwritten, truncated) is moved
        aside instead (field_index.py): it is derived data, and reindex always works."""
        healing([self], lambda: self.index_handle(rebuild=True).clear())

    def warnings(self) -> list[str]:
        """Everything currently wrong with the folder or its pages (layout, YAML, encoding,
        one uuid on several pages)."""
        return scan_field(self.path).warnings + self.with_index(
            lambda index: index.stored_warnings() + index.uuid_warnings())

    def with_index(self, fn: Callable[[FieldIndex], T]) -> T:
        """``fn(index)``, healing a damaged index first if it turns out to be one."""
        return healing([self], lambda: fn(self.index_handle()))

    def heal_index(self, exc: BaseException, *, probe: bool = False) -> bool:
        """Move a damaged index aside and start a new one. ``probe`` (the damage may be
        another field's): check this field's index first and return False if it is sound.
        A missing table or column is always checked first: it may be a query's own error."""
        if probe or is_schema_error(exc):
            try:
                sound = damage(self.index_handle().conn) is None
            except IndexStateError as failed:  # locked, or unusable: not for healing
                sound = not (isinstance(failed, IndexCorruptError) and failed.damaged)
            if sound:
                return False
        found = self._seen_file
        if self._index is not None:
            found = self._index.file_id
            self._index.close()
            self._index = None
        moved = quarantine(self.index_path(), found)
        self._fresh = Freshness()
        # Rebuilt now, text first (vectors follow as for any new page): a caller that does
        # not sync, such as a server's searcher, must not search an empty index.
        self._sync_changes(embed=False)
        if moved is not None:
            # SQLite's own words ("database disk image is malformed"), not our wrapping
            reason = exc.message.rsplit(": ", 1)[-1] if isinstance(exc, IndexCorruptError) \
                else str(exc)
            where = moved.relative_to(self.path) if moved.is_relative_to(self.path) else moved
            self._notices.append(f"{moved.name.split(CORRUPT_MARK)[0]}: the index was damaged "
                                 f"({reason}); it was moved to {where} and is rebuilt from "
                                 "the pages")
        return True

    def take_notices(self) -> list[str]:
        """What healing has to say that no caller has reported yet (each said once)."""
        notices, self._notices = self._notices, []
        return notices


def _cache_dir_for(path: Path) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "deepfield"
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    folder = base / "indexes" / f"{path.name}-{digest}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder
