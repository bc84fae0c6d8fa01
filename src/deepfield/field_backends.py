"""The Field side of the index backend interface (deepfield.index.backend): which backend
answers a field's searches, where its derived data lives, and keeping it in step with the
field's SQLite index. A mixin of :class:`deepfield.Field`, apart from field.py's pages."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from .index.backend import (
    BackendContext,
    IndexBackend,
    SqliteBackend,
    close_quietly,
    create_index_backend,
)

if TYPE_CHECKING:
    from .embed.base import Embedder
    from .index import FieldIndex


class FieldBackends:
    """What a field needs to pick and feed its index backend."""

    name: str
    embedder: Embedder | None
    index_backend: str
    """The index backend that answers searches (deepfield.index.backend; the SQLite index is
    always kept too: it is the catalogue of pages)."""
    _backends: dict[bool, IndexBackend]

    def index_handle(self) -> FieldIndex:
        raise NotImplementedError

    def _index_folder(self) -> Path:
        raise NotImplementedError

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
                              os.fspath(self._index_folder() / ".deepfield"))

    def _refresh_backend(self, embed_budget: float | None) -> None:
        """Bring a derived backend (not the SQLite index itself) in step with the index."""
        if self.index_backend != SqliteBackend.name:
            self.search_backend().refresh(embed_budget=embed_budget)

    def _clear_backend(self) -> None:
        if self.index_backend != SqliteBackend.name:
            self.search_backend().clear()

    def close_backends(self) -> None:
        for backend in self._backends.values():
            close_quietly(backend)
        self._backends.clear()
