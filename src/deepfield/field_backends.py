"""The Field side of the index backend interface (deepfield.index.backend): which backend
answers a field's searches, where its derived data lives, and keeping it in step with the
field's SQLite index. The part of :class:`deepfield.Field` between its index (field_index.py)
and its pages (field.py)."""

from __future__ import annotations

import os
from collections.abc import Callable

from .field_index import IndexHolder
from .index.backend import (
    BackendContext,
    IndexBackend,
    SqliteBackend,
    close_quietly,
    create_index_backend,
)
from .index.budget import Deadline
from .index.vectors import EmbedReport


class FieldBackends(IndexHolder):
    """What a field needs to pick and feed its index backend."""

    index_backend: str
    """The index backend that answers searches (deepfield.index.backend; the SQLite index is
    always kept too: it is the catalogue of pages)."""
    _backends: dict[bool, IndexBackend]

    def search_backend(self, *, catalogue: bool = False) -> IndexBackend:
        """What answers this field's searches: its ``index_backend``, or (``catalogue``) the
        SQLite index whatever that is."""
        sqlite = catalogue or self.index_backend == SqliteBackend.name
        backend = self._backends.get(sqlite)
        if backend is None:
            context = self.backend_context()
            backend = SqliteBackend(context) if sqlite else \
                create_index_backend(self.index_backend, context)
            self._backends[sqlite] = backend
        return backend

    def backend_context(self) -> BackendContext:
        """Where this field's index backend keeps its derived data: beside the SQLite index."""
        return BackendContext(self.name, self.index_handle, self.embedder,
                              os.fspath(self.index_path().parent / ".deepfield"))

    def _refresh_backend(self, embed_budget: float | None) -> None:
        """Bring a derived backend (not the SQLite index itself) in step with the index."""
        if self.index_backend != SqliteBackend.name:
            self.search_backend().refresh(embed_budget=embed_budget)

    def vectors_hint(self) -> str:
        """What a search tells people about chunks that have no vector yet."""
        return "run `deepfield index` to embed them"

    def _clear_backend(self) -> None:
        if self.index_backend != SqliteBackend.name:
            self.search_backend().clear()

    def close_backends(self) -> None:
        for backend in self._backends.values():
            close_quietly(backend)
        self._backends.clear()

    def close(self) -> None:
        self.close_backends()
        super().close()

    def embed(
        self,
        *,
        budget: float | None = None,
        deadline: Deadline | None = None,
        pages: bool = True,
        latent: bool | None = None,
        threads: int | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> EmbedReport:
        done = super().embed(budget=budget, deadline=deadline, pages=pages, latent=latent,
                             threads=threads, progress=progress)
        self._refresh_backend(backend_budget(budget, deadline))
        return done

    def clear_index(self) -> None:
        super().clear_index()
        self._clear_backend()


def backend_budget(budget: float | None, deadline: Deadline | None) -> float | None:
    """The seconds a derived backend may spend embedding what it writes: what is left of
    ``deadline``, else ``budget`` (None: no limit)."""
    if deadline is not None and deadline.limited:
        return max(0.0, deadline.left())
    return budget
