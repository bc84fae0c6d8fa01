"""Per-field connections for a server: one writer, a small pool of searchers, syncing off the
request path.

A :class:`~deepfield.Field` owns one SQLite connection that serves one caller at a time. A server
answering many searches at once therefore keeps, per field:

* the *writer* Field, behind a lock: writes, reads of pages, research, context, and the syncs
  that bring the index up to date with the folder;
* up to ``readers`` search-only Fields, each with its own connection (SQLite in WAL mode lets
  them read while the writer writes), which search with ``sync=False``.

Freshness: a search first compares the folder's mtime with the one last synced (a ``stat``).
A page created, deleted or atomically replaced changes it, and the search syncs before it runs;
edits in place are found by a background sync at most every ``BACKGROUND_SYNC_S`` seconds while
searches arrive. Writes made through the server sync their own pages before returning, as the
spec requires.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from ..embed.base import Embedder, Kind, Vectors
from ..errors import EmbeddingError
from ..field import AUTO_EMBED_SECONDS, Field

T = TypeVar("T")
BACKGROUND_SYNC_S = 1.0


class SharedEmbedder(Embedder):
    """One embedder used by several threads: calls are serialised (backends need not be
    thread-safe) and the model is loaded once."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_code = inner.model_code
        self._lock = threading.Lock()

    @property
    def dim(self) -> int | None:
        return self.inner.dim

    @dim.setter
    def dim(self, value: int | None) -> None:
        self.inner.dim = value

    def embed_batch(self, texts: list[str], kind: Kind) -> Vectors:
        with self._lock:
            return self.inner.embed_batch(texts, kind)

    def embed(self, texts: Sequence[str], kind: Kind = "document",
              progress: Callable[[int], None] | None = None) -> Vectors:
        with self._lock:
            return self.inner.embed(texts, kind, progress)

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()


class FieldSlot:
    """The writer and the searchers of one field."""

    def __init__(self, path: Path, name: str, embedder: Embedder | None, readers: int,
                 background: ThreadPoolExecutor) -> None:
        self.path = path
        self.name = name
        self.embedder = embedder
        self.writer = Field(path, embedder, name=name)
        self.lock = threading.Lock()
        self.max_readers = max(1, readers)
        self._idle: list[Field] = []
        self._made = 0
        self._cond = threading.Condition()
        self._background = background
        self._seen_mtime = -1
        self._last_sync = 0.0
        self._syncing = False

    def locked(self, fn: Callable[[Field], T]) -> T:
        with self.lock:
            return fn(self.writer)

    def wrote(self) -> None:
        """After a write through the writer (lock held): its own change needs no re-scan
        before the next search; a background sync tidies up."""
        self._seen_mtime = self._mtime()
        self._last_sync = 0.0

    def embed_new(self) -> None:
        """Vectors for what was just written (lock held), within the time a search would
        spend; an embedder that fails leaves them pending for the background sync."""
        if self.writer.embedder is None:
            return
        with contextlib.suppress(EmbeddingError):
            self.writer.embed(budget=AUTO_EMBED_SECONDS, pages=False)

    def search(self, fn: Callable[[Field], T], *, embed: bool) -> T:
        """Run ``fn`` on an idle searcher (waiting for one if all are busy)."""
        self.freshen(embed=embed)
        with self._cond:
            while not self._idle and self._made >= self.max_readers:
                self._cond.wait()
            if self._idle:
                reader = self._idle.pop()
            else:
                self._made += 1
                reader = Field(self.path, self.embedder, name=self.name)
        try:
            return fn(reader)
        finally:
            with self._cond:
                self._idle.append(reader)
                self._cond.notify()

    def freshen(self, *, embed: bool) -> None:
        """Sync now if the folder changed since the last sync, else maybe in the background."""
        mtime = self._mtime()
        if mtime != self._seen_mtime:
            with self.lock:
                if mtime != self._seen_mtime:
                    self.writer.ensure_synced(embed=embed)
                    self._seen_mtime = mtime
                    self._last_sync = time.monotonic()
            return
        if time.monotonic() - self._last_sync >= BACKGROUND_SYNC_S and not self._syncing:
            self._syncing = True
            self._background.submit(self._sync_in_background, embed)

    def _sync_in_background(self, embed: bool) -> None:
        try:
            with self.lock:
                self.writer.ensure_synced(embed=embed)
        except Exception:  # the next search syncs (and reports the error) again
            self._seen_mtime = -1
        finally:
            self._last_sync = time.monotonic()
            self._syncing = False

    def _mtime(self) -> int:
        try:
            return os.stat(self.path).st_mtime_ns
        except OSError:
            return -1

    def close(self) -> None:
        with self.lock, self._cond:
            for reader in self._idle:
                reader.close()
            self._idle.clear()
            self._made = 0
            self.writer.close()
