"""The HTTP server under uvicorn on 127.0.0.1: every spec route and status code, auth, the
loopback rule, path escapes, the zip, deepfield's own routes and concurrent searches."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.client as httplib
import io
import json
import os
import socket
import sys
import threading
import time
import tomllib
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.routing import Route
from starlette.testclient import TestClient

import deepfield
from deepfield.config import load_config
from deepfield.server import Auth, create_app, hash_password, verify_password
from deepfield.server.auth import is_local_name, is_loopback, save_user

from .conftest import run_deepfield
from .fakes import FakeEmbedder
from .procnet import listening_workers, port_sockets

WOK = b"---\ntitle: Carbon fibre woks\nsummary: Woks that heat unevenly.\n---\n# Woks\n\n" \
      b"## Heat\n\nCarbon fibre woks conduct heat unevenly.\n\n## Care\n\nOil them after use.\n"


class Served:
    """A uvicorn server in a thread on a free loopback port."""

    def __init__(self, app: Any) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, log_level="error", access_log=False, lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       daemon=True)

    def __enter__(self) -> Served:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *_: Any) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file of a field (archive included, index files excluded) with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and ".sqlite3" not in p.name and ".deepfield" not in p.parts}


def basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


@pytest.fixture
def server(store: deepfield.Store) -> Iterator[tuple[Served, deepfield.Store]]:
    store.create_field("notes", intro="Notes about cooking.")
    with Served(create_app(store)) as served:
        yield served, store


@pytest.fixture
def http(server: tuple[Served, deepfield.Store]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server[0].url, timeout=10) as client:
        yield client


def test_fields_intro_and_openapi(server: tuple[Served, deepfield.Store],
                                  http: httpx.Client) -> None:
    _, store = server
    assert http.get("/").json()["fields"][0]["name"] == "notes"
    intro = http.get("/notes/")
    assert intro.status_code == 200 and "Notes about cooking." in intro.text
    assert intro.headers["content-type"].startswith("text/markdown")
    assert http.get("/notes", follow_redirects=True).text == intro.text  # to /notes/
    store.create_field("bare")
    assert "listing.md" in http.get("/bare/").text  # generated when there is no index.md
    assert http.get("/bare/memoryfield.zip").status_code == 404  # no pages: no memoryfield
    assert http.get("/nope/").status_code == 404
    spec = http.get("/openapi.json").json()
    assert spec["openapi"].startswith("3.1")
    for route in create_app(store).routes:  # every route and method is documented
        if getattr(route, "path", "").startswith("/ui"):
            continue  # the console (HTML for people: docs/CONSOLE.md), not the API
        assert isinstance(route, Route)
        if not route.include_in_schema:
            continue  # /FIELD/_/ alone: a 404 that names the routes, no route of the API
        documented = spec["paths"][route.path]
        assert {m.lower() for m in route.methods or ()} - {"head"} == set(documented), route
    put = spec["paths"]["/{field}/{filename}"]["put"]["responses"]
    assert {"201", "204", "400", "401", "409", "415"} <= set(put)
    # The codes a client meets are the ones the document lists.
    observed = {
        ("/{field}/_/research", "get"): http.get("/notes/_/research").status_code,
        ("/{field}/_/context", "get"): http.get("/notes/_/context").status_code,
        ("/{field}/", "get"): http.get("/notes/", headers={
            "If-None-Match": intro.headers["etag"]}).status_code,
    }
    for (path, method), code in observed.items():
        assert str(code) in spec["paths"][path][method]["responses"], (path, code)
    assert "502" in spec["paths"]["/{field}/{filename}"]["get"]["responses"]
    assert "/ui/" in spec["paths"]  # the console's door, as docs/API.md's table lists it


def test_put_get_search_delete(server: tuple[Served, deepfield.Store],
                               http: httpx.Client) -> None:
    _, store = server
    folder = store.field("notes").path
    created = http.put("/notes/woks.md", content=WOK)
    assert created.status_code == 201, created.text
    assert created.headers["location"] == "/notes/woks.md"
    uuid = created.json()["pages"][0]["uuid"]
    page = http.get("/notes/woks.md")
    assert page.status_code == 200 and "conduct heat unevenly" in page.text
    assert page.headers["etag"] == '"' + hashlib.sha256(page.content).hexdigest() + '"'
    assert http.get("/notes/woks.md", headers={"If-None-Match": page.headers["etag"]}
                    ).status_code == 304
    assert "(woks.md)" in http.get("/notes/listing.md").text
    hits = http.get("/notes/search", params={"q": "unevenly"}).json()
    assert hits["results"][0]["filename"] == "woks.md"
    assert hits["results"][0]["frontmatter"]["uuid"] == uuid
    # Replace without a uuid: 204, the stored uuid is kept, search sees the new text at once.
    replaced = http.put("/notes/woks.md", content=b"# Woks\n\nSeasoning builds a patina.\n")
    assert replaced.status_code == 204 and replaced.content == b""
    assert f"uuid: {uuid}" in http.get("/notes/woks.md").text
    hits = http.get("/notes/search", params={"q": "patina", "mode": "bm25"}).json()
    assert [r["filename"] for r in hits["results"]] == ["woks.md"]
    # The spec: a PUT regenerates the page's vector index entries (its row of the `pages`
    # table, embedded from the whole new file) before the page is next returned.
    conn = store.field("notes").index_handle().conn
    row = conn.execute("SELECT sha256_hash, embedding FROM pages WHERE filename = 'woks.md'"
                       ).fetchone()
    assert row is not None and row[1] is not None
    assert bytes(row[0]) == hashlib.sha256((folder / "woks.md").read_bytes()).digest()
    assert http.get("/notes/search", params={"q": "unevenly", "mode": "bm25"}
                    ).json()["results"] == []
    # Pages without frontmatter are accepted.
    assert http.put("/notes/plain.md", content=b"just text\n").status_code == 201
    deleted = http.delete("/notes/woks.md")
    assert deleted.status_code == 204
    assert http.get("/notes/woks.md").status_code == 404
    assert http.delete("/notes/woks.md").status_code == 404
    assert (folder / "archive" / "woks.md").is_file()  # archived, never destroyed
    assert "woks.md" not in http.get("/notes/listing.md").text
    hits = http.get("/notes/search", params={"q": "patina"}).json()["results"]
    assert "woks.md" not in [h["filename"] for h in hits]


def test_bad_writes_leave_the_store_unchanged(server: tuple[Served, deepfield.Store],
                                              http: httpx.Client) -> None:
    _, store = server
    folder = store.field("notes").path
    assert http.put("/notes/woks.md", content=WOK).status_code == 201
    stored_uuid = http.get("/notes/_/read/woks").json()["uuid"]
    before = snapshot(folder)
    other = "6aa615f0-486f-48a7-a210-ba4f5ff18c8b"
    cases = [
        ("/notes/Bad_Name.md", b"# x\n", 400),
        ("/notes/-bad.md", b"# x\n", 400),
        ("/notes/notes.txt", b"# x\n", 400),
        ("/notes/.md", b"# x\n", 400),
        ("/notes/ok.md", b"\xff\xfe\x00bad", 415),
        ("/notes/ok.md", b"", 400),
        ("/notes/ok.md", b"  \n\n", 400),
        ("/notes/woks.md", b"---\n---\n", 400),  # an empty block and no text: empty
        ("/notes/woks.md", f"---\nuuid: {other}\n---\nnew\n".encode(), 409),
        ("/notes/copy.md", f"---\nuuid: {stored_uuid}\n---\ncopy\n".encode(), 409),
        ("/notes/listing.md", b"# mine\n", 405),
        ("/notes/a%2Fb.md", b"# x\n", 400),  # a sub-folder once decoded: a bad page name
        ("/notes/..%2Fevil.md", b"# x\n", 400),
        ("/nope/ok.md", b"# x\n", 404),
    ]
    for path, body, status in cases:
        response = http.put(path, content=body)
        assert response.status_code == status, (path, response.text)
        assert response.json()["error"]["message"]
    assert http.put("/notes/woks.md", content=b"# x\n", headers={"If-Match": '"nope"'}
                    ).status_code == 412
    assert http.delete("/notes/listing.md").status_code == 405
    assert http.delete("/notes/woks.txt").status_code == 400
    assert snapshot(folder) == before


def _raw(port: int, method: str, path: str, body: bytes | None = None) -> int:
    conn = httplib.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=body)
        return conn.getresponse().status
    finally:
        conn.close()


def test_paths_that_escape_the_field_are_refused(server: tuple[Served, deepfield.Store],
                                                 tmp_path: Path) -> None:
    served, store = server
    folder = store.field("notes").path
    secret = tmp_path / "secret.md"
    secret.write_text("# secret\n")
    (folder / "link.md").symlink_to(secret)
    before = snapshot(folder)
    toml = (store.root / "deepfield.toml").read_bytes()
    for method in ("GET", "PUT", "DELETE"):
        body = b"# evil\n" if method == "PUT" else None
        for path in ("/notes/../deepfield.toml", "/notes/%2e%2e/deepfield.toml",
                     "/notes/..%2Fdeepfield.toml", "/notes/..%2fsecret.md",
                     "/notes/%2e%2e%2fnotes.md", "/notes//etc/passwd", "/notes/link.md",
                     "/%2e%2e/notes/index.md", "/notes/_/read/..%2F..%2Fdeepfield.toml",
                     "/notes/_/read/link", "/notes/_/read/link.md",
                     "/notes/.deepfield.md", "/.deepfield/x.md"):
            status = _raw(served.port, method, path, body)
            assert status in (400, 404, 405), (method, path, status)
    assert snapshot(folder) == before
    assert secret.read_text() == "# secret\n"
    assert (store.root / "deepfield.toml").read_bytes() == toml


def test_page_reads_never_follow_a_link_swapped_in(tmp_path: Path) -> None:
    """A link put in place after the path was checked is still not followed."""
    from deepfield.server.routes_spec import _read

    secret = tmp_path / "secret.md"
    secret.write_text("# secret\n")
    (tmp_path / "page.md").symlink_to(secret)
    with pytest.raises(FileNotFoundError):
        _read(tmp_path / "page.md")
    secret.with_name("plain.md").write_text("# plain\n")
    assert _read(tmp_path / "plain.md")[0] == b"# plain\n"


def test_basic_auth_for_writes(store: deepfield.Store) -> None:
    store.create_field("notes")
    auth = Auth({"alice": hash_password("s3cret", n=1 << 10)})
    with Served(create_app(store, auth=auth)) as served, \
            httpx.Client(base_url=served.url, timeout=10) as client:
        folder = store.field("notes").path
        before = snapshot(folder)
        for headers in ({}, basic("alice", "wrong"), basic("bob", "s3cret"),
                        {"Authorization": "Basic !!notbase64"}, {"Authorization": "Bearer x"}):
            for response in (client.put("/notes/a.md", content=b"# a\n", headers=headers),
                             client.delete("/notes/index.md", headers=headers)):
                assert response.status_code == 401
                assert response.headers["www-authenticate"].startswith("Basic realm=")
        assert snapshot(folder) == before
        assert client.get("/notes/search", params={"q": "a"}).status_code == 200  # reads open
        ok = client.put("/notes/a.md", content=b"# a\n", headers=basic("alice", "s3cret"))
        assert ok.status_code == 201
        again = client.put("/notes/a.md", content=b"# a\n\nmore\n",
                           headers=basic("alice", "s3cret"))
        assert again.status_code == 204


def test_unknown_users_cost_a_password_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """An unknown name is as slow as a wrong password, so user names cannot be probed."""
    from deepfield.server import auth as auth_module

    checked: list[str] = []
    real = auth_module.verify_password
    monkeypatch.setattr(auth_module, "verify_password",
                        lambda pw, stored: checked.append(pw) or real(pw, stored))
    auth = Auth({"alice": hash_password("pw", n=1 << 10)})
    assert auth.user(basic("mallory", "guess")["Authorization"]) is None
    assert auth.user(basic("alice", "guess")["Authorization"]) is None
    assert checked == ["guess", "guess"]
    assert auth.user(basic("alice", "pw")["Authorization"]) == "alice"


def test_private_store_gates_reads(store: deepfield.Store) -> None:
    store.create_field("notes").add("Woks", "Carbon steel woks.")
    auth = Auth({"alice": hash_password("pw", n=1 << 10)}, private=True)
    client = TestClient(create_app(store, auth=auth), client=("127.0.0.1", 5000))
    for path in ("/", "/notes/", "/notes/search?q=x", "/notes/listing.md",
                 "/notes/memoryfield.zip", "/notes/_/pages"):
        assert client.get(path).status_code == 401, path
        assert client.get(path, headers=basic("alice", "pw")).status_code == 200, path


def test_private_store_without_users_serves_only_loopback(store: deepfield.Store) -> None:
    """``private = true`` with no users to log in as never falls open."""
    store.create_field("notes")
    app = create_app(store, auth=Auth({}, private=True))
    remote = TestClient(app, client=("203.0.113.7", 40000))
    for path in ("/", "/notes/", "/notes/search?q=x", "/notes/memoryfield.zip"):
        response = remote.get(path)
        assert response.status_code == 403, path
        assert "private" in response.json()["error"]["message"]
    local = TestClient(app, client=("127.0.0.1", 40000), base_url="http://127.0.0.1:8765")
    assert local.get("/notes/").status_code == 200


def test_without_users_only_loopback_may_write(store: deepfield.Store) -> None:
    store.create_field("notes")
    app = create_app(store)
    remote = TestClient(app, client=("203.0.113.7", 40000))
    folder = store.field("notes").path
    before = snapshot(folder)
    assert remote.put("/notes/a.md", content=b"# a\n").status_code == 403
    assert remote.delete("/notes/index.md").status_code == 403
    assert remote.post("/notes/_/remember", content=b"hello").status_code == 403
    assert remote.get("/notes/").status_code == 200
    assert snapshot(folder) == before
    for number, host in enumerate(("127.0.0.1", "::1", "127.8.9.1", "::ffff:127.0.0.1")):
        client = TestClient(app, client=(host, 40000), base_url="http://127.0.0.1:8765")
        name = f"p{number}"  # (names from hash(host) % 1000 collided now and then: a 204)
        assert client.put(f"/notes/{name}.md", content=b"# p\n").status_code == 201, host
    assert not is_loopback("10.0.0.1") and not is_loopback(None) and not is_loopback("x")
    # A reverse proxy on this machine connects from loopback for anyone: a proxied request
    # is not a loopback client, whichever header the proxy sets.
    local = TestClient(app, client=("127.0.0.1", 40000), base_url="http://127.0.0.1:8765")
    for header in ({"Forwarded": "for=203.0.113.7"}, {"X-Real-IP": "203.0.113.7"},
                   {"Via": "1.1 proxy"}, {"X-Forwarded-For": "203.0.113.7"}):
        assert local.put("/notes/proxied.md", content=b"# p\n", headers=header
                         ).status_code == 403, header
    assert not (folder / "proxied.md").exists()


def test_web_pages_cannot_use_a_loopback_server(store: deepfield.Store) -> None:
    """DNS rebinding (a loopback request naming another host) and cross-site writes."""
    store.create_field("notes")
    app = create_app(store)
    folder = store.field("notes").path
    before = snapshot(folder)
    rebound = TestClient(app, client=("127.0.0.1", 40000), base_url="http://evil.example:8765")
    assert rebound.get("/notes/").status_code == 403
    assert rebound.get("/notes/search", params={"q": "x"}).status_code == 403
    assert rebound.put("/notes/a.md", content=b"# a\n").status_code == 403
    local = TestClient(app, client=("127.0.0.1", 40000), base_url="http://127.0.0.1:8765")
    forged = {"Origin": "https://evil.example", "Content-Type": "text/plain"}
    assert local.post("/notes/_/remember", content=b"hi", headers=forged).status_code == 403
    assert local.put("/notes/a.md", content=b"# a\n", headers=forged).status_code == 403
    assert snapshot(folder) == before
    same = {"Origin": "http://127.0.0.1:8765"}
    assert local.put("/notes/a.md", content=b"# a\n", headers=same).status_code == 201
    assert local.get("/notes/", headers={"Origin": "https://evil.example"}).status_code == 200
    for name in ("localhost:1", "127.0.0.1", "[::1]:80", "app.localhost", "LOCALHOST"):
        assert is_local_name(name), name
    for name in ("evil.example", "10.0.0.1:80", "", "127.0.0.1.evil.example"):
        assert not is_local_name(name), name


def test_zip_download(server: tuple[Served, deepfield.Store], http: httpx.Client) -> None:
    http.put("/notes/woks.md", content=WOK)
    http.put("/notes/gone.md", content=b"# gone\n")
    http.delete("/notes/gone.md")
    response = http.get("/notes/memoryfield.zip")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/zip"
    tag = response.headers["etag"]
    assert tag == '"' + hashlib.sha256(response.content).hexdigest() + '"'
    names = zipfile.ZipFile(io.BytesIO(response.content)).namelist()
    assert {"woks.md", "index.md", "listing.md"} <= set(names)
    assert not any(n.startswith(("archive/", ".")) or n.endswith(".sqlite3") for n in names)
    assert http.get("/notes/memoryfield.zip", headers={"If-None-Match": tag}
                    ).status_code == 304
    http.put("/notes/new.md", content=b"# new\n")
    assert http.get("/notes/memoryfield.zip").headers["etag"] != tag


def test_search_parameters_and_substring_fallback(keyword_store: deepfield.Store) -> None:
    field = keyword_store.create_field("notes")
    field.add("Carbon fibre woks", "They heat unevenly.", summary="Cookware notes.")
    client = TestClient(create_app(keyword_store), client=("127.0.0.1", 5000),
                        base_url="http://localhost:8765")
    out = client.get("/notes/search", params={"q": "fibr"}).json()  # no BM25 term matches
    assert out["mode"] == "bm25"
    assert [r["filename"] for r in out["results"]] == ["carbon-fibre-woks.md"]
    assert out["results"][0]["frontmatter"]["title"] == "Carbon fibre woks"
    # Substring matches only: not "nothing was found" above a listed page, but low, and why.
    inner = client.get("/notes/search", params={"q": "arbon"}).json()
    assert [r["filename"] for r in inner["results"]] == ["carbon-fibre-woks.md"]
    assert inner["confidence"]["level"] == "low", inner["confidence"]
    assert "filename, title or summary" in inner["confidence"]["reason"]
    none = client.get("/notes/search", params={"q": "zzz"}).json()
    assert none["results"] == [] and none["confidence"]["level"] == "none"
    assert client.get("/notes/search").json()["results"] == []
    for params in ({"q": "x", "mode": "nope"}, {"q": "x", "unit": "para"},
                   {"q": "x", "k": "0"}, {"q": "x", "k": "lots"}, {"q": "x", "mode": "vector"}):
        assert client.get("/notes/search", params=params).status_code == 400, params
    assert client.get("/nope/search", params={"q": "x"}).status_code == 404


def test_external_edits_are_noticed(server: tuple[Served, deepfield.Store],
                                    http: httpx.Client) -> None:
    _, store = server
    folder = store.field("notes").path
    assert http.get("/notes/search", params={"q": "zeppelin"}).json()["results"] == []
    (folder / "airships.md").write_text("# Airships\n\nA zeppelin floats.\n")
    hits = http.get("/notes/search", params={"q": "zeppelin"}).json()["results"]
    assert [h["filename"] for h in hits] == ["airships.md"]
    assert "(airships.md)" in http.get("/notes/listing.md").text


def test_deepfield_routes(server: tuple[Served, deepfield.Store], http: httpx.Client) -> None:
    http.put("/notes/woks.md", content=WOK)
    pages = http.get("/notes/_/pages").json()
    assert [p["filename"] for p in pages["pages"]] == ["woks.md"]
    outline = http.get("/notes/_/read/woks.md").json()
    assert outline["view"] == "outline" and "## Heat" in outline["text"]
    section = http.get("/notes/_/read/woks", params={"view": "section", "section": "Care"})
    assert section.json()["text"].strip().endswith("Oil them after use.")
    full = http.get("/notes/_/read/woks", params={"view": "full"}).json()
    assert "Carbon fibre woks conduct" in full["text"]
    assert http.get("/notes/_/read/woks", params={"view": "section", "section": "Nope"}
                    ).status_code == 404
    assert http.get("/notes/_/read/nope").status_code == 404
    assert http.get("/notes/_/read/woks", params={"view": "bad"}).status_code == 400
    assert http.get("/notes/_/context").status_code == 400
    assert http.get("/notes/_/research").status_code == 400


def _has(module: str, name: str) -> bool:
    """True once another part of deepfield (being written meanwhile) provides ``name``."""
    import importlib

    try:
        return hasattr(importlib.import_module(module), name)
    except ImportError:
        return False


@pytest.mark.skipif(not _has("deepfield.memorize", "remember"),
                    reason="deepfield.memorize not built yet")
def test_remember_route(server: tuple[Served, deepfield.Store], http: httpx.Client) -> None:
    response = http.post("/notes/_/remember", content=b"user: I moved to Lisbon in May.\n"
                         b"assistant: Noted, Lisbon since May.\n")
    assert response.status_code == 201, response.text
    assert http.get("/notes/search", params={"q": "Lisbon"}).json()["results"]
    again = http.post("/notes/_/remember", content=b"user: I moved to Lisbon in May.\n"
                      b"assistant: Noted, Lisbon since May.\n")
    assert again.status_code == 200 and again.json()["action"] == "unchanged"
    assert http.post("/notes/_/remember", content=b"").status_code == 400
    assert http.post("/notes/_/remember", content=b"\xff\xfe").status_code == 415
    folder = server[1].field("notes").path
    before = snapshot(folder)
    for body in (b"A: x\x00y\nB: z\x00", b'[{"role": 5, "content": {"x": 1}}]'):
        bad = http.post("/notes/_/remember", content=body)
        assert bad.status_code == 400 and bad.json()["error"]["message"], body
    not_json = http.post("/notes/_/remember", params={"format": "openai"}, content=b"{oops")
    assert not_json.json()["error"]["message"].startswith("the request body is not valid")
    assert snapshot(folder) == before  # nothing written for either
    # Errors of Starlette itself and names no file can have keep the JSON error shape.
    wrong_method = http.patch("/notes/woks.md")
    assert wrong_method.status_code == 405 and wrong_method.json()["error"]["type"]
    long_name = http.get("/notes/_/read/" + "a" * 300)
    assert long_name.status_code == 404 and long_name.json()["error"]["type"]
    assert http.get("/notes/" + "a" * 300 + ".md").status_code in (400, 404)


@pytest.mark.skipif(not _has("deepfield.research", "research"),
                    reason="deepfield.research not built yet")
def test_research_route(server: tuple[Served, deepfield.Store], http: httpx.Client) -> None:
    http.put("/notes/woks.md", content=WOK)
    response = http.get("/notes/_/research", params={"q": "how do woks heat?"})
    assert response.status_code == 200, response.text
    assert "woks.md" in json.dumps(response.json())


@pytest.mark.skipif(not _has("deepfield.context", "build_context"),
                    reason="deepfield.context not built yet")
def test_context_route(server: tuple[Served, deepfield.Store], http: httpx.Client) -> None:
    http.put("/notes/woks.md", content=WOK)
    response = http.get("/notes/_/context", params={"task": "cook with a wok", "budget": 500})
    assert response.status_code == 200, response.text
    assert isinstance(response.json()["text"], str)
    light = http.get("/notes/_/context", params={"level": "light"})
    assert light.status_code == 200 and "Notes about cooking." in light.json()["text"]
    assert http.get("/notes/_/context", params={"task": "x", "budget": 5}).status_code == 400
    assert http.get("/notes/_/context", params={"task": "x", "level": "x"}).status_code == 400


def test_concurrent_searches_and_writes(server: tuple[Served, deepfield.Store]) -> None:
    served, store = server
    field = store.field("notes")
    for i in range(30):
        field.add(f"Note {i}", f"Topic {i % 5} about woks, pans and kettles number {i}.")
    errors: list[str] = []
    started = time.monotonic()

    def client_loop(worker: int) -> int:
        done = 0
        with httpx.Client(base_url=served.url, timeout=10) as client:
            for i in range(25):
                if time.monotonic() - started > 20:
                    break
                if worker == 0 and i % 5 == 0:  # a writer among the readers
                    r = client.put(f"/notes/w{i}.md", content=f"# W{i}\n\nwok {i}\n".encode())
                    ok = r.status_code == 201
                else:
                    r = client.get("/notes/search", params={"q": f"topic {i % 5} woks"})
                    ok = r.status_code == 200 and bool(r.json()["results"])
                if not ok:
                    errors.append(f"{r.status_code} {r.text[:200]}")
                done += 1
        return done

    with ThreadPoolExecutor(8) as pool:
        done = sum(pool.map(client_loop, range(8)))
    assert errors == []
    assert done == 200
    assert time.monotonic() - started < 30


def test_passwords_and_config(tmp_path: Path, cli: Any) -> None:
    hashed = hash_password("pw", n=1 << 10)
    assert verify_password("pw", hashed) and not verify_password("pW", hashed)
    assert not verify_password("pw", "md5$abc") and not verify_password("pw", "garbage")
    result = cli("passwd", "alice", "--password-stdin", "--json", input="s3cret\n")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["saved"]
    cli("passwd", "bob", "--password-stdin", input="other\n")
    cli("passwd", "alice", "--password-stdin", input="changed\n")
    config = load_config(cli.store_path)
    assert set(config.server.users) == {"alice", "bob"}
    assert verify_password("changed", config.server.users["alice"])
    assert config.embedding.backend == "fake"  # the rest of the file is kept
    tomllib.loads((cli.store_path / "deepfield.toml").read_text())
    with pytest.raises(deepfield.DeepfieldError):
        save_user(cli.store_path, "bad name", hashed)
    printed = cli("passwd", "carol", "--password-stdin", "--print", input="x\n")
    assert printed.stdout.startswith('carol = "scrypt$')
    assert "carol" not in load_config(cli.store_path).server.users
    removed = cli("passwd", "bob", "--remove")
    assert removed.exit_code == 0 and removed.stdout.startswith("login of bob removed from")
    assert set(load_config(cli.store_path).server.users) == {"alice"}
    assert load_config(cli.store_path).embedding.backend == "fake"
    with pytest.raises(deepfield.DeepfieldError, match="no user 'bob'"):  # one line, exit 1
        cli("passwd", "bob", "--remove")


def _first_search(client: httpx.Client, query: str) -> dict[str, Any]:
    """The first answer of a server that is still starting (connections refused meanwhile)."""
    deadline = time.monotonic() + 15
    while True:
        try:
            found: dict[str, Any] = client.get("notes/search", params={"q": query}).json()
            return found
        except httpx.TransportError:
            assert time.monotonic() < deadline, "the server never answered"
            time.sleep(0.05)


@pytest.mark.parametrize("workers", [1, 2, None])
def test_cli_serve_in_a_subprocess(keyword_store: deepfield.Store, workers: int | None) -> None:
    import subprocess

    keyword_store.create_field("notes").add("Woks", "Carbon fibre woks heat unevenly.")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEEPFIELD_")}
    chosen = ["--workers", str(workers)] if workers else []  # None: one per CPU, up to 4
    with subprocess.Popen(
        [sys.executable, "-m", "deepfield", "serve", str(keyword_store.root), "--port", "0",
         *chosen, "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    ) as proc:
        try:
            assert proc.stdout is not None
            info = json.loads(proc.stdout.readline())
            assert info["writes"] == "loopback only" and info["fields"] == ["notes"]
            assert info["workers"] == (workers or min(4, os.cpu_count() or 1))
            with httpx.Client(base_url=info["url"], timeout=10) as client:
                hits = _first_search(client, "woks")
                assert hits["results"][0]["filename"] == "woks.md"
                name = f"pans-{workers or 'auto'}"
                put = client.put(f"notes/{name}.md", content=b"# Pans\n")
                assert put.status_code == 201, put.text
                for _ in range(4):  # whichever process answers sees the new page
                    found = client.get("notes/search", params={"q": "pans"}).json()
                    assert f"{name}.md" in [r["filename"] for r in found["results"]]
            if workers == 1:
                _keep_alive_outlives_a_pause(info["url"], 6.0)
        finally:
            proc.terminate()
            proc.wait(10)
    if workers == 1:
        missing = run_deepfield("serve", str(keyword_store.root / "nope"), "--port", "0")
        assert missing.returncode == 1 and b"error: no store" in missing.stderr


def _keep_alive_outlives_a_pause(url: str, pause: float) -> None:
    """A client that pauses ``pause`` s on a keep-alive connection can still send on it (a
    server that closed it meanwhile races the client's next request: "connection reset")."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    request = f"GET / HTTP/1.1\r\nHost: {parts.hostname}\r\n\r\n".encode()
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        for attempt in range(2):
            sock.sendall(request)
            head = sock.recv(65536)
            assert head.startswith(b"HTTP/1.1 200"), (attempt, head[:80])
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))
            body = head.split(b"\r\n\r\n", 1)[1]
            while len(body) < length:
                body += sock.recv(65536)
            if attempt == 0:
                time.sleep(pause)


def test_pages_have_validators_for_mirrors(server: tuple[Served, deepfield.Store],
                                           http: httpx.Client) -> None:
    http.put("/notes/woks.md", content=WOK)
    page = http.get("/notes/woks.md")
    stamp = page.headers["last-modified"]
    assert http.get("/notes/woks.md", headers={"If-Modified-Since": stamp}).status_code == 304
    assert http.get("/notes/woks.md", headers={
        "If-Modified-Since": "Mon, 01 Jan 2001 00:00:00 GMT"}).status_code == 200
    assert http.get("/notes/", headers={"If-Modified-Since": http.get("/notes/").headers[
        "last-modified"]}).status_code == 304


@pytest.mark.skipif(not _has("deepfield.portable", "open_remote"),
                    reason="deepfield.portable not built yet")
def test_portable_remote_reads_the_server(server: tuple[Served, deepfield.Store],
                                          http: httpx.Client, tmp_path: Path) -> None:
    from deepfield import portable

    served, _ = server
    http.put("/notes/woks.md", content=WOK)
    remote = portable.open_remote(served.url + "/notes/", cache=tmp_path / "mirror")
    try:
        assert "woks.md" in [d.filename for d in remote.pages()]
        assert remote.search("unevenly", mode="bm25").results[0].filename == "woks.md"
    finally:
        remote.close()
    assert portable.remote_search(served.url + "/notes/", "unevenly", k=3)[0]["filename"] \
        == "woks.md"


def test_written_pages_are_found_by_meaning_at_once(server: tuple[Served, deepfield.Store],
                                                    http: httpx.Client) -> None:
    http.put("/notes/woks.md", content=WOK)
    http.put("/notes/pans.md", content=b"# Pans\n\nCast iron skillets hold heat.\n")
    hits = http.get("/notes/search", params={"q": "skillets", "mode": "vector"}).json()
    assert hits["results"][0]["filename"] == "pans.md"
    assert hits["pending_vectors"] == 0


def _edit_in_place(path: Path) -> None:
    """Rewrite a page in the same inode, so its folder's mtime does not change."""
    with path.open("r+", encoding="utf-8") as handle:
        text = handle.read()
        handle.seek(0)
        handle.write(text.replace("Oil them after use.", "Oil them with flaxseed."))


@pytest.mark.parametrize("notices", ["watcher", "polling"])
def test_pages_edited_in_place_are_noticed(store: deepfield.Store, notices: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The folder's mtime misses an edit in place: the file watcher reports it (polling is
    turned off to prove it), or, where no watcher can run, a background poll finds it."""
    from deepfield.server import pool

    if notices == "watcher":
        monkeypatch.setattr(pool, "BACKGROUND_SYNC_S", 3600.0)
        monkeypatch.setattr(pool, "SAFETY_SYNC_S", 3600.0)
    else:
        import watchfiles

        def no_watcher(*_args: object, **_kwargs: object) -> None:
            raise OSError(28, "inotify watch limit reached")

        monkeypatch.setattr(watchfiles, "watch", no_watcher)
    store.create_field("notes")
    with Served(create_app(store)) as served, \
            httpx.Client(base_url=served.url, timeout=10) as http:
        http.put("/notes/woks.md", content=WOK)
        assert http.get("/notes/search", params={"q": "woks"}).json()["results"]
        time.sleep(1.1)  # the folder's mtime is trusted once it is a second old …
        http.get("/notes/search", params={"q": "woks"})  # … and seen by this search
        time.sleep(0.2)  # the listing it may have rewritten is settled
        _edit_in_place(store.field("notes").path / "woks.md")
        deadline = time.monotonic() + 8
        while True:
            hits = http.get("/notes/search", params={"q": "flaxseed", "mode": "bm25"}).json()
            if hits["results"] and hits["results"][0]["filename"] == "woks.md":
                break
            assert time.monotonic() < deadline, "in-place edit never noticed"
            time.sleep(0.1)


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key (PEM), made with ``cryptography``."""
    pytest.importorskip("cryptography")
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def test_cli_serve_over_tls(keyword_store: deepfield.Store, tmp_path: Path) -> None:
    """The spec asks for TLS wherever logins travel: `serve --tls-cert/--tls-key`."""
    import ssl
    import subprocess
    import sys

    cert, key = _self_signed(tmp_path)
    keyword_store.create_field("notes").add("Woks", "Carbon fibre woks heat unevenly.")
    root = str(keyword_store.root)
    half = run_deepfield("serve", root, "--port", "0", "--tls-cert", str(cert))
    assert half.returncode == 1 and half.stderr.count(b"\n") == 1
    assert b"go together" in half.stderr
    wrong = run_deepfield("serve", root, "--port", "0", "--tls-cert", str(cert), "--tls-key",
                          str(cert))
    assert wrong.returncode == 1 and b"error: cannot use" in wrong.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEEPFIELD_")}
    with subprocess.Popen(
        [sys.executable, "-m", "deepfield", "serve", root, "--port", "0", "--json",
         "--tls-cert", str(cert), "--tls-key", str(key)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    ) as proc:
        try:
            assert proc.stdout is not None
            info = json.loads(proc.stdout.readline())
            assert info["tls"] is True and info["url"].startswith("https://127.0.0.1:")
            context = ssl.create_default_context(cafile=str(cert))
            with httpx.Client(base_url=info["url"], timeout=10, verify=context) as client:
                hits = _first_search(client, "woks")
                assert hits["results"][0]["filename"] == "woks.md"
        finally:
            proc.terminate()
            proc.wait(10)


def test_chat_models_are_built_once_under_concurrency(
    store: deepfield.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deepfield.server import service as service_module

    built: list[str] = []

    def slow_build(_config: Any, role: str) -> object:
        built.append(role)
        time.sleep(0.05)  # wide enough for every thread to miss the cache without the lock
        return object()

    monkeypatch.setattr(service_module, "build_llm", slow_build)
    service = service_module.Service(store)
    try:
        with ThreadPoolExecutor(8) as pool:
            models = list(pool.map(lambda _: service.llm("researcher"), range(8)))
        assert built == ["researcher"] and all(m is models[0] for m in models)
    finally:
        service.close()



@contextlib.contextmanager
def _two_workers(root: Path) -> Iterator[tuple[Any, int, list[int]]]:
    """`deepfield serve ROOT --workers 2` in a subprocess: (process, port, worker pids) once
    both workers listen; terminated afterwards if still running."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("DEEPFIELD_")}
    with subprocess.Popen(
        [sys.executable, "-m", "deepfield", "serve", str(root), "--port", "0",
         "--workers", "2", "--json"], stdout=subprocess.PIPE, env=env,
    ) as proc:
        try:
            assert proc.stdout is not None
            port = int(json.loads(proc.stdout.readline())["url"].rsplit(":", 1)[1].strip("/"))
            deadline = time.monotonic() + 30
            while len(workers := listening_workers(proc.pid, port)) < 2:
                assert time.monotonic() < deadline, "the workers never listened"
                time.sleep(0.1)
            yield proc, port, workers
        finally:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(15)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_workers_each_get_connections(keyword_store: deepfield.Store) -> None:
    """`serve --workers 2`: each worker listens on its own socket and the kernel spreads
    keep-alive connections over them (with one shared socket, one worker took them all); a
    worker holding more than half answers with `Connection: close` until the split is even,
    and the clients' next requests simply reconnect."""
    keyword_store.create_field("notes").add("Woks", "Carbon fibre woks heat unevenly.")
    connections: list[httplib.HTTPConnection] = []
    with _two_workers(keyword_store.root) as (proc, port, workers):
        try:
            for _ in range(16):
                conn = httplib.HTTPConnection("127.0.0.1", port, timeout=10)
                conn.connect()
                connections.append(conn)
            closed, deadline = 0, time.monotonic() + 20
            while True:
                for conn in connections:  # http.client reconnects after `Connection: close`
                    conn.request("GET", "/notes/search?q=woks")
                    response = conn.getresponse()
                    assert b"woks.md" in response.read()
                    closed += response.getheader("connection", "") == "close"
                served = sorted(port_sockets(pid, port)["01"] for pid in workers)
                if served == [8, 8]:
                    break
                assert time.monotonic() < deadline, f"connections stayed split {served}"
            assert sum(served) == 16 and closed <= 16, (served, closed)
            os.kill(workers[0], 9)  # a worker dies: its socket leaves, a new worker binds one
            deadline = time.monotonic() + 30
            while set(listening_workers(proc.pid, port)) in (set(), set(workers), {workers[1]}):
                assert time.monotonic() < deadline, "the worker was not replaced"
                time.sleep(0.1)
            for _ in range(8):
                fresh = httplib.HTTPConnection("127.0.0.1", port, timeout=10)
                fresh.request("GET", "/notes/search?q=woks")
                assert b"woks.md" in fresh.getresponse().read()
                fresh.close()
        finally:
            for conn in connections:
                conn.close()
    assert proc.returncode == 0


def test_put_stores_a_long_page_whole(server: tuple[Served, deepfield.Store],
                                      http: httpx.Client) -> None:
    """The spec's PUT replaces one file with the page sent: a page over 8 KB is kept whole
    (pages MAY exceed the limit), not split into parts as `deepfield write` does."""
    _, store = server
    paragraphs = [f"Paragraph {i} is about seasoning woks and pans." for i in range(400)]
    body = ("# Long notes\n\n" + "\n\n".join(paragraphs) + "\n\nThe end: tamarind.\n").encode()
    assert len(body) > 16_000
    assert http.put("/notes/long.md", content=body).status_code == 201
    files = sorted(p.name for p in store.field("notes").path.glob("long*.md"))
    assert files == ["long.md"]
    stored = http.get("/notes/long.md").text
    assert stored.endswith("The end: tamarind.\n") and "Paragraph 399" in stored
    hits = http.get("/notes/search", params={"q": "tamarind", "mode": "bm25"}).json()
    assert [r["filename"] for r in hits["results"]] == ["long.md"]


def test_inline_search_only_when_it_cannot_block(keyword_store: deepfield.Store) -> None:
    """The event loop answers a BM25 search itself only when no sync is due and a searcher
    is free; anything else goes to a worker thread (None here)."""
    from deepfield.server.service import Service

    keyword_store.create_field("notes").add("Woks", "Carbon fibre woks heat unevenly.")
    service = Service(keyword_store, readers=1)
    try:
        def inline(query: str, mode: str | None = None, k: int = 1) -> dict[str, Any] | None:
            return service.search_inline("notes", query, k=k, mode=mode, unit="page")

        assert inline("woks") is None  # not synced by this server yet
        threaded = service.search("notes", "woks", k=1, mode=None, unit="page")
        now = inline("woks")
        assert now is not None and now["results"] == threaded["results"]
        assert now["field"] == "notes" and now["results"][0]["filename"] == "woks.md"
        assert inline("woks", mode="hybrid") is None  # no model: the thread path says so
        assert inline("woks", k=5) is None  # under k hits: the substring fallback scans pages
        slot = service.slot("notes")
        busy = slot._take_reader(wait=False)  # the only searcher is in use
        assert busy is not None and inline("woks") is None
        slot._idle.put(busy)
        (keyword_store.field("notes").path / "pans.md").write_text("# Pans\n\nCast iron pans.\n")
        assert inline("pans") is None  # the folder changed: a sync comes first
        found = service.search("notes", "pans", k=1, mode=None, unit="page")["results"]
        assert [r["filename"] for r in found] == ["pans.md"]
        assert inline("pans") is not None
    finally:
        service.close()


def test_inline_hybrid_search_with_a_local_model(store: deepfield.Store,
                                                 embedder: FakeEmbedder) -> None:
    """A model that encodes in this process lets the event loop answer hybrid searches too,
    with the same results as the thread path and the query encoded once; a model behind a
    network, or one busy embedding pages for a background sync, sends them to a thread."""
    from deepfield.server.service import Service

    fld = store.create_field("notes")
    fld.add("Woks", "Carbon fibre woks heat unevenly.")
    fld.add("Pans", "Cast iron pans keep their heat.")
    service = Service(store, readers=1)
    try:
        def inline(query: str) -> dict[str, Any] | None:
            return service.search_inline("notes", query, k=2, mode="hybrid", unit="page")

        # Searching in a thread loads the model; writing its vector cache leaves the folder's
        # mtime alone (.deepfield/ exists since the index does), so no re-scan is due after.
        threaded = service.search("notes", "heat woks", k=2, mode="hybrid", unit="page")
        queries_before = sum(n for kind, n in embedder.calls if kind == "query")
        now = inline("iron heat")
        assert now is not None and now["mode"] == "hybrid"
        assert [r["filename"] for r in now["results"]] == ["pans.md", "woks.md"]
        assert sum(n for kind, n in embedder.calls if kind == "query") == queries_before + 1
        again = inline("heat woks")
        assert again is not None and again["results"] == threaded["results"]
        fewer = service.search_inline("notes", "woks", k=5, mode="hybrid", unit="page")
        assert fewer is not None and len(fewer["results"]) == 2  # no substring fallback to run

        shared = service.embedder
        assert shared is not None
        held = threading.Event()
        release = threading.Event()

        def background_embedding() -> None:
            with shared._lock:  # as a background sync holds it while it embeds new pages
                held.set()
                release.wait(10)

        worker = threading.Thread(target=background_embedding)
        worker.start()
        try:
            assert held.wait(10)
            started = time.perf_counter()
            assert inline("cast iron") is None  # the loop does not wait for the model
            assert time.perf_counter() - started < 3.0  # a wait for the model would last the 10 s
        finally:
            release.set()
            worker.join()
        assert inline("cast iron") is not None

        shared.in_process = False  # e.g. an OpenAI-compatible endpoint
        assert inline("carbon fibre") is None
    finally:
        service.close()


def test_a_model_is_loaded_off_the_event_loop() -> None:
    """Loading a model may take seconds: until the shared embedder has encoded something (in
    a worker thread), try_embed_query declines and the search goes to a thread."""
    from deepfield.server.pool import SharedEmbedder

    inner = FakeEmbedder()
    shared = SharedEmbedder(inner)
    assert shared.in_process
    assert not shared.try_embed_query("woks") and inner.calls == []
    shared.embed(["Carbon fibre woks heat unevenly."])
    assert shared.try_embed_query("woks") and inner.calls[-1] == ("query", 1)
    assert shared.try_embed_query("woks") and len(inner.calls) == 2  # remembered


def test_pages_with_non_spec_names_can_be_read_not_written(
        server: tuple[Served, deepfield.Store], http: httpx.Client) -> None:
    """A page someone saved as "My Notes.md" is indexed (with a warning) and found by search,
    so GET serves it; writes still take spec names only, and hidden files stay hidden."""
    _, store = server
    folder = store.field("notes").path
    (folder / "My Notes.md").write_text("# My notes\n\nThe saffron is in the blue tin.\n")
    (folder / ".secret.md").write_text("# Hidden\n\nNot for the web.\n")
    hits = http.get("/notes/search", params={"q": "saffron", "mode": "bm25"}).json()
    assert [r["filename"] for r in hits["results"]] == ["My Notes.md"]
    page = http.get("/notes/My%20Notes.md")
    assert page.status_code == 200 and "blue tin" in page.text
    assert http.get("/notes/Other%20Notes.md").status_code == 400
    assert http.get("/notes/.secret.md").status_code == 400
    assert http.put("/notes/My%20Notes.md", content=b"# Mine\n").status_code == 400
    assert (folder / "My Notes.md").read_text().endswith("blue tin.\n")


@pytest.mark.parametrize("other", ["plain", "reuse-port"])
def test_workers_refuse_a_port_another_server_holds(keyword_store: deepfield.Store,
                                                    other: str) -> None:
    """SO_REUSEPORT must not let `serve --workers 2` join another server's port (same user)
    and quietly share its clients: the port is checked first."""
    keyword_store.create_field("notes")
    holder = socket.socket()
    if other == "reuse-port":
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    holder.bind(("127.0.0.1", 0))
    holder.listen(8)
    try:
        port = holder.getsockname()[1]
        taken = run_deepfield("serve", str(keyword_store.root), "--port", str(port),
                              "--workers", "2", timeout=30)  # a server that started: no exit
        assert taken.returncode == 1
        assert f"cannot listen on 127.0.0.1:{port}".encode() in taken.stderr
    finally:
        holder.close()


def test_one_watcher_serves_every_field(store: deepfield.Store,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A server process watches all its field folders with one watcher (one inotify
    instance, of the 128 a user has), restarted as fields are opened; edits in place in a
    field opened later are noticed too (polling is off here to prove it)."""
    from deepfield.server import pool
    from deepfield.server.service import Service

    monkeypatch.setattr(pool, "BACKGROUND_SYNC_S", 3600.0)
    monkeypatch.setattr(pool, "SAFETY_SYNC_S", 3600.0)
    names = ["alpha", "beta", "gamma"]
    for name in names:
        store.create_field(name).add("Woks", "Oil them after use.")
    def watchers() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name.startswith("deepfield-watch")}

    others = watchers()  # of servers other tests left open
    service = Service(store)
    try:
        for name in names:  # opened one after another: the watcher restarts with each
            assert service.search(name, "woks", k=5, mode="bm25", unit="page")["results"]
        ours = watchers() - others
        assert len(ours) == 1
        time.sleep(1.1)  # folder mtimes are trusted once they are a second old
        for name in names:
            service.search(name, "woks", k=5, mode="bm25", unit="page")
        _edit_in_place(store.field("gamma").path / "woks.md")
        deadline = time.monotonic() + 8
        while not service.search("gamma", "flaxseed", k=5, mode="bm25", unit="page")["results"]:
            assert time.monotonic() < deadline, "in-place edit never noticed"
            time.sleep(0.1)
    finally:
        service.close()
    assert not any(t.is_alive() for t in ours)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_workers_stop_when_the_supervisor_is_killed(keyword_store: deepfield.Store) -> None:
    """An orphaned worker would keep serving unsupervised and hold the port: workers watch
    their parent and stop when it dies, even by SIGKILL."""
    import signal

    keyword_store.create_field("notes")
    with _two_workers(keyword_store.root) as (proc, _port, workers):
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 15
        while any(Path(f"/proc/{pid}").exists() and
                  "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2:3]
                  for pid in workers):
            assert time.monotonic() < deadline, "workers outlived their supervisor"
            time.sleep(0.1)


def test_a_held_port_cannot_be_claimed_while_workers_start() -> None:
    """The supervisor's holder socket (bound, not yet listening) already makes another
    server's port check fail."""
    from deepfield.server.workers import claim_port, reuse_port_socket

    holder = reuse_port_socket("127.0.0.1", claim_port("127.0.0.1", 0), listen=False)
    try:
        with pytest.raises(OSError):
            claim_port("127.0.0.1", holder.getsockname()[1])
        worker = reuse_port_socket("127.0.0.1", holder.getsockname()[1], listen=True)
        worker.close()  # the workers themselves still bind beside it
    finally:
        holder.close()


def test_watcher_survives_a_field_folder_removed_while_served(tmp_path: Path) -> None:
    """A folder that disappears is dropped from the watch instead of ending it for every
    other field (the watch of all folders fails as a whole)."""
    from deepfield.server.watching import FolderWatcher

    seen: dict[str, set[str]] = {}
    folders = {name: tmp_path / name for name in ("a", "b", "c")}
    for folder in folders.values():
        folder.mkdir()

    def record(name: str) -> Callable[[set[str]], None]:
        return lambda pages: seen.setdefault(name, set()).update(pages)

    watcher = FolderWatcher()
    try:
        watcher.add(folders["a"], record("a"))
        watcher.add(folders["b"], record("b"))
        folders["b"].rename(tmp_path / "b-gone")
        watcher.add(folders["c"], record("c"))  # restarts the watch
        deadline = time.monotonic() + 10
        while "a" not in seen:
            (folders["a"] / "note.md").write_text(f"# Note\n\n{time.monotonic()}\n")
            (folders["a"] / "notes.txt").write_text("not a page")
            assert time.monotonic() < deadline, "the watcher stopped"
            time.sleep(0.2)
        assert watcher.running.is_set()
        assert seen["a"] == {"note.md"}  # the pages that changed, by name
    finally:
        watcher.close()
    assert not watcher.running.is_set()


def test_a_worker_over_its_share_closes_one_connection_at_a_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """ConnectionBalance: over the fair share (total over workers, rounded up) a worker closes
    a connection, then waits QUIET_S before the next; at or under it, never."""
    from deepfield.server import balance

    clock = [100.0]
    monkeypatch.setattr(balance.time, "monotonic", lambda: clock[0])
    counts = [0, 2]
    mine = [6]
    worker = balance.ConnectionBalance(counts, 0, lambda: mine[0])
    assert worker.should_close() and counts == [6, 2]
    assert not worker.should_close()  # just closed one: its count has not dropped yet
    clock[0] += balance.QUIET_S
    mine[0], counts[1] = 5, 3  # the client came back on the other worker
    assert worker.should_close() and worker.closed == 2
    clock[0] += balance.QUIET_S
    mine[0], counts[1] = 4, 4
    assert not worker.should_close() and counts == [4, 4]
    other = balance.ConnectionBalance(counts, 1, lambda: 4)
    assert not other.should_close()
    odd = balance.ConnectionBalance([0, 2], 0, lambda: 3)
    assert not odd.should_close()  # 3/2: as even as 5 connections get
    mine[0] = 1  # clients left while no request came: the periodic publish says so
    assert worker.publish() == 1 and counts == [1, 4]


def test_rebalance_middleware_adds_connection_close_only_when_told() -> None:
    """The middleware only touches the start of an HTTP/1.1 response; lifespan messages,
    bodies and HTTP/1.0 requests pass unchanged."""
    import asyncio

    from deepfield.server.balance import RebalanceMiddleware

    class Told:
        answer = True

        def should_close(self) -> bool:
            return self.answer

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b"{}"})

    async def run(told: Told, version: str = "1.1") -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        middleware = RebalanceMiddleware(app, told)  # type: ignore[arg-type]
        await middleware({"type": "http", "http_version": version}, None, send)  # type: ignore[arg-type]
        return sent

    told = Told()
    closing = asyncio.run(run(told))
    assert closing[0]["headers"][-1] == (b"connection", b"close")
    assert closing[1] == {"type": "http.response.body", "body": b"{}"}
    told.answer = False
    assert (b"connection", b"close") not in asyncio.run(run(told))[0]["headers"]
    told.answer = True
    assert (b"connection", b"close") not in asyncio.run(run(told, "1.0"))[0]["headers"]


def test_a_model_writing_a_memo_does_not_hold_the_field(store: deepfield.Store) -> None:
    """remember prepares its page (the model call included) on a searcher; only the write
    takes the field's writer, so a read of the same field is answered meanwhile."""
    from deepfield.llm.config import LLMConfig

    from .fake_openai import CHAT, FakeOpenAIServer, chat_completion

    store.create_field("notes").add("Woks", "Carbon steel woks need seasoning.")
    with FakeOpenAIServer() as model:
        model.enqueue(CHAT, json=chat_completion(json.dumps(
            {"memo": "Ana moved to Porto in May.", "title": "Ana moves"})), delay=3.0)
        config = LLMConfig(options={"url": model.url, "model": "writer", "max_retries": 0})
        with Served(create_app(store, llm_config=config)) as served, \
                httpx.Client(base_url=served.url, timeout=20) as http:
            with ThreadPoolExecutor(1) as pool:
                pending = pool.submit(http.post, "/notes/_/remember",
                                      content=b"user: Ana moved to Porto in May.\n")
                deadline = time.monotonic() + 5
                while not model.requests_to(CHAT) and time.monotonic() < deadline:
                    time.sleep(0.02)  # the model is answering now
                started = time.monotonic()
                read = http.get("/notes/_/read/woks")
                waited = time.monotonic() - started
                answered_first = not pending.done()
                response = pending.result()
            # Generous on a busy CI box: a read held by the writer would wait out the model's 3 s.
            assert read.status_code == 200 and answered_first and waited < 2.0, waited
            assert response.status_code == 201, response.text
            assert response.json()["memo_by"] == "llm:writer"
