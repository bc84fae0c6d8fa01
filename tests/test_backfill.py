"""The server's backfill: page vectors and latent terms computed while a field is idle, by one
worker at a time, never while searches arrive (deepfield.server.backfill)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from starlette.testclient import TestClient

import deepfield
from deepfield.config import EmbeddingConfig
from deepfield.embed.base import Kind, Vectors
from deepfield.errors import EmbeddingError
from deepfield.index.text import chunk_embedding_text
from deepfield.index.vectors import count_pending
from deepfield.server import backfill as backfill_module
from deepfield.server import service as service_module
from deepfield.server.app import create_app
from deepfield.server.backfill import (
    IDLE_S,
    LEASE_KEY,
    LEASE_S,
    RECHECK_S,
    Backfiller,
    release_lease,
    take_lease,
)
from deepfield.server.service import Service

from .fakes import FakeEmbedder, FakeLatentEmbedder

PAGE = ("---\ntitle: {title}\n---\n# {title}\n\nShe went surfing at dawn with {who}.\n\n"
        "## More\n\nMore text.\n")


@pytest.fixture
def latent_store(tmp_path: Path) -> Iterator[deepfield.Store]:
    deepfield.init(tmp_path / "store", EmbeddingConfig("fake-latent"))
    opened = deepfield.open(tmp_path / "store")
    yield opened
    opened.close()


def _pages_behind_the_server(store: deepfield.Store, count: int = 5) -> deepfield.Field:
    """Pages indexed for keywords only, as a folder edited by hand and synced without vectors."""
    field = store.create_field("notes")
    for n in range(count):
        (field.path / f"page-{n}.md").write_text(
            PAGE.format(title=f"Day {n}", who=f"friend {n}"), encoding="utf-8")
    field.index(embed=False)
    return field


def _pending(field: deepfield.Field) -> int:
    return count_pending(field.index_handle().conn, latent=True).total


def _backfiller(service: Service) -> Backfiller:
    return service._backfill


def test_an_idle_field_gets_all_its_vectors_and_latent_terms(
        latent_store: deepfield.Store) -> None:
    field = _pages_behind_the_server(latent_store)
    assert _pending(field) > 0
    service = Service(latent_store)
    try:
        slot = service.slot("notes")
        now = time.monotonic() + IDLE_S
        rounds = 0
        while _backfiller(service).step(now):
            rounds += 1
            assert rounds < 50
        assert rounds >= 1
        assert _pending(field) == 0
        conn = field.index_handle().conn
        assert conn.execute("SELECT count(*) FROM pages").fetchone()[0] == 5
        assert conn.execute("SELECT count(*) FROM df_latent").fetchone()[0] > 0
        # Its own model instance: a search's query encoding never waits behind it.
        own = _backfiller(service)._embedder
        assert isinstance(own, FakeLatentEmbedder) and own is not slot.embedder
        assert own is not service.embedder and own.latent_texts
    finally:
        service.close()


def test_a_server_with_requests_arriving_is_left_alone(latent_store: deepfield.Store) -> None:
    field = _pages_behind_the_server(latent_store)
    service = Service(latent_store)
    try:
        slot = service.slot("notes")
        slot.search(lambda f: f.search("surfing"), embed=False)
        before = _pending(field)
        assert before > 0
        assert _backfiller(service).step(service.activity.last + IDLE_S / 2) == 0
        assert _pending(field) == before
        assert _backfiller(service).step(service.activity.last + IDLE_S) > 0
    finally:
        service.close()


def test_nothing_to_do_is_looked_at_again_after_a_change_or_a_while(
        latent_store: deepfield.Store, monkeypatch: pytest.MonkeyPatch) -> None:
    _pages_behind_the_server(latent_store, count=1)
    service = Service(latent_store)
    slices: list[str] = []
    backfiller = _backfiller(service)
    real_slice = backfiller._slice
    monkeypatch.setattr(backfiller, "_slice", lambda slot: slices.append(slot.name)
                        or real_slice(slot))
    try:
        slot = service.slot("notes")
        now = time.monotonic() + IDLE_S
        while backfiller.step(now):
            pass
        looked = len(slices)
        backfiller.step(now + 1)
        assert len(slices) == looked  # resting: found nothing, nothing synced since
        slot.changed_at = now + 2  # a write or sync through the server
        backfiller.step(now + 3)
        assert len(slices) == looked + 1
        backfiller.step(now + 4)
        backfiller.step(now + 3 + RECHECK_S)
        assert len(slices) == looked + 2
    finally:
        service.close()


def test_one_worker_at_a_time_holds_a_fields_backlog(latent_store: deepfield.Store) -> None:
    field = _pages_behind_the_server(latent_store, count=1)
    other = latent_store.field("notes")
    assert take_lease(field, "worker-a", 1000.0)
    assert take_lease(field, "worker-a", 1001.0)  # renewed by its holder
    assert not take_lease(other, "worker-b", 1001.0)
    assert take_lease(other, "worker-b", 1001.0 + LEASE_S + 1)  # ran out: taken over
    release_lease(field, "worker-a")  # not the holder any more: nothing happens
    conn = field.index_handle().conn
    assert conn.execute("SELECT value FROM df_meta WHERE key = ?",
                        (LEASE_KEY,)).fetchone()[0].startswith("worker-b ")
    release_lease(other, "worker-b")
    assert conn.execute("SELECT count(*) FROM df_meta WHERE key = ?",
                        (LEASE_KEY,)).fetchone()[0] == 0


def test_a_backlog_another_worker_holds_is_not_done_twice(
        latent_store: deepfield.Store) -> None:
    field = _pages_behind_the_server(latent_store, count=2)
    assert take_lease(field, "another-process", time.time())
    service = Service(latent_store)
    try:
        service.slot("notes")
        assert _backfiller(service).step(time.monotonic() + IDLE_S) == 0
        assert _pending(field) > 0
    finally:
        service.close()


def test_a_failing_model_pauses_the_backfill_without_stopping_it(
        latent_store: deepfield.Store, monkeypatch: pytest.MonkeyPatch) -> None:
    field = _pages_behind_the_server(latent_store, count=2)
    broken = FakeLatentEmbedder()
    broken.latent_error = EmbeddingError("the model crashed", "restart it")
    monkeypatch.setattr(service_module, "backfill_embedder", lambda store, shared: broken)
    service = Service(latent_store)
    try:
        service.slot("notes")
        now = time.monotonic() + IDLE_S
        backfiller = _backfiller(service)
        while backfiller.step(now):  # chunks and pages are done; latent terms fail
            pass
        left = count_pending(field.index_handle().conn)
        assert left.chunk_vectors == left.page_vectors == 0
        assert _pending(field) > 0
        broken.latent_error = None
        assert backfiller.step(now + RECHECK_S) > 0
    finally:
        service.close()


def test_an_embedder_the_configuration_does_not_describe_is_shared(
        store: deepfield.Store, embedder: FakeEmbedder) -> None:
    """A store opened with an embedder object of a different model code: the backfill uses
    the server's shared one (calls serialised) rather than build another model."""
    embedder.model_code = "custom-model-v1"
    service = Service(store)
    try:
        assert backfill_module.backfill_embedder(store, service.embedder) is service.embedder
    finally:
        service.close()


def _starts_a_backfill(store: deepfield.Store) -> bool:
    service = Service(store)
    try:
        service.start_backfill()
        return _backfiller(service)._thread is not None
    finally:
        service.close()


def test_a_keyword_only_store_starts_no_backfill(keyword_store: deepfield.Store) -> None:
    assert not _starts_a_backfill(keyword_store)


def test_the_served_app_backfills_in_its_own_thread(
        latent_store: deepfield.Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backfill_module, "IDLE_S", 0.05)
    monkeypatch.setattr(backfill_module, "POLL_S", 0.05)
    field = _pages_behind_the_server(latent_store, count=3)
    app = create_app(latent_store)
    with TestClient(app, client=("127.0.0.1", 5000), base_url="http://127.0.0.1:8765") as client:
        assert client.get("/notes/search", params={"q": "surfing"}).status_code == 200
        deadline = time.monotonic() + 20
        while _pending(field) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _pending(field) == 0
        thread = app.state.service._backfill._thread
        assert thread is not None and thread.is_alive()
        put = client.put("/notes/new-page.md", content=PAGE.format(title="New", who="Ana"))
        assert put.status_code == 201
    assert not thread.is_alive()  # stopped with the server


class _EditsWhileEncoding(FakeEmbedder):
    """Runs ``during`` (once) inside its first encode of documents: another connection
    changes the field while this one encodes, as a server's backfill and its writer may."""

    def __init__(self, during: Callable[[], None]) -> None:
        super().__init__()
        self.during: Callable[[], None] | None = during

    def embed_batch(self, texts: list[str], kind: Kind) -> Vectors:
        if self.during is not None and kind == "document":
            during, self.during = self.during, None
            during()
        return super().embed_batch(texts, kind)


def test_a_vector_is_stored_only_for_the_text_that_was_encoded(
        store: deepfield.Store, embedder: FakeEmbedder) -> None:
    field = store.create_field("notes")
    field.write("# Cooking\n\nCarbon steel woks season well.\n", name="b")
    field.index(embed=False)
    other = store.field("notes")  # the writer's own connection

    def rewrite() -> None:
        (field.path / "b.md").write_text("# Physics\n\nQuantum chromodynamics lecture.\n",
                                         encoding="utf-8")
        other.index(embed=False)  # the old chunks go; the new ones may reuse their ids

    racing = deepfield.Field(field.path, _EditsWhileEncoding(rewrite), name="notes")
    racing.embed(pages=False)
    conn = racing.index_handle().conn
    for context, body, blob in conn.execute("SELECT context, body, embedding FROM df_chunks"):
        if blob is not None:  # what is stored is the vector of the text stored
            expected = embedder.embed([chunk_embedding_text(context, body)])[0]
            assert np.allclose(np.frombuffer(blob, np.float32), expected)
    assert _pending_chunks(racing) == 0  # the next batch embedded the new text
    racing.close()


def test_a_page_deleted_while_encoded_leaves_no_page_vector(store: deepfield.Store) -> None:
    field = store.create_field("notes")
    field.write("# One\n\nFirst page.\n", name="a")
    field.write("# Two\n\nSecond page.\n", name="b")
    field.index(embed=False)
    field.embed(pages=False)  # chunks done: the next encode is of whole pages
    other = store.field("notes")

    def delete() -> None:
        (field.path / "a.md").unlink()
        other.index(embed=False)

    racing = deepfield.Field(field.path, _EditsWhileEncoding(delete), name="notes")
    racing.page_vectors = "whole"  # pages encoded whole (a derived vector takes no encoding)
    racing.embed(pages=True)
    conn = racing.index_handle().conn
    assert [r[0] for r in conn.execute("SELECT filename FROM pages")] == ["b.md"]
    racing.close()


def _pending_chunks(field: deepfield.Field) -> int:
    return count_pending(field.index_handle().conn).chunk_vectors


def test_a_request_on_any_field_holds_the_backfill_of_all(
        latent_store: deepfield.Store) -> None:
    field = _pages_behind_the_server(latent_store)
    latent_store.create_field("other")
    service = Service(latent_store)
    try:
        service.slot("notes")
        service.locked("other", lambda f: f.pages())  # a read of another field
        assert _backfiller(service).step(service.activity.last + IDLE_S / 2) == 0
        assert _pending(field) > 0
    finally:
        service.close()


def test_one_broken_field_does_not_stop_the_others(
        latent_store: deepfield.Store, caplog: pytest.LogCaptureFixture) -> None:
    latent_store.create_field("broken")
    (latent_store.root / "broken" / "fake-latent-64-v1.sqlite3").write_bytes(b"not sqlite" * 99)
    field = _pages_behind_the_server(latent_store, count=2)
    service = Service(latent_store)
    try:
        service.slot("broken")
        service.slot("notes")
        backfiller = _backfiller(service)
        now = time.monotonic() + IDLE_S
        while backfiller.step(now):
            pass
        assert _pending(field) == 0
        backfiller.step(now + RECHECK_S + 1)  # tried again, not logged again
        assert sum("field broken paused" in r.getMessage() for r in caplog.records) == 1
    finally:
        service.close()


def test_closing_stops_a_slice_after_the_batch_in_progress(
        latent_store: deepfield.Store) -> None:
    field = _pages_behind_the_server(latent_store, count=30)
    service = Service(latent_store)
    backfiller = _backfiller(service)

    class StopsTheServer(FakeLatentEmbedder):
        def embed_batch(self, texts: list[str], kind: Kind) -> Vectors:
            backfiller._stop.set()  # as close() does, from another thread
            return super().embed_batch(texts, kind)

    backfiller._embedder = StopsTheServer()
    try:
        service.slot("notes")
        assert backfiller.step(time.monotonic() + IDLE_S) == 0  # ended after one batch
        conn = field.index_handle().conn
        done = conn.execute("SELECT count(*) FROM df_chunks WHERE embedding IS NOT NULL")
        assert 0 < done.fetchone()[0] < conn.execute("SELECT count(*) FROM df_chunks"
                                                     ).fetchone()[0]
    finally:
        service.close()


def test_backfill_can_be_turned_off_in_the_store_config(tmp_path: Path) -> None:
    root = tmp_path / "store"
    deepfield.init(root, EmbeddingConfig("fake-latent"))
    with (root / "deepfield.toml").open("a", encoding="utf-8") as config:
        config.write("\n[server]\nbackfill = false\n")
    store = deepfield.open(root)
    try:
        assert not _starts_a_backfill(store)
    finally:
        store.close()
    (root / "deepfield.toml").write_text(
        (root / "deepfield.toml").read_text().replace("backfill = false", "backfill = 1"))
    with pytest.raises(deepfield.ConfigError, match=r"server\.backfill must be true or false"):
        deepfield.open(root)


def test_a_field_deleted_under_the_server_is_skipped(
        latent_store: deepfield.Store, tmp_path: Path) -> None:
    field = _pages_behind_the_server(latent_store, count=1)
    service = Service(latent_store)
    try:
        service.slot("notes")
        field.close()
        shutil.rmtree(field.path)
        assert _backfiller(service).step(time.monotonic() + IDLE_S) == 0
        assert not list((tmp_path / ".cache").rglob("*.sqlite3"))  # no index made elsewhere
    finally:
        service.close()
