"""The HTTP server and setup as a demanding user meets them (fifth walk): query parameters a
route does not take, the remember route's size refusal, and `setup --remove` leaving an
agent's configuration as it was before setup."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

import deepfield
from deepfield.server import create_app
from deepfield.server.openapi import openapi_document
from deepfield.writer import MAX_WRITE_BYTES

BASE = "http://127.0.0.1:8765"


@pytest.fixture
def client(keyword_store: deepfield.Store) -> TestClient:
    field = keyword_store.create_field("notes")
    field.add("Woks", "Carbon steel woks heat quickly.\n\n## Care\n\nOil them.\n", name="woks")
    return TestClient(create_app(keyword_store), client=("127.0.0.1", 40000), base_url=BASE)


def test_unknown_query_parameters_are_refused_naming_the_right_one(client: TestClient) -> None:
    # max_rounds (the MCP tool's name) ran with the default rounds, limit= (k is the name)
    # was ignored: an agent's typo silently changed what it got.
    research = client.get("/notes/_/research", params={"q": "woks", "max_rounds": 0})
    assert research.status_code == 400, research.text
    message = research.json()["error"]["message"]
    assert "max_rounds" in message and "did you mean rounds?" in message
    assert "q, rounds, budget" in message and "\n" not in message
    search = client.get("/notes/search", params={"q": "woks", "limit": 5})
    assert search.status_code == 400 and "did you mean k?" in search.json()["error"]["message"]
    read = client.get("/notes/_/read/woks", params={"mode": "full"})  # MCP's name is mode
    assert read.status_code == 400 and "did you mean view?" in read.json()["error"]["message"]
    two = client.get("/notes/_/context", params={"task": "woks", "budgt": 300, "levl": "light"})
    assert "budgt → budget, levl → level" in two.json()["error"]["message"]
    page = client.get("/notes/woks.md", params={"section": "Care"})
    assert page.status_code == 400 and "no query parameters" in page.json()["error"]["message"]
    put = client.put("/notes/new-page.md?overwrite=1", content=b"# New\n\nText.\n")
    assert put.status_code == 400 and client.get("/notes/new-page.md").status_code == 404
    assert client.get("/", params={"q": "woks"}).status_code == 400
    # The documented parameters still work, HEAD included.
    assert client.get("/notes/search", params={"q": "woks", "k": 5, "mode": "bm25",
                                               "unit": "chunk"}).status_code == 200
    assert client.get("/notes/_/read/woks", params={"view": "section", "section": "Care",
                                                    "depth": 2,
                                                    "sentences": 1}).status_code == 200
    assert client.head("/notes/woks.md").status_code == 200
    assert client.get("/notes/_/context", params={"task": "woks", "level": "light",
                                                  "budget": 300}).status_code == 200


def test_every_api_route_checks_its_parameters_against_openapi(client: TestClient) -> None:
    # The accepted names are /openapi.json's: a route wrapped without the check, or a
    # parameter used but not described, shows here.
    document = openapi_document("0")["paths"]
    for route in client.app.routes:  # type: ignore[attr-defined]
        if not isinstance(route, Route) or not route.include_in_schema:
            continue
        if route.path.startswith("/ui"):
            continue  # the console's forms, for people
        for method in route.methods or ():
            if method == "HEAD":
                continue
            path = route.path.replace("{field}", "notes").replace("{page}", "woks") \
                .replace("{filename}", "woks.md")
            answer = client.request(method, path, params={"zzz_unknown": "1"})
            assert answer.status_code == 400, (method, route.path, answer.text)
            known = [p["name"] for p in document[route.path][method.lower()].get(
                "parameters", []) if p["in"] == "query"]
            assert ", ".join(known) in answer.json()["error"]["message"]


def test_remember_too_large_says_a_text_not_a_page(client: TestClient) -> None:
    # The 413 hint said "a page is at most 16 MiB": remember takes a session's text.
    body = b"x" * (MAX_WRITE_BYTES + 8192)
    refused = client.post("/notes/_/remember", content=body)
    assert refused.status_code == 413
    hint = refused.json()["error"]["hint"]
    assert "page" not in hint and "text" in hint, hint
    put = client.put("/notes/big.md", content=body)
    assert put.status_code == 413 and "a page is at most" in put.json()["error"]["hint"]
    # Within the body limit's slack (it allows a little over, for PUT's own refusal): the
    # same refusal, not a text over the size memorized.
    slack = client.post("/notes/_/remember", content=b"x" * (MAX_WRITE_BYTES + 1))
    assert slack.status_code == 413 and "page" not in slack.json()["error"]["hint"]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    folder = tmp_path / "proj"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def _setup(*args: str) -> None:
    from click.testing import CliRunner

    from deepfield.cli import app

    done = CliRunner().invoke(app, ["--store", "memory", "setup", *args])
    assert done.exit_code == 0, done.output


def test_setup_remove_leaves_no_file_setup_created(project: Path) -> None:
    # `setup cursor --scope project` then `--remove` left .cursor/mcp.json holding `{}` and a
    # mcp.json.deepfield-backup-* beside it, where there had been nothing.
    for agent, name in (("cursor", ".cursor/mcp.json"), ("claude-code", ".mcp.json"),
                        ("codex", ".codex/config.toml")):
        _setup(agent, "--scope", "project")
        assert (project / name).is_file()
        _setup(agent, "--scope", "project", "--remove")
        assert not (project / name).exists(), agent
    assert sorted(p.name for p in project.iterdir()) == []  # no .cursor/ either, no backups
    # With its instruction file: both go, and the folders setup made for them.
    _setup("cursor", "--scope", "project", "--instructions")
    _setup("cursor", "--scope", "project", "--instructions", "--remove")
    assert sorted(p.name for p in project.iterdir()) == []


def test_setup_remove_keeps_files_that_hold_more_or_were_there(project: Path) -> None:
    import json

    # There before setup, holding only `{}`: kept as it was (with setup's backup of it).
    (project / ".mcp.json").write_text("{}\n")
    _setup("claude-code", "--scope", "project")
    _setup("claude-code", "--scope", "project", "--remove")
    assert (project / ".mcp.json").read_text() == "{}\n"
    # Created by setup, then the user added a server of their own: only the entry goes.
    _setup("cursor", "--scope", "project")
    config = project / ".cursor/mcp.json"
    data = json.loads(config.read_text())
    data["mcpServers"]["other"] = {"command": "other"}
    config.write_text(json.dumps(data))
    _setup("cursor", "--scope", "project", "--remove")
    assert json.loads(config.read_text()) == {"mcpServers": {"other": {"command": "other"}}}
    # Created by setup, and a comment added to it (Cursor's file is JSONC): never deleted.
    _setup("gemini", "--scope", "project")
    settings = project / ".gemini/settings.json"
    settings.write_text("// mine\n" + settings.read_text())
    _setup("gemini", "--scope", "project", "--remove")
    assert settings.read_text().startswith("// mine\n")
    # A dry run records nothing: the file it would create is not taken for setup's.
    _setup("vscode", "--scope", "project", "--dry-run")
    (project / ".vscode").mkdir()
    (project / ".vscode/mcp.json").write_text("{}")
    _setup("vscode", "--scope", "project")
    _setup("vscode", "--scope", "project", "--remove")
    assert (project / ".vscode/mcp.json").read_text() == "{}"
