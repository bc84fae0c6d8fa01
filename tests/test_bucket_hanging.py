"""A bucket whose endpoint accepts connections and never answers: reads give up within
seconds and go on from the working copy with a warning, instead of hanging for minutes."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from deepfield.bucket import Bucket, open_bucket_store
from deepfield.errors import RemoteUnavailableError

from .fakes import FakeEmbedder
from .test_transports import moto_endpoint, s3  # noqa: F401 (the transport tests' fixtures)

CONFIG = b'[embedding]\nbackend = "fake"\n'


@pytest.fixture
def hanging() -> Iterator[str]:
    """An endpoint that accepts every connection and never answers (closed at the end)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(5)
    for conn in held:
        conn.close()
    server.close()


def _within(seconds: float, call: Any) -> BaseException | None:
    """Run ``call`` in a thread; what it raised, or fail if it has not ended in time."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # handed to the test
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still waiting on the bucket after {seconds} s"
    return raised[0] if raised else None


def test_reads_of_a_hanging_bucket_fail_within_seconds(
        s3: Any, hanging: str, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    _, bucket = s3
    monkeypatch.setenv("AWS_ENDPOINT_URL", hanging)
    stuck = Bucket(f"s3://{bucket}/team")
    try:
        failed = _within(20, lambda: stuck.get("notes/wok.md"))  # botocore's default: 90 s
        assert isinstance(failed, RemoteUnavailableError), failed
        assert "cannot reach the bucket" in failed.message
    finally:
        stuck.close()


def test_searches_warn_while_the_bucket_does_not_answer(
        s3: Any, hanging: str, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    client, bucket = s3
    client.put_object(Bucket=bucket, Key="team/deepfield.toml", Body=CONFIG)
    store = open_bucket_store(f"s3://{bucket}/team", embedder=FakeEmbedder())
    notes = store.create_field("notes")
    notes.add("Wok", "Carbon fibre woks heat unevenly.")
    monkeypatch.setenv("AWS_ENDPOINT_URL", hanging)
    stuck = Bucket(f"s3://{bucket}/team")
    notes.bucket = store.bucket = stuck
    try:
        assert notes.copy_warnings() == []
        # The poller's list hangs meanwhile: a search served from the copy says so.
        waiting = threading.Thread(target=lambda: _within(20, lambda: stuck.list("")),
                                   daemon=True)
        waiting.start()
        deadline = time.monotonic() + 10
        while not notes.copy_warnings():
            assert time.monotonic() < deadline, "no warning while the bucket hangs"
            time.sleep(0.2)
        notes.state.refreshed = time.monotonic()  # no refresh of its own in this search
        found = notes.search("carbon woks", mode="bm25")
        assert found.results[0].filename == "wok.md"
        assert any("has not answered for" in w for w in found.warnings)
    finally:
        stuck.close()
        store.close()


def test_lancedb_settings_from_the_environment_bound_a_hanging_bucket(hanging: str) -> None:
    """LanceDB's own requests to a bucket that never answers waited minutes (a 30 s timeout,
    retried); DEEPFIELD_LANCE_* settings reach its object store and bound them."""
    pytest.importorskip("lancedb")
    from deepfield.index.lance_table import LanceDataset, storage_options_from_env

    env = {"AWS_ENDPOINT_URL": hanging, "AWS_REGION": "us-east-1",
           "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s",
           "DEEPFIELD_LANCE_TIMEOUT": "1s", "DEEPFIELD_LANCE_CLIENT_MAX_RETRIES": "0",
           "DEEPFIELD_LANCE_": "ignored", "DEEPFIELD_LANCE_CONNECT_TIMEOUT": ""}
    options = storage_options_from_env(env)
    assert options["timeout"] == "1s" and options["client_max_retries"] == "0"
    assert options["aws_endpoint"] == hanging and options["allow_http"] == "true"
    assert "" not in options and "connect_timeout" not in options
    dataset = LanceDataset("s3://lance-bucket/field/.deepfield/lancedb/m.v1", 8, options)
    failed = _within(25, lambda: dataset.table("chunks"))  # 8 s here; minutes by default
    assert failed is not None
