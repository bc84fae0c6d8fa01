"""Finishing a served field's index while the server is idle.

A server computes at once what a search needs: a sync embeds new chunks within a few seconds'
budget, and a write through the server embeds its own page. The rest of the work `deepfield
index` would do waits: whole-page vectors (the spec's ``pages`` table, read by other memoryfield
readers), latent terms (the researcher's ``latent`` tools), and the chunks of a large edit that
did not fit a sync's budget. The :class:`Backfiller` does that work on the server, a slice at a
time, so a served field converges without anyone running `deepfield index`:

* only while no request has used any field of this server for ``IDLE_S`` seconds: a busy
  server keeps its CPU for requests, and the first request after a pause waits at most for
  the batch in progress;
* in a thread of its own, with its own connection to the index and, where the store's
  configuration can build one, its own instance of the model, so neither the field's writer
  (PUT, DELETE) nor a search's query encoding waits behind it. Its writes are guarded as
  `deepfield index`'s are: a vector or term is stored only for the text that was encoded;
* by one worker process at a time: a lease in the index (``df_meta``), renewed each slice and
  taken over once it has run out, keeps several workers from encoding the same backlog.

Not at a lowered CPU priority: Python threads share one lock (the GIL), and a thread at nice 19
preempted while holding it would stall the server's event loop behind it for as long as the
scheduler starves it. ``[server] backfill = false`` in deepfield.toml turns it off (a paid
embedding endpoint, say); `deepfield index` does the same work at once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..embed.base import Embedder
from ..errors import DeepfieldError
from ..field import Field
from ..index.db import get_meta, set_meta, transaction
from ..store import Store, build_embedder

if TYPE_CHECKING:
    from .pool import Activity, FieldSlot

IDLE_S = 2.0
"""Seconds without a request before backlogs are worked on."""
POLL_S = 1.0
"""Seconds between looks at the fields."""
SLICE_S = 2.0
"""Budget of one slice of work (at least one batch is always finished)."""
RECHECK_S = 30.0
"""Seconds before a field found with nothing to do (or whose model failed) is looked at again."""
LEASE_S = 60.0
"""Seconds a worker's claim on a field's backlog lasts unless renewed."""
LEASE_KEY = "backfill_lease"

log = logging.getLogger(__name__)


class _StoppedError(Exception):
    """The server is closing: the slice ends after the batch just stored."""


class Backfiller:
    """A thread that computes the vectors and latent terms served fields still lack."""

    def __init__(self, slots: Callable[[], list[FieldSlot]], activity: Activity,
                 make_embedder: Callable[[], Embedder]) -> None:
        self._slots = slots
        self._activity = activity
        self._make_embedder = make_embedder
        self._embedder: Embedder | None = None
        self._fields: dict[str, Field] = {}
        """This thread's own Field (connection) per field name (a server's slots stay)."""
        self._rested_at: dict[str, float] = {}
        """When each field was last found with nothing to do (or failed)."""
        self._failing: set[str] = set()
        self._owner = f"{os.getpid()}-{id(self):x}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="deepfield-backfill",
                                            daemon=True)
            self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            # A slice ends after the batch in progress (a remote model's may take a while).
            self._thread.join(timeout=SLICE_S + 30.0)
            if self._thread.is_alive():
                return  # still using its connections: the lease runs out by itself
        for name, field in list(self._fields.items()):
            with contextlib.suppress(Exception):
                release_lease(field, self._owner)
                field.close()
            del self._fields[name]

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            self.step(time.monotonic())

    def step(self, now: float) -> int:
        """One look at the fields: a slice of work on each with a backlog, if no request has
        come for IDLE_S. Returns how many chunks, pages and latent-term rows were done."""
        done = 0
        for slot in self._slots():
            if self._stop.is_set() or now - self._activity.last < IDLE_S:
                break
            if slot.closed or not slot.path.is_dir():
                continue
            rested = self._rested_at.get(slot.name)
            if rested is not None and now < rested + RECHECK_S and slot.changed_at <= rested:
                continue  # nothing to do when last looked, and nothing synced since
            try:
                work = self._slice(slot)
            except _StoppedError:
                break
            except Exception as exc:  # one field's trouble must not stop the others'
                self._failed(slot.name, exc)
                work = 0
            else:
                self._failing.discard(slot.name)
            done += work
            if work:
                self._rested_at.pop(slot.name, None)
            else:
                self._rested_at[slot.name] = now
        return done

    def _failed(self, name: str, exc: Exception) -> None:
        """Logged once per run of failures (a retry comes every RECHECK_S)."""
        if name not in self._failing:
            self._failing.add(name)
            detail = exc.message if isinstance(exc, DeepfieldError) else repr(exc)
            log.warning("background indexing of field %s paused: %s", name, detail)

    def _slice(self, slot: FieldSlot) -> int:
        field = self._fields.get(slot.name)
        if field is None:
            if self._embedder is None:
                self._embedder = self._make_embedder()
            field = self._fields[slot.name] = Field(slot.path, self._embedder, name=slot.name)
            field.page_vectors = slot.writer.page_vectors
            field.windows = slot.writer.windows
        if not take_lease(field, self._owner, time.time()):
            return 0  # another worker is on it
        counted = [0]

        def count(n: int) -> None:
            counted[0] += n
            if self._stop.is_set():
                raise _StoppedError

        # Every core the model may use (searches encode their queries on a model of their
        # own, on one thread), and latent terms whatever the field's fast mode: finishing
        # what a fast import deferred is this thread's job.
        field.embed(budget=SLICE_S, pages=True, latent=True, progress=count)
        return counted[0]


def backfill_embedder(store: Store, shared: Embedder | None) -> Embedder:
    """A model instance of the backfill's own, built from the store's configuration, so that
    searches never wait for it; the shared one (calls serialised) when the store was opened
    with an embedder its configuration does not describe."""
    try:
        own = build_embedder(store.config.embedding)
    except DeepfieldError:
        own = None
    if own is not None and (shared is None or own.model_code == shared.model_code):
        return own
    if shared is None:
        raise RuntimeError("a keyword-only store has nothing to backfill")
    return shared


def take_lease(field: Field, owner: str, now: float) -> bool:
    """Claim (or renew) the field's backlog for ``owner`` unless another holds a live lease."""
    conn = field.index_handle().conn
    with transaction(conn):
        held = (get_meta(conn, LEASE_KEY) or "").split(" ")
        if len(held) == 2 and held[0] != owner and _float(held[1]) > now:
            return False
        set_meta(conn, LEASE_KEY, f"{owner} {now + LEASE_S:.3f}")
    return True


def release_lease(field: Field, owner: str) -> None:
    conn = field.index_handle().conn
    with transaction(conn):
        if (get_meta(conn, LEASE_KEY) or "").split(" ")[0] == owner:
            conn.execute("DELETE FROM df_meta WHERE key = ?", (LEASE_KEY,))


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0
