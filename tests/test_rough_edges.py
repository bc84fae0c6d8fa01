"""The rough edges a new user hit (issue 18 items 5-10 and 12), each through the surface where
it was found: the CLI, the library or the HTTP server."""

from __future__ import annotations

import base64
import io
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

import deepfield
from deepfield.cli import main
from deepfield.errors import DuplicateUuidError
from deepfield.server import Auth, create_app
from deepfield.server.mcp_server import BasicAuthMiddleware

UUID = "11111111-2222-3333-4444-555555555555"


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def _page(title: str, body: str, uuid: str = UUID) -> str:
    return f"---\ntitle: {title}\nuuid: {uuid}\n---\n{body}\n"


@dataclass
class Ran:
    exit_code: int
    stdout: str
    stderr: str


class MainCli:
    """The real entry point (``deepfield.cli.main``: one-line errors, exit codes) in-process."""

    def __init__(self, store: Path, capsys: pytest.CaptureFixture[str],
                 monkeypatch: pytest.MonkeyPatch) -> None:
        self.store, self.capsys, self.monkeypatch = store, capsys, monkeypatch

    def __call__(self, *args: str, input: str | None = None) -> Ran:
        self.capsys.readouterr()
        if input is not None:
            self.monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(input.encode())))
        try:
            main(["--store", str(self.store), *args])
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        out = self.capsys.readouterr()
        return Ran(code, out.out, out.err)


@pytest.fixture
def kcli(keyword_store: deepfield.Store, capsys: pytest.CaptureFixture[str],
         monkeypatch: pytest.MonkeyPatch) -> MainCli:
    keyword_store.create_field("n")
    return MainCli(keyword_store.root, capsys, monkeypatch)


def _served(store: deepfield.Store) -> TestClient:
    return TestClient(create_app(store), client=("127.0.0.1", 5000),
                      base_url="http://127.0.0.1:8765")


# ---------------------------------------------------------------- 5: one uuid, two pages


def test_two_pages_with_one_uuid(keyword_store: deepfield.Store, kcli: MainCli) -> None:
    folder = keyword_store.root / "n"
    (folder / "a.md").write_text(_page("A", "body a"))
    (folder / "b.md").write_text(_page("B", "body b"))
    indexed = kcli("index")
    assert indexed.exit_code == 0
    assert f"a.md, b.md: all carry uuid {UUID}" in indexed.stderr  # index warns
    read = kcli("read", "n", UUID)
    assert read.exit_code == 1
    assert "belongs to 2 pages in n: a.md, b.md" in read.stderr  # names both
    assert "give the full uuid" not in read.stderr  # it is the full uuid
    written = kcli("write", "n", "-", input=_page("C", "body c"))
    assert written.exit_code == 1
    assert "a.md, b.md" in written.stderr and "not written" in written.stderr
    assert "body a" in (folder / "a.md").read_text()  # neither page was replaced
    assert "body b" in (folder / "b.md").read_text()
    with pytest.raises(DuplicateUuidError):
        keyword_store.field("n").write(_page("C", "body c"))
    with _served(keyword_store) as http:  # PUT goes on returning 409
        put = http.put("/n/a.md", content=_page("C", "body c").encode())
        assert put.status_code == 409 and "b.md" in put.text
        put = http.put("/n/c.md", content=_page("C", "body c").encode())
        assert put.status_code == 409


# ---------------------------------------------------------------- 6: terminal text, PUT names


def test_terminal_output_strips_control_characters(kcli: MainCli) -> None:
    title = "Bell \a here \x1b]0;owned\x07 \x1b[2J\u202eexe.txt"
    added = kcli("add", "n", "--title", title, "A line with a \x1b[31mred\x1b[0m word.",
                 "--json")
    assert added.exit_code == 0, added.stderr
    name = json.loads(added.stdout)["pages"][0]["filename"]
    for args in (("ls", "n"), ("search", "bell"), ("read", "n", name),
                 ("search", "word", "--unit", "chunk")):
        shown = kcli(*args)
        assert shown.exit_code == 0, (args, shown.stderr)
        assert "Bell" in shown.stdout or "word" in shown.stdout
        for char in ("\a", "\x1b", "\u202e"):
            assert char not in shown.stdout + shown.stderr, (args, char)
    as_json = kcli("search", "bell", "--json")
    assert "\\u0007" in as_json.stdout  # JSON is exact (escaped), for agents


def test_put_to_an_invalid_name_is_400(keyword_store: deepfield.Store) -> None:
    keyword_store.create_field("n")
    with _served(keyword_store) as http:
        for name in ("a%00b.md", "a" * 300 + ".md"):
            put = http.put(f"/n/{name}", content=b"# Page\n\ntext\n")
            assert put.status_code == 400, (name, put.status_code, put.text)
            assert http.get(f"/n/{name}").status_code == 404  # reading one: no such page


# ---------------------------------------------------------------- 7: passwd while serving


def _until(check: Callable[[], bool], seconds: float = 2.0) -> float:
    """Seconds until ``check()`` holds (fails after ``seconds``)."""
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < seconds, "not picked up in time"
        time.sleep(0.05)
    return time.monotonic() - started


def test_servers_pick_up_passwd_within_2_s(keyword_store: deepfield.Store,
                                            kcli: MainCli) -> None:
    page = b"# Note\n\ntext\n"

    async def ok(scope: Any, receive: Any, send: Any) -> None:  # stands for the MCP app
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    mcp = TestClient(BasicAuthMiddleware(ok, Auth.for_store(keyword_store.root)),
                     client=("127.0.0.1", 5000))
    with _served(keyword_store) as http:
        assert http.put("/n/before.md", content=page).status_code == 201  # loopback, no users
        assert mcp.post("/mcp").status_code == 200
        done = kcli("passwd", "alice", "--password-stdin", input="s3cret\n")
        assert done.exit_code == 0, done.stderr
        _until(lambda: http.put("/n/race.md", content=page).status_code == 401)
        wrong = http.put("/n/after.md", content=page, headers=basic("alice", "nope"))
        assert wrong.status_code == 401
        right = http.put("/n/after.md", content=page, headers=basic("alice", "s3cret"))
        assert right.status_code == 201
        _until(lambda: mcp.post("/mcp").status_code == 401)
        assert mcp.post("/mcp", headers=basic("alice", "s3cret")).status_code == 200
        remote = TestClient(BasicAuthMiddleware(ok, Auth.for_store(keyword_store.root)),
                            client=("203.0.113.7", 5000))
        assert remote.post("/mcp").status_code == 401
