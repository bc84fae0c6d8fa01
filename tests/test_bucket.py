"""Stores in a bucket (moto's S3 server on 127.0.0.1): the memoryfield layout, conditional
writes, archiving, the indexer lease, LanceDB in the bucket, and failures that leave no
trace."""

from __future__ import annotations

import hashlib
import http.server
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import botocore.exceptions
import httpx
import pytest

import deepfield
from deepfield.bucket import Bucket, BucketField, BucketStore, Lease, open_bucket_store
from deepfield.bucket.lease import LEASE_OBJECT
from deepfield.bucket.poller import BucketPoller
from deepfield.errors import (
    PageConflictError,
    RemoteUnavailableError,
    StoreNotFoundError,
    WriteConflictError,
)

from .conftest import Cli
from .fakes import FakeEmbedder
from .test_portable_archive import run_main
from .test_transports import moto_endpoint, s3  # noqa: F401 (the transport tests' fixtures)

CONFIG = b'[embedding]\nbackend = "fake"\n'
LANCE_CONFIG = CONFIG + b'\n[index]\nbackend = "lancedb"\n\n[server]\nlease_ttl_s = 2\n'


def keys(client: Any, bucket: str, prefix: str = "") -> list[str]:
    listed = client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    return sorted(str(item["Key"]) for item in listed
                  if "/.deepfield/" not in str(item["Key"]))


def body(client: Any, bucket: str, key: str) -> str:
    return str(client.get_object(Bucket=bucket, Key=key)["Body"].read().decode())


@pytest.fixture
def two(s3: Any) -> Any:  # noqa: F811
    """Two processes' views of one store (each with its own working copy)."""
    client, bucket = s3
    client.put_object(Bucket=bucket, Key="team/deepfield.toml", Body=CONFIG)
    first = deepfield.open(f"s3://{bucket}/team", embedder=FakeEmbedder())
    second = deepfield.open(f"s3://{bucket}/team", embedder=FakeEmbedder())
    assert isinstance(first, BucketStore) and isinstance(second, BucketStore)
    yield first, second, client, bucket
    first.close()
    second.close()


def test_pages_live_in_the_bucket_in_the_memoryfield_layout(two: Any) -> None:
    first, second, client, bucket = two
    assert first.root != second.root  # no shared local state
    notes = first.create_field("notes", intro="Team notes.")
    written = notes.add("Battery decision", "We chose LiFePO4 cells for heat tolerance.",
                        summary="LiFePO4 over NMC.")
    assert written.pages[0].action == "created"
    assert keys(client, bucket) == ["team/deepfield.toml", "team/notes/",
                                    "team/notes/battery-decision.md", "team/notes/index.md"]
    stored = body(client, bucket, "team/notes/battery-decision.md")
    assert stored.startswith("---\ntitle: Battery decision\n") and "LiFePO4 cells" in stored
    other = second.field("notes")
    assert second.field_names() == ["notes"]
    assert other.search("LiFePO4 heat").results[0].filename == "battery-decision.md"
    assert other.read("battery-decision").text == stored
    assert other.intro() == "# notes\n\nTeam notes.\n"
    # An edit through the other process replaces the object; the first sees it.
    other.write(stored.replace("heat tolerance", "cold starts"), name="battery-decision")
    assert "cold starts" in body(client, bucket, "team/notes/battery-decision.md")
    notes.state.refreshed = 0.0
    assert notes.search("cold starts", mode="bm25").results[0].filename == "battery-decision.md"


def test_a_lost_race_is_a_conflict_never_a_silent_overwrite(
        two: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second, client, bucket = two
    mine = first.create_field("notes")
    mine.add("Plan", "Version one.")
    theirs = second.field("notes")
    theirs.refresh_from_bucket()
    original = BucketField._put
    raced: list[str] = []

    def put_after_another_writer(self: BucketField, name: str, etag: str | None) -> None:
        if self is mine and not raced:  # the other replica writes between our read and put
            raced.append(name)
            theirs.write("---\ntitle: Plan\n---\nTheir version.\n", name="plan")
        original(self, name, etag)

    monkeypatch.setattr(BucketField, "_put", put_after_another_writer)
    with pytest.raises(WriteConflictError) as caught:
        mine.write("---\ntitle: Plan\n---\nMy version.\n", name="plan")
    assert raced == ["plan.md"]
    current = body(client, bucket, "team/notes/plan.md")
    assert "Their version." in current and caught.value.current == current.encode()
    # The working copy went back to what the bucket holds; nothing else was touched.
    assert mine.read("plan").text == current
    assert mine.search("version", mode="bm25").results[0].snippet == "Their version."
    # A new page named from its title takes the next free name instead of failing.
    raced.clear()
    monkeypatch.setattr(BucketField, "_put", original)

    def create_in_between(self: BucketField, name: str, etag: str | None) -> None:
        if self is mine and not raced:
            raced.append(name)
            theirs.write("---\ntitle: Idea\n---\nTheirs.\n")
        original(self, name, etag)

    monkeypatch.setattr(BucketField, "_put", create_in_between)
    made = mine.write("---\ntitle: Idea\n---\nMine.\n")
    assert raced == ["idea.md"] and made.pages[0].filename == "idea-2.md"
    assert body(client, bucket, "team/notes/idea.md").endswith("Theirs.\n")
    assert body(client, bucket, "team/notes/idea-2.md").endswith("Mine.\n")


def test_concurrent_conditional_writes_have_one_winner(two: Any) -> None:
    first, _, _, bucket = two
    first.create_field("notes").add("Plan", "Version one.")
    raw = Bucket(f"s3://{bucket}/team")
    etag = raw.get("notes/plan.md")
    assert etag is not None
    outcomes: list[str] = []

    def writer(number: int) -> None:
        own = Bucket(f"s3://{bucket}/team")
        try:
            own.put("notes/plan.md", f"writer {number}".encode(), if_match=etag.etag)
            outcomes.append(f"won {number}")
        except deepfield.bucket.ObjectConflictError as exc:
            assert exc.current is not None
            outcomes.append("lost")
        own.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [o for o in outcomes if o.startswith("won")]
    assert len(outcomes) == 8 and len(winners) == 1
    final = raw.get("notes/plan.md")
    assert final is not None and final.data.decode() == f"writer {winners[0].split()[1]}"
    raw.close()


def test_archive_moves_the_object_and_restore_brings_it_back(two: Any) -> None:
    first, second, client, bucket = two
    notes = first.create_field("notes")
    notes.add("Old idea", "Superseded thinking.")
    assert notes.archive("old-idea") == "archive/old-idea.md"
    assert keys(client, bucket, "team/notes/") == ["team/notes/",
                                                   "team/notes/archive/old-idea.md"]
    other = second.field("notes")
    assert other.archived() == ["old-idea.md"]
    assert not other.search("superseded thinking", mode="bm25").results
    assert other.restore("old-idea") == "old-idea.md"
    assert keys(client, bucket, "team/notes/") == ["team/notes/", "team/notes/old-idea.md"]
    notes.state.refreshed = 0.0
    assert notes.search("superseded thinking", mode="bm25").results


def test_the_indexer_lease_is_exclusive_expires_and_is_taken_over(s3: Any) -> None:  # noqa: F811
    _, bucket = s3
    first, second = Bucket(f"s3://{bucket}/team"), Bucket(f"s3://{bucket}/team")
    one, other = Lease(first, ttl_s=1.0, holder="one"), Lease(second, ttl_s=1.0, holder="two")
    assert one.acquire() and not other.acquire()
    assert other.state().holder == "one"
    time.sleep(3.1)  # "one" stops renewing, as a killed replica would (ages: whole seconds)
    assert other.acquire() and other.state().holder == "two"
    assert not one.acquire()  # its renewal loses: the lease moved on
    other.release()
    time.sleep(0.25)  # a refused process asks the bucket again after TTL/5
    assert other.state().holder is None and one.acquire()
    one.release()
    first.close()
    second.close()


def test_lancedb_in_the_bucket_one_indexer_every_replica_reads(
        s3: Any, tmp_path: Path) -> None:  # noqa: F811
    client, bucket = s3
    client.put_object(Bucket=bucket, Key="team/deepfield.toml", Body=LANCE_CONFIG)
    indexer = open_bucket_store(f"s3://{bucket}/team", embedder=FakeEmbedder())
    replica = open_bucket_store(f"s3://{bucket}/team", embedder=FakeEmbedder())
    replica.index_writer = False
    notes = indexer.create_field("notes")
    notes.add("Valve", "Alice: the valve stuck open\nBob: grit in the seat\n")
    poller = BucketPoller(indexer)
    poller.round()
    assert indexer.lease.held and body(client, bucket, "team/" + LEASE_OBJECT)
    assert any("/.deepfield/lancedb/" in str(o["Key"]) for o in client.list_objects_v2(
        Bucket=bucket, Prefix="team/notes/.deepfield/")["Contents"])
    view = replica.field("notes")
    assert view.search("valve grit").results[0].filename == "valve.md"
    # A write through the replica reaches the index through the indexer's next round.
    view.add("Wok", "Carbon fibre woks heat unevenly.")
    poller.round()
    deadline = time.monotonic() + 10
    while view.search("carbon fibre woks").results[0].filename != "wok.md":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    # A served replica's own copy of the dataset: fetched whole, then kept while the
    # bucket's copy is gone (being rebuilt), and searched like any local dataset.
    from deepfield.bucket.dataset_cache import refresh_dataset_copy
    from deepfield.index.backend import BackendContext
    from deepfield.index.lance_backend import LanceBackend

    shared = notes.search_backend()
    assert isinstance(shared, LanceBackend)
    prefix = shared.uri.removeprefix(f"s3://{bucket}/team/") + "/"
    local = LanceBackend(BackendContext("notes", view.index_handle, view.embedder,
                                        str(tmp_path / "copy"), writes=lambda: False))
    first = refresh_dataset_copy(replica.bucket, prefix, Path(local.uri))
    assert first.fetched > 0 and refresh_dataset_copy(replica.bucket, prefix,
                                                      Path(local.uri)).fetched == 0
    vector = view.embedder.embed_query("carbon fibre woks")
    keyword, _ = local.candidates("carbon fibre woks", vector, 5, "hybrid")
    assert local.chunks([keyword[0][0]])[keyword[0][0]].doc.filename == "wok.md"
    for item in client.list_objects_v2(Bucket=bucket, Prefix=f"team/{prefix}")["Contents"]:
        if "/_versions/" in item["Key"]:  # the bucket's dataset is gone
            client.delete_object(Bucket=bucket, Key=item["Key"])
    kept = refresh_dataset_copy(replica.bucket, prefix, Path(local.uri))
    assert (kept.fetched, kept.removed) == (0, 0)
    assert local.candidates("carbon fibre woks", vector, 5, "bm25")[0]
    # The dataset in the bucket is damaged: the indexer rebuilds it from the pages.
    for item in client.list_objects_v2(Bucket=bucket,
                                       Prefix="team/notes/.deepfield/")["Contents"]:
        if "/data/" in item["Key"]:
            client.put_object(Bucket=bucket, Key=item["Key"], Body=b"\0damaged\0")
    assert notes.search("valve grit").results[0].filename == "valve.md"
    assert notes.search_backend().dataset.rebuilt == 1
    poller.close()
    indexer.close()
    replica.close()


def test_a_reading_replica_finds_writes_before_the_index_catches_up(
        s3: Any) -> None:  # noqa: F811
    """Pages newer than the shared dataset are searched in the replica's own catalogue, and
    the dataset's rows of pages changed or archived since are not served (lance_overlay)."""
    client, bucket = s3
    client.put_object(Bucket=bucket, Key="team/deepfield.toml", Body=LANCE_CONFIG)
    indexer = open_bucket_store(f"s3://{bucket}/team", embedder=FakeEmbedder())
    replica = open_bucket_store(f"s3://{bucket}/team", embedder=FakeEmbedder())
    replica.index_writer = False
    indexer.create_field("notes").add("Valve",
                                      "Alice: the valve stuck open\nBob: grit in the seat\n")
    poller = BucketPoller(indexer)
    poller.round()
    view = replica.field("notes")
    backend = view.search_backend()
    assert view.search("valve grit").results[0].filename == "valve.md" and not backend.overlay()
    # No indexer round from here on: the dataset knows none of these writes.
    view.add("Wok", "Carbon fibre woks heat unevenly.")
    found = view.search("carbon fibre woks", mode="bm25")
    assert found.results[0].filename == "wok.md" and "woks heat" in found.results[0].snippet
    # Hybrid places it by its keywords until the indexer has its vectors, and says so.
    hybrid = view.search("carbon fibre woks")
    assert hybrid.results[0].filename == "wok.md" and hybrid.pending_vectors > 0
    assert view.read("wok.md").text.endswith("Carbon fibre woks heat unevenly.\n")
    view.write("---\ntitle: Valve\n---\nAlice: the valve was replaced in May\n", name="valve.md")
    assert "valve.md" not in {r.filename for r in view.search("grit seat", mode="bm25").results}
    assert view.search("replaced May", mode="bm25").results[0].filename == "valve.md"
    view.archive("wok.md")
    assert "wok.md" not in {r.filename for r in view.search("carbon fibre woks").results}
    # The indexer catches up: the dataset answers alone again, with the same results.
    poller.round()
    assert not backend.overlay()
    assert view.search("replaced May", mode="bm25").results[0].filename == "valve.md"
    assert "wok.md" not in {r.filename for r in view.search("carbon fibre woks").results}
    poller.close()
    indexer.close()
    replica.close()


def test_an_unreachable_bucket_is_one_line_and_leaves_no_trace(
        two: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    first, _, _, bucket = two
    notes = first.create_field("notes")
    notes.add("Plan", "Version one.")
    copy = {p.name: p.read_bytes() for p in notes.path.glob("*.md")}
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    live = os.environ["AWS_ENDPOINT_URL"]
    monkeypatch.setenv("AWS_ENDPOINT_URL", dead)
    cache = tmp_path / ".cache"
    before = sorted(str(p) for p in cache.rglob("*"))
    with pytest.raises(RemoteUnavailableError, match="cannot reach the bucket"):
        deepfield.open(f"s3://{bucket}/team")
    assert sorted(str(p) for p in cache.rglob("*")) == before  # no working copy was made
    code, out, err = run_main(capsys, "--store", f"s3://{bucket}/team", "search", "plan")
    assert (code, out) == (1, "")
    assert err.startswith("error: cannot reach the bucket of s3://") and err.count("\n") == 1
    # A write through a store opened before the outage fails whole: the bucket and the
    # working copy keep the page as it was, and its index still finds it.
    dead_bucket = Bucket(f"s3://{bucket}/team")
    notes.bucket = dead_bucket
    with pytest.raises(RemoteUnavailableError):
        notes.write("---\ntitle: Plan\n---\nVersion two.\n", name="plan")
    with pytest.raises(RemoteUnavailableError):  # a new page fails at its upload: undone
        notes.add("Fresh", "A page the bucket never took.")
    assert {p.name: p.read_bytes() for p in notes.path.glob("*.md")} == copy
    assert not list(notes.path.glob("archive/*"))  # no kept "previous" of a write not made
    notes.state.refreshed = 0.0
    response = notes.search("version", mode="bm25")  # reads go on from the working copy
    assert response.results[0].snippet == "Version one."
    assert any("cannot reach the bucket" in w for w in response.warnings)
    assert not notes.search("never took", mode="bm25").results
    dead_bucket.close()
    monkeypatch.setenv("AWS_ENDPOINT_URL", live)
    with pytest.raises(StoreNotFoundError, match="no store at s3://"):
        deepfield.open(f"s3://{bucket}/nothing-here")


class _Denying(http.server.BaseHTTPRequestHandler):
    """An S3 endpoint whose policy refuses these credentials everything: S3's own 403."""

    def _deny(self) -> None:
        data = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
                b"<Message>Access Denied</Message></Error>")
        self.send_response(403)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_HEAD = do_DELETE = do_POST = _deny  # noqa: N815 (http.server names)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_bucket_that_denies_access_is_one_line_and_leaves_no_trace(
        two: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    first, _, _, bucket = two
    notes = first.create_field("notes")
    notes.add("Plan", "Version one.")
    copy = {p.name: p.read_bytes() for p in notes.path.rglob("*.md")}
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Denying)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{server.server_address[1]}")
    try:
        cache = tmp_path / ".cache"
        before = sorted(str(p) for p in cache.rglob("*"))
        with pytest.raises(RemoteUnavailableError, match="AccessDenied") as caught:
            deepfield.open(f"s3://{bucket}/team")
        assert "\n" not in str(caught.value)
        assert sorted(str(p) for p in cache.rglob("*")) == before  # no working copy made
        code, out, err = run_main(capsys, "--store", f"s3://{bucket}/team", "search", "plan")
        assert (code, out) == (1, "")
        assert err.startswith("error: cannot ") and "AccessDenied" in err
        assert err.count("\n") == 1
        # Access revoked under a store opened before: writes fail whole, the working copy
        # and its index keep what the bucket holds, reads go on from the copy.
        denied = Bucket(f"s3://{bucket}/team")
        notes.bucket = denied
        with pytest.raises(RemoteUnavailableError, match="AccessDenied"):
            notes.write("---\ntitle: Plan\n---\nVersion two.\n", name="plan")
        with pytest.raises(RemoteUnavailableError, match="AccessDenied"):
            notes.add("Fresh", "A page the bucket never took.")
        assert {p.name: p.read_bytes() for p in notes.path.rglob("*.md")} == copy
        notes.state.refreshed = 0.0
        response = notes.search("version", mode="bm25")
        assert response.results[0].snippet == "Version one."
        assert any("AccessDenied" in w for w in response.warnings), response.warnings
        denied.close()
    finally:
        server.shutdown()
        server.server_close()


def test_access_denied_and_missing_buckets_read_as_one_line(s3: Any) -> None:  # noqa: F811
    with pytest.raises(RemoteUnavailableError, match="NoSuchBucket") as caught:
        deepfield.open("s3://no-such-bucket-here/team")
    assert "\n" not in str(caught.value)
    refused = botocore.exceptions.ClientError(
        {"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, "GetObject")
    raw = Bucket("s3://anything/team")
    error = raw.fail(refused, "read")
    assert str(error) == ("cannot read s3://anything/team/: AccessDenied: Access Denied "
                          "(the credentials may not use this bucket; check its policy)")
    raw.close()


def test_the_cli_and_json_on_a_bucket_store(s3: Any, tmp_path: Path) -> None:  # noqa: F811
    _, bucket = s3
    url = f"s3://{bucket}/cli"
    cli = Cli(Path("unused"))
    init = cli.json("--store", url, "--embedder", "fake", "init")
    assert init == {"store": url, "created": True, "embedding": {"backend": "fake"}}
    made = cli("--store", url, "new", "notes")  # where the field lives, not the cache copy
    assert (made.exit_code, made.stdout) == (0, f"created field notes at {url}/notes\n")
    assert cli.json("--store", url, "new", "more")["path"] == f"{url}/more"
    added = cli.json("--store", url, "add", "notes", "--title", "Wok", "-",
                     input="Carbon fibre woks heat unevenly.\n")
    assert added["pages"][0]["filename"] == "wok.md"
    found = cli.json("--store", url, "search", "carbon woks", "-f", "notes")
    assert found["results"][0]["filename"] == "wok.md" and found["mode"] == "hybrid"
    read = cli.json("--store", url, "read", "notes", "wok")
    assert read["text"].endswith("Carbon fibre woks heat unevenly.\n")
    assert cli("--store", url, "rm", "notes", "wok").exit_code == 0
    assert cli.json("--store", url, "search", "carbon woks", "-f", "notes")["results"] == []
    # the working copies live in the cache (XDG_CACHE_HOME), never beside the command
    assert (tmp_path / ".cache" / "deepfield" / "buckets").is_dir()
    assert not list(Path.cwd().glob("s3-*"))


def test_http_on_a_bucket_store_answers_races_with_the_current_version(two: Any) -> None:
    """PUT with a stale If-Match is 412 with the current ETag, also when the other writer
    was another replica (the page is fetched again, not trusted from the copy); DELETE
    archives in the bucket."""
    from deepfield.server import create_app

    from .test_server import Served

    first, second, client, bucket = two
    first.create_field("notes").add("Plan", "Version one.")
    with Served(create_app(first)) as served, httpx.Client(base_url=served.url) as http:
        got = http.get("/notes/plan.md")
        stale = got.headers["etag"]
        # Another replica updates the page in the bucket.
        second.field("notes").write(got.content.replace(b"one", b"two"), name="plan")
        reply = http.put("/notes/plan.md", content=got.content.replace(b"one", b"three"),
                         headers={"If-Match": stale})
        current = body(client, bucket, "team/notes/plan.md").encode()
        assert reply.status_code == 412
        assert reply.headers["etag"] == '"' + hashlib.sha256(current).hexdigest() + '"'
        assert b"Version two." in current  # nothing was overwritten
        fresh = http.get("/notes/plan.md")
        assert fresh.content == current and fresh.headers["etag"] == reply.headers["etag"]
        assert http.put("/notes/plan.md", content=current.replace(b"two", b"four"),
                        headers={"If-Match": fresh.headers["etag"]}).status_code == 204
        assert b"Version four." in body(client, bucket, "team/notes/plan.md").encode()
        assert http.delete("/notes/plan.md").status_code == 204
        # The other replica's write by name kept version one in archive/ (as on disk); the
        # DELETE archived version four beside it. PUT replaced without keeping (the spec's).
        left = keys(client, bucket, "team/notes/")
        assert len(left) == 3 and left[0] == "team/notes/" and \
            "team/notes/archive/plan.md" in left and "team/notes/plan.md" not in left
        archived = {body(client, bucket, k) for k in left[1:]}
        assert len(archived) == 2 and any("Version one." in a for a in archived) and \
            any("Version four." in a for a in archived)


def test_http_put_that_loses_a_race_without_if_match_is_409(
        two: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another replica writes the page between this replica's read of it and its conditional
    PUT to the bucket: 409 with the winner's ETag, and the winner's version stays."""
    from deepfield.server import create_app

    from .test_server import Served

    first, second, client, bucket = two
    first.create_field("notes").add("Plan", "Version one.")
    original = BucketField._put
    raced: list[str] = []

    def put_after_another_writer(self: BucketField, name: str, etag: str | None) -> None:
        if self.store is first and not raced:
            raced.append(name)
            second.field("notes").write("---\ntitle: Plan\n---\nTheirs.\n", name="plan")
        original(self, name, etag)

    monkeypatch.setattr(BucketField, "_put", put_after_another_writer)
    with Served(create_app(first)) as served, httpx.Client(base_url=served.url) as http:
        reply = http.put("/notes/plan.md", content=b"---\ntitle: Plan\n---\nMine.\n")
        current = body(client, bucket, "team/notes/plan.md").encode()
        assert raced == ["plan.md"]
        assert reply.status_code == 409 and reply.json()["error"]["type"] == "WriteConflictError"
        assert reply.headers["etag"] == '"' + hashlib.sha256(current).hexdigest() + '"'
        assert current.endswith(b"Theirs.\n")
        assert http.get("/notes/plan.md").content == current  # the copy follows the bucket


def test_a_conditional_write_on_a_local_field(field: deepfield.Field) -> None:
    field.add("Plan", "Version one.")
    before = (field.path / "plan.md").read_bytes()
    field.write(before.replace(b"one", b"two"), name="plan", expected=before)
    with pytest.raises(WriteConflictError) as caught:
        field.write(before.replace(b"one", b"three"), name="plan", expected=before)
    assert caught.value.current == (field.path / "plan.md").read_bytes()
    assert b"Version two." in caught.value.current


def test_the_lease_ttl_is_configured_per_store(tmp_path: Path) -> None:
    from deepfield.config import load_config
    from deepfield.errors import ConfigError

    (tmp_path / "deepfield.toml").write_text("[server]\nlease_ttl_s = 30\n")
    assert load_config(tmp_path).server.lease_ttl_s == 30.0
    (tmp_path / "deepfield.toml").write_text("[server]\nlease_ttl_s = 0\n")
    with pytest.raises(ConfigError, match="lease_ttl_s must be a number of seconds"):
        load_config(tmp_path)


BIG = "\n\n".join(f"## Section {i}\n\n" + f"Sentence {i} of the big page. " * 40
                  for i in range(12))


def test_restore_in_a_bucket_brings_back_the_newest_version_and_every_part(two: Any) -> None:
    first, second, client, bucket = two
    notes = first.create_field("notes")
    notes.add("G", "Version one.", name="g")
    notes.add("G", "Version two.", name="g")  # version one -> archive/g.md
    notes.archive("g")
    other = second.field("notes")
    result = other.restore_page("g")
    assert result.filename == "g.md" and result.source.startswith("archive/g--archived-")
    assert result.others == ["g.md"]
    assert body(client, bucket, "team/notes/g.md").endswith("Version two.\n")
    older = other.restore_page("archive/g.md", as_name="g-old")
    assert body(client, bucket, "team/notes/g-old.md").endswith("Version one.\n")
    assert older.new_uuid is not None  # its own uuid is g.md's: the copy gets a fresh one
    # A split page goes and comes back whole.
    parts = notes.add("Big", BIG).filenames
    assert len(parts) > 1
    assert len(notes.archive_page("big").archived) == len(parts)
    assert [k for k in keys(client, bucket, "team/notes/") if "big" in k] == sorted(
        f"team/notes/archive/{p}" for p in parts)
    back = other.restore_page("big")
    assert sorted(back.restored) == sorted(parts)
    assert sorted(k for k in keys(client, bucket, "team/notes/") if "big" in k) == sorted(
        f"team/notes/{p}" for p in parts)
    # A name taken at the root is refused before anything moves.
    notes.add("G", "Version three.", name="g-taken")
    notes.archive("g-taken")
    notes.add("G", "A new page.", name="g-taken")
    with pytest.raises(PageConflictError, match="already exists"):
        other.restore("g-taken")
    assert "team/notes/archive/g-taken.md" in keys(client, bucket, "team/notes/")


def _until(check: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "not picked up in time"
        time.sleep(0.1)


def test_passwd_on_a_bucket_store_reaches_running_replicas(
        two: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`passwd --store s3://…` edits the bucket's deepfield.toml (conditionally: an edit
    made meanwhile is kept), and a running server's logins follow it within seconds."""
    import io

    from deepfield.server import create_app

    from .test_server import Served, basic

    first, _, client, bucket = two
    url = f"s3://{bucket}/team"
    first.create_field("notes")
    page = b"# Note\n\ntext\n"
    with Served(create_app(first)) as served, httpx.Client(base_url=served.url) as http:
        assert http.put("/notes/before.md", content=page).status_code == 201  # no users
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"s3cret\n")))
        code, out, err = run_main(capsys, "--store", url, "passwd", "dave", "--password-stdin")
        assert (code, err) == (0, "")
        assert out == f"password for dave saved in {url}/deepfield.toml\n"
        config = body(client, bucket, "team/deepfield.toml")
        assert 'backend = "fake"' in config and "dave = \"scrypt$" in config
        _until(lambda: http.put("/notes/race.md", content=page).status_code == 401, 5)
        assert http.put("/notes/after.md", content=page,
                        headers=basic("dave", "s3cret")).status_code == 201
        code, out, err = run_main(capsys, "--store", url, "passwd", "dave", "--remove")
        assert code == 0 and out.startswith("login of dave removed")
        assert "dave" not in body(client, bucket, "team/deepfield.toml")
        _until(lambda: http.put("/notes/open.md", content=page).status_code == 201, 5)
        code, _, err = run_main(capsys, "--store", url, "passwd", "dave", "--remove")
        assert code == 1 and err.startswith("error: no user 'dave' in s3://")


def test_editing_the_bucket_config_keeps_an_edit_made_meanwhile(two: Any) -> None:
    from deepfield.bucket.store import edit_bucket_config
    from deepfield.server.auth import with_user

    _, _, client, bucket = two
    url = f"s3://{bucket}/team"
    tries = []

    def edit(text: str) -> str:
        if not tries:  # another process adds its user between our read and our write
            client.put_object(Bucket=bucket, Key="team/deepfield.toml",
                              Body=with_user(text, "erin", "scrypt$x", "t").encode())
        tries.append(text)
        return with_user(text, "dave", "scrypt$y", "t")

    assert edit_bucket_config(url, edit) == f"{url}/deepfield.toml"
    config = body(client, bucket, "team/deepfield.toml")
    assert len(tries) == 2 and "erin = " in config and "dave = " in config


def test_a_server_answers_from_its_copy_while_the_bucket_is_down(
        s3: Any, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """The page file route and search answer from the working copy with the warning, as
    the other reads do (a bucket server of its own, stopped in the middle)."""
    import boto3
    from moto.server import ThreadedMotoServer

    from deepfield.server import create_app

    from .test_server import Served

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://{host}:{port}")
    client = boto3.client("s3")
    client.create_bucket(Bucket="down")
    client.put_object(Bucket="down", Key="team/deepfield.toml", Body=CONFIG)
    client.close()
    store = deepfield.open("s3://down/team", embedder=FakeEmbedder())
    store.create_field("notes").add("Wok", "Carbon fibre woks heat unevenly.")
    search = {"q": "carbon woks", "mode": "bm25"}
    try:
        with Served(create_app(store)) as served, httpx.Client(base_url=served.url) as http:
            assert "x-deepfield-warning" not in http.get("/notes/wok.md").headers
            assert http.get("/notes/search", params=search).json()["warnings"] == []
            server.stop()
            _until(lambda: any("cannot reach the bucket" in w for w in
                               http.get("/notes/search", params=search).json()["warnings"]), 15)
            found = http.get("/notes/search", params=search).json()
            assert found["results"][0]["filename"] == "wok.md"
            got = http.get("/notes/wok.md")
            assert got.status_code == 200 and b"Carbon fibre woks" in got.content
            assert "cannot reach the bucket" in got.headers["x-deepfield-warning"]
            for route in ("/notes/_/read/wok", "/notes/_/pages"):
                answer = http.get(route)
                assert answer.status_code == 200, route
                assert any("cannot reach the bucket" in w for w in answer.json()["warnings"])
            for tool, args in (("read", {"field": "notes", "page": "wok"}),
                               ("list_pages", {"field": "notes"})):
                reply = anyio.run(_mcp_call, store, tool, args)
                assert any("cannot reach the bucket" in w for w in reply["warnings"]), tool
    finally:
        store.close()


async def _mcp_call(store: deepfield.Store, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    from mcp import Client

    from deepfield.server.mcp_server import create_mcp_server

    async with Client(create_mcp_server(store)) as client:
        reply = await client.call_tool(tool, args)
    assert not reply.is_error and reply.structured_content is not None, reply.content
    return reply.structured_content
