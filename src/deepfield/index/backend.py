"""Index backends: where a field's keyword and vector candidates come from.

Every backend is built from the same Markdown pages with the same chunking (chunking.py), and
deepfield fuses what it returns the same way (fusion.py, search.py), so results have one
shape whichever backend a field uses. A backend answers two questions for one field: which
chunks match a query, by keywords and by vector (:meth:`IndexBackend.candidates`), and what
those chunks are (:meth:`IndexBackend.chunks`). Everything else a field needs (the page
catalogue, listing.md, uuids, the research tools) stays in the field's SQLite index.

* ``sqlite`` (default): today's index, FTS5 BM25 and numpy vectors in the field's
  ``<model-code>.sqlite3`` (:class:`SqliteBackend`, an adapter over
  :class:`~deepfield.index.FieldIndex`).
* ``lancedb`` (``pip install 'deepfield[scale]'``): a LanceDB dataset derived from that index,
  on local disk or in an S3-compatible bucket (lance_backend.py), for fields of millions of
  chunks and for replicas that share one index.

Backends are registered by name, like embedders; the built-ins register the same way a
third-party backend would (``register_index_backend``), and a store picks one per field in
``deepfield.toml`` (``[index]``).
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..embed.base import Embedder, Vectors
    from . import ChunkRow, FieldIndex

Hits = list[tuple[int, float]]
Candidates = tuple[Hits, Hits]
"""(keyword hits with BM25 scores, dense hits with cosines), each best first."""
PageFacts = dict[int, tuple[str, "str | None", bool]]
"""chunk id -> (filename, uuid, superseded?) of its page."""


@dataclass
class BackendContext:
    """What a backend factory gets: the field's catalogue and where derived data may live."""

    field_name: str
    catalogue: Callable[[], FieldIndex]
    """The field's SQLite index (opened on first use): the pages, their chunks, vectors."""
    embedder: Embedder | None
    location: str
    """A folder or URI (``s3://…``) for the backend's own derived files."""
    writes: Callable[[], bool] = field(default=lambda: True)
    """Whether this process keeps the derived data current now (False: another one does,
    e.g. the replica holding a bucket store's indexer lease)."""
    storage_options: dict[str, str] = field(default_factory=dict)
    """Object-store settings (endpoint, region, credentials) for a URI location."""
    resync: Callable[[], object] | None = None
    """Brings a reader's local copy of derived data in line with its source (a served
    replica's copy of a bucket's dataset), for a search that found the copy unreadable."""
    indexer: Callable[[], str | None] = field(default=lambda: None)
    """Who keeps the derived data current when :attr:`writes` is False, for messages (e.g.
    "the replica holding the indexer lease (host:pid:…)"); None: not known."""


class IndexBackend(ABC):
    """Keyword and vector retrieval over one field's chunks."""

    name: ClassVar[str] = ""

    def __init__(self, context: BackendContext) -> None:
        self.context = context
        self.embedder = context.embedder
        self.model_code = context.embedder.model_code if context.embedder else "bm25-only"

    @abstractmethod
    def candidates(self, query: str, query_vector: Vectors | None, limit: int, mode: str, *,
                   parallel: bool = True) -> Candidates:
        """Up to ``limit`` keyword hits and ``limit`` dense hits for ``mode`` (bm25: no dense
        list; vector: no keyword list). In hybrid mode the dense list also holds the cosine
        of every keyword hit it does not rank, so fusion can place keyword-only chunks."""

    @abstractmethod
    def chunks(self, ids: Iterable[int]) -> dict[int, ChunkRow]:
        """The chunks, with their pages, of ids :meth:`candidates` returned."""

    def chunk_docs(self, ids: Iterable[int]) -> dict[int, int]:
        """chunk id -> page id, for grouping hits by page."""
        return {cid: row.doc.id for cid, row in self.chunks(ids).items()}

    def page_facts(self, ids: Sequence[int]) -> PageFacts:
        """chunk id -> (filename, uuid, superseded?) of its page (activation, superseding)."""
        return {cid: (row.doc.filename, row.doc.uuid, superseded(row.doc.frontmatter))
                for cid, row in self.chunks(ids).items()}

    def any_superseded(self) -> bool:
        """Whether some page is superseded (so searches must look)."""
        return True

    @property
    def catalogue(self) -> FieldIndex | None:
        """The SQLite index when the candidates' ids are its chunk ids, else None."""
        return None

    def pending_chunk_vectors(self) -> int:
        """Chunks that have no vector yet (found by keywords only)."""
        return 0

    def refresh(self, *, embed_budget: float | None = 0.0) -> None:  # noqa: B027
        """Bring the backend in step with the field's catalogue, computing missing vectors
        for up to ``embed_budget`` seconds (None: all). A no-op where nothing is derived."""

    def clear(self) -> None:  # noqa: B027
        """Drop everything derived (``reindex`` then rebuilds it from the pages)."""

    def check(self) -> None:  # noqa: B027
        """Read the derived data through and rebuild it if it is damaged."""

    def stats(self) -> dict[str, Any]:
        return {"backend": self.name}

    def close(self) -> None:  # noqa: B027
        """Release files and connections."""


class SqliteBackend(IndexBackend):
    """The default backend: the field's SQLite index itself (FTS5 BM25, numpy vectors)."""

    name: ClassVar[str] = "sqlite"

    def __init__(self, context: BackendContext, index: FieldIndex | None = None) -> None:
        super().__init__(context)
        self._index = index

    @property
    def index(self) -> FieldIndex:
        # Asked each time: a damaged index is replaced by a new one (field_index.py).
        return self._index if self._index is not None else self.context.catalogue()

    @property
    def catalogue(self) -> FieldIndex:
        return self.index

    def candidates(self, query: str, query_vector: Vectors | None, limit: int, mode: str, *,
                   parallel: bool = True) -> Candidates:
        index = self.index
        if query_vector is None or mode == "bm25":
            return index.keyword(query, limit), []
        if mode == "vector":
            return [], index.dense(query_vector, limit)
        vectors = index.vectors()  # reads the index generation before the worker takes conn
        found: Hits
        if parallel:
            # SQLite and numpy both release the GIL: BM25 runs while the vectors are scored.
            future = search_pool().submit(index.keyword, query, limit)
            near = vectors.search(query_vector, limit)
            found = future.result()
        else:
            found = index.keyword(query, limit)
            near = vectors.search(query_vector, limit)
        listed = {cid for cid, _ in near}
        extra = vectors.search(query_vector, 0, [cid for cid, _ in found if cid not in listed])
        return found, near + extra

    def chunks(self, ids: Iterable[int]) -> dict[int, ChunkRow]:
        return self.index.chunks(ids)

    def chunk_docs(self, ids: Iterable[int]) -> dict[int, int]:
        return self.index.chunk_docs(ids)

    def pending_chunk_vectors(self) -> int:
        return self.index.pending_chunk_vectors()

    def stats(self) -> dict[str, Any]:
        return {"backend": self.name, "index": self.index.path.name}


def superseded(frontmatter: dict[str, Any] | None) -> bool:
    """manage.supersede.is_superseded, here because the index sits below manage/:
    ``superseded_by`` names a page (a non-blank string, or a list holding one)."""
    value = (frontmatter or {}).get("superseded_by")
    if isinstance(value, list):
        return any(isinstance(v, str) and v.strip() for v in value)
    return isinstance(value, str) and bool(value.strip())


_POOL: ThreadPoolExecutor | None = None


def search_pool() -> ThreadPoolExecutor:
    """Two worker threads a search hands work that releases the GIL (BM25, an encoder pass)."""
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="deepfield-search")
    return _POOL


# ---------------------------------------------------------------------- registry

BackendFactory = Callable[[BackendContext], IndexBackend]
_BUILTIN = {"lancedb": "deepfield.index.lance_backend:LanceBackend"}
"""Built-ins imported only when a field asks for them (lancedb needs the [scale] extra)."""
_registered: dict[str, BackendFactory] = {"sqlite": SqliteBackend}


def register_index_backend(name: str, factory: BackendFactory) -> None:
    """Register (or replace) an index backend under ``name`` for this process."""
    _registered[name] = factory


def index_backend_names() -> list[str]:
    return sorted({*_registered, *_BUILTIN})


def create_index_backend(name: str, context: BackendContext) -> IndexBackend:
    """The backend registered as ``name`` for one field; ConfigError for unknown names."""
    factory = _registered.get(name)
    if factory is None and name in _BUILTIN:
        import importlib

        module, _, attr = _BUILTIN[name].partition(":")
        factory = getattr(importlib.import_module(module), attr)
        _registered[name] = factory
    if factory is None:
        raise ConfigError(
            f"no index backend named {name!r} (known: {', '.join(index_backend_names())})",
            "set [index] backend in deepfield.toml to one of them",
        )
    return factory(context)


def close_quietly(backend: IndexBackend | None) -> None:
    if backend is not None:
        with contextlib.suppress(Exception):
            backend.close()
