"""The ``lancedb`` index backend: a field's chunks in a LanceDB dataset (the [scale] extra).

The dataset (lance_table.py) is derived from the field's SQLite index, which stays the
catalogue of its pages, and is kept in step by lance_sync.py whenever the index changes.
It lives beside the index (``.deepfield/lancedb/<model-code>.v1/``) or, for a store in a
bucket, under the field's prefix, where every replica reads it and one indexer writes it.
A search asks LanceDB for BM25 candidates (its own inverted index: English stemming and
stop words, CJK through the same n-gram text as the SQLite index) and vector candidates
(exact below ANN_MIN_ROWS vectors, IVF_HNSW_SQ above), and deepfield fuses them as it does
for the SQLite index: cosines are recomputed exactly from the stored vectors, so the ANN
index only decides which chunks are candidates. A dataset that is deleted or cannot be read
is rebuilt from the catalogue by the process that writes it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import IndexCorruptError, NotIndexerError
from .backend import (
    BackendContext,
    Candidates,
    Hits,
    IndexBackend,
    PageFacts,
    search_pool,
    superseded,
)
from .db import get_meta
from .lance_hits import HitReader
from .lance_overlay import Overlay, compare
from .lance_query import EF as EF  # re-exported: bench/scale.py reports the settings
from .lance_query import HYBRID_NEAREST, scored, vector_query
from .lance_query import NPROBES as NPROBES
from .lance_query import REFINE as REFINE
from .lance_query import keyword_rows as keyword_rows_of
from .lance_sync import PushReport, push
from .lance_table import (
    CHUNKS,
    PAGES,
    DatasetDamagedError,
    LanceDataset,
    page_of,
    quoted,
    shared_dataset,
)
from .lance_table import (
    DATASET_FORMAT as DATASET_FORMAT,  # re-exported (tools name the dataset's format)
)
from .lance_table import dataset_uri as dataset_uri

if TYPE_CHECKING:
    from ..embed.base import Vectors
    from . import ChunkRow

_QUERY_ERRORS = (RuntimeError, OSError, ValueError, DatasetDamagedError)
"""What LanceDB raises when files of a dataset are missing or unreadable."""
class LanceBackend(IndexBackend):
    """Searches a field's LanceDB dataset; keeps it current when ``context.writable``."""

    name: ClassVar[str] = "lancedb"
    MAX_REBUILDS = 3
    """Rebuilds in a row, without a read that worked in between, before a handle reports the
    dataset as unusable (a long-running indexer rebuilds a dataset deleted now and then
    as often as it happens)."""

    def __init__(self, context: BackendContext) -> None:
        super().__init__(context)
        self.uri = dataset_uri(context, self.model_code)
        self._dataset: LanceDataset | None = None
        self._clean: tuple[str, int] | None = None
        """(catalogue instance, generation) the dataset was last found complete for."""
        self.hits = HitReader(context.catalogue, _QUERY_ERRORS)
        # Caches keyed by (dataset generation, table version): see LanceDataset.generation.
        self._pending: tuple[tuple[int, int], int] = ((-1, -1), 0)
        self._waiting_keys: tuple[tuple[int, int], set[int]] = ((-1, -1), set())
        self._superseded: tuple[tuple[int, int], bool] = ((-1, -1), False)
        self._overlay: tuple[tuple[str, int, tuple[int, int]], Overlay] = (
            ("", -1, (-1, -1)), Overlay())
        self._states: tuple[tuple[int, int], dict[str, tuple[str, bool]]] = ((-1, -2), {})
        """The dataset's page states, by version of its pages table (lance_overlay.py)."""
        self.last_push: PushReport | None = None

    # ------------------------------------------------------------------ dataset

    @property
    def dataset(self) -> LanceDataset:
        if self._dataset is None:
            self._dataset = shared_dataset(self.uri, self._dim(), self.context.storage_options)
        return self._dataset

    def _dim(self) -> int | None:
        embedder = self.embedder
        if embedder is None:
            return None
        if embedder.dim is None and self.context.writes():
            stored = get_meta(self.context.catalogue().conn, "dim")
            if stored:
                return int(stored)
            embedder.embed(["dimension probe"])  # sets dim (an endpoint's model may vary)
        return embedder.dim

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Processes of one machine write a local dataset one at a time (a bucket's dataset
        has one writer anyway: the lease holder)."""
        dataset = self.dataset
        with dataset.writing:  # one sync at a time in this process, over the whole diff
            if not dataset.local:
                yield
                return
            from ..fsutil import field_lock

            folder = Path(self.uri)
            folder.mkdir(parents=True, exist_ok=True)
            with field_lock(folder):
                yield

    def refresh(self, *, embed_budget: float | None = 0.0) -> None:
        if not self.context.writes():
            return  # readers see new versions by themselves (lance_table.READ_CONSISTENCY_S)
        catalogue = self.context.catalogue()
        stamp = (get_meta(catalogue.conn, "instance") or "", catalogue.generation())
        if stamp == self._clean:
            return
        self.sync(embed_budget=embed_budget)

    def sync(self, *, embed_budget: float | None = None, maintain: bool = True,
             progress: Any = None) -> PushReport:
        """Write what the dataset lacks, then fold new rows into its indexes when due."""
        catalogue = self.context.catalogue()
        stamp = (get_meta(catalogue.conn, "instance") or "", catalogue.generation())
        with self._writing():
            try:
                report = push(catalogue, self.dataset, self.embedder,
                              embed_budget=embed_budget, progress=progress)
                if maintain:
                    report.maintenance = self.dataset.maintain(
                        force=embed_budget is None and report.changed > 0
                        and self.dataset.optimize_due())
            except _QUERY_ERRORS as exc:
                self._rebuild(exc)
                report = push(catalogue, self.dataset, self.embedder,
                              embed_budget=embed_budget, progress=progress)
                report.maintenance = self.dataset.maintain()
        after = (get_meta(catalogue.conn, "instance") or "", catalogue.generation())
        self._clean = after if report.incomplete == 0 and after[0] == stamp[0] else None
        self.last_push = report
        return report

    def _rebuild(self, exc: BaseException) -> None:
        dataset = self.dataset
        if dataset.rebuilds_in_a_row >= self.MAX_REBUILDS:
            raise IndexCorruptError(
                f"the LanceDB index at {self.uri} cannot be rebuilt: {exc}",
                "check the disk it lives on, then run `deepfield reindex`" if dataset.local
                else "check the bucket and its credentials; the indexer rebuilds it by itself "
                "once it can write there") from None
        dataset.drop()
        self._clean = None

    def check(self) -> None:
        """Read a row of each table; a dataset that fails is rebuilt (when this process
        writes it) from the catalogue."""
        if not self.context.writes():
            return
        try:
            table = self.dataset.table(CHUNKS)
            if table is not None:
                table.search().limit(1).to_arrow()
            self.dataset.page_states()
            self.dataset.rebuilds_in_a_row = 0
        except _QUERY_ERRORS as exc:
            with self._writing():
                self._rebuild(exc)
            self.sync(embed_budget=None)

    def clear(self) -> None:
        # A shared dataset has one writer: dropping it from any other process would leave
        # every replica without an index until the writer notices (docs/SCALE.md).
        if not self.context.writes():
            raise NotIndexerError(
                f"the LanceDB index of field {self.context.field_name} ({self.uri}) is "
                f"written by {self.writer_name()}, not by this process; it was left as it is")
        with self._writing():
            self.dataset.drop()
        self._clean = None

    def writer_name(self) -> str:
        """Who writes the dataset, for messages (this process, or the lease holder)."""
        if self.context.writes():
            return "this process"
        return self.context.indexer() or "the process holding the indexer lease"

    def close(self) -> None:
        self.hits.facts.clear()

    def stats(self) -> dict[str, Any]:
        table = self.dataset.table(CHUNKS)
        rows = table.count_rows() if table is not None else 0
        return {"backend": self.name, "dataset": self.uri, "chunks": rows}

    # ------------------------------------------------------------------ search

    def candidates(self, query: str, query_vector: Vectors | None, limit: int, mode: str, *,
                   parallel: bool = True) -> Candidates:
        try:
            found = self._candidates(query, query_vector, limit, mode, parallel)
            self.dataset.rebuilds_in_a_row = 0
            return found
        except _QUERY_ERRORS as exc:
            if not self.context.writes():
                return self._read_again(query, query_vector, limit, mode, parallel)
            self.dataset.forget()
            if isinstance(exc, DatasetDamagedError) or self.dataset.table(CHUNKS) is None \
                    or _unreadable(exc):
                self._rebuild(exc)
            self.sync(embed_budget=0.0)
            found = self._candidates(query, query_vector, limit, mode, parallel)
            self.dataset.rebuilds_in_a_row = 0  # rebuilt and readable again
            return found

    def _read_again(self, query: str, query_vector: Vectors | None, limit: int, mode: str,
                    parallel: bool) -> Candidates:
        """A reader's dataset failed (a copy swapped or missing files, a dataset rebuilt):
        open it again, after bringing a local copy in line, and search once more."""
        self.dataset.forget()
        if self.context.resync is not None:
            with contextlib.suppress(Exception):  # the bucket may be down: try what we have
                self.context.resync()
        try:
            return self._candidates(query, query_vector, limit, mode, parallel)
        except _QUERY_ERRORS as exc:
            raise IndexCorruptError(
                f"the LanceDB index of field {self.context.field_name} cannot be read "
                f"({str(exc).splitlines()[0][:200]})",
                f"{self.writer_name()} rebuilds it; retry shortly") from None

    def _candidates(self, query: str, query_vector: Vectors | None, limit: int, mode: str,
                    parallel: bool) -> Candidates:

        table = self.dataset.table(CHUNKS)
        want_keywords = mode != "vector" or query_vector is None
        if table is None:
            if self.context.writes() and self.context.catalogue().conn.execute(
                    "SELECT 1 FROM df_docs LIMIT 1").fetchone():
                raise DatasetDamagedError(f"{self.uri}: no chunks table")
            # Not written yet: a reader finds the pages it has by keywords meanwhile.
            return (self.overlay().keyword(self.context.catalogue(), query, limit)
                    if want_keywords else []), []
        self.hits.follow(table)
        overlay = self.overlay()
        want_vectors = query_vector is not None and mode != "bm25"
        hybrid = want_keywords and want_vectors
        future = None
        if want_keywords and want_vectors and parallel:
            future = search_pool().submit(keyword_rows_of, table, query, limit, hybrid)
        keyword_rows = None
        if want_keywords and future is None:
            keyword_rows = keyword_rows_of(table, query, limit, hybrid)
        dense: Hits = []
        waiting = self._waiting(table) if want_vectors else set()
        if want_vectors:
            assert query_vector is not None
            near = self.vector_query(table, query_vector, min(limit, HYBRID_NEAREST) if hybrid
                                     else limit).with_row_id(True) \
                .select(["key", "_distance"]).to_arrow()
            self.hits.remember(near)
            # Exact cosines: the vector index's candidates are re-ranked with the stored
            # vectors (refine), and without an index every row is compared exactly.
            dense = [(key, 1.0 - float(distance)) for key, distance in zip(
                near["key"].to_pylist(), near["_distance"].to_pylist(), strict=True)
                if key not in waiting]
        if future is not None:
            keyword_rows = future.result()
        keyword: Hits = []
        if keyword_rows is not None:
            self.hits.remember(keyword_rows)
            keyword = list(zip(keyword_rows["key"].to_pylist(),
                               (float(s) for s in keyword_rows["_score"].to_pylist()),
                               strict=True))
            if hybrid and keyword_rows.num_rows:
                assert query_vector is not None
                listed = {key for key, _ in dense} | waiting
                dense += [(key, score) for key, score in scored(keyword_rows, query_vector)
                          if key not in listed]
        if overlay:  # pages newer here than in the dataset (lance_overlay.py)
            keyword = [pair for pair in keyword if page_of(pair[0]) not in overlay.stale]
            dense = [pair for pair in dense if page_of(pair[0]) not in overlay.stale]
            if want_keywords:
                keyword += overlay.keyword(self.context.catalogue(), query, limit)
                keyword = sorted(keyword, key=lambda pair: -pair[1])[:limit]
        return keyword, dense

    def overlay(self) -> Overlay:
        """What this reader's catalogue holds newer than the dataset (empty for the process
        that writes the dataset: it brings the dataset up to date before searching)."""
        if self.context.writes():
            return Overlay()
        catalogue = self.context.catalogue()
        pages = self.dataset.table(PAGES)
        version = (self.dataset.generation, pages.version if pages is not None else -1)
        stamp = (get_meta(catalogue.conn, "instance") or "", catalogue.generation(), version)
        if stamp != self._overlay[0]:
            if version != self._states[0]:
                self._states = (version, self.dataset.page_states())
            self._overlay = (stamp, compare(catalogue, self._states[1]))
        return self._overlay[1]

    def vector_query(self, table: Any, vector: Vectors, limit: int) -> Any:
        """LanceDB's nearest-neighbour query (lance_query.vector_query; bench/scale.py)."""
        return vector_query(table, vector, limit)

    def _waiting(self, table: Any) -> set[int]:
        """Keys of chunks written before their vector (zeros until then) or whose text the
        model could not encode, once per version: left out of the dense candidates."""
        with contextlib.suppress(*_QUERY_ERRORS):
            version = (self.dataset.generation, table.version)
            if version != self._waiting_keys[0]:
                rows = table.search().where("NOT embedded").select(["key"]).limit(None) \
                    .to_arrow()
                self._waiting_keys = (version, set(rows["key"].to_pylist()))
        return self._waiting_keys[1]

    # ------------------------------------------------------------------ hits

    def chunk_docs(self, ids: Iterable[int]) -> dict[int, int]:
        """chunk key -> page id: the key holds it (lance_table.chunk_key)."""
        return {int(key): page_of(int(key)) for key in ids}

    def any_superseded(self) -> bool:
        """Whether a page of the dataset is superseded (once per version of its pages)."""
        table = self.dataset.table(PAGES)
        if table is None:
            return False
        with contextlib.suppress(*_QUERY_ERRORS):
            version = (self.dataset.generation, table.version)
            if version != self._superseded[0]:
                self._superseded = (version, table.count_rows("superseded") > 0)
        return self._superseded[1] or self.overlay().superseded

    def page_facts(self, ids: Iterable[int]) -> PageFacts:
        wanted = [int(key) for key in dict.fromkeys(ids)]
        fresh = self._fresh_rows(wanted)
        table = self.dataset.table(CHUNKS) if len(fresh) < len(wanted) else None
        facts = {} if table is None else self.hits.page_facts(
            table, [key for key in wanted if key not in fresh])
        return facts | {key: (row.doc.filename, row.doc.uuid, superseded(row.doc.frontmatter))
                        for key, row in fresh.items()}

    def _fresh_rows(self, keys: list[int]) -> dict[int, ChunkRow]:
        overlay = self.overlay()
        if not any(key in overlay.chunks for key in keys):
            return {}
        return overlay.rows(self.context.catalogue(), keys)

    def chunks(self, ids: Iterable[int]) -> dict[int, ChunkRow]:
        wanted = [int(key) for key in dict.fromkeys(ids)]
        found = self._fresh_rows(wanted)
        rest = [key for key in wanted if key not in found]
        table = self.dataset.table(CHUNKS) if rest else None
        return found if table is None else found | self.hits.chunks(table, rest)

    def pending_chunk_vectors(self) -> int:
        """Chunks of pages written before all their vectors were computed (an upper bound:
        counted from the small ``pages`` table, once per version of it)."""
        if self.embedder is None:
            return 0
        fresh = len(self.overlay().chunks)  # found by keywords in the catalogue meanwhile
        table = self.dataset.table(PAGES)
        if table is None:
            return fresh
        with contextlib.suppress(*_QUERY_ERRORS):
            version = (self.dataset.generation, table.version)
            if version != self._pending[0]:
                rows = table.search().where("NOT complete").select(["chunks"]).limit(None) \
                    .to_arrow()
                self._pending = (version, int(sum(rows["chunks"].to_pylist())))
        return self._pending[1] + fresh

    def filenames(self, names: list[str]) -> set[str]:
        """Which of ``names`` the dataset holds (tests, tools)."""
        table = self.dataset.table(CHUNKS)
        if table is None or not names:
            return set()
        rows = table.search().where(f"filename IN ({quoted(names)})").select(["filename"]) \
            .limit(None).to_arrow()
        return set(rows["filename"].to_pylist())


def _unreadable(exc: BaseException) -> bool:
    text = str(exc).lower()
    return any(word in text for word in ("not found", "no such file", "corrupt", "invalid",
                                         "unexpected eof", "failed to read", "io"))
