"""Watching fields: re-index as people (or other tools) edit the Markdown files.

Uses watchfiles (native file notifications, polling where they are missing). Only changes to
pages at a field's root trigger work; deepfield's own files (the index, ``.deepfield/``,
temporary files, ``activation/``, ``review/``, ``archive/``) are ignored, so the watcher never
wakes itself up. Each batch of changes becomes one quick sync (size + mtime) plus up to a few
seconds of embedding for the new chunks (on one thread, as a search would). Whatever that
leaves (a large edit's chunks, page vectors, latent terms) is embedded in the background:
between file events, in slices of BACKGROUND_SLICE_S on every core, so the watcher answers the
next change within a slice.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from dataclasses import field as dc_field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import EmbeddingError
from ..page import SPECIAL_FILES, is_debris

if TYPE_CHECKING:
    from ..field import Field

EMBED_BUDGET = 3.0
"""Seconds of embedding per batch of changes; the rest is done in background slices."""
BACKGROUND_SLICE_S = 2.0
"""Seconds of background embedding between looks at the file events."""


@dataclass
class WatchEvent:
    field: str
    changed: list[str]
    added: int = 0
    updated: int = 0
    removed: int = 0
    chunks_embedded: int = 0
    seconds: float = 0.0
    warnings: list[str] = dc_field(default_factory=list)
    background: bool = False
    """A slice of background embedding, not a sync after changes."""
    latent_terms: int = 0
    pending: dict[str, int] = dc_field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"field": self.field, "changed": self.changed, "added": self.added,
                "updated": self.updated, "removed": self.removed,
                "chunks_embedded": self.chunks_embedded, "latent_terms": self.latent_terms,
                "background": self.background, "pending": self.pending,
                "seconds": round(self.seconds, 3), "warnings": self.warnings}


def is_page_path(root: Path, path: str) -> bool:
    """True for a page file directly inside ``root`` (what the index cares about)."""
    candidate = Path(path)
    name = candidate.name
    if candidate.parent != root or not name.endswith(".md") or name in SPECIAL_FILES:
        return False
    return not (name.startswith(".") or is_debris(name))


def sync_field(fld: Field, changed: list[str], embed: bool = True) -> WatchEvent:
    """One quick sync of ``fld`` after ``changed`` files changed."""
    started = time.perf_counter()
    report = fld.index(verify=False, embed=False)
    again = fld.reread(changed)  # the named files, whatever their size and mtime say
    event = WatchEvent(fld.name, changed, report.added + again.added,
                       report.updated + again.updated, report.removed + again.removed,
                       warnings=[*report.warnings, *again.warnings])
    if embed and fld.index_handle().embedder is not None:
        try:
            # Page vectors too (derived from the chunks', no encoder pass): the spec's
            # `pages` table lists what searches find.
            event.chunks_embedded = fld.embed(budget=EMBED_BUDGET, latent=False, threads=1,
                                              pages=fld.page_vectors != "whole").chunks
        except EmbeddingError as exc:
            event.warnings.append(f"new chunks could not be embedded: {exc.message}")
    event.seconds = time.perf_counter() - started
    return event


def embed_backlog(fld: Field) -> WatchEvent | None:
    """One background slice of what ``fld`` still lacks, or None when it lacks nothing."""
    if fld.index_handle().embedder is None or not fld.index_handle().pending().total:
        return None
    started = time.perf_counter()
    event = WatchEvent(fld.name, [], background=True)
    try:
        done = fld.embed(budget=BACKGROUND_SLICE_S)
    except EmbeddingError as exc:
        event.warnings.append(f"background embedding paused: {exc.message}")
    else:
        event.chunks_embedded, event.latent_terms = done.chunks, done.latent_chunks
        event.warnings += done.warnings
    event.pending = fld.index_handle().pending().to_json()
    event.seconds = time.perf_counter() - started
    return event


def watch(
    fields: Sequence[Field],
    on_event: Callable[[WatchEvent], None],
    *,
    stop: threading.Event | None = None,
    embed: bool = True,
    debounce_ms: int = 300,
    force_polling: bool | None = None,
) -> None:
    """Sync ``fields`` once, then after every change to their pages, until ``stop`` is set
    (or KeyboardInterrupt)."""
    from watchfiles import watch as watch_paths

    roots = {Path(os.path.realpath(f.path)): f for f in fields}
    backlog: set[str] = set()
    for fld in fields:
        on_event(sync_field(fld, [], embed))
        backlog.add(fld.name)

    def relevant(_change: Any, path: str) -> bool:
        return any(is_page_path(root, os.path.realpath(path)) or
                   is_page_path(root, path) for root in roots)

    for changes in watch_paths(
        *roots, watch_filter=relevant, debounce=debounce_ms, step=50, stop_event=stop,
        force_polling=force_polling, rust_timeout=1000, yield_on_timeout=embed,
        raise_interrupt=False,
    ):
        if not changes:  # a quiet second: a slice of the backlog
            for fld in fields:
                if fld.name in backlog and not (stop is not None and stop.is_set()):
                    event = embed_backlog(fld)
                    if event is None or not (event.chunks_embedded or event.latent_terms):
                        backlog.discard(fld.name)  # done, or nothing it may do (fast mode)
                    if event is not None and (event.chunks_embedded or event.latent_terms
                                              or event.warnings):
                        on_event(event)
            continue
        by_root: dict[Path, list[str]] = {}
        for _change, path in changes:
            real = Path(os.path.realpath(path))
            root = real.parent if real.parent in roots else Path(path).parent
            if root in roots:
                by_root.setdefault(root, []).append(Path(path).name)
        for root, names in by_root.items():
            on_event(sync_field(roots[root], sorted(set(names)), embed))
            backlog.add(roots[root].name)
