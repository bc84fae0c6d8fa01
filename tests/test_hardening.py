"""Defects a tester found by feeding deepfield hostile or odd input, each checked through the
surface where it was found (the CLI's one-line errors, the library's typed errors, the HTTP
server's JSON errors): deeply nested JSON, create-only PUTs, reserved field names, ..."""

from __future__ import annotations

import functools
import json
import struct
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

import deepfield
from deepfield import portable
from deepfield.errors import (
    ArchiveError,
    ImportFormatError,
    InvalidNameError,
    PinMismatchError,
    RemoteUnavailableError,
    SessionFormatError,
    TransportError,
)
from deepfield.manage.activation import ACTIVATION_DIR, read_log
from deepfield.memorize import remember
from deepfield.page import is_valid_name
from deepfield.server import create_app
from deepfield.sessions import parse_session
from deepfield.store import RESERVED_FIELD_NAMES

from .conftest import MainCli
from .test_portable_archive import run_main
from .test_transports import PAGES, _QuietHandler, mirror_pages, serve, write_field

DEEP = "[" * 100_000 + "]" * 100_000
"""JSON nested far deeper than Python's recursion limit: json.loads raises RecursionError."""


@pytest.fixture
def kcli(keyword_store: deepfield.Store, capsys: pytest.CaptureFixture[str],
         monkeypatch: pytest.MonkeyPatch) -> MainCli:
    keyword_store.create_field("n").add("Woks", "Carbon fibre woks heat unevenly.")
    return MainCli(keyword_store.root, capsys, monkeypatch)


def served(store: deepfield.Store) -> TestClient:
    return TestClient(create_app(store), client=("127.0.0.1", 5000),
                      base_url="http://127.0.0.1:8765")


def files(folder: Path) -> dict[str, bytes]:
    """Every file of a field but its index (which a sync may touch)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and ".sqlite3" not in p.name and ".deepfield" not in p.parts}


# ---------------------------------------------------------------- deeply nested JSON


@pytest.mark.parametrize(("text", "fmt", "source"), [
    (DEEP, "auto", None),
    (DEEP, "auto", "deep.json"),
    (DEEP, "openai", None),
    ('{"role": "user", "content": "hi"}\n{"x": ' + DEEP + "}\n", "jsonl", None),
])
def test_deeply_nested_session_json_is_a_format_error(text: str, fmt: str,
                                                      source: str | None) -> None:
    with pytest.raises(SessionFormatError, match="nests JSON too deeply"):
        parse_session(text, format=fmt, source=source)


def test_remember_refuses_deep_json_on_the_cli_and_over_http(
    kcli: MainCli, keyword_store: deepfield.Store, tmp_path: Path
) -> None:
    folder = keyword_store.field("n").path
    before = files(folder)
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP)
    ran = kcli("remember", "n", str(deep))
    assert ran.exit_code == 1 and ran.stdout == ""
    assert ran.stderr.count("\n") == 1
    assert ran.stderr.startswith("error: deep.json nests JSON too deeply")
    ran = kcli("remember", "n", str(deep), "--json")
    assert ran.exit_code == 1
    assert json.loads(ran.stdout)["error"]["type"] == "SessionFormatError"
    with served(keyword_store) as http:
        answer = http.post("/n/_/remember", content=DEEP.encode())
    assert answer.status_code == 400
    assert answer.json()["error"]["type"] == "SessionFormatError"
    assert files(folder) == before


def test_search_batch_answers_a_deep_json_line_with_an_error_line(
    kcli: MainCli, tmp_path: Path
) -> None:
    batch = tmp_path / "batch.txt"
    batch.write_text('{"query": ' + DEEP + "}\nwoks\n")
    ran = kcli("search", "--batch", str(batch))
    assert ran.exit_code == 0, ran.stderr
    first, second = (json.loads(line) for line in ran.stdout.splitlines())
    assert first == {"line": 1, "id": None, "error": "invalid JSON: nested too deeply"}
    assert second["results"][0]["filename"] == "woks.md"


def test_import_locomo_refuses_deep_json(keyword_store: deepfield.Store, tmp_path: Path) -> None:
    from deepfield.importers.locomo import import_locomo

    deep = tmp_path / "deep.json"
    deep.write_text(DEEP)
    with pytest.raises(ImportFormatError, match="nested too deeply"):
        import_locomo(keyword_store, deep)


def test_a_deep_activation_log_line_is_skipped_as_corrupt(keyword_store: deepfield.Store) -> None:
    # The log travels in memoryfield zips: a hostile line must not break every search.
    field = keyword_store.create_field("n")
    field.add("Alpha", "alpha text")
    folder = field.path / ACTIVATION_DIR
    folder.mkdir(exist_ok=True)
    (folder / "evil.jsonl").write_text('{"t": ' + DEEP + "}\n")
    assert read_log(folder).warnings == ["activation/evil.jsonl: skipped 1 corrupt line(s)"]
    assert field.search("alpha", mode="bm25").results[0].filename == "alpha.md"


# ---------------------------------------------------------------- remote fields


class _CatchAllHandler(_QuietHandler):
    """Serves the folder until ``app`` is set, then answers every path with a web app's
    HTML page (200), as single-page apps and misconfigured servers do."""

    app = False

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if not self.app:
            super().do_GET()
            return
        data = b"<html>app</html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_an_http_server_that_is_no_memoryfield_leaves_the_mirror_alone(
    store: deepfield.Store, tmp_path: Path
) -> None:
    root = write_field(tmp_path / "www")
    deepfield.open_field(root, None).index()  # listing.md
    server, url = serve(functools.partial(_CatchAllHandler, directory=str(root)))
    cache = tmp_path / "cache"
    try:
        first = portable.open_remote(url, embedder=store.embedder, cache=cache)
        before = files(first.path)
        assert mirror_pages(first) == PAGES
        _CatchAllHandler.app = True
        with pytest.raises(RemoteUnavailableError, match="not a memoryfield server"):
            portable.open_remote(url, embedder=store.embedder, cache=cache)
        assert files(first.path) == before
        # A listing.md that links no page is not a field's listing either.
        _CatchAllHandler.app = False
        (root / "listing.md").write_text("# Listing\n\nNothing here.\n")
        with pytest.raises(RemoteUnavailableError, match="links no pages"):
            portable.open_remote(url, embedder=store.embedder, cache=cache)
        assert files(first.path) == before
    finally:
        _CatchAllHandler.app = False
        server.shutdown()
        server.server_close()


def test_a_zip_without_pages_leaves_the_mirror_alone(
    capsys: pytest.CaptureFixture[str], store: deepfield.Store, tmp_path: Path
) -> None:
    field = store.create_field("travel")
    field.add("Helsinki trip", "Book the sauna early.")
    zipped = portable.pack(field, tmp_path / "travel.memoryfield.zip").path
    cache = tmp_path / "cache"
    first = portable.open_remote(str(zipped), cache=cache)
    before = files(first.path)
    with zipfile.ZipFile(zipped, "w") as empty:
        empty.writestr("index.md", "# Travel\n")
    with pytest.raises(ArchiveError, match="holds no pages"):
        portable.open_remote(str(zipped), cache=cache)
    assert files(first.path) == before and mirror_pages(first) == {
        "helsinki-trip.md": (field.path / "helsinki-trip.md").read_text()}
    # Through the CLI: one line, non-zero, nothing removed.
    code, stdout, stderr = run_main(capsys, "--store", str(store.root), "remote", "fetch",
                                    str(zipped))
    assert code == 1 and stdout == "" and stderr.count("\n") == 1
    assert "holds no pages" in stderr
    assert files(first.path) == before


def _damage(path: Path, entry: str) -> None:
    """Flip one byte of ``entry``'s stored data: its CRC-32 no longer matches."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(entry)
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data[start] ^= 0xFF
    path.write_bytes(bytes(data))


def _misdeclare(path: Path, entry: str, extra: int) -> None:
    """Make the central directory declare ``extra`` more bytes for ``entry`` than it holds."""
    data = bytearray(path.read_bytes())
    name = entry.encode()
    at = data.find(b"PK\x01\x02")
    while at != -1:
        length = struct.unpack_from("<H", data, at + 28)[0]
        if bytes(data[at + 46 : at + 46 + length]) == name:
            size = struct.unpack_from("<I", data, at + 24)[0]
            struct.pack_into("<I", data, at + 24, size + extra)
            path.write_bytes(bytes(data))
            return
        at = data.find(b"PK\x01\x02", at + 4)
    raise AssertionError(f"no entry {entry}")


def _stored_zip(path: Path, entries: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for name, text in entries.items():
            archive.writestr(name, text)
    return path


@pytest.mark.parametrize("damage", ["crc-of-a-log", "declared-size"])
def test_remote_fetch_verifies_a_zip_like_unpack(
    store: deepfield.Store, tmp_path: Path, damage: str
) -> None:
    zipped = _stored_zip(tmp_path / "travel.memoryfield.zip", {
        "index.md": "# Travel\n", "helsinki-trip.md": "# Helsinki\n\nBook the sauna early.\n",
        "logs/activation.jsonl": '{"event": "read"}\n'})
    if damage == "crc-of-a-log":
        _damage(zipped, "logs/activation.jsonl")  # a file the mirror never reads
    else:
        _misdeclare(zipped, "helsinki-trip.md", 10)
    with pytest.raises(ArchiveError, match="is damaged") as unpacked:
        portable.unpack(store, zipped)
    with pytest.raises(ArchiveError, match="is damaged") as fetched:
        portable.open_remote(str(zipped), cache=tmp_path / "cache")
    assert type(fetched.value) is type(unpacked.value)
    assert "travel" not in store.field_names()


def test_an_http_zip_pin_mismatch_names_the_url(
    store: deepfield.Store, tmp_path: Path
) -> None:
    root = tmp_path / "www"
    (root / "travel").mkdir(parents=True)
    field = store.create_field("travel")
    field.add("Helsinki trip", "Book the sauna early.")
    portable.pack(field, root / "travel" / "memoryfield.zip")
    server, url = serve(functools.partial(_QuietHandler, directory=str(root)))
    try:
        with pytest.raises(PinMismatchError) as caught:
            portable.open_remote(f"{url}travel/memoryfield.zip#sha256={'0' * 64}",
                                 cache=tmp_path / "cache")
    finally:
        server.shutdown()
        server.server_close()
    assert caught.value.message.startswith(f"{url}travel/memoryfield.zip has sha256 ")
    assert ".tmp" not in caught.value.message


def test_an_invalid_url_is_a_typed_error(capsys: pytest.CaptureFixture[str],
                                         store: deepfield.Store) -> None:
    with pytest.raises(TransportError, match=r"is not a valid URL \("):
        portable.open_remote("http://[::1")
    code, stdout, _ = run_main(capsys, "--store", str(store.root), "remote", "fetch",
                               "http://[::1", "--json")
    error = json.loads(stdout)["error"]
    assert code == 1 and error["type"] == "TransportError"
    assert error["message"].startswith("http://[::1 is not a valid URL (")


# ---------------------------------------------------------------- HTTP writes


def test_put_with_if_none_match_star_only_creates(keyword_store: deepfield.Store) -> None:
    folder = keyword_store.create_field("n").path
    create_only = {"If-None-Match": "*"}
    with served(keyword_store) as http:
        created = http.put("/n/woks.md", content=b"# Woks\n\nFirst.\n", headers=create_only)
        assert created.status_code == 201, created.text
        before = files(folder)
        again = http.put("/n/woks.md", content=b"# Woks\n\nSecond.\n", headers=create_only)
        assert again.status_code == 412
        error = again.json()["error"]
        assert error["type"] == "PreconditionFailed" and "already exists" in error["message"]
        assert again.headers["etag"] == http.get("/n/woks.md").headers["etag"]
        assert files(folder) == before  # nothing replaced, nothing archived
        # An If-None-Match naming the current ETag is refused the same way (RFC 9110).
        tag = http.get("/n/woks.md").headers["etag"]
        assert http.put("/n/woks.md", content=b"# Woks\n\nThird.\n",
                        headers={"If-None-Match": tag}).status_code == 412
        assert http.put("/n/woks.md", content=b"# Woks\n\nFourth.\n",
                        headers={"If-None-Match": '"other"'}).status_code == 204
        assert b"Fourth." in (folder / "woks.md").read_bytes()


def test_delete_of_the_introduction_is_refused(keyword_store: deepfield.Store) -> None:
    folder = keyword_store.create_field("n", intro="About cooking.").path
    before = files(folder)
    with served(keyword_store) as http:
        refused = http.delete("/n/index.md")
        assert refused.status_code == 405
        error = refused.json()["error"]
        assert error["type"] == "MethodNotAllowed" and "introduction" in error["message"]
        assert "PUT /n/index.md" in error["hint"]
        assert "PUT" in refused.headers["allow"]
        assert "About cooking." in http.get("/n/").text
    assert files(folder) == before and not (folder / "archive").exists()


# ---------------------------------------------------------------- reserved field names


def test_every_top_level_path_of_the_server_is_a_reserved_field_name(
    keyword_store: deepfield.Store,
) -> None:
    """A field named like a fixed top-level path of the app would be shadowed by it."""
    tops = {getattr(route, "path", "").strip("/").split("/")[0]
            for route in create_app(keyword_store).routes}
    shadowing = {t for t in tops if t and "{" not in t and is_valid_name(t)}
    assert shadowing == set(RESERVED_FIELD_NAMES) == {"ui"}


def test_a_reserved_field_name_is_refused_everywhere(
    kcli: MainCli, keyword_store: deepfield.Store, tmp_path: Path
) -> None:
    with pytest.raises(InvalidNameError, match="reserved"):
        keyword_store.create_field("ui")
    ran = kcli("new", "ui")
    assert ran.exit_code == 1 and ran.stderr.count("\n") == 1
    assert ran.stderr.startswith("error: field name 'ui' is reserved") and "console" in ran.stderr
    zipped = portable.pack(keyword_store.field("n"), tmp_path / "ui.memoryfield.zip").path
    ran = kcli("unpack", str(zipped), "--json")
    error = json.loads(ran.stdout)["error"]
    assert ran.exit_code == 1 and error["type"] == "InvalidNameError"
    assert "--as NAME" in error["hint"]
    ran = kcli("unpack", str(zipped), "--as", "ui")
    assert ran.exit_code == 1 and "reserved" in ran.stderr
    assert "ui" not in keyword_store.field_names()
    assert kcli("unpack", str(zipped), "--as", "ui-copy").exit_code == 0


def test_the_server_never_lists_a_field_it_cannot_reach(keyword_store: deepfield.Store) -> None:
    (keyword_store.root / "ui").mkdir()  # made by hand, or before the name was reserved
    keyword_store.create_field("n")
    with served(keyword_store) as http:
        names = [f["name"] for f in http.get("/").json()["fields"]]
    assert names == ["n"]


# ---------------------------------------------------------------- request size


def test_an_oversized_body_is_a_json_413_with_or_without_content_length(
    keyword_store: deepfield.Store,
) -> None:
    from deepfield.writer import MAX_WRITE_BYTES

    folder = keyword_store.create_field("n").path
    before = files(folder)
    big = b"# Big\n\n" + b"x" * (MAX_WRITE_BYTES + 8192)

    def chunked() -> Iterator[bytes]:
        for start in range(0, len(big), 1 << 20):
            yield big[start:start + (1 << 20)]

    with served(keyword_store) as http:
        for path in ("/n/big.md", "/n/_/remember"):
            method = http.put if path.endswith(".md") else http.post
            for body in (big, chunked()):
                answer = method(path, content=body)
                assert answer.status_code == 413, (path, answer.text[:200])
                assert answer.headers["content-type"] == "application/json"
                error = answer.json()["error"]
                assert error["type"] in ("RequestEntityTooLarge", "ContentTooLarge")
                assert "larger than" in error["message"] and "MiB" in error["hint"]
        assert files(folder) == before
        # A request that fits is untouched by the limit.
        assert http.put("/n/small.md", content=b"# Small\n\nFits.\n").status_code == 201


# ---------------------------------------------------------------- agent setup


def test_setup_passes_a_bucket_store_through_as_its_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    for key, value in (("HOME", home), ("XDG_CONFIG_HOME", tmp_path / "xdg"),
                       ("APPDATA", tmp_path / "appdata"), ("CODEX_HOME", tmp_path / "codex")):
        monkeypatch.setenv(key, str(value))
    monkeypatch.chdir(tmp_path)
    cli = MainCli("s3://bucket/pfx", capsys, monkeypatch)
    printed = cli("setup", "cursor", "--print")
    assert printed.exit_code == 0, printed.stderr
    entry = json.loads(printed.stdout)["mcpServers"]["deepfield"]
    assert entry["args"][-2:] == ["mcp", "s3://bucket/pfx"]
    assert "AWS_" in printed.stderr  # the agent needs the credentials in its environment
    done = cli("setup", "gemini", "--json")
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["store"] == "s3://bucket/pfx"
    written = json.loads((home / ".gemini/settings.json").read_text())
    assert written["mcpServers"]["deepfield"]["args"][-2:] == ["mcp", "s3://bucket/pfx"]
    assert not list(tmp_path.glob("s3*"))  # no made-up local folder for the bucket


def test_what_remember_reads_as_no_conversation() -> None:
    # A program that printed a bare JSON value by mistake: no page of "null".
    for text in ("null", "42", "true", '"hello"'):
        with pytest.raises(deepfield.SessionFormatError, match="not a conversation"):
            parse_session(text, label="standard input")
    # LoCoMo's own file is a list of samples: one is read, several are named.
    sample = {"sample_id": "conv-1", "qa": [], "conversation": {
        "speaker_a": "A", "speaker_b": "B", "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi there"},
                      {"speaker": "B", "dia_id": "D1:2", "text": "hello"}]}}
    one = parse_session(json.dumps([sample]), session=1)
    assert [t.text for t in one.turns] == ["hi there", "hello"]
    with pytest.raises(deepfield.SessionFormatError, match="holds 2 LoCoMo conversations"):
        parse_session(json.dumps([sample, sample]), session=1)


def test_a_transcript_with_broken_frontmatter_is_filed_with_a_warning(
        keyword_store: deepfield.Store) -> None:
    field = keyword_store.create_field("chats")
    text = "---\ndate: [oops\n---\nAlice: hi about kites\nBob: kites are fun\n"
    (warning,) = parse_session(text).warnings
    assert warning.startswith("the session: malformed YAML frontmatter")
    written = remember(field, "-", text=text)
    assert any("the block is read as text" in w for w in written.warnings), written.warnings


def test_a_query_that_starts_with_a_dash_is_told_where_to_go(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_main(capsys, "search", "-1.72")
    assert code == 2 and err.count("\n") == 1, err
    assert "goes after '--': deepfield search -- \"-1.72\"" in err
    code, _out, err = run_main(capsys, "search", "--bogus", "x")  # a real option's typo
    assert code == 2 and "--'" not in err and "see `deepfield search --help`" in err


def test_delete_over_http_takes_every_part_of_a_split_page(
        keyword_store: deepfield.Store) -> None:
    field = keyword_store.create_field("big")
    text = "# Big\n\n" + "\n\n".join(f"## S{i}\n\n" + "lorem ipsum dolor " * 60
                                     for i in range(20))
    names = field.add("Big", text).filenames
    assert len(names) > 2
    with served(keyword_store) as http:
        gone = http.delete(f"/big/{names[0]}")
    assert gone.status_code == 204 and gone.headers["x-deepfield-archived-as"] == \
        f"archive/{names[0]}"
    assert field.pages() == [] and sorted(field.archived()) == sorted(names)
