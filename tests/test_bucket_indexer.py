"""The indexer lease seen from other processes of a bucket store: only the holder drops or
rebuilds the shared LanceDB dataset, replicas' copies follow a rebuild, and hints name the
holder instead of sending operators to commands that do nothing there (moto on 127.0.0.1)."""

from __future__ import annotations

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
    client.put_object(Bucket=bucket, Key="team/deepfield.toml", Body=HELD_CONFIG)
    indexer = open_bucket_store(f"s3://{bucket}/team", embedder=FakeEmbedder())
    notes = indexer.create_field("notes")
    notes.add("Valve", "Alice: the valve stuck open\nBob: grit in the seat\n")
    notes.add("Wok", "Carbon fibre woks heat unevenly.")
    poller = BucketPoller(indexer)
    poller.round()
    assert indexer.lease.held and dataset_keys(client, bucket)
    yield indexer, poller, client, bucket
    poller.close()
    indexer.close()


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
