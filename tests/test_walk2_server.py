"""`deepfield serve` used as a demanding client would: conditional deletes, the error shape of
every refusal, /openapi.json against what the routes really do, and the console's forms fed
what a browser would never send."""

from __future__ import annotations

import hashlib
import re
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

import deepfield
from deepfield.config import EmbeddingConfig, load_config
from deepfield.errors import ConfigError
from deepfield.server import Auth, create_app, hash_password
from deepfield.writer import MAX_WRITE_BYTES

from .conftest import Cli

BASE = "http://127.0.0.1:8765"


@pytest.fixture
def client(keyword_store: deepfield.Store) -> TestClient:
    field = keyword_store.create_field("notes")
    field.add("Woks", "Carbon steel woks heat quickly.\n", name="woks")
    return TestClient(create_app(keyword_store), client=("127.0.0.1", 40000), base_url=BASE)


def _tag(data: bytes) -> str:
    return '"' + hashlib.sha256(data).hexdigest() + '"'


def test_delete_honours_if_match(keyword_store: deepfield.Store, client: TestClient) -> None:
    page = keyword_store.field("notes").path / "woks.md"
    current = page.read_bytes()
    stale = client.delete("/notes/woks.md", headers={"If-Match": '"stale"'})
    assert stale.status_code == 412, stale.text
    assert stale.json()["error"]["type"] == "PreconditionFailed"
    assert stale.headers["etag"] == _tag(current)
    assert client.delete("/notes/woks.md", headers={"If-None-Match": "*"}).status_code == 412
    assert page.read_bytes() == current  # kept: the client's version was not this one
    done = client.delete("/notes/woks.md", headers={"If-Match": _tag(current)})
    assert done.status_code == 204 and not page.exists()
    assert client.delete("/notes/woks.md", headers={"If-Match": "*"}).status_code == 404


def test_every_refusal_names_its_type_without_spaces(client: TestClient) -> None:
    answers = [client.get("/notes/_/unknown"), client.get("/nowhere/at/all"),
               client.put("/notes/a%2Fb.md", content=b"x"), client.patch("/notes/woks.md")]
    assert [a.status_code for a in answers] == [404, 404, 400, 405]
    for answer in answers:
        kind = answer.json()["error"]["type"]
        assert re.fullmatch(r"[A-Za-z]+", kind), kind  # NotFound, as MethodNotAllowed


def test_remember_asks_for_text_not_a_page(client: TestClient) -> None:
    empty = client.post("/notes/_/remember", content=b"  ")
    assert empty.status_code == 400
    assert "text to memorize" in empty.json()["error"]["hint"]
    assert "page" not in empty.json()["error"]["hint"]


def test_openapi_states_the_ranges_the_server_enforces(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    put = spec["paths"]["/{field}/{filename}"]["put"]["description"]
    assert "are split" not in put and "stored whole" in put  # PUT never splits a page
    assert "412" in spec["paths"]["/{field}/{filename}"]["delete"]["responses"]
    urls = {"/{field}/_/read/{page}": "/notes/_/read/woks", "/{field}/_/context":
            "/notes/_/context?task=woks", "/{field}/_/research": "/notes/_/research?q=woks",
            "/{field}/search": "/notes/search?q=woks"}
    checked = 0
    for path, url in urls.items():
        for param in spec["paths"][path]["get"]["parameters"]:
            schema = param["schema"]
            if schema.get("type") != "integer":
                continue
            low, high, name = schema["minimum"], schema["maximum"], param["name"]
            assert client.get(f"{url}&{name}={high}" if "?" in url
                              else f"{url}?{name}={high}").status_code == 200, (path, name)
            if (path, name) != ("/{field}/_/research", "budget"):  # the fence's share
                # depends on the question: the least a research budget may be varies
                assert client.get(f"{url}&{name}={low}" if "?" in url
                                  else f"{url}?{name}={low}").status_code == 200, (path, name)
            for bad in (low - 1, high + 1):
                answer = client.get(f"{url}&{name}={bad}" if "?" in url
                                    else f"{url}?{name}={bad}")
                assert answer.status_code == 400, (path, name, bad)
                assert str(answer.status_code) in spec["paths"][path]["get"]["responses"]
            checked += 1
    assert checked == 6  # depth, sentences, two budgets, rounds, k


def test_a_console_edit_with_a_foreign_etag_is_a_stale_edit(keyword_store: deepfield.Store,
                                                           client: TestClient) -> None:
    form = client.get("/ui/f/notes/edit/woks.md").text
    token = re.search(r'name="csrf" value="([^"]+)"', form)
    assert token
    before = (keyword_store.field("notes").path / "woks.md").read_bytes()
    saved = client.post("/ui/f/notes/edit/woks.md", data={
        "csrf": token.group(1), "etag": '"\u20ac"', "text": "# Woks\n\nMine.\n"})
    assert saved.status_code == 412, saved.text  # was a 500 (UnicodeEncodeError)
    assert "Mine." in saved.text  # the text typed is kept in the form
    assert (keyword_store.field("notes").path / "woks.md").read_bytes() == before


def test_a_page_search_lists_under_a_non_spec_name_can_be_read(
        keyword_store: deepfield.Store, client: TestClient) -> None:
    folder = keyword_store.field("notes").path
    (folder / "My Notes.md").write_text("---\ntitle: Mine\n---\n# Mine\n\nzebra crossing\n",
                                        encoding="utf-8")
    found = client.get("/notes/search", params={"q": "zebra"}).json()["results"]
    assert [r["filename"] for r in found] == ["My Notes.md"]
    assert client.get("/notes/My%20Notes.md").status_code == 200
    for ref in ("My%20Notes.md", "My%20Notes"):  # was 400: "not a spec filename"
        read = client.get(f"/notes/_/read/{ref}", params={"view": "full"})
        assert read.status_code == 200, read.text
        assert "zebra crossing" in read.json()["text"]
    (folder / "link.md").symlink_to(folder / "woks.md")
    assert client.get("/notes/_/read/link.md").status_code == 404  # links never followed
    assert client.get("/notes/_/read/..%2Fdeepfield.toml").status_code == 404


def test_passwd_piped_without_password_stdin_says_why(cli: Any, tmp_path: Path) -> None:
    once = cli("passwd", "alice", input="s3cret\n")  # the prompt asks twice; stdin ended
    assert once.exit_code == 2, once.output  # was "aborted", exit 130
    assert "--password-stdin" in once.output
    assert "alice" not in (cli.store_path / "deepfield.toml").read_text()
    twice = cli("passwd", "alice", input="s3cret\ns3cret\n")  # still fine when repeated
    assert twice.exit_code == 0, twice.output
    # No store: said before any password is asked for (it was asked, then refused).
    with pytest.raises(deepfield.DeepfieldError, match="no store"):
        Cli(tmp_path / "nowhere")("passwd", "bob")


def test_create_only_puts_of_two_workers_create_one_page(
        keyword_store: deepfield.Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """`serve --workers 2`: two processes, each with its own lock. Two apps on one store stand
    in for them (the folder lock is an flock: two descriptors conflict within a process too);
    each check that finds no page is slowed, so both checks would run before either write."""
    keyword_store.create_field("notes")
    from deepfield.server import routes_spec

    checked = routes_spec._precondition

    def slow_check(request: Any, exists: bool, current: bytes | None) -> str | None:
        failed = checked(request, exists, current)
        if failed is None:
            time.sleep(0.4)  # the other worker's check runs meanwhile
        return failed

    monkeypatch.setattr(routes_spec, "_precondition", slow_check)
    workers = [TestClient(create_app(keyword_store), client=("127.0.0.1", 40000 + i),
                          base_url=BASE) for i in range(2)]
    codes: list[int] = []

    def put(i: int) -> None:
        codes.append(workers[i].put("/notes/claim.md", content=f"mine: {i}\n".encode(),
                                    headers={"If-None-Match": "*"}).status_code)

    threads = [threading.Thread(target=put, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
        time.sleep(0.1)
    for thread in threads:
        thread.join(10)
    assert sorted(codes) == [201, 412]  # was [201, 201]: the second replaced the first
    text = (keyword_store.field("notes").path / "claim.md").read_text()
    assert text.endswith("mine: 0\n")


def test_a_console_new_page_under_a_taken_name_says_it_exists(
        keyword_store: deepfield.Store, client: TestClient) -> None:
    form = client.get("/ui/f/notes/new").text
    token = re.search(r'name="csrf" value="([^"]+)"', form)
    assert token
    before = (keyword_store.field("notes").path / "woks.md").read_bytes()
    taken = client.post("/ui/f/notes/new", data={
        "csrf": token.group(1), "etag": "", "name": "woks", "text": "# Woks\n\nMine.\n"})
    assert taken.status_code == 412
    assert "woks.md already exists" in taken.text  # was "was created meanwhile"
    assert "Carbon steel" in taken.text and "Mine." in taken.text  # both versions
    assert (keyword_store.field("notes").path / "woks.md").read_bytes() == before
    fresh = client.post("/ui/f/notes/new", data={
        "csrf": token.group(1), "etag": "", "name": "pans", "text": "# Pans\n\nCast iron.\n"},
        follow_redirects=False)
    assert fresh.status_code == 303


def test_a_created_introduction_answers_like_any_created_page(client: TestClient) -> None:
    intro = client.put("/notes/index.md", content=b"# Notes\n\nAbout cooking.\n")
    page = client.put("/notes/pans.md", content=b"# Pans\n\nCast iron.\n")
    assert intro.status_code == page.status_code == 201
    assert set(intro.json()) == set(page.json())  # split and warnings were missing
    assert set(intro.json()["pages"][0]) == set(page.json()["pages"][0])
    assert intro.json()["pages"][0]["bytes"] == len(b"# Notes\n\nAbout cooking.\n")


def test_the_zip_honours_if_none_match_star_as_pages_do(client: TestClient) -> None:
    assert client.get("/notes/woks.md", headers={"If-None-Match": "*"}).status_code == 304
    zipped = client.get("/notes/memoryfield.zip", headers={"If-None-Match": "*"})
    assert zipped.status_code == 304 and zipped.headers["etag"]  # was 200 and the whole zip
    assert client.get("/notes/memoryfield.zip", headers={"If-None-Match": '"x"'}
                      ).status_code == 200


def test_openapi_schemas_name_every_key_the_bodies_have(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    written = client.put("/notes/pans.md", content=b"# Pans\n\nCast iron pans.\n").json()
    assert set(written) <= set(schemas["WriteResult"]["properties"])  # warnings was missing
    page_keys = schemas["WriteResult"]["properties"]["pages"]["items"]["properties"]
    assert set(written["pages"][0]) <= set(page_keys)
    for unit in ("page", "chunk"):
        found = client.get("/notes/search", params={"q": "pans", "unit": unit}).json()
        assert found["results"]
        assert set(found) <= set(schemas["SearchResponse"]["properties"]), unit
        for hit in found["results"]:
            assert set(hit) <= set(schemas["SearchResult"]["properties"]), unit
    fallback = client.get("/notes/search", params={"q": "an"}).json()["results"]  # in "pans"
    assert all(set(hit) <= set(schemas["SearchResult"]["properties"]) for hit in fallback)


def test_a_vector_search_without_a_model_says_how_to_ask_over_http(client: TestClient) -> None:
    refused = client.get("/notes/search", params={"q": "woks", "mode": "vector"})
    assert refused.status_code == 400
    assert "mode=bm25" in refused.json()["error"]["hint"]  # was only the CLI's --mode bm25


def test_searching_a_field_removed_while_served_is_a_404(keyword_store: deepfield.Store,
                                                         client: TestClient) -> None:
    assert client.get("/notes/search", params={"q": "woks"}).json()["results"]
    shutil.rmtree(keyword_store.field("notes").path)
    gone = client.get("/notes/search", params={"q": "woks"})
    assert gone.status_code == 404, gone.text  # was a 500 (FileNotFoundError) the first time
    assert gone.json()["error"]["type"] == "UnknownFieldError"
    for write in (client.put("/notes/pans.md", content=b"# Pans\n"),
                  client.delete("/notes/woks.md")):
        assert write.status_code == 404, write.text  # was a 500 from the folder lock


def test_remember_takes_a_text_with_a_word_longer_than_a_query(client: TestClient) -> None:
    blob = "QUJD" * 800  # a 3,200-character token: base64, a minified line
    filed = client.post("/notes/_/remember", content=f"# Key\n\nThe key is {blob}\n".encode())
    assert filed.status_code == 201, filed.text  # was 400 "the query is 3,200 characters"
    page = client.get(f"/notes/{filed.json()['filename']}")
    assert blob in page.text


def test_a_page_just_over_the_limit_is_a_413_as_documented(client: TestClient) -> None:
    body = b"# Big\n\n" + b"a" * (MAX_WRITE_BYTES + 100)
    refused = client.put("/notes/big.md", content=body)
    assert refused.status_code == 413, refused.text[:300]  # was 400, hinting at a split
    assert "split automatically" not in refused.json()["error"]["hint"]


def test_a_plain_password_in_server_users_is_refused_by_name(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    deepfield.init(root, EmbeddingConfig("none"))
    with (root / "deepfield.toml").open("a", encoding="utf-8") as out:
        out.write('\n[server.users]\nalice = "s3cret"\n')
    with pytest.raises(ConfigError, match=r"server\.users\.alice is not a password hash") as err:
        load_config(root)  # it was taken, and every login then failed with a bare 401
    assert "s3cret" not in str(err.value) and "deepfield passwd alice" in err.value.hint


def test_a_private_store_answers_only_codes_the_document_lists(
        keyword_store: deepfield.Store) -> None:
    keyword_store.create_field("notes").add("Woks", "Carbon steel.\n", name="woks")
    app = create_app(keyword_store, auth=Auth(users={"alice": hash_password("pw", n=1 << 10)},
                                              private=True))
    remote = TestClient(app, client=("203.0.113.7", 4000), base_url=BASE)
    spec = TestClient(app, client=("127.0.0.1", 4000), base_url=BASE).get(
        "/openapi.json").json()["paths"]
    for path, url in (("/", "/"), ("/{field}/", "/notes/"), ("/{field}/search",
                      "/notes/search?q=wok"), ("/{field}/_/pages", "/notes/_/pages")):
        code = remote.get(url).status_code
        assert code == 401 and str(code) in spec[path]["get"]["responses"], (path, code)


@pytest.mark.parametrize(("path", "method", "url", "body"), [
    ("/{field}/", "get", "/BAD/", None),
    ("/{field}/memoryfield.zip", "get", "/BAD/memoryfield.zip", None),
    ("/{field}/memoryfield.zip", "get", "/bare/memoryfield.zip", None),
    ("/{field}/_/pages", "get", "/BAD/_/pages", None),
    ("/{field}/search", "get", "/notes/search?q=" + "x" * 3000, None),
    ("/{field}/search", "get", "/notes/search?q=x&mode=vector", None),
    ("/{field}/{filename}", "get", "/notes/Nope.md", None),
    ("/{field}/{filename}", "put", "/notes/x.txt", b"x"),
    ("/{field}/{filename}", "put", "/notes/listing.md", b"x"),
    ("/{field}/{filename}", "delete", "/notes/Bad.md", None),
    ("/{field}/_/read/{page}", "get", "/notes/_/read/woks?section=Nope", None),
    ("/{field}/_/context", "get", "/notes/_/context?task=" + "x" * 3000, None),
    ("/{field}/_/research", "get", "/notes/_/research?q=x&budget=60", None),
    ("/{field}/_/remember", "post", "/notes/_/remember?format=zz", b"x"),
    ("/{field}/_/remember", "post", "/notes/_/remember", b"\xff"),
])
def test_refusals_answer_codes_the_document_lists(
        keyword_store: deepfield.Store, client: TestClient, path: str, method: str, url: str,
        body: bytes | None) -> None:
    keyword_store.create_field("bare")
    spec = client.get("/openapi.json").json()["paths"]
    answer = client.request(method.upper(), url, content=body)
    assert answer.status_code >= 400, answer.text
    assert str(answer.status_code) in spec[path][method]["responses"], answer.text[:200]


def test_a_text_too_large_to_remember_is_a_documented_413(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()["paths"]["/{field}/_/remember"]["post"]
    answer = client.post("/notes/_/remember", content=b"x" * (MAX_WRITE_BYTES + 8192))
    assert answer.status_code == 413 and "413" in spec["responses"]


def test_a_console_url_with_the_wrong_method_answers_the_console_s_page(
        client: TestClient) -> None:
    for method, url in (("GET", "/ui/f/notes/p/woks.md/archive"), ("DELETE", "/ui/f/notes/"),
                        ("GET", "/ui/f/notes/review/r1")):
        answer = client.request(method, url)
        assert answer.status_code == 405, (method, url)
        assert answer.headers["content-type"].startswith("text/html"), answer.text[:100]
        assert "default-src 'none'" in answer.headers["content-security-policy"]
        assert "allow" in answer.headers and "<h1>405</h1>" in answer.text
    assert client.request("PATCH", "/notes/woks.md").json()["error"]["type"] == \
        "MethodNotAllowed"  # the API's stay JSON


def test_a_console_form_too_large_answers_the_console_s_page(client: TestClient) -> None:
    big = b"text=" + b"a" * (MAX_WRITE_BYTES + 8192)
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    console = client.post("/ui/f/notes/edit/woks.md", content=big, headers=form)
    assert console.status_code == 413
    assert console.headers["content-type"].startswith("text/html")  # was the API's JSON
    assert client.put("/notes/woks.md", content=big).json()["error"]["type"] == \
        "RequestEntityTooLarge"


def test_a_field_name_too_long_for_a_folder_is_no_such_field(
        keyword_store: deepfield.Store, client: TestClient) -> None:
    name = "a" * 300
    for url in (f"/{name}/", f"/{name}/search?q=x", f"/ui/f/{name}/"):
        assert client.get(url).status_code == 404, url  # was a 500 (File name too long)
    assert client.put(f"/{name}/x.md", content=b"x").status_code == 404
    with pytest.raises(deepfield.UnknownFieldError):
        keyword_store.field(name)
