"""What both servers (HTTP and MCP) do with a store, made safe for many concurrent requests.

A :class:`~deepfield.Field` holds one SQLite connection that serves one caller at a time, so
each field gets a writer used under its lock and a pool of searchers (pool.py); blocking calls
run in worker threads, never on the event loop. The library calls are the same as the CLI's;
what is added here is the spec's search fallback and the zip snapshot cache (the path checks
and the zip itself are pagefiles.py's).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool

from ..errors import InvalidNameError, RemoteUnavailableError
from ..field import Field
from ..llm.config import LLMConfig, Role, build_llm, load_llm_config
from ..manage.activation import activation_cached
from ..page import is_valid_name
from ..read import PageView
from ..search import search_fields
from ..store import Store
from .backfill import Backfiller, backfill_embedder
from .fallback import substring_matches
from .pagefiles import Snapshot, page_path, snapshot_of
from .pool import Activity, FieldSlot, SharedEmbedder
from .watching import FolderWatcher

T = TypeVar("T")


class Service:
    """A store as the servers see it: fields by name, each with a locked writer and a pool of
    searchers (see pool.py); blocking calls are moved off the event loop."""

    def __init__(self, store: Store, llm_config: LLMConfig | None = None, *,
                 readers: int | None = None) -> None:
        self.store = store
        self.llm_config = llm_config if llm_config is not None else load_llm_config(store.root)
        self.readers = readers or min(8, max(2, os.cpu_count() or 2))
        self.embedder = SharedEmbedder(store.embedder) if store.embedder is not None else None
        self._llms: dict[str, Any] = {}
        self._slots: dict[str, FieldSlot] = {}
        self._guard = threading.Lock()
        self._llm_lock = threading.Lock()
        self._zips: dict[str, Snapshot] = {}
        self._background = ThreadPoolExecutor(1, thread_name_prefix="deepfield-sync")
        self._watcher = FolderWatcher()
        self.activity = Activity()
        self._backfill = Backfiller(self._open_slots, self.activity,
                                    lambda: backfill_embedder(store, self.embedder))
        self._poller: Any = None

    def start_backfill(self) -> None:
        """Compute what the fields' indexes lack while the server is idle (backfill.py), unless
        the store's ``[server] backfill = false``; a store in a bucket also starts following
        the bucket (bucket/poller.py)."""
        bucket = getattr(self.store, "bucket", None) is not None
        # A bucket store's lancedb fields get their vectors once, from the indexer: each
        # replica embedding its own copy would only spend its CPU.
        shared = bucket and self.store.config.index.backend != "sqlite"
        if self.embedder is not None and self.store.config.server.backfill and not shared:
            self._backfill.start()
        if self._poller is None and bucket:
            from ..bucket.poller import BucketPoller
            from ..bucket.store import BucketStore

            assert isinstance(self.store, BucketStore)
            self._poller = BucketPoller(self.store,
                                        interval=self.store.config.server.poll_s).start()

    def _open_slots(self) -> list[FieldSlot]:
        with self._guard:
            return list(self._slots.values())

    def close(self) -> None:
        if self._poller is not None:
            self._poller.close()
        self._backfill.close()
        self._watcher.close()  # before the sync thread it feeds goes away
        self._background.shutdown(wait=True)
        with self._guard:
            for slot in self._slots.values():
                slot.close()
            self._slots.clear()

    # ------------------------------------------------------------------ fields

    def field_names(self) -> list[str]:
        # A bucket store lists its working copy's fields while the bucket is down.
        names = getattr(self.store, "readable_field_names", self.store.field_names)()
        return [n for n in names if is_valid_name(n)]

    def copy_warnings(self) -> list[str]:
        """Why a listing of fields comes from this process's copy (a bucket that is down)."""
        problem = getattr(self.store, "unreachable", None)
        return [problem] if isinstance(problem, str) else []

    def slot(self, name: str) -> FieldSlot:
        """The writer and searchers of field ``name``; only spec names are served."""
        if not is_valid_name(name):
            raise InvalidNameError(f"field name {name!r} is not a spec name")
        with self._guard:
            slot = self._slots.get(name)
            if slot is None:
                path = self.store.field(name).path  # raises UnknownFieldError
                slot = FieldSlot(path, name, self.embedder, self.readers, self._background,
                                 self.activity, self._watcher,
                                 lambda: self._open_field(name))
                self._watcher.add(path, slot.pages_changed)
                self._slots[name] = slot
            return slot

    def create_field(self, name: str) -> None:
        """Create field ``name`` if the store has none of that name (an agent's first write)."""
        with self._guard:
            if name not in self.store.field_names():
                self.store.create_field(name, exist_ok=True)

    def discard_if_empty(self, name: str) -> bool:
        """Remove field ``name`` when it holds no page, after a call that created it failed
        (a `remember` whose model could not be reached left a new, empty field behind):
        a local store's folder, a bucket's folder marker. True when it was removed."""
        from ..bucket.store import BucketStore
        from ..manage.watch import is_page_path

        if isinstance(self.store, BucketStore):
            with self._guard:
                slot = self._slots.pop(name, None)
                if slot is not None:
                    slot.close()
                # Unreachable now: the marker stays (the call's own error is what to report).
                with contextlib.suppress(RemoteUnavailableError):
                    return self.store.discard_empty_field(name)
            return False
        folder = self.store.root / name
        with self._guard:
            if not folder.is_dir() or any(
                    is_page_path(folder, str(p)) for p in folder.iterdir()):
                return False
            slot = self._slots.pop(name, None)
            if slot is not None:
                slot.close()
            self.store.forget_field(name)
            shutil.rmtree(folder, ignore_errors=True)
        return True

    def _open_field(self, name: str) -> Field:
        """A Field of the store for a slot, on the server's shared embedder."""
        return self.store.open_handle(name, self.embedder)

    def field(self, name: str) -> Field:
        """The field's writer (use it under :meth:`lock`)."""
        return self.slot(name).writer

    def lock(self, name: str) -> threading.Lock:
        return self.slot(name).lock

    def locked(self, name: str, fn: Callable[[Field], T]) -> T:
        """Run ``fn(field)`` under the field's lock (blocking; call from a worker thread)."""
        return self.slot(name).locked(fn)

    def writing(self, name: str, fn: Callable[[Field], T]) -> T:
        """Like :meth:`locked`, for calls that write pages (searches need no re-scan after)."""
        slot = self.slot(name)
        self.activity.touch()
        with slot.lock:
            try:
                result = fn(slot.writer)
                slot.embed_new()  # hybrid search finds the new text by meaning at once
                return result
            finally:
                slot.wrote()

    async def run(self, name: str, fn: Callable[[Field], T], *, write: bool = False) -> T:
        """Run ``fn(field)`` in a worker thread under the field's lock."""
        return await run_in_threadpool(self.writing if write else self.locked, name, fn)

    # ------------------------------------------------------------------ files

    page_path = staticmethod(page_path)

    def read(self, name: str, ref: str, *, view: str, section: str | None = None,
             depth: int = 2, sentences: int = 1) -> PageView:
        """Read a page (outline, full or section) by filename, stem or uuid; the resolved
        file goes through :meth:`page_path`, so a symbolic link is never followed. A page
        already in the folder under a non-spec name ("My Notes.md") is read, as the page
        route serves it and search lists it."""

        def run(field: Field) -> PageView:
            filename = field.resolve(ref)
            self.page_path(field, filename, existing=True)
            return field.read(filename, outline_only=view == "outline", depth=depth,
                              sentences=sentences, section=section if view == "section" else None)

        return self.locked(name, run)

    # ------------------------------------------------------------------ search

    def search(self, name: str, query: str, *, k: int, mode: str | None,
               unit: str) -> dict[str, Any]:
        """Search one field (blocking; see :meth:`search_many`)."""
        return self.search_many([name], query, k=k, mode=mode, unit=unit)

    def search_inline(self, name: str, query: str, *, k: int, mode: str | None,
                      unit: str) -> dict[str, Any] | None:
        """Search one field in the calling thread when nothing can make it wait: no sync due,
        a searcher free, and a BM25 search or an embedder that encodes in this process; else
        None (use :meth:`search` in a worker thread).

        The HTTP server calls this on its event loop. Handing each search to a thread and
        back cost more than the search's own Python: on 10k pages with 8 clients and 2
        workers, BM25 p95 34-44 ms inline against 44-69 ms through the threadpool
        (bench/serve_load.py, six runs each). An embedder behind a network (an OpenAI-style
        endpoint) keeps the thread, so a slow reply does not stall the other connections; a
        local model's encoding is CPU work like the rest of the search. Inline, a hybrid
        search scores vectors and BM25 one after the other (``parallel=False``): with a
        process per core a second thread only competes with the other searches."""
        chosen = self._mode(mode)
        with self._guard:
            slot = self._slots.get(name)
        if slot is None:  # opening a field may migrate its index: a thread
            return None
        if chosen != "bm25" and (self.embedder is None or not self.embedder.in_process
                                 or not self.embedder.try_embed_query(query)):
            return None
        if not activation_cached(slot.path):  # a changed activation log is re-read: a thread
            return None
        out = slot.try_search(lambda f: self._search_fields([f], query, k, chosen, unit,
                                                            sync=False, substring=False,
                                                            parallel=False),
                              embed=chosen != "bm25")
        if out is None or (chosen == "bm25" and unit == "page" and len(out["results"]) < k):
            return None  # the spec's substring fallback may scan every page: a thread
        out["field"] = name
        return out

    def search_many(self, names: list[str], query: str, *, k: int, mode: str | None,
                    unit: str) -> dict[str, Any]:
        """Search fields together. The default mode is hybrid when the fields have an
        embedding model, else BM25; a BM25 search that finds fewer than ``k`` pages adds the
        spec's substring matches. One field: on a free searcher, in parallel with others;
        several: on their writers, holding their locks in name order."""
        chosen = self._mode(mode)
        started = time.monotonic()  # the search's budget counts from here
        if len(set(names)) == 1:
            out = self.slot(names[0]).search(
                lambda f: self._search_fields([f], query, k, chosen, unit, sync=False),
                embed=chosen != "bm25", started=started)
            out["field"] = names[0]
            return out
        fields = [self.field(n) for n in names]
        with self.holding(names):
            return self._search_fields(fields, query, k, chosen, unit, sync=True,
                                       started=started)

    def _mode(self, mode: str | None) -> str:
        return mode or ("hybrid" if self.embedder is not None else "bm25")

    @staticmethod
    def _search_fields(fields: list[Field], query: str, k: int, mode: str, unit: str,
                       *, sync: bool, substring: bool = True, parallel: bool = True,
                       started: float | None = None) -> dict[str, Any]:
        response = search_fields(fields, query, k=k, mode=mode, unit=unit, sync=sync,
                                 parallel=parallel, started=started)
        out = response.to_json(with_text=unit == "chunk")
        if substring and mode == "bm25" and unit == "page" and len(response.results) < k:
            seen = {(r["field"], r["filename"]) for r in out["results"]}
            for field in fields:
                out["results"] += substring_matches(field, query, seen, k - len(out["results"]))
            out["count"] = len(out["results"])
            if not response.results and out["results"]:
                # The signal read no lines ("nothing was found"), yet pages are listed.
                out["confidence"] = {**out["confidence"], "level": "low", "reason": (
                    "no keyword match; these pages only hold the query in their filename, "
                    "title or summary")}
        return out

    @contextmanager
    def holding(self, names: list[str]) -> Iterator[None]:
        """Hold the locks of several fields, always taken in the same (name) order."""
        locks = [self.lock(n) for n in sorted(set(names))]
        self.activity.touch()
        for lock in locks:
            lock.acquire()
        try:
            yield
        finally:
            for lock in reversed(locks):
                lock.release()

    # ------------------------------------------------------------------ memory

    def llm(self, role: Role) -> Any:
        """The store's chat model for ``role`` (None: the offline algorithms); built once,
        even when requests for several fields ask for it at the same moment."""
        with self._llm_lock:
            if role not in self._llms:
                self._llms[role] = build_llm(self.llm_config, role)
            return self._llms[role]

    def context(self, field: Field, task: str, *, budget: int,
                level: str = "deep") -> dict[str, Any]:
        """A context block for ``task`` at ``level`` (call under the field's lock)."""
        from ..context import build_context

        result = build_context(field, task, budget=budget, level=level,
                               llm=self.llm("researcher"))
        out: dict[str, Any] = result.to_json()
        out.setdefault("text", result.text)
        return out

    def research(self, names: list[str], question: str, *, max_rounds: int,
                 budget: int) -> dict[str, Any]:
        """Research ``question`` over the named fields (holding their locks, in name order)."""
        from ..fence import check_fenced_budget, fence_research
        from ..research import research

        fields = [self.field(n) for n in names]
        check_fenced_budget(budget, names, question)
        with self.holding(names):
            result = research(fields, question, llm=self.llm("researcher"),
                              max_rounds=max_rounds, budget=budget)
        out: dict[str, Any] = fence_research(result, [f.name for f in fields]).to_json()
        return out

    def remember(self, name: str, text: str, *, format: str | None, source: str = "remote",
                 label: str = "the request body") -> dict[str, Any]:
        """Memorize ``text`` into field ``name`` (blocking: call from a worker thread). The
        text is always passed as content: a client can never make the server open a path of
        its choosing. The page is prepared on a searcher — parsing, the memo and its model
        call, if any, take seconds — and only its write holds the field's writer, so reads,
        research and other writes of the field do not wait for a model."""
        from ..memorize import RememberResult, file_prepared, prepare_remember

        llm = self.llm("memorizer")
        prepared = self.slot(name).search(
            lambda reader: prepare_remember(
                reader, source, text=text, llm=llm, format=format or "auto", sync=False,
                label=label),
            embed=False)
        if isinstance(prepared, RememberResult):
            return prepared.to_json()
        out: dict[str, Any] = self.writing(name, lambda f: file_prepared(f, prepared)).to_json()
        return out

    # ------------------------------------------------------------------ zip

    def snapshot(self, name: str) -> Snapshot:
        """The field as a ``.memoryfield.zip`` (rebuilt only when a file changed)."""

        def run(field: Field) -> Snapshot:
            snap = self._zips[field.name] = snapshot_of(field, self._zips.get(field.name))
            return snap

        return self.locked(name, run)
