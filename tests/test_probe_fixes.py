"""Defects a robustness probe found, each through the surface where it was found: text that
is not UTF-8, an empty field name, loose LoCoMo imports, unchecked batch search options and
the HTTP reading routes' parameters."""

from __future__ import annotations

from typing import Any

import pytest

import deepfield
from deepfield.errors import InvalidNameError, InvalidPageError, InvalidQueryError

from .conftest import MainCli

LATIN1 = "caf\udce9"
"""What Python makes of the Latin-1 bytes ``caf\\xe9`` in a command-line argument."""


@pytest.fixture
def mcli(store: deepfield.Store, capsys: pytest.CaptureFixture[str],
         monkeypatch: pytest.MonkeyPatch) -> MainCli:
    """The real entry point on a store with an embedder (hybrid searches embed the query)."""
    store.create_field("f").add("Woks", "Carbon steel woks heat fast.")
    return MainCli(store.root, capsys, monkeypatch)


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
    with pytest.raises(InvalidPageError, match="'a' is a object, which YAML cannot write"):
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
