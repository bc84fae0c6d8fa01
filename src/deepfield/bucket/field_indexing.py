"""The index side of a field of a bucket store: where its searches read the field's LanceDB
dataset (a served replica's own copy, or the dataset in the bucket), and that only the
process holding the store's indexer lease embeds into, writes or drops the shared dataset;
every other process says who does instead of pretending to (docs/SCALE.md)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import NotIndexerError
from ..field import Field
from ..field_backends import backend_budget
from ..index.backend import BackendContext, SqliteBackend
from ..index.budget import Deadline
from ..index.vectors import EmbedReport

if TYPE_CHECKING:
    from ..index import SyncReport
    from .objects import Bucket
    from .store import BucketStore


class SharedIndexField(Field):
    """The part of :class:`~deepfield.bucket.field.BucketField` about its index backend."""

    store: BucketStore
    bucket: Bucket
    prefix: str

    def index(self, **options: Any) -> SyncReport:
        report = super().index(**options)
        if self.index_backend != SqliteBackend.name and not self.store.may_write_index():
            # `deepfield index` here embeds nothing: say so rather than exit as if it had.
            report.warnings.append(
                f"not the indexer: the shared LanceDB index is written (and its vectors "
                f"computed) by {self.store.indexer_name()}; this process embedded nothing")
        return report

    def vectors_hint(self) -> str:
        if self.index_backend == SqliteBackend.name:
            return super().vectors_hint()
        return (f"{self.store.indexer_name(ask=False)} computes them (`deepfield index` "
                "elsewhere embeds nothing)")

    def embed(self, *, budget: float | None = None, deadline: Deadline | None = None,
              pages: bool = True, latent: bool | None = None, threads: int | None = None,
              progress: Callable[[int], None] | None = None) -> EmbedReport:
        """Vectors for the working copy's own index, which only a field on the SQLite backend
        searches; a ``lancedb`` field's vectors are computed once, by the indexer (this
        process, if it holds the lease: the shared dataset is then brought up to date)."""
        if self.index_backend != SqliteBackend.name:
            self._refresh_backend(backend_budget(budget, deadline))
            return EmbedReport()
        return super().embed(budget=budget, deadline=deadline, pages=pages, latent=latent,
                             threads=threads, progress=progress)

    def _refresh_backend(self, embed_budget: float | None) -> None:
        """On a server the shared LanceDB dataset is written by the poller of the replica
        holding the lease (bucket/poller.py), in one commit for every page written meanwhile,
        not by each request; elsewhere (the CLI, a script) by this process if no other one
        holds the lease."""
        if not self.store.background_indexing:
            super()._refresh_backend(embed_budget)

    def backend_context(self) -> BackendContext:
        """Where searches read the field's LanceDB dataset: on a server, the replica's own
        copy of it (kept current by the poller: bucket/dataset_cache.py); elsewhere the
        dataset in the bucket itself."""
        if self.store.background_indexing:
            from .dataset_cache import sync_field_copy

            return BackendContext(self.name, self.index_handle, self.embedder,
                                  os.fspath(self.store.root / ".lancedb" / self.name),
                                  writes=lambda: False, indexer=self.store.indexer_name,
                                  resync=lambda: sync_field_copy(self))
        return self.shared_backend_context()

    def shared_backend_context(self) -> BackendContext:
        """The field's LanceDB dataset in the bucket, beside its pages: the process holding
        the store's indexer lease writes it, every other one only reads."""
        from ..index.lance_table import storage_options_from_env

        return BackendContext(
            self.name, self.index_handle, self.embedder,
            f"s3://{self.bucket.name}/{self.bucket.prefix}{self.prefix}.deepfield",
            writes=self.store.may_write_index, storage_options=storage_options_from_env(),
            indexer=self.store.indexer_name)

    def clear_index(self) -> None:
        """Drop the working copy's catalogue and, on the ``lancedb`` backend, the shared
        dataset: only in the process holding the indexer lease (checked before anything is
        dropped). Any other process would delete the index every replica searches."""
        if self.index_backend != SqliteBackend.name and not self.store.may_write_index():
            raise NotIndexerError(
                f"field {self.name}: its LanceDB index in the bucket is rebuilt only by "
                f"{self.store.indexer_name()}; this process does not hold the lease, so "
                "nothing was dropped")
        super().clear_index()
