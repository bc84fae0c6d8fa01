"""The derived search index of one field: sync from Markdown, keyword and vector retrieval.

:class:`FieldIndex` owns SQLite connections to ``<model-code>.sqlite3`` (one per thread that
uses it) and an in-memory vector matrix. It never writes Markdown. Deleting the file loses
nothing: ``rebuild`` (or just the next sync) recreates it from the pages.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from ..embed.base import Embedder, LatentTerms, Vectors
from ..errors import IndexCorruptError, IndexStateError
from ..page import load_frontmatter_json
from ..scan import SourceFile
from .budget import Deadline
from .db import (
    BUSY_TIMEOUT_MS,
    KEYWORD_ONLY_CODE,
    bump_generation,
    connect,
    get_meta,
    index_filename,
    prepare,
    set_meta,
    transaction,
)
from .dense import DenseIndex
from .health import file_id, is_corruption
from .keyword import TermCounts, bm25_search
from .latent import LatentIndex, latent_stamp
from .sync import NOT_A_PAGE, SyncReport, sync_files
from .vectors import Pending, count_pending, count_pending_chunks, embed_pending

__all__ = ["ChunkRow", "DocRow", "FieldIndex", "Pending", "SyncReport"]


@dataclass(frozen=True)
class DocRow:
    id: int
    filename: str
    uuid: str | None
    title: str
    summary: str | None
    frontmatter: dict[str, Any] | None
    last_modified: str
    size: int
    warnings: list[str]


@dataclass(frozen=True)
class ChunkRow:
    id: int
    doc: DocRow
    ord: int
    kind: str
    heading: str
    line_start: int
    line_end: int
    body: str


class CatalogueEntry(NamedTuple):
    filename: str
    title: str
    summary: str | None


CHUNK_TABLE_SECONDS_PER_ROW = 0.8e-6
"""What building the chunk id → doc id arrays costs per chunk (0.77 s for 1M chunks, 2 cores).
A long-lived index (a server's searcher) switches from SQL lookups of each search's ~100 hits
(~0.5 ms a search at 100k chunks, the rows being spread over the file) to the arrays once the
lookups of one index generation have cost that much."""

_DOC_COLUMNS = "d.id, d.filename, d.uuid, d.title, d.summary, d.frontmatter, d.last_modified, " \
    "d.size, d.warnings"


def _doc(row: tuple[Any, ...]) -> DocRow:
    return DocRow(
        id=row[0], filename=row[1], uuid=row[2], title=row[3], summary=row[4],
        frontmatter=load_frontmatter_json(row[5]), last_modified=row[6], size=row[7],
        warnings=json.loads(row[8]),
    )


class FieldIndex:
    """Search index of one field directory for one embedder (None: keyword only)."""

    def __init__(self, field_dir: Path, embedder: Embedder | None, index_dir: Path | None = None,
                 *, rebuild: bool = False):
        self.field_dir = field_dir
        self.embedder = embedder
        self.model_code = embedder.model_code if embedder else KEYWORD_ONLY_CODE
        self.path = (index_dir or field_dir) / index_filename(self.model_code)
        if self.path.is_dir() and not self.path.is_symlink():
            # Not an index SQLite could ever open: moved aside like a damaged file (healing)
            # so the index can be rebuilt from the pages, its contents kept.
            raise IndexCorruptError(f"cannot open index {self.path}: it is a folder, not a "
                                    "file", damaged=True)
        try:
            conn = connect(self.path)
        except sqlite3.DatabaseError as exc:
            if "locked" in str(exc):  # still held after the busy timeout: not a damaged file
                raise IndexStateError(
                    f"cannot open index {self.path}: another process has held it locked "
                    f"for {BUSY_TIMEOUT_MS // 1000} s",
                    "try again; if a deepfield process hangs, stop it") from None
            raise IndexCorruptError(f"cannot open index {self.path}: {exc}",
                                    damaged=is_corruption(exc)) from None
        try:
            prepare(conn, self.path, self.model_code, embedder.dim if embedder else None,
                    rebuild=rebuild)
        except sqlite3.DatabaseError as exc:
            conn.close()
            if not is_corruption(exc):
                raise
            raise IndexCorruptError(f"index {self.path} is damaged: {exc}", damaged=True) from None
        except BaseException:
            conn.close()
            raise
        # One connection per thread: threads sharing a Field (a web app, LangGraph branches)
        # then serialise on SQLite's own locks as processes do. One shared connection mixed
        # their statements ("cannot start a transaction within a transaction").
        self._local = threading.local()
        self._local.conn = conn
        self._conns = [(weakref.ref(threading.current_thread()), conn)]
        self._conns_lock = threading.Lock()
        self.windows = "lines"
        """How record windows get vectors and terms (config.IndexConfig.windows)."""
        self.page_vectors = "mean"
        """How page vectors are made (config.IndexConfig.page_vectors)."""
        self.file_id = file_id(self.path)
        """The file this connection opened: another process may replace it (healing)."""
        self._vector_cache = self.path.parent / ".deepfield" / f"{self.model_code}.vectors"
        if embedder is not None:
            # Made now, with the index file: made by the first search instead, it would change
            # the folder's mtime, which a server takes for edited pages and re-scans.
            with contextlib.suppress(OSError):
                self._vector_cache.parent.mkdir(exist_ok=True)
        self._dense: DenseIndex | None = None
        self._latent: dict[bool, LatentIndex] = {}
        self._term_counts = TermCounts()
        self._chunk_table: tuple[int, Any, Any] | None = None
        self._chunk_sql_generation = -1
        self._chunk_sql_seconds = 0.0
        self._chunk_rows = 0
        self.slow_builds = True
        """False while a caller must not wait (a server's event loop): lookups stay on SQL."""

    @property
    def with_vectors(self) -> bool:
        return self.embedder is not None

    @property
    def conn(self) -> sqlite3.Connection:
        """This thread's connection to the index file (opened on the thread's first use)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path)
            with self._conns_lock:
                # The connections of threads that ended are closed here, so a process that
                # runs each request on a new thread holds one per live thread, not one per
                # request ever made.
                kept = []
                for thread, other in self._conns:
                    owner = thread()
                    if owner is None or not owner.is_alive():
                        other.close()
                    else:
                        kept.append((thread, other))
                self._conns = [*kept, (weakref.ref(threading.current_thread()), conn)]
            self._local.conn = conn
        return conn

    def close(self) -> None:
        with self._conns_lock:
            conns, self._conns = self._conns, []
        for _thread, conn in conns:
            conn.close()

    def replaced(self) -> bool:
        """Whether the file at :attr:`path` is no longer the one this index opened (moved
        aside as damaged, or deleted, by this or another process)."""
        return file_id(self.path) != self.file_id


    # ------------------------------------------------------------------ maintenance

    def generation(self) -> int:
        return int(get_meta(self.conn, "generation") or 0)

    def sync(
        self,
        files: list[SourceFile],
        *,
        verify: bool = False,
        embed_budget: float | None = 0.0,
        progress: Callable[[int], None] | None = None,
        embed_progress: Callable[[int], None] | None = None,
    ) -> SyncReport:
        """Reconcile with ``files``; then embed pending chunk vectors within ``embed_budget``
        seconds (None: everything pending, pages and latent terms too; 0: nothing)."""
        started = time.time()
        last = float(get_meta(self.conn, "synced_at") or 0.0)
        report = sync_files(
            self.conn, files, verify=verify, with_vectors=self.with_vectors,
            last_sync=last, progress=progress,
        )
        if report.hashed or report.removed or not last:
            # Only when the folder was looked at closer: a sync that found every page as it
            # was leaves the index file byte for byte (a search in a git checkout must not
            # dirty it), and the pages it skipped were not recent enough to be racy.
            with transaction(self.conn):
                set_meta(self.conn, "synced_at", repr(started))
        if self.embedder is not None:
            if embed_budget is None or embed_budget > 0:
                done = embed_pending(
                    self.conn, self.embedder, self.field_dir,
                    deadline=Deadline(embed_budget), pages=embed_budget is None,
                    page_vectors=self.page_vectors, windows=self.windows,
                    threads=None if embed_budget is None else 1, progress=embed_progress,
                )
                report.chunks_embedded, report.pages_embedded = done.chunks, done.pages
                report.warnings += done.warnings
            report.pending_vectors = self.pending_vectors()
        report.seconds = time.time() - started
        return report

    def sync_names(self, files: list[SourceFile], names: set[str], *,
                   verify: bool = False) -> SyncReport:
        """Sync just ``names`` (``files``: those of them that exist), without embedding;
        ``verify`` reads them whatever their size and mtime say."""
        return sync_files(
            self.conn, files, verify=verify, with_vectors=self.with_vectors, only=names,
            last_sync=float(get_meta(self.conn, "synced_at") or 0.0),
        )

    def pending(self, *, latent: bool = True) -> Pending:
        """Work still to do by kind: chunk vectors, page vectors and (for a model with a
        sparse head, unless ``latent`` is false) chunks without latent terms."""
        if not self.with_vectors:
            return Pending()
        latent = latent and self.embedder is not None and self.embedder.has_latent
        return count_pending(self.conn, latent=latent)

    def pending_vectors(self) -> int:
        """Chunk and page vectors still to compute (latent terms: :meth:`pending`). Every
        sync reports it, so it skips the latent count: that anti-join reads every chunk of
        the field, which a quick sync must not."""
        pending = self.pending(latent=False)
        return pending.chunk_vectors + pending.page_vectors

    def pending_chunk_vectors(self) -> int:
        """Chunk vectors still to compute (what a search waits for; no page or latent count)."""
        return count_pending_chunks(self.conn) if self.with_vectors else 0

    def unencodable_chunks(self) -> int:
        """Chunks the model could not encode (found by keywords only)."""
        if not self.with_vectors:
            return 0
        row = self.conn.execute("SELECT count(*) FROM df_chunks WHERE length(embedding) = 0")
        return int(row.fetchone()[0])

    def clear(self) -> None:
        """Drop every row (``reindex`` then rebuilds from the Markdown alone)."""
        with transaction(self.conn):
            self.conn.execute("DELETE FROM df_chunks")
            self.conn.execute("DELETE FROM df_docs")
            if self.with_vectors:
                self.conn.execute("DELETE FROM pages")
                # No vector is left: the next ones set the size (a model swapped behind the
                # same model code made the old size an error that only reindex could clear).
                self.conn.execute("DELETE FROM df_meta WHERE key = 'dim'")
            self.conn.execute("INSERT INTO df_chunks_fts(df_chunks_fts) VALUES ('rebuild')")
            set_meta(self.conn, "synced_at", "0")
            bump_generation(self.conn)  # ids restart: no table of before may be used
        self._dense = None
        self._term_counts = TermCounts()
        self._chunk_table = None

    def stored_warnings(self) -> list[str]:
        warnings: list[str] = []
        for (raw,) in self.conn.execute("SELECT warnings FROM df_docs WHERE warnings != '[]'"):
            warnings.extend(json.loads(raw))
        return warnings

    def stats(self) -> dict[str, Any]:
        pending = self.pending()
        docs = self.conn.execute("SELECT count(*) FROM df_docs").fetchone()[0]
        chunks = self.conn.execute("SELECT count(*) FROM df_chunks").fetchone()[0]
        return {
            "index": self.path.name,
            "model_code": self.model_code,
            "dim": int(get_meta(self.conn, "dim") or 0) or None,
            "pages": int(docs),
            "chunks": int(chunks),
            "pending_vectors": pending.chunk_vectors + pending.page_vectors,
            "pending": pending.to_json(),
            "unencodable_chunks": self.unencodable_chunks(),
        }

    # ------------------------------------------------------------------ lookup

    def docs(self) -> list[DocRow]:
        rows = self.conn.execute(f"SELECT {_DOC_COLUMNS} FROM df_docs d ORDER BY d.filename")
        return [_doc(r) for r in rows]

    def catalogue(self) -> list[CatalogueEntry]:
        """(filename, title, summary) of every page, by filename: what listing.md shows."""
        rows = self.conn.execute(  # a binary or non-UTF-8 file is no page to list
            "SELECT filename, title, summary FROM df_docs "
            f"WHERE page_embedded != {NOT_A_PAGE} ORDER BY filename")
        return [CatalogueEntry(*r) for r in rows]

    def doc_by_filename(self, filename: str) -> DocRow | None:
        row = self.conn.execute(
            f"SELECT {_DOC_COLUMNS} FROM df_docs d WHERE d.filename = ?", (filename,)
        ).fetchone()
        return None if row is None else _doc(row)

    def docs_by_uuid(self, uuid: str) -> list[DocRow]:
        rows = self.conn.execute(
            f"SELECT {_DOC_COLUMNS} FROM df_docs d WHERE d.uuid = ? OR d.uuid LIKE ? "
            "ORDER BY d.filename",
            (uuid, uuid.replace("%", "").replace("_", "") + "%"),
        )
        return [_doc(r) for r in rows]

    def uuid_warnings(self) -> list[str]:
        """One warning per uuid that several pages carry (a copied page that kept its
        frontmatter): a uuid must name one page."""
        rows = self.conn.execute(
            "SELECT lower(uuid), group_concat(filename, char(10)) FROM df_docs "
            "WHERE uuid IS NOT NULL AND uuid != '' GROUP BY lower(uuid) HAVING count(*) > 1 "
            "ORDER BY 1")
        return [f"{', '.join(sorted(names.split(chr(10))))}: all carry uuid {uuid}, which must "
                "name one page; give all but one a new uuid (delete its `uuid:` line)"
                for uuid, names in rows]

    def chunks(self, ids: Iterable[int]) -> dict[int, ChunkRow]:
        wanted = list(dict.fromkeys(ids))
        found: dict[int, ChunkRow] = {}
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            marks = ",".join("?" * len(part))
            rows = self.conn.execute(
                f"SELECT c.id, c.ord, c.kind, c.heading, c.line_start, c.line_end, c.body, "
                f"{_DOC_COLUMNS} FROM df_chunks c JOIN df_docs d ON d.id = c.doc_id "
                f"WHERE c.id IN ({marks})",
                part,
            )
            for r in rows:
                found[r[0]] = ChunkRow(r[0], _doc(r[7:]), r[1], r[2], r[3], r[4], r[5], r[6])
        return found

    def chunk_docs(self, ids: Iterable[int]) -> dict[int, int]:
        """chunk id -> doc id, for grouping hits by page."""
        wanted = list(dict.fromkeys(ids))
        mapping: dict[int, int] = {}
        table = self._chunk_doc_table()
        if table is not None and wanted:
            import numpy as np

            generation, chunk_ids, doc_ids = table
            asked = np.asarray(wanted, dtype=np.int64)
            at = np.clip(np.searchsorted(chunk_ids, asked), 0, max(0, len(chunk_ids) - 1))
            hit = chunk_ids[at] == asked if len(chunk_ids) else np.zeros(len(asked), bool)
            mapping = dict(zip(asked[hit].tolist(), doc_ids[at[hit]].tolist(), strict=True))
            # Not in the arrays: a chunk still waiting for its vector (the dense index's
            # arrays hold embedded chunks only), or one a concurrent sync removed.
            wanted = asked[~hit].tolist()
            if self.generation() != generation:  # a sync committed meanwhile: ask SQLite
                mapping, wanted = {}, asked.tolist()
        started = time.perf_counter()
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            marks = ",".join("?" * len(part))
            mapping.update(
                self.conn.execute(
                    f"SELECT id, doc_id FROM df_chunks WHERE id IN ({marks})", part
                ).fetchall()
            )
        self._chunk_sql_seconds += time.perf_counter() - started
        return mapping

    def _chunk_doc_table(self) -> tuple[int, Any, Any] | None:
        """(chunk ids ascending, their doc ids) of this index generation, or None while
        asking SQLite is cheaper. The dense index has the arrays already; a keyword-only index
        builds them once its lookups for this generation have cost as much as building would
        (CHUNK_TABLE_SECONDS_PER_ROW): a one-off CLI search never pays for it, a server soon
        does, and never spends more than twice what the better choice would have."""
        generation = self.generation()
        dense = self._dense
        if dense is not None and dense.generation == generation and len(dense.ids):
            return generation, dense.ids, dense.docs
        cached = self._chunk_table
        if cached is not None and cached[0] == generation:
            return cached
        if self._chunk_sql_generation != generation:
            self._chunk_sql_generation, self._chunk_sql_seconds = generation, 0.0
            self._chunk_rows = self.conn.execute(
                "SELECT max(rowid) FROM df_chunks").fetchone()[0] or 0
        if self._chunk_sql_seconds < self._chunk_rows * CHUNK_TABLE_SECONDS_PER_ROW \
                or not self.slow_builds:
            return None
        import numpy as np

        # The covering index on doc_id holds both numbers: a scan of it never reads the rows
        # (with their vectors: gigabytes at a million chunks).
        rows = self.conn.execute(
            "SELECT id, doc_id FROM df_chunks INDEXED BY df_chunks_doc").fetchall()
        pairs = np.asarray(rows, dtype=np.int64).reshape(-1, 2)
        order = np.argsort(pairs[:, 0], kind="stable")
        self._chunk_table = (generation, pairs[order, 0], pairs[order, 1])
        return self._chunk_table

    # ------------------------------------------------------------------ retrieval

    def keyword(self, query: str, limit: int) -> list[tuple[int, float]]:
        return bm25_search(self.conn, query, limit, counts=self._term_counts,
                           generation=self.generation())

    def term_counts(self, terms: list[str]) -> tuple[int, dict[str, int]]:
        """(chunks in the index, {term or phrase: chunks containing it}), cached until the
        index changes; terms are stemmed as the chunks were."""
        return self._term_counts.lookup(self.conn, terms, self.generation())

    def vectors(self) -> DenseIndex:
        """The dense index of the current generation (reloaded when vectors changed)."""
        generation = self.generation()
        if self._dense is None or self._dense.generation != generation:
            self._dense = DenseIndex.load(self.conn, generation, self._vector_cache)
        return self._dense

    def listing_stale(self) -> str | None:
        """A token while listing.md lags behind the catalogue (set by a sync that changed
        what it shows), else None; pass it to :meth:`listing_rendered` after rendering."""
        token = get_meta(self.conn, "listing_stale")
        return None if token in (None, "0") else token

    def listing_rendered(self, token: str) -> None:
        """listing.md shows the catalogue as of ``token``: clear it unless a later sync
        (of this or another process) has marked it stale again since."""
        with transaction(self.conn):
            self.conn.execute("UPDATE df_meta SET value = '0' WHERE key = 'listing_stale' "
                              "AND value = ?", (token,))

    def has_latent_terms(self) -> bool:
        """Whether any chunk has latent terms yet (index/latent.py)."""
        if not (self.with_vectors and self.embedder is not None and self.embedder.has_latent):
            return False
        try:
            return self.conn.execute("SELECT 1 FROM df_latent LIMIT 1").fetchone() is not None
        except sqlite3.OperationalError:  # a read-only index written before latent terms
            return False

    def latent(self, query: LatentTerms, limit: int, *,
               lines: bool = False) -> list[tuple[tuple[int, int], float]]:
        """The ``limit`` chunks (keys ``(chunk id, 0)``) or record lines (``(doc id, line)``)
        whose latent terms best match ``query``'s, best first."""
        stamp = latent_stamp(self.conn, self.generation())
        cached = self._latent.get(lines)
        if cached is None or cached.stamp != stamp:
            cached = self._latent[lines] = LatentIndex.load(self.conn, lines, stamp)
        return cached.search(query, limit)

    def dense(self, query_vector: Vectors, limit: int) -> list[tuple[int, float]]:
        """Top ``limit`` chunks by cosine."""
        return self.vectors().search(query_vector, limit)
