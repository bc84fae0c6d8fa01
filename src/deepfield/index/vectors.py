"""Dense vectors: computing the pending ones and brute-force cosine search over a field.

Chunks whose vector is NULL are embedded in batches, newest pages first, optionally within a
time budget so a search never waits long; what is left stays pending and keyword search still
covers it. The spec's ``pages`` rows (whole-file embeddings) are filled after the chunks.

Search is an exact dot product over unit vectors held in one float32 matrix, reloaded only
when the index generation changes: 3-8 ms at 10k x 384 on one core (dependencies.md), no ANN
index to drift out of step with the pages.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ..embed.base import Embedder, Vectors
from ..errors import ModelMismatchError
from .db import bump_generation, get_meta, set_meta
from .sync import page_embedding_text

EMBED_BATCH = 32


_LABEL_MARKER = re.compile(r"^(\S[^:(\n]{0,60}?) \([^)\n]{1,30}\):", re.M)


def chunk_embedding_text(context: str, body: str) -> str:
    """What a chunk's vector is computed from: its title/heading context, then its text.

    Reference markers in record labels (``Caroline (D1:3): …`` → ``Caroline: …``) carry no
    meaning for a sentence encoder and are dropped; BM25 still indexes them verbatim.
    """
    cleaned = _LABEL_MARKER.sub(r"\1:", body)
    return f"{context}\n{cleaned}"


def count_pending(conn: sqlite3.Connection, with_pages: bool = True) -> int:
    chunks = conn.execute("SELECT count(*) FROM df_chunks WHERE embedding IS NULL").fetchone()[0]
    pages = 0
    if with_pages:
        pages = conn.execute("SELECT count(*) FROM df_docs WHERE page_embedded = 0").fetchone()[0]
    return int(chunks) + int(pages)


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
    budget_seconds: float | None = None,
    include_pages: bool = True,
    progress: Callable[[int], None] | None = None,
) -> tuple[int, int]:
    """Embed pending chunks, then pending pages; returns (chunks, pages) embedded."""
    deadline = None if budget_seconds is None else time.monotonic() + budget_seconds
    chunks_done = pages_done = 0
    while deadline is None or time.monotonic() < deadline:
        rows = conn.execute(
            "SELECT id, context, body FROM df_chunks WHERE embedding IS NULL "
            "ORDER BY doc_id DESC, ord LIMIT ?",
            (max(EMBED_BATCH, embedder.batch_size),),
        ).fetchall()
        if not rows:
            break
        vectors = embedder.embed([chunk_embedding_text(r[1], r[2]) for r in rows])
        conn.execute("BEGIN IMMEDIATE")
        try:
            _check_dim(conn, embedder, vectors)
            conn.executemany(
                "UPDATE df_chunks SET embedding = ? WHERE id = ? AND embedding IS NULL",
                [(vec.tobytes(), row[0]) for vec, row in zip(vectors, rows, strict=True)],
            )
            bump_generation(conn)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        chunks_done += len(rows)
        if progress:
            progress(len(rows))
    if not include_pages:
        return chunks_done, pages_done
    while deadline is None or time.monotonic() < deadline:
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
        vectors = embedder.embed(texts) if texts else np.zeros((0, 0), np.float32)
        conn.execute("BEGIN IMMEDIATE")
        try:
            if len(ready):
                _check_dim(conn, embedder, vectors)
            for vec, doc in zip(vectors, ready, strict=True):
                conn.execute(
                    "INSERT OR REPLACE INTO pages(filename, frontmatter, last_modified, "
                    "sha256_hash, embedding) VALUES (?, ?, ?, ?, ?)",
                    (doc[1], doc[2], doc[3], bytes(doc[4]), vec.tobytes()),
                )
                conn.execute(
                    "UPDATE df_docs SET page_embedded = 1 WHERE id = ? AND sha256 = ?",
                    (doc[0], doc[4]),
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        pages_done += len(ready)
        if progress:
            progress(len(ready))
    return chunks_done, pages_done


@dataclass
class VectorMatrix:
    """All embedded chunk vectors of one index, as one matrix for exact cosine search."""

    generation: int
    ids: npt.NDArray[np.int64]
    matrix: Vectors

    @classmethod
    def load(cls, conn: sqlite3.Connection, generation: int) -> VectorMatrix:
        rows = conn.execute(
            "SELECT id, embedding FROM df_chunks WHERE embedding IS NOT NULL ORDER BY id"
        ).fetchall()
        if not rows:
            return cls(generation, np.zeros(0, np.int64), np.zeros((0, 0), np.float32))
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        flat = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32)
        return cls(generation, ids, flat.reshape(len(rows), -1))

    def similarities(self, query: Vectors) -> Vectors:
        """Cosine similarity of ``query`` to every vector, in ``ids`` order."""
        if query.shape[0] != self.matrix.shape[1]:
            raise ModelMismatchError(
                f"query vector has {query.shape[0]} dimensions, the index {self.matrix.shape[1]}",
                "the embedder changed; run `deepfield reindex`",
            )
        result: Vectors = self.matrix @ query
        return result

    def search(
        self, query: Vectors, limit: int, include: list[int] | None = None
    ) -> list[tuple[int, float]]:
        """The ``limit`` most similar chunks, best first, then the cosine of every id in
        ``include`` not already listed (hybrid fusion needs it for keyword-only candidates)."""
        if not len(self.ids) or (limit <= 0 and not include):
            return []
        scores = self.similarities(query)
        limit = min(limit, len(scores))
        if 0 < limit < len(scores):
            top = np.argpartition(-scores, limit)[:limit]
            top = top[np.argsort(-scores[top], kind="stable")]
        else:
            top = np.argsort(-scores, kind="stable")[:limit]
        found = [(int(self.ids[i]), float(scores[i])) for i in top]
        if include:
            listed = {item for item, _ in found}
            wanted = np.asarray(sorted(set(include) - listed), dtype=np.int64)
            rows = np.clip(np.searchsorted(self.ids, wanted), 0, len(self.ids) - 1)
            for item, row in zip(wanted, rows, strict=True):
                if self.ids[row] == item:  # chunks still waiting for a vector are skipped
                    found.append((int(item), float(scores[row])))
        return found
