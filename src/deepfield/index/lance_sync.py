"""Bring a field's LanceDB dataset in step with its SQLite index (the catalogue of its pages).

The catalogue already holds every page's chunks, made by the same chunking as any index
(chunking.py via sync.py), and their vectors. A sync compares each page's sha256 and vector
state with the dataset's ``pages`` table and rewrites the rows of the pages that differ:
chunks first, then the page row that vouches for them, so an interrupted sync only repeats
work. Chunks still waiting for a vector are written with ``embedded = false`` (keyword search
finds them at once) after up to ``embed_budget`` seconds spent computing the vectors of the
pages being written, never of pages the dataset already holds: a process that takes over
from another indexer re-embeds nothing the dataset has.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .backend import superseded
from .db import bump_generation, transaction
from .encoding import LineVectors
from .lance_table import LanceDataset, chunk_key, page_id
from .sync import NOT_A_PAGE

if TYPE_CHECKING:
    import pyarrow as pa

    from ..embed.base import Embedder
    from . import FieldIndex

BATCH_PAGES = 2_000
"""Pages written per LanceDB commit during a sync (a 1M-chunk build: ~50 commits)."""


@dataclass
class PushReport:
    written: int = 0
    removed: int = 0
    unchanged: int = 0
    chunks: int = 0
    embedded: int = 0
    incomplete: int = 0
    """Pages written with chunks still waiting for vectors."""
    seconds: float = 0.0
    maintenance: dict[str, Any] = field(default_factory=dict)

    @property
    def changed(self) -> int:
        return self.written + self.removed


@dataclass(frozen=True)
class _Doc:
    id: int
    filename: str
    sha: str
    uuid: str | None
    title: str
    summary: str | None
    frontmatter: str
    last_modified: str
    size: int


def push(catalogue: FieldIndex, dataset: LanceDataset, embedder: Embedder | None, *,
         embed_budget: float | None = 0.0,
         progress: Callable[[int], None] | None = None) -> PushReport:
    """Write what the dataset lacks (see the module docstring); returns what was done."""
    started = time.monotonic()
    deadline = None if embed_budget is None else started + embed_budget
    report = PushReport()
    conn = catalogue.conn
    docs = [_Doc(r[0], r[1], bytes(r[2]).hex(), *r[3:]) for r in conn.execute(
        "SELECT id, filename, sha256, uuid, title, summary, frontmatter, last_modified, size "
        f"FROM df_docs WHERE page_embedded != {NOT_A_PAGE}")]
    pending = set() if embedder is None else {int(r[0]) for r in conn.execute(
        "SELECT DISTINCT doc_id FROM df_chunks WHERE embedding IS NULL")}
    states = dataset.page_states()
    todo: list[_Doc] = []
    retry: set[int] = set()
    """Pages the dataset holds as they are, written before their vectors were computed."""
    for doc in docs:
        state = states.get(doc.filename)
        if state is not None and state[0] == doc.sha:
            if state[1] or (doc.id in pending and deadline is not None
                            and time.monotonic() >= deadline):
                report.unchanged += 1
                continue
            if doc.id in pending:
                retry.add(doc.id)
        todo.append(doc)
    present = {doc.filename for doc in docs}
    removed = [name for name in states if name not in present]
    for start in range(0, max(len(todo), 1 if removed else 0), BATCH_PAGES):
        batch = todo[start:start + BATCH_PAGES]
        if embedder is not None and (deadline is None or time.monotonic() < deadline):
            report.embedded += _embed(catalogue, embedder, [d.id for d in batch if d.id in pending],
                                      deadline)
        if retry:
            still = _still_pending(catalogue, [d.id for d in batch if d.id in retry])
            report.unchanged += len(still)
            batch = [d for d in batch if d.id not in still]
        chunks, pages, incomplete = _rows(catalogue, batch, embedder)
        gone = [d.filename for d in batch if d.filename in states]
        if start == 0:
            gone += removed
        dataset.replace_pages(gone, chunks, pages)
        report.written += len(batch)
        report.chunks += chunks.num_rows
        report.incomplete += incomplete
        if progress is not None:
            progress(len(batch))
    report.removed = len(removed)
    report.seconds = time.monotonic() - started
    return report


def _still_pending(catalogue: FieldIndex, doc_ids: list[int]) -> set[int]:
    found: set[int] = set()
    for start in range(0, len(doc_ids), 500):
        part = doc_ids[start:start + 500]
        found.update(int(r[0]) for r in catalogue.conn.execute(
            "SELECT DISTINCT doc_id FROM df_chunks WHERE embedding IS NULL AND doc_id IN "
            f"({','.join('?' * len(part))})", part))
    return found


def _embed(catalogue: FieldIndex, embedder: Embedder, doc_ids: list[int],
           deadline: float | None) -> int:
    """Compute the missing chunk vectors of ``doc_ids`` (until ``deadline``) and store them
    in the catalogue too, where the text is still the one encoded."""
    conn = catalogue.conn
    done = 0
    lines = LineVectors(catalogue.windows == "lines")
    for start in range(0, len(doc_ids), 200):
        part = doc_ids[start:start + 200]
        rows = conn.execute(
            "SELECT id, context, body, kind, line_start, line_end FROM df_chunks WHERE "
            f"embedding IS NULL AND doc_id IN ({','.join('?' * len(part))}) "
            "ORDER BY doc_id, ord", part).fetchall()
        for first in range(0, len(rows), 256):
            if deadline is not None and time.monotonic() >= deadline:
                return done
            chunk = rows[first:first + 256]
            # As index/vectors.py encodes chunks: a text the model cannot encode is stored
            # as an empty vector (found by keywords only), never asked for again.
            vectors, refused, _ = lines.chunk_vectors(embedder, [r[1:] for r in chunk], None)
            with transaction(conn):
                conn.executemany(
                    "UPDATE df_chunks SET embedding = ? WHERE id = ? AND embedding IS NULL "
                    "AND context = ? AND body = ?",
                    [(b"" if vectors is None or i in refused else vectors[i].tobytes(),
                      r[0], r[1], r[2]) for i, r in enumerate(chunk)])
                bump_generation(conn)
            done += len(chunk)
    return done


def _rows(catalogue: FieldIndex, batch: list[_Doc],
          embedder: Embedder | None) -> tuple[pa.Table, pa.Table, int]:
    """The ``chunks`` and ``pages`` rows of ``batch``, and how many of its pages still lack
    some vector."""
    import numpy as np
    import pyarrow as pa

    from .lance_table import chunks_schema, pages_schema

    dim = embedder.dim if embedder is not None else None
    by_id = {doc.id: doc for doc in batch}
    stale = {doc.id: superseded(json.loads(doc.frontmatter)) for doc in batch}
    columns: dict[str, list[Any]] = {name: [] for name in chunks_schema(None).names}
    blobs: list[bytes | None] = []
    counts: dict[int, int] = {}
    waiting: set[int] = set()
    ids = list(by_id)
    for start in range(0, len(ids), 500):
        part = ids[start:start + 500]
        rows = catalogue.conn.execute(
            "SELECT doc_id, ord, kind, heading, line_start, line_end, body, context, cjk, "
            f"embedding FROM df_chunks WHERE doc_id IN ({','.join('?' * len(part))}) "
            "ORDER BY doc_id, ord", part)
        for doc_id, ord_, kind, heading, line_start, line_end, body, context, cjk, blob in rows:
            doc = by_id[doc_id]
            counts[doc_id] = counts.get(doc_id, 0) + 1
            if blob is None:
                waiting.add(doc_id)
            values = (chunk_key(doc.filename, ord_), page_id(doc.filename), doc.filename,
                      ord_, kind, heading, line_start, line_end, body,
                      f"{context}\n{body}\n{cjk}", doc.title, doc.uuid, doc.summary,
                      doc.frontmatter, doc.last_modified, doc.size, stale[doc_id],
                      bool(blob))  # empty: a text the model could not encode, never searched
            for name, value in zip(columns, values, strict=True):
                columns[name].append(value)
            blobs.append(blob)
    schema = chunks_schema(dim)
    arrays: dict[str, Any] = dict(columns)
    if dim:
        zero = bytes(4 * dim)
        flat = np.frombuffer(b"".join(b if b else zero for b in blobs),
                             dtype=np.float32)
        arrays["vector"] = pa.FixedSizeListArray.from_arrays(pa.array(flat), dim)
    if not dim:
        waiting.clear()
    chunks = pa.table(arrays, schema=schema)
    pages = pa.table({
        "filename": [d.filename for d in batch],
        "doc": [page_id(d.filename) for d in batch],
        "sha256": [d.sha for d in batch],
        "complete": [d.id not in waiting for d in batch],
        "chunks": [counts.get(d.id, 0) for d in batch],
        "superseded": [stale[d.id] for d in batch],
    }, schema=pages_schema())
    return chunks, pages, len(waiting)
