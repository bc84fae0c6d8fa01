"""Computing vectors: the pending chunks first, then the spec's whole-page vectors.

Chunks whose vector is NULL are embedded in batches, newest pages first, optionally within a
time budget so a search never waits long; what is left stays pending and keyword search still
covers it. The spec's ``pages`` rows (whole-file embeddings) are filled after the chunks.
Searching the vectors is dense.py's job.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..embed.base import Embedder, Vectors
from ..errors import ModelMismatchError
from .db import bump_generation, get_meta, set_meta, transaction
from .sync import page_embedding_text

if TYPE_CHECKING:
    pass

EMBED_BATCH = 32


_LABEL_MARKER = re.compile(r"^(\S[^:(\n]{0,60}?) \([^)\n]{1,30}\):", re.M)


def chunk_embedding_text(context: str, body: str) -> str:
    """What a chunk's vector is computed from: its title/heading context, then its text.

    Reference markers in record labels (``Caroline (D1:3): …`` → ``Caroline: …``) carry no
    meaning for a sentence encoder and are dropped; BM25 still indexes them verbatim.
    """
    cleaned = _LABEL_MARKER.sub(r"\1:", body)
    return f"{context}\n{cleaned}"


def count_pending(conn: sqlite3.Connection, with_pages: bool = True,
                  with_latent: bool = False) -> int:
    """Chunks without a vector, plus pages without one (``with_pages``) and chunks without
    latent terms (``with_latent``: the work `deepfield index` still has to do)."""
    chunks = conn.execute("SELECT count(*) FROM df_chunks WHERE embedding IS NULL").fetchone()[0]
    pages = latent = 0
    if with_pages:
        pages = conn.execute("SELECT count(*) FROM df_docs WHERE page_embedded = 0").fetchone()[0]
    if with_latent:
        from .latent import count_pending_latent

        latent = count_pending_latent(conn) + int(chunks)
    return int(chunks) + int(pages) + latent


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
    """Embed pending chunks, then pending pages, then (with ``include_pages``, when the model
    has a sparse head) the chunks' latent terms; returns (chunks, pages) embedded."""
    import numpy as np

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
        with transaction(conn):
            _check_dim(conn, embedder, vectors)
            # Only where the text is still the one encoded: another connection (a server's
            # backfill, `deepfield index`) may have re-synced the page meanwhile, and a freed
            # chunk id is given to the next chunk inserted.
            conn.executemany(
                "UPDATE df_chunks SET embedding = ? WHERE id = ? AND embedding IS NULL "
                "AND context = ? AND body = ?",
                [(vec.tobytes(), row[0], row[1], row[2])
                 for vec, row in zip(vectors, rows, strict=True)],
            )
            bump_generation(conn)
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
        with transaction(conn):
            if len(ready):
                _check_dim(conn, embedder, vectors)
            for vec, doc in zip(vectors, ready, strict=True):
                # Only for the page as encoded: it may have changed or gone meanwhile.
                conn.execute(
                    "INSERT OR REPLACE INTO pages(filename, frontmatter, last_modified, "
                    "sha256_hash, embedding) SELECT ?, ?, ?, ?, ? "
                    "WHERE EXISTS (SELECT 1 FROM df_docs WHERE id = ? AND sha256 = ?)",
                    (doc[1], doc[2], doc[3], bytes(doc[4]), vec.tobytes(), doc[0], doc[4]),
                )
                conn.execute(
                    "UPDATE df_docs SET page_embedded = 1 WHERE id = ? AND sha256 = ?",
                    (doc[0], doc[4]),
                )
            if ready:
                bump_generation(conn)  # page vectors feed the dense prefilter (dense.py)
        pages_done += len(ready)
        if progress:
            progress(len(ready))
    if embedder.has_latent:
        from .latent import embed_pending_latent

        done = embed_pending_latent(conn, embedder, deadline)
        if progress and done:
            progress(done)
    return chunks_done, pages_done
