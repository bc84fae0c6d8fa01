"""What a replica of a bucket store does in the background: follow the bucket, and index.

Every POLL_S seconds the poller refreshes the replica's working copy of each field from the
bucket (other replicas' writes arrive here; a server's searches then sync them as they would
a folder edited by hand). If the replica holds the store's indexer lease, or can take it (no
holder, or one silent for the lease's TTL), it also brings each ``lancedb`` field's shared
dataset up to date, vectors included: one replica does the indexing, every replica's search
reads the result. The poller uses Field objects of its own, so it never waits for a
request's lock.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time

from ..index.backend import IndexBackend, SqliteBackend, close_quietly, create_index_backend
from ..index.lance_backend import LanceBackend
from .dataset_cache import sync_field_copy
from .field import BucketField
from .store import BucketStore

POLL_S = 1.0
"""Seconds between rounds (a write is searchable on every replica within a few rounds); a
store's ``[server] poll_s`` sets it for its servers."""
FIELDS_EVERY_S = 10.0
"""How often the list of fields is read again."""
CHECK_EVERY_S = 30.0
"""How often the indexer reads its datasets through, to rebuild one damaged meanwhile."""

log = logging.getLogger(__name__)


class BucketPoller:
    """The background thread of one replica (see the module docstring)."""

    def __init__(self, store: BucketStore, *, interval: float = POLL_S) -> None:
        self.store = store
        self.interval = interval
        self._handles: dict[str, BucketField] = {}
        self._writers: dict[str, IndexBackend] = {}
        """Per field, the backend that writes the shared dataset in the bucket."""
        self._names: list[str] = []
        self._names_at = 0.0
        self._checked: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.rounds = 0
        self.failures: dict[str, str] = {}
        """The last error of each field, logged once until the field works again."""
        self.overrun = False
        """Whether the last round took longer than the interval (said once per run of them)."""

    def start(self, *, ready: bool = True) -> BucketPoller:
        """Start the thread; ``ready``: after one round in this thread, so a server answers
        its first request with a current copy (and LanceDB loaded)."""
        self.store.background_indexing = True
        if ready and self._thread is None:
            self.round()
            self._warm()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="deepfield-bucket",
                                            daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.round()
            took = time.monotonic() - started
            self._note_overrun(took)
            self._stop.wait(max(0.05, self.interval - took))

    def _note_overrun(self, took: float) -> None:
        """Warn when a round takes longer than the interval: rounds then run back to back
        (the bucket is listed and indexed without pause, and other replicas' writes arrive
        later than the interval says). Once per run of such rounds, not each round."""
        late = took > self.interval
        if late and not self.overrun and not self._stop.is_set():
            log.warning("bucket store %s: a poll round took %.2f s, longer than the %.2f s "
                        "interval, so rounds run back to back; raise [server] poll_s in the "
                        "store's deepfield.toml", self.store.url, took, self.interval)
        elif self.overrun and not late:
            log.info("bucket store %s: poll rounds fit the %.2f s interval again",
                     self.store.url, self.interval)
        self.overrun = late

    def round(self) -> None:
        """One pass over every field (also callable directly, e.g. by tests)."""
        try:
            with self.store.reaching():
                if time.monotonic() - self._names_at >= FIELDS_EVERY_S or not self._names:
                    self._names = self.store.field_names()
                    self._names_at = time.monotonic()
                # Logins (server/auth.py) follow this replica's copy of deepfield.toml.
                self.store.refresh_config()
            indexer = self.store.may_write_index()
        except Exception as exc:  # the bucket is unreachable: keep serving what we have
            self._failed("*", exc)
            return
        self.failures.pop("*", None)
        for name in self._names:
            if self._stop.is_set():
                return
            try:
                self._field_round(name, indexer)
                self.failures.pop(name, None)
            except Exception as exc:
                self._failed(name, exc)
        self.rounds += 1

    def _warm(self) -> None:
        """Open each shared dataset once (importing LanceDB takes seconds): not on the first
        search of a replica that does not index."""
        for handle in self._handles.values():
            if handle.index_backend != SqliteBackend.name:
                with contextlib.suppress(Exception):
                    handle.search_backend().pending_chunk_vectors()

    def _field_round(self, name: str, indexer: bool) -> None:
        took: dict[str, float] = {}
        mark = time.monotonic()

        def stage(label: str) -> None:
            nonlocal mark
            now = time.monotonic()
            took[label] = now - mark
            mark = now

        handle = self._handles.get(name)
        if handle is None:
            handle = self._handles[name] = self.store.open_handle(name)
        handle.refresh_from_bucket()
        stage("pages")
        if handle.index_backend == SqliteBackend.name:
            return
        writer = self._writers.get(name)
        if writer is None:
            writer = self._writers[name] = create_index_backend(
                handle.index_backend, handle.shared_backend_context())
        if indexer:
            handle.ensure_synced(embed=False)
            stage("catalogue")
            if time.monotonic() - self._checked.get(name, 0.0) >= CHECK_EVERY_S:
                self._checked[name] = time.monotonic()
                writer.check()  # deleted or damaged by hand meanwhile: rebuilt now
            writer.refresh(embed_budget=None)
            stage("dataset")
        if isinstance(writer, LanceBackend) and self.store.background_indexing:
            # Every replica (the indexer too) searches its own copy of the dataset.
            sync_field_copy(handle)
            stage("copy")
        log.debug("field %s round %d: %s", name, self.rounds,
                  ", ".join(f"{label} {seconds:.2f} s" for label, seconds in took.items()))

    def _failed(self, name: str, exc: Exception) -> None:
        text = f"{type(exc).__name__}: {exc}"
        if self.failures.get(name) != text:
            log.warning("bucket store %s, field %s: %s", self.store.url, name, text)
        self.failures[name] = text

    def close(self) -> None:
        self._stop.set()
        self.store.background_indexing = False
        if self._thread is not None:
            self._thread.join(timeout=30)
        for writer in self._writers.values():
            close_quietly(writer)
        self._writers.clear()
        for handle in self._handles.values():
            with contextlib.suppress(Exception):
                handle.close()
        self._handles.clear()
        with contextlib.suppress(Exception):
            self.store.lease.release()
