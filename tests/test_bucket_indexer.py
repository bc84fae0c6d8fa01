"""The indexer lease seen from other processes of a bucket store: only the holder drops or
rebuilds the shared LanceDB dataset, replicas' copies follow a rebuild, and hints name the
holder instead of sending operators to commands that do nothing there (moto on 127.0.0.1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deepfield.bucket import open_bucket_store
from deepfield.bucket.poller import BucketPoller

from .fakes import FakeEmbedder
from .test_portable_archive import run_main
from .test_transports import moto_endpoint, s3  # noqa: F401 (the transport tests' fixtures)

# A long TTL: the lease stays with the poller's store for the whole test, however slow.
HELD_CONFIG = (b'[embedding]\nbackend = "fake"\n\n[index]\nbackend = "lancedb"\n\n'
               b'[server]\nlease_ttl_s = 120\n')
DATASET = "team/notes/.deepfield/lancedb/"


def dataset_keys(client: Any, bucket: str) -> list[str]:
    listed = client.list_objects_v2(Bucket=bucket, Prefix=DATASET).get("Contents", [])
    return sorted(str(item["Key"]) for item in listed)


@pytest.fixture
def held(s3: Any) -> Any:  # noqa: F811
    """A store whose indexer (a poller's store) holds the lease and wrote the dataset."""
    client, bucket = s3
    indexer, poller = _indexed_store(client, bucket, background=False)
    assert indexer.lease.held and dataset_keys(client, bucket)
    yield indexer, poller, client, bucket
    poller.close()
    indexer.close()


def _indexed_store(client: Any, bucket: str, *, background: bool) -> Any:
    """A bucket store of two pages whose poller took the lease and wrote the dataset once
    (``background``: as a served replica's start() marks it, without its thread)."""
    client.put_object(Bucket=bucket, Key="team/deepfield.toml", Body=HELD_CONFIG)
    store = open_bucket_store(f"s3://{bucket}/team", embedder=FakeEmbedder())
    notes = store.create_field("notes")
    notes.add("Valve", "Alice: the valve stuck open\nBob: grit in the seat\n")
    notes.add("Wok", "Carbon fibre woks heat unevenly.")
    poller = BucketPoller(store)
    store.background_indexing = background
    poller.round()
    return store, poller


def test_reindex_outside_the_lease_holder_leaves_the_shared_dataset(
        held: Any, capsys: pytest.CaptureFixture[str]) -> None:
    indexer, _, client, bucket = held
    before = dataset_keys(client, bucket)
    code, out, err = run_main(capsys, "--store", f"s3://{bucket}/team", "reindex")
    assert code == 1 and out == ""
    assert err.startswith("error: field notes: its LanceDB index in the bucket is rebuilt "
                          "only by the replica holding the indexer lease (")
    assert indexer.lease.holder in err and "nothing was dropped" in err
    assert dataset_keys(client, bucket) == before
    # The holder itself may rebuild it.
    notes = indexer.field("notes")
    notes.reindex()
    assert notes.search("carbon fibre woks").results[0].filename == "wok.md"


@pytest.fixture
def served(s3: Any) -> Any:  # noqa: F811
    """A served replica (its searches read its own copy of the dataset) holding the lease."""
    client, bucket = s3
    store, poller = _indexed_store(client, bucket, background=True)  # rounds by hand
    yield store, poller, client, bucket
    poller.close()
    store.close()


def _found(field: Any, query: str, mode: str) -> str:
    return str(field.search(query, mode=mode).results[0].filename)


def test_a_copy_follows_a_rebuilt_dataset_with_the_same_version_names(served: Any) -> None:
    store, poller, client, bucket = served
    view = store.field("notes")
    for mode in ("bm25", "vector", "hybrid"):
        assert _found(view, "carbon fibre woks", mode) == "wok.md"
    manifests = {str(o["Key"]): (o["Size"], o["ETag"]) for o in client.list_objects_v2(
        Bucket=bucket, Prefix=DATASET)["Contents"] if "/_versions/" in str(o["Key"])}
    writer = poller._writers["notes"]
    writer.clear()  # the holder rebuilds the dataset: versions start again
    poller.round()
    rebuilt = {str(o["Key"]): (o["Size"], o["ETag"]) for o in client.list_objects_v2(
        Bucket=bucket, Prefix=DATASET)["Contents"] if "/_versions/" in str(o["Key"])}
    assert set(rebuilt) & set(manifests)  # the same names: sizes alone cannot tell
    for mode in ("bm25", "vector", "hybrid"):
        assert _found(view, "carbon fibre woks", mode) == "wok.md"
        assert _found(view, "valve grit", mode) == "valve.md"


def test_a_copy_missing_files_is_fetched_again_by_the_search_that_finds_it(
        served: Any) -> None:
    store, _, _, _ = served
    view = store.field("notes")
    copy = view.search_backend()
    data = [p for p in Path(copy.uri).rglob("*") if p.is_file() and "/data/" in p.as_posix()]
    assert data
    for path in data:
        path.unlink()
    copy.dataset.forget()
    for mode in ("bm25", "vector"):
        assert _found(view, "carbon fibre woks", mode) == "wok.md"


def test_index_and_search_hints_outside_the_holder_name_it(
        held: Any, capsys: pytest.CaptureFixture[str]) -> None:
    indexer, _, _, bucket = held
    url = f"s3://{bucket}/team"
    code, out, err = run_main(capsys, "--store", url, "index")
    assert code == 0 and out.startswith("notes: ")
    assert "not the indexer" in err and indexer.lease.holder in err
    other = open_bucket_store(url, embedder=FakeEmbedder())
    try:
        notes = other.field("notes")
        notes.add("Kettle", "Copper kettles need a lemon scrub.")  # no indexer round yet
        for mode in ("hybrid", "vector"):
            warnings = " ".join(notes.search("copper kettles", mode=mode).warnings)
            assert "have no vector yet" in warnings and indexer.lease.holder in warnings
            assert "run `deepfield index`" not in warnings
    finally:
        other.close()
