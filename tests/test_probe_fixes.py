"""Defects a robustness probe found, each through the surface where it was found: text that
is not UTF-8, an empty field name, loose LoCoMo imports, unchecked batch search options and
the HTTP reading routes' parameters."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

import deepfield
from deepfield.errors import InvalidNameError, InvalidPageError, InvalidQueryError
from deepfield.server import create_app

from .conftest import MainCli

LATIN1 = "caf\udce9"
"""What Python makes of the Latin-1 bytes ``caf\\xe9`` in a command-line argument."""


@pytest.fixture
def mcli(store: deepfield.Store, capsys: pytest.CaptureFixture[str],
         monkeypatch: pytest.MonkeyPatch) -> MainCli:
    """The real entry point on a store with an embedder (hybrid searches embed the query)."""
    store.create_field("f").add("Woks", "Carbon steel woks heat fast.")
    return MainCli(store.root, capsys, monkeypatch)


@pytest.fixture
def kcli(keyword_store: deepfield.Store, capsys: pytest.CaptureFixture[str],
         monkeypatch: pytest.MonkeyPatch) -> MainCli:
    """The real entry point on a keyword-only store."""
    return MainCli(keyword_store.root, capsys, monkeypatch)


# ---------------------------------------------------------------- text that is not UTF-8


def test_library_refuses_text_that_is_not_utf8(field: deepfield.Field) -> None:
    for mode in ("bm25", "hybrid"):
        with pytest.raises(InvalidQueryError, match="not valid UTF-8: the byte 0xe9"):
            field.search(LATIN1, mode=mode)
    with pytest.raises(InvalidPageError, match="page text is not valid UTF-8"):
        field.write(f"# t\n{LATIN1}")
    with pytest.raises(InvalidPageError, match="title is not valid UTF-8"):
        field.add(LATIN1, "x")
    with pytest.raises(InvalidPageError, match="frontmatter value of 'a' is not valid UTF-8"):
        field.add("t", "x", frontmatter={"a": [LATIN1]})
    with pytest.raises(InvalidPageError,
                       match=r"'a' is \(or holds\) an object, which plain YAML cannot"):
        field.add("t", "x", frontmatter={"a": object()})
    page = deepfield.Page(body=f"{LATIN1}\n", frontmatter={"title": "t"})
    with pytest.raises(InvalidPageError, match="page text is not valid UTF-8"):
        field.write(page)
    with pytest.raises(InvalidNameError, match="not valid UTF-8"):
        field.read(LATIN1)
    assert field.pages() == []  # nothing half-written


@pytest.mark.parametrize("args", [
    ("search", LATIN1), ("search", "--mode", "bm25", LATIN1),
    ("research", LATIN1, "--offline"), ("context", "-f", "f", LATIN1, "--offline"),
    ("add", "f", "--title", LATIN1, "x"), ("add", "f", "--title", "t", "--summary", LATIN1, "x"),
    ("add", "f", "--title", "t", LATIN1), ("read", "f", LATIN1), ("ls", LATIN1),
])
def test_cli_says_which_argument_is_not_utf8(mcli: MainCli, args: tuple[str, ...]) -> None:
    ran = mcli(*args)
    assert ran.exit_code == 1, ran
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), ran.stderr
    assert "is not valid UTF-8: the byte 0xe9 at character 4" in lines[0]
    assert "LANG=C.UTF-8" in lines[0]


def test_cli_catches_any_other_argument_that_is_not_utf8(
        mcli: MainCli, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no library check stands, the entry point still names the argument."""
    def encode(*_args: Any, **_kwargs: Any) -> None:
        LATIN1.encode("utf-8")

    monkeypatch.setattr(deepfield.Store, "field", encode)
    ran = mcli("ls", "--json", LATIN1 + "x")
    assert ran.exit_code == 2
    assert "the argument 'caf\\udce9x' is not valid UTF-8" in ran.stderr
    assert len(ran.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------- an empty field name


@pytest.mark.parametrize("name", ["", "  "])
def test_an_empty_field_name_is_no_field(store: deepfield.Store, name: str) -> None:
    with pytest.raises(InvalidNameError, match="field name is empty"):
        store.field(name)


def test_cli_never_writes_into_the_store_root(mcli: MainCli, store: deepfield.Store) -> None:
    for args, stdin in ((("add", "", "--title", "evil", "x"), None),
                        (("write", "", "-"), "# evil\n\ntext\n")):
        ran = mcli(*args, input=stdin)
        assert ran.exit_code == 1, ran
        assert ran.stderr.startswith("error: the field name is empty"), ran.stderr
    assert not (store.root / "evil.md").exists()


# ---------------------------------------------------------------- import locomo


def _locomo(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def test_locomo_without_conversations_is_an_error(kcli: MainCli, tmp_path: Path) -> None:
    ran = kcli("import", "locomo", str(_locomo(tmp_path, [])), "--no-index")
    assert ran.exit_code == 1 and "imported" not in ran.stdout
    assert "holds no conversations (give a LoCoMo file such as locomo10.json" in ran.stderr
    broken = kcli("import", "locomo", str(_locomo(tmp_path, "{bad")), "--no-index")
    assert broken.exit_code == 1
    assert "is not LoCoMo JSON: Expecting property name" in broken.stderr
    assert "(give a LoCoMo file such as locomo10.json" in broken.stderr  # what to do


def test_locomo_skips_malformed_turns_and_says_so(kcli: MainCli, tmp_path: Path,
                                                  keyword_store: deepfield.Store) -> None:
    turns = [{"speaker": "A", "dia_id": "D1:1", "text": "hello wok"},
             {"speaker": "A", "text": None}, {"foo": 1}, 5,
             {"speaker": "B", "dia_id": "D1:5", "text": "hi"}]
    source = _locomo(tmp_path, [{"sample_id": "c1", "conversation": {
        "speaker_a": "A", "speaker_b": "B", "session_1": turns}}])
    ran = kcli("import", "locomo", str(source), "--no-index")
    assert ran.exit_code == 0, ran
    assert "3 malformed turns skipped" in ran.stdout
    assert ("c1 session 1: 3 malformed turn(s) skipped (turn 2: no text; turn 3: no "
            "text; turn 4: a JSON int, not an object)") in ran.stderr
    body = (keyword_store.root / "c1" / "session-01.md").read_text()
    assert "A (D1:1): hello wok\nB (D1:5): hi\n" in body
    assert "None" not in body and "? (?)" not in body


# ---------------------------------------------------------------- search --batch options


def test_batch_lines_options_are_checked_like_the_flags(kcli: MainCli, tmp_path: Path,
                                                        keyword_store: deepfield.Store) -> None:
    keyword_store.create_field("n").add("Woks", "Carbon steel woks heat fast.")
    bad = ['{"query": "wok", "k": 1e9}', '{"query": "wok", "k": true}',
           '{"query": "wok", "k": 0}', '{"query": "wok", "k": "5"}',
           '{"query": "wok", "mode": "fuzzy"}', '{"query": "wok", "unit": null}']
    batch = tmp_path / "batch.jsonl"
    batch.write_text("\n".join([*bad, '{"id": "ok", "query": "wok", "k": 1000}']) + "\n")
    ran = kcli("search", "--batch", str(batch))
    assert ran.exit_code == 0, ran.stderr  # errors are answer lines, as for bad JSON
    *errors, good = (json.loads(line) for line in ran.stdout.splitlines())
    assert [e["line"] for e in errors] == list(range(1, len(bad) + 1))
    for error in errors[:4]:
        assert error["error"].startswith("k must be a whole number from 1 to 1000, not ")
        assert "results" not in error
    assert "1000000000.0" in errors[0]["error"] and "not true" in errors[1]["error"]
    assert 'unknown search mode "fuzzy"' in errors[4]["error"]
    assert "unknown result unit null" in errors[5]["error"]
    assert good["id"] == "ok" and good["results"][0]["filename"] == "woks.md"


# ---------------------------------------------------------------- HTTP reading parameters


PAGE = "# Woks\n\nWoks heat fast.\n\n## Care\n\nDry it on the stove, then oil it.\n"


def _http(store: deepfield.Store) -> TestClient:
    store.create_field("n").write(PAGE, name="woks")
    return TestClient(create_app(store), client=("127.0.0.1", 5000),
                      base_url="http://127.0.0.1:8765")


def test_http_section_alone_reads_the_section(keyword_store: deepfield.Store) -> None:
    with _http(keyword_store) as http:
        found = http.get("/n/_/read/woks", params={"section": "Care"})
        assert found.status_code == 200, found.text
        assert found.json()["view"] == "section" and "oil it" in found.json()["text"]
        missing = http.get("/n/_/read/woks", params={"section": "Nope"})
        assert missing.status_code == 404  # not the outline, as if it had been read
        assert missing.json()["error"]["type"] == "SectionNotFoundError"
        clash = http.get("/n/_/read/woks", params={"section": "Care", "view": "full"})
        assert clash.status_code == 400 and "view=section" in clash.json()["error"]["hint"]
        outline = http.get("/n/_/read/woks")
        assert outline.json()["view"] == "outline"


@pytest.mark.parametrize("url", [
    "/n/search?q=wok&k=0", "/n/search?q=wok&k=x", "/n/_/read/woks?depth=9",
    "/n/_/research?q=wok&budget=1", "/n/_/context?task=wok&budget=0", "/n/_/research",
    "/n/_/read/woks?view=section",
])
def test_http_400s_say_what_to_send(keyword_store: deepfield.Store, url: str) -> None:
    with _http(keyword_store) as http:
        answer = http.get(url)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["hint"], answer.json()
