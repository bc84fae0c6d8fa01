"""The HTTP server, MCP server and setup, and bucket stores as a demanding user meets them
(fourth walk): a shareable Claude Code project entry, failed calls that leave nothing behind
in a bucket, deletes of pages already gone, and a poller that falls behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

import deepfield
from deepfield.bucket import BucketStore
from deepfield.config import EmbeddingConfig

from .fakes import FakeEmbedder
from .test_transports import moto_endpoint, s3  # noqa: F401 (the transport tests' fixtures)

SRC = Path(deepfield.__file__).resolve().parent.parent


def test_claude_code_project_entry_names_the_store_relative_to_the_project(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # .mcp.json got the store's absolute folder, which no teammate has: the file could not be
    # committed. Claude Code passes $CLAUDE_PROJECT_DIR to the servers it starts
    # (anthropics/claude-code#58121), so the entry names the store relative to the project.
    from click.testing import CliRunner

    from deepfield.cli import app
    from deepfield.cli.commands_serve import project_store

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    project = tmp_path / "proj"
    (project / "src").mkdir(parents=True)
    monkeypatch.chdir(project)
    runner = CliRunner()
    assert runner.invoke(app, ["--embedder", "none", "init", "memory"]).exit_code == 0
    done = runner.invoke(app, ["--store", "memory", "setup", "claude-code", "--scope", "project"])
    assert done.exit_code == 0, done.output
    assert "memory" not in done.stderr  # nothing about the store is this machine's
    entry = json.loads((project / ".mcp.json").read_text())["mcpServers"]["deepfield"]
    assert entry["args"][-2:] == ["mcp", "memory"]
    # Running setup again (e.g. for --instructions) keeps the entry as it is.
    again = runner.invoke(app, ["--store", "memory", "setup", "claude-code", "--scope",
                                "project"])
    assert again.exit_code == 0 and "unchanged" in again.stdout, again.output
    # From a subfolder without --store, setup does not move the entry off the project's
    # store (to ./memory there, which holds none), and names the store's folder to pass.
    monkeypatch.chdir(project / "src")
    moved = runner.invoke(app, ["setup", "claude-code", "--scope", "project", "--dir", ".."])
    assert moved.exit_code != 0
    assert f"pass --store {project / 'memory'} to keep it" in str(moved.exception)
    monkeypatch.chdir(project)
    # The user scope stays absolute: it is this machine's own file.
    assert runner.invoke(app, ["--store", "memory", "setup", "claude-code"]).exit_code == 0
    user = json.loads((tmp_path / "home" / ".claude.json").read_text())
    assert user["mcpServers"]["deepfield"]["args"][-1] == str((project / "memory").resolve())
    # The relative store is taken inside $CLAUDE_PROJECT_DIR; others are left as given.
    env = {"CLAUDE_PROJECT_DIR": str(project)}
    assert project_store("memory", env) == str(project / "memory")
    for given in (str(project / "memory"), "s3://b/team", None):
        assert project_store(given, env) == given
    assert project_store("memory", {}) == "memory"
    # A session started in a subfolder may pass that folder: the store is found beside the
    # nearest .mcp.json above it (and only there).
    below = {"CLAUDE_PROJECT_DIR": str(project / "src")}
    assert project_store("memory", below) == str(project / "memory")
    assert project_store("other", below) == str(project / "src" / "other")
    assert project_store("memory", {"CLAUDE_PROJECT_DIR": "rel"}) == "memory"


def test_mcp_started_in_a_subfolder_finds_the_project_store(tmp_path: Path) -> None:
    # Claude Code starts stdio servers in the folder it was launched from: `mcp memory` from
    # proj/src said "no store at proj/src/memory".
    project = tmp_path / "proj"
    (project / "src").mkdir(parents=True)
    deepfield.init(project / "memory", EmbeddingConfig("none")).close()
    env = {**os.environ, "PYTHONPATH": str(SRC), "CLAUDE_PROJECT_DIR": str(project),
           "HOME": str(tmp_path)}
    ran = subprocess.run([sys.executable, "-m", "deepfield", "mcp", "memory"], cwd=project / "src",
                         env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                         timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert "no store" not in ran.stderr


def test_a_failed_remember_with_create_field_leaves_no_field_in_the_bucket(
        s3: Any) -> None:  # noqa: F811
    # A local store's new field was removed again after a failed call; in a bucket its
    # folder marker stayed, and the empty field was listed from then on.
    from deepfield.llm.config import LLMConfig
    from deepfield.server.mcp_server import create_mcp_server
    from deepfield.server.service import Service

    client, bucket = s3
    client.put_object(Bucket=bucket, Key="team/deepfield.toml",
                      Body=b'[embedding]\nbackend = "fake"\n')
    store = deepfield.open(f"s3://{bucket}/team", embedder=FakeEmbedder())
    assert isinstance(store, BucketStore)
    store.create_field("notes")
    unreachable = LLMConfig(options={"model": "m", "url": "http://127.0.0.1:1/v1"})
    service = Service(store, unreachable)
    server = create_mcp_server(store, service=service)

    async def main() -> None:
        with anyio.fail_after(90):
            async with Client(server) as mcp:
                failed = await mcp.call_tool("remember", {
                    "field": "journal", "text": "We moved to Berlin in May.",
                    "create_field": True})
                assert failed.is_error
                listed = client.list_objects_v2(Bucket=bucket, Prefix="team/journal")
                assert listed.get("KeyCount", 0) == 0, listed.get("Contents")
                assert store.field_names() == ["notes"]
                # A field that was there before the call stays, even empty.
                kept = await mcp.call_tool("remember", {
                    "field": "notes", "text": "We moved to Berlin in May.",
                    "create_field": True})
                assert kept.is_error and store.field_names() == ["notes"]
                # The field can be started again by a write that works.
                started = await mcp.call_tool("write", {
                    "field": "journal", "text": "# Day one\n", "create_field": True})
                assert not started.is_error, started.content
                assert store.field_names() == ["journal", "notes"]

    try:
        anyio.run(main)
    finally:
        service.close()
        store.close()


def test_a_second_delete_of_a_hand_made_name_is_a_404(keyword_store: deepfield.Store) -> None:
    # After "My Notes.md" (made by hand) was archived, deleting it again was a 400 ("not a
    # page filename"), as if the name had never been accepted: a client retrying a DELETE
    # took it for a bug in its own request. It is gone, as any missing page: 404.
    from starlette.testclient import TestClient

    from deepfield.server import create_app

    folder = keyword_store.create_field("notes").path
    (folder / "My Notes.md").write_text("# My notes\n\nHand made woks.\n", encoding="utf-8")
    client = TestClient(create_app(keyword_store), client=("127.0.0.1", 40000),
                        base_url="http://127.0.0.1:8765")
    assert client.delete("/notes/My%20Notes.md").status_code == 204
    again = client.delete("/notes/My%20Notes.md")
    assert again.status_code == 404, again.text
    assert again.json()["error"]["type"] == "PageNotFoundError"
    never = client.delete("/notes/Other%20Notes.md")  # never there: as any missing page
    assert never.status_code == 404
    # Names that are never pages stay a bad request; a PUT still takes spec names only.
    assert client.delete("/notes/.secret.md").status_code == 400
    assert client.delete("/notes/woks.txt").status_code == 400
    assert client.put("/notes/My%20Notes.md", content=b"# Mine\n").status_code == 400


def test_a_poll_round_longer_than_the_interval_is_said_once_per_run(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    # Rounds slower than the interval ran back to back without a word: other replicas'
    # writes arrived later than the documented second, and nothing said to raise it.
    import logging
    import threading
    import time
    from types import SimpleNamespace

    from deepfield.bucket.poller import BucketPoller

    store: Any = SimpleNamespace(url="s3://b/team", background_indexing=False)
    poller = BucketPoller(store, interval=0.1)
    slow = threading.Event()
    slow.set()
    rounds: list[bool] = []

    def round_() -> None:
        rounds.append(slow.is_set())
        time.sleep(0.25 if slow.is_set() else 0.01)

    monkeypatch.setattr(poller, "round", round_)
    monkeypatch.setattr(poller, "close", lambda: poller._stop.set())

    def wait_for(count: int) -> None:
        deadline = time.monotonic() + 30
        while len(rounds) < count and time.monotonic() < deadline:
            time.sleep(0.02)

    with caplog.at_level(logging.INFO, logger="deepfield.bucket.poller"):
        poller.start(ready=False)
        try:
            wait_for(4)  # several slow rounds in a row: one warning
            slow.clear()
            wait_for(len(rounds) + 3)
            slow.set()  # slow again after fitting: said again
            wait_for(len(rounds) + 3)
        finally:
            poller._stop.set()
            assert poller._thread is not None
            poller._thread.join(timeout=10)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings
    assert "longer than the 0.10 s interval" in warnings[0] and "poll_s" in warnings[0]
    assert any("fit the 0.10 s interval again" in r.getMessage() for r in caplog.records)


def test_the_poll_interval_is_a_server_setting(tmp_path: Path) -> None:
    from deepfield.config import load_config
    from deepfield.errors import ConfigError

    (tmp_path / "deepfield.toml").write_text("[server]\npoll_s = 5\n")
    assert load_config(tmp_path).server.poll_s == 5.0
    for bad in ("0", "true", '"5"', "5000"):
        (tmp_path / "deepfield.toml").write_text(f"[server]\npoll_s = {bad}\n")
        with pytest.raises(ConfigError, match="poll_s"):
            load_config(tmp_path)


def test_listed_resources_of_hand_made_names_can_be_read(
        keyword_store: deepfield.Store) -> None:
    # resources/list gave "memoryfield://notes/Q&A #2.md": the "#" cut the URI short and
    # reading it was "Unknown resource". A field that does not exist was "no page".
    folder = keyword_store.create_field("notes").path
    (folder / "Q&A #2.md").write_text("# Q and A\n\nHash names.\n", encoding="utf-8")
    (folder / "My Notes.md").write_text("# Mine\n\nSpaces.\n", encoding="utf-8")
    from deepfield.server.mcp_server import create_mcp_server

    server = create_mcp_server(keyword_store)

    async def main() -> None:
        with anyio.fail_after(60):
            async with Client(server) as mcp:
                listed = {r.name: str(r.uri) for r in (await mcp.list_resources()).resources}
                assert listed["notes/Q&A #2.md"] == "memoryfield://notes/Q%26A%20%232.md"
                for name in ("notes/Q&A #2.md", "notes/My Notes.md"):
                    got = await mcp.read_resource(listed[name])
                    assert getattr(got.contents[0], "text", "").startswith("# "), name
                with pytest.raises(Exception, match="no field nope"):
                    await mcp.read_resource("memoryfield://nope/woks.md")

    try:
        anyio.run(main)
    finally:
        server.service.close()


@pytest.mark.skipif(os.sep == "\\", reason="a backslash separates folders on Windows")
def test_a_hand_made_name_with_a_backslash_is_read_as_search_lists_it(
        keyword_store: deepfield.Store) -> None:
    # "Q1\Q2.md" (an object name from a bucket; an ordinary character on POSIX) was indexed,
    # found by search and linked by listing.md, but GET, DELETE and MCP read refused it as
    # "not a page filename".
    from starlette.testclient import TestClient

    from deepfield.server import create_app

    field = keyword_store.create_field("notes")
    (field.path / "Q1\\Q2.md").write_text("# Quarters\n\nSlashy plans.\n", encoding="utf-8")
    client = TestClient(create_app(keyword_store), client=("127.0.0.1", 40000),
                        base_url="http://127.0.0.1:8765")
    found = client.get("/notes/search", params={"q": "slashy"}).json()["results"]
    assert [r["filename"] for r in found] == ["Q1\\Q2.md"]
    assert client.get("/notes/Q1%5CQ2.md").text.startswith("# Quarters")
    assert client.get("/notes/_/read/Q1%5CQ2.md").json()["title"] == "Quarters"
    assert client.put("/notes/Q3%5CQ4.md", content=b"# New\n").status_code == 400
    assert client.get("/notes/..%5Cdeepfield.toml").status_code in (400, 404)
    assert client.delete("/notes/Q1%5CQ2.md").status_code == 204


def test_mcp_over_http_says_why_a_request_is_refused(keyword_store: deepfield.Store) -> None:
    # A remote client of a server without users (its users removed while it runs) got 401
    # "login needed", which no login could satisfy; a wrong password read the same.
    from starlette.testclient import TestClient

    from deepfield.server import Auth, hash_password
    from deepfield.server.mcp_server import BasicAuthMiddleware, basic_header

    async def ok(scope: Any, receive: Any, send: Any) -> None:  # stands for the MCP app
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    def remote() -> TestClient:
        return TestClient(BasicAuthMiddleware(ok, Auth.for_store(keyword_store.root)),
                          client=("203.0.113.7", 5000))

    refused = remote().post("/mcp")
    assert refused.status_code == 403, refused.text
    assert "no users" in refused.json()["error"]["message"]
    assert "www-authenticate" not in refused.headers
    config = keyword_store.root / "deepfield.toml"
    config.write_text(config.read_text() + f'\n[server.users]\nalice = "{hash_password("pw")}"\n')
    client = remote()
    missing = client.post("/mcp")
    assert missing.status_code == 401 and missing.json()["error"]["message"] == "login needed"
    assert missing.headers["www-authenticate"].startswith("Basic")
    wrong = client.post("/mcp", headers={"Authorization": basic_header("alice", "nope")})
    assert wrong.status_code == 401
    assert wrong.json()["error"]["message"] == "wrong user or password"
    right = client.post("/mcp", headers={"Authorization": basic_header("alice", "pw")})
    assert right.status_code == 200


def test_a_fresh_server_reads_a_mirrored_field_while_the_bucket_is_down(
        s3: Any, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    # "Reads answer from the working copy with a warning" held only for a field the server
    # had opened before the outage: a restarted server's first GET of a page, search or
    # _/pages was a 502, as opening the field listed the bucket.
    import time

    import boto3
    import httpx
    from moto.server import ThreadedMotoServer

    from deepfield.server import create_app

    from .test_server import Served

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://{host}:{port}")
    client = boto3.client("s3")
    bucket = f"walk4-down-{time.monotonic_ns()}"  # moto's buckets are one per process
    client.create_bucket(Bucket=bucket)
    client.put_object(Bucket=bucket, Key="team/deepfield.toml",
                      Body=b'[embedding]\nbackend = "fake"\n')
    client.close()
    first = deepfield.open(f"s3://{bucket}/team", embedder=FakeEmbedder())
    first.create_field("notes").add("Wok", "Carbon fibre woks heat unevenly.")
    first.close()  # its working copy stays, as a stopped server's does
    store = deepfield.open(f"s3://{bucket}/team", embedder=FakeEmbedder())
    try:
        server.stop()
        with Served(create_app(store)) as served, httpx.Client(base_url=served.url) as http:
            got = http.get("/notes/wok.md")
            assert got.status_code == 200, got.text
            assert "cannot reach the bucket" in got.headers["x-deepfield-warning"]
            found = http.get("/notes/search", params={"q": "carbon woks", "mode": "bm25"})
            assert found.json()["results"][0]["filename"] == "wok.md"
            # A field this process never mirrored is still the bucket's error, not a 404.
            assert http.get("/other/_/pages").status_code == 502
            # The list of fields is the copy's too, and says so (it was a 502).
            listed = http.get("/")
            assert listed.status_code == 200, listed.text
            assert [f["name"] for f in listed.json()["fields"]] == ["notes"]
            assert "cannot reach the bucket" in listed.json()["warnings"][0]
            reply = anyio.run(_list_fields, store)
            assert [f["name"] for f in reply["fields"]] == ["notes"] and reply["warnings"]
    finally:
        store.close()


async def _list_fields(store: deepfield.Store) -> dict[str, Any]:
    from deepfield.server.mcp_server import create_mcp_server

    server = create_mcp_server(store)
    try:
        async with Client(server) as mcp:
            reply = await mcp.call_tool("list_fields", {})
        assert not reply.is_error and reply.structured_content is not None, reply.content
        return reply.structured_content
    finally:
        server.service.close()


def test_the_console_offers_no_edit_that_cannot_be_saved(keyword_store: deepfield.Store) -> None:
    # A page kept under a non-spec name had an "edit" link, and every save was refused as
    # "not a spec filename": the console says so instead, and keeps archiving it possible.
    from starlette.testclient import TestClient

    from deepfield.server import create_app

    field = keyword_store.create_field("notes")
    field.add("Woks", "Carbon steel woks heat fast.", name="woks")
    (field.path / "My Notes.md").write_text("# Mine\n\nHand made.\n", encoding="utf-8")
    client = TestClient(create_app(keyword_store), client=("127.0.0.1", 40000),
                        base_url="http://127.0.0.1:8765")
    own = client.get("/ui/f/notes/p/My%20Notes.md").text
    assert 'id="edit"' not in own and 'id="not-savable"' in own
    assert 'id="archive-form"' in own
    spec = client.get("/ui/f/notes/p/woks.md").text
    assert 'id="edit"' in spec and 'id="not-savable"' not in spec


def test_console_errors_point_at_console_views(keyword_store: deepfield.Store) -> None:
    # The console's 404 pages said "list fields with `deepfield ls`": a command, where the
    # console has a Fields page.
    from starlette.testclient import TestClient

    from deepfield.server import create_app

    keyword_store.create_field("notes").add("Woks", "Carbon steel woks.", name="woks")
    client = TestClient(create_app(keyword_store), client=("127.0.0.1", 40000),
                        base_url="http://127.0.0.1:8765")
    for path, hint in (("/ui/f/nope/", "the Fields page lists the fields"),
                       ("/ui/f/notes/p/nope", "the field&#39;s Pages view lists its pages")):
        answer = client.get(path)
        assert answer.status_code == 404 and hint in answer.text, answer.text
        assert "deepfield ls" not in answer.text
