"""Per-field connections for a server: one writer, a small pool of searchers, syncing off the
request path.

A :class:`~deepfield.Field` owns one SQLite connection that serves one caller at a time. A server
answering many searches at once therefore keeps, per field:

* the *writer* Field, behind a lock: writes, reads of pages, research, context, and the syncs
  that bring the index up to date with the folder;
* up to ``readers`` search-only Fields, each with its own connection (SQLite in WAL mode lets
  them read while the writer writes), which search with ``sync=False``.

Freshness: a search first compares the folder's mtime with the one last synced (a ``stat``).
A page created, deleted or atomically replaced changes it, and the search syncs before it runs.
Edits in place keep the folder's mtime: the process's file watcher (server/watching.py)
reports them and a background sync follows within a fraction of a second. Where no watcher can
run, a background sync polls instead, at most every ``BACKGROUND_SYNC_S`` seconds while searches
arrive; with a watcher, a poll every ``SAFETY_SYNC_S`` seconds only covers lost events. Polling
is not free: a full scan of 10k pages is ~75 ms of CPU, much of it holding the GIL that
searches in the same process need. Between full scans a sync reads only the pages the watcher
named and those the folder's listing shows created, deleted or replaced (Field.ensure_synced):
~12 ms at 10k pages for another worker's write (bench/freshness.py). Writes made through the
server sync their own pages before returning, as the spec requires.
"""

from __future__ import annotations

import contextlib
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from ..embed.base import Embedder, Kind, LatentTerms, Vectors
from ..embed.meter import EncodeMeter
from ..errors import EmbeddingError, IndexStateError
from ..field import AUTO_EMBED_SECONDS, Field
from ..index.budget import Deadline
from .watching import FolderWatcher

T = TypeVar("T")
BACKGROUND_SYNC_S = 1.0
"""Seconds between background scans of a field without a file watcher."""
SAFETY_SYNC_S = 60.0
"""Seconds between background scans of a watched field (for events the watcher lost)."""
BACKGROUND_EMBED_S = 1.0
"""Seconds a background sync may spend embedding new chunks, holding the field's writer."""


class SharedEmbedder(Embedder):
    """One embedder used by several threads: calls are serialised (backends need not be
    thread-safe) and the model is loaded once."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_code = inner.model_code
        self.in_process = inner.in_process
        self.has_latent = inner.has_latent
        self._lock = threading.RLock()  # try_embed_query holds it around embed_query
        self._loaded = False
        """Whether the model has encoded anything yet (loading it may take seconds)."""

    @property
    def dim(self) -> int | None:
        return self.inner.dim

    @dim.setter
    def dim(self, value: int | None) -> None:
        self.inner.dim = value

    def embed_batch(self, texts: list[str], kind: Kind) -> Vectors:
        with self._lock:
            vectors = self.inner.embed_batch(texts, kind)
            self._loaded = True
            return vectors

    def embed(self, texts: Sequence[str], kind: Kind = "document",
              progress: Callable[[int], None] | None = None, *, purpose: str | None = None,
              threads: int | None = None) -> Vectors:
        with self._lock:
            vectors = self.inner.embed(texts, kind, progress, purpose=purpose, threads=threads)
            self._loaded = True
            return vectors

    def embed_latent(self, texts: list[str]) -> list[LatentTerms]:
        with self._lock:
            return self.inner.embed_latent(texts)

    def latent_terms(self, texts: Sequence[str], *, purpose: str = "chunk_sparse",
                     threads: int | None = None) -> list[LatentTerms]:
        with self._lock:
            return self.inner.latent_terms(texts, purpose=purpose, threads=threads)

    @property
    def meter(self) -> EncodeMeter:
        return self.inner.meter

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def try_embed_query(self, text: str) -> bool:
        """Encode ``text`` as a query now (remembered by :meth:`embed_query`) unless the model
        is not loaded yet (that may take seconds) or another thread is using it, e.g. a
        background sync embedding new pages: then, or if encoding fails, False. The event
        loop must not wait for a model load or behind a batch of pages."""
        if not self._loaded or not self._lock.acquire(blocking=False):
            return False
        try:
            self.embed_query(text)
        except EmbeddingError:
            return False  # the thread path degrades to keywords and says why
        finally:
            self._lock.release()
        return True


class Activity:
    """When a request last used any field of a server (time.monotonic): the backfill waits
    for a pause (backfill.py)."""

    def __init__(self) -> None:
        self.last = 0.0

    def touch(self) -> None:
        self.last = time.monotonic()


class FieldSlot:
    """The writer and the searchers of one field."""

    def __init__(self, path: Path, name: str, embedder: Embedder | None, readers: int,
                 background: ThreadPoolExecutor, activity: Activity,
                 watcher: FolderWatcher | None = None) -> None:
        self.path = path
        self.name = name
        self.embedder = embedder
        self.writer = Field(path, embedder, name=name)
        self.lock = threading.Lock()
        self.max_readers = max(1, readers)
        self._idle: queue.SimpleQueue[Field] = queue.SimpleQueue()
        self._made = 0
        self._made_lock = threading.Lock()
        self._background = background
        self._seen_mtime = -1
        self._last_sync = 0.0
        self._syncing = False
        self._requested = False
        self._changed = False
        self._changed_names: set[str] = set()
        self._sync_guard = threading.Lock()
        self._watcher = watcher
        self._closed = False
        self.activity = activity
        self.changed_at = 0.0
        """When the field was last written or synced through this slot."""

    @property
    def closed(self) -> bool:
        return self._closed

    def pages_changed(self, names: set[str]) -> None:
        """The file watcher saw these pages change (edits in place included): sync soon."""
        with self._sync_guard:
            self._changed_names |= names
        self._request_sync(self.embedder is not None, changed=True)

    def locked(self, fn: Callable[[Field], T]) -> T:
        self.activity.touch()
        with self.lock:
            return fn(self.writer)

    def wrote(self) -> None:
        """After a write through the writer (lock held): its own change needs no re-scan
        before the next search; a background sync tidies up."""
        self._seen_mtime = self._mtime()
        self._last_sync = 0.0
        self.changed_at = time.monotonic()

    def embed_new(self) -> None:
        """Vectors for what was just written (lock held), within the time a search would
        spend: its chunks, then its whole-page vector in the spec's ``pages`` table (the
        spec: after a PUT the page's vector index entries are regenerated before the page is
        next returned; the newest chunks and pages come first, so a backlog of older ones
        does not push the new page out of the budget). An embedder that fails leaves them
        pending; a background sync only embeds chunks, and the backfill (backfill.py) the
        rest while the server is idle: a backlog of page vectors would hold the writer for
        hours."""
        if self.writer.embedder is None:
            return
        # The page is stored: vectors that cannot be computed now stay pending.
        with contextlib.suppress(EmbeddingError, IndexStateError, sqlite3.Error):
            self.writer.embed(budget=AUTO_EMBED_SECONDS, pages=True)

    def search(self, fn: Callable[[Field], T], *, embed: bool,
               started: float | None = None) -> T:
        """Run ``fn`` on an idle searcher (waiting for one if all are busy). A sync it needs
        embeds new chunks only within the search's budget, counted from ``started`` (a
        time.monotonic() value; default: now)."""
        self.activity.touch()
        self.freshen(embed=embed, deadline=Deadline.for_search(
            time.monotonic() if started is None else started))
        reader = self._take_reader(wait=True)
        assert reader is not None
        try:
            return fn(reader)
        finally:
            self._release(reader)

    def try_search(self, fn: Callable[[Field], T], *, embed: bool = False) -> T | None:
        """Run ``fn`` now if nothing can make it wait: no sync is due (the folder is as last
        synced) and a searcher is free. None otherwise: then use :meth:`search` (in a thread).
        For searches on a server's event loop (see Service.search_inline)."""
        self.activity.touch()
        if self._mtime() != self._seen_mtime:
            return None
        try:
            # Only a searcher that has searched before: opening a new one's index takes the
            # write lock to check its schema, which may wait for a writer (up to 30 s).
            reader = self._idle.get_nowait()
        except queue.Empty:
            return None
        index = reader.index_handle()
        index.slow_builds = False  # no lookup table built here (~1 s at 1M chunks)
        try:
            return fn(reader)
        finally:
            index.slow_builds = True
            self._release(reader)
            self._poll(embed=embed)

    def _release(self, reader: Field) -> None:
        """A searcher back to the pool, or closed if the slot closed while it searched."""
        if self._closed:
            reader.close()
        else:
            self._idle.put(reader)

    def _take_reader(self, *, wait: bool) -> Field | None:
        """An idle searcher, a new one while fewer than ``max_readers`` exist, else (``wait``)
        the next one released, or None."""
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            with self._made_lock:
                make = self._made < self.max_readers
                self._made += make
            if make:
                return Field(self.path, self.embedder, name=self.name)
            # queue.SimpleQueue blocks in C, without a threading.Condition's Python-level
            # lock juggling on every hand-over.
            return self._idle.get() if wait else None

    def freshen(self, *, embed: bool, deadline: Deadline | None = None) -> None:
        """Sync now if the folder changed since the last sync, else maybe in the background."""
        mtime = self._mtime()
        if mtime != self._seen_mtime:
            with self.lock:
                if mtime != self._seen_mtime:
                    self.writer.ensure_synced(embed=embed, deadline=deadline)
                    # The mtime after the sync, which may have rewritten listing.md: else the
                    # next search would sync again for the sync's own write. A page changed by
                    # someone else during the sync is caught by the watcher or the poll.
                    self._seen_mtime = self._mtime()
                    self._last_sync = self.changed_at = time.monotonic()
            return
        self._poll(embed=embed)

    def _poll(self, *, embed: bool) -> None:
        """A background sync when one is due (see the module docstring)."""
        watched = self._watcher is not None and self._watcher.running.is_set()
        interval = SAFETY_SYNC_S if watched else BACKGROUND_SYNC_S
        if time.monotonic() - self._last_sync >= interval:
            self._request_sync(embed, changed=False)

    def _request_sync(self, embed: bool, *, changed: bool) -> None:
        """A background sync (``changed``: the watcher saw pages change, so it scans at once).
        A request made while one runs is served by another round of that one."""
        with self._sync_guard:
            self._changed = self._changed or changed
            self._requested = True
            if self._syncing:
                return
            self._syncing = True
        try:
            self._background.submit(self._sync_in_background, embed)
        except RuntimeError:  # the server is shutting down
            with self._sync_guard:
                self._syncing = False

    def _sync_in_background(self, embed: bool) -> None:
        while True:
            with self._sync_guard:
                if not self._requested:
                    self._syncing = False
                    return
                changed, self._changed, self._requested = self._changed, False, False
                names, self._changed_names = self._changed_names, set()
            try:
                with self.lock:
                    if changed:
                        self.writer.mark_changed(names)
                    # A field with a model embeds what a watcher-reported edit added, whatever
                    # the request that started this round asked.
                    # A short slice: a search that needs the lock meanwhile waits at most
                    # for it; the backfill (backfill.py) does the rest while the server idles.
                    self.writer.ensure_synced(
                        embed=embed or self.embedder is not None,
                        deadline=Deadline(BACKGROUND_EMBED_S, strict=True))
                    # As after a search's sync: the listing.md it may have rewritten does not
                    # make the next search scan again.
                    self._seen_mtime = self._mtime()
            except Exception:  # the next search syncs (and reports the error) again
                self._seen_mtime = -1
            finally:
                self._last_sync = self.changed_at = time.monotonic()

    def _mtime(self) -> int:
        try:
            return os.stat(self.path).st_mtime_ns
        except OSError:
            return -1

    def close(self) -> None:
        self._closed = True
        with self.lock, self._made_lock:
            while True:  # searches still running put their reader back after this: unused
                try:
                    self._idle.get_nowait().close()
                except queue.Empty:
                    break
            self._made = 0
            self.writer.close()
