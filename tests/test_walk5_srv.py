"""The HTTP server and setup as a demanding user meets them (fifth walk): query parameters a
route does not take, the remember route's size refusal, and `setup --remove` leaving an
agent's configuration as it was before setup."""

from __future__ import annotations

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
