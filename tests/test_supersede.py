"""Supersession: newer pages hide older ones from search, keep them readable, refuse cycles."""

from __future__ import annotations

import pytest

import deepfield
from deepfield.manage.supersede import supersede

from .conftest import Cli

OLD = """---
title: Alice's team location
# where the team sits
tags: [team, alice]
uuid: 11111111-2222-4333-8444-555555555555
summary: Alice's team is based in Berlin.
created: "2024-01-02T10:00:00Z"
updated: "2024-01-02T10:00:00Z"
---
Alice's team is based in the Berlin office.
"""


def _names(response: deepfield.SearchResponse) -> list[str]:
    return [h.filename for h in response.results]


def test_writing_supersedes_links_and_hides_the_old_page(field: deepfield.Field) -> None:
    field.write(OLD, name="alice-team-berlin")
    result = field.add("Alice's team moved", "Alice's team moved from the Berlin office to "
                       "Lisbon.", frontmatter={"supersedes": "alice-team-berlin.md"})
    new = result.pages[0].filename
    old_text = (field.path / "alice-team-berlin.md").read_text()
    # only one line was added; every other byte (comment, key order, updated) is kept
    assert old_text == OLD.replace("updated: \"2024-01-02T10:00:00Z\"\n",
                                   f"updated: \"2024-01-02T10:00:00Z\"\nsuperseded_by: {new}\n")
    for mode in ("bm25", "vector", "hybrid"):
        assert "alice-team-berlin.md" not in _names(field.search("Alice team Berlin", mode=mode))
        assert new in _names(field.search("Alice team Berlin", mode=mode))
        shown = field.search("Alice team Berlin", mode=mode, include_superseded=True)
        assert "alice-team-berlin.md" in _names(shown)
    view = field.read("alice-team-berlin")
    assert "superseded by" in " ".join(view.warnings)
    assert view.frontmatter is not None and view.frontmatter["superseded_by"] == new


def test_supersede_by_uuid_and_a_cycle_is_refused(field: deepfield.Field) -> None:
    a = field.add("Budget 2024", "The Atlas budget is 10k.").pages[0]
    b = field.add("Budget 2025", "The Atlas budget is 12k.",
                  frontmatter={"supersedes": a.uuid}).pages[0]
    assert field.load(a.filename)[1].get("superseded_by") == b.filename
    before = (field.path / a.filename).read_text()
    page = field.load(a.filename)[1]
    page.set("supersedes", b.filename)
    with pytest.raises(deepfield.SupersessionCycleError, match="cycle"):
        field.write(page)
    assert (field.path / a.filename).read_text() == before  # nothing written
    with pytest.raises(deepfield.SupersessionCycleError):
        supersede(field, b.filename, a.filename)
    with pytest.raises(deepfield.SupersessionCycleError, match="itself"):
        supersede(field, a.filename, a.filename)


def test_chains_and_unknown_references(field: deepfield.Field) -> None:
    a = field.add("Plan v1", "Launch in May.").pages[0].filename
    b = field.add("Plan v2", "Launch in June.").pages[0].filename
    c = field.add("Plan v3", "Launch in July.").pages[0].filename
    supersede(field, a, b)
    supersede(field, b, c)
    with pytest.raises(deepfield.SupersessionCycleError):
        supersede(field, c, a)  # a -> b -> c already: c cannot be older than a
    assert _names(field.search("launch plan", mode="bm25")) == [c]
    written = field.add("Plan v4", "Launch in August.", frontmatter={"supersedes": "nope"})
    assert any("no such page" in w for w in written.warnings)


def test_cli_supersede_and_include_superseded(cli: Cli) -> None:
    cli("new", "notes")
    cli("add", "notes", "The office is in Berlin.", "--title", "Office")
    cli("add", "notes", "The office moved to Lisbon.", "--title", "Office move")
    out = cli.json("supersede", "notes", "office", "office-move")
    assert out["superseded"] == ["office.md"] and out["new"] == "office-move.md"
    hits = cli.json("search", "office", "--mode", "bm25")["results"]
    assert [h["filename"] for h in hits] == ["office-move.md"]
    hits = cli.json("search", "office", "--mode", "bm25", "--include-superseded")["results"]
    assert {h["filename"] for h in hits} == {"office.md", "office-move.md"}
    with pytest.raises(deepfield.SupersessionCycleError):
        cli("supersede", "notes", "office-move", "office")


def test_a_new_page_closing_a_loop_through_a_dangling_reference(field: deepfield.Field) -> None:
    x = field.add("Plan X", "Launch in May.", frontmatter={"supersedes": "plan-y"})
    assert any("no such page" in w for w in x.warnings)
    y = field.add("Plan Y", "Launch in June.", frontmatter={"supersedes": "plan-x"})
    assert y.pages[0].filename == "plan-y.md"
    assert any("cycle" in w and "not linked" in w for w in y.warnings)
    assert field.load("plan-x")[1].get("superseded_by") is None  # nothing hidden by a loop
    assert sorted(_names(field.search("launch plan", mode="bm25"))) == ["plan-x.md",
                                                                         "plan-y.md"]


def test_an_old_page_with_broken_yaml_is_a_warning_not_a_failed_write(
    field: deepfield.Field,
) -> None:
    (field.path / "broken.md").write_text("---\ntitle: [unclosed\n---\n# Broken\n\nOld fact.\n")
    field.ensure_synced(embed=False)
    written = field.add("New fact", "New fact.", frontmatter={"supersedes": "broken"})
    assert written.pages[0].filename == "new-fact.md"
    assert any("could not be marked superseded" in w and "deepfield supersede" in w
               for w in written.warnings)
    with pytest.raises(deepfield.InvalidPageError, match="unreadable frontmatter"):
        supersede(field, "broken", "new-fact")


def test_superseded_pages_stay_hidden_as_fields_are_opened_and_closed(
    keyword_store: deepfield.Store,
) -> None:
    # Two fields at the same index generation, one with a superseded page: a cache keyed on
    # id(index) once answered for the wrong field after the other's index was closed.
    plain, moved = keyword_store.create_field("plain"), keyword_store.create_field("moved")
    for title in ("Office", "Office two", "Office three"):
        plain.add(title, f"The office note {title}.", review=False)
    moved.add("Office", "The office is in Berlin.", review=False)
    moved.add("Office moved", "The office moved to Lisbon.", review=False,
              frontmatter={"supersedes": "office"})
    paths = plain.path, moved.path
    for _ in range(10):
        first = deepfield.open_field(paths[0], None)
        first.search("office", mode="bm25")
        first.close()
        second = deepfield.open_field(paths[1], None)
        names = _names(second.search("office", mode="bm25"))
        second.close()
        assert names == ["office-moved.md"]


def test_an_old_page_that_is_not_utf8_is_refused_and_left_byte_for_byte(
    field: deepfield.Field,
) -> None:
    # Decoding with replacement characters and writing the text back destroyed the bytes.
    latin = b"---\ntitle: latin\n---\ncaf\xe9 \xff\xfe bad bytes\n"
    (field.path / "non-utf8.md").write_bytes(latin)
    (field.path / "newp.md").write_bytes(b"# new page\n")
    field.ensure_synced(embed=False)
    with pytest.raises(deepfield.InvalidPageError, match="not valid UTF-8") as caught:
        supersede(field, "non-utf8", "newp")
    assert "fix its encoding" in caught.value.hint
    assert (field.path / "non-utf8.md").read_bytes() == latin
    assert (field.path / "newp.md").read_bytes() == b"# new page\n"  # neither page changed
    # Written with a ``supersedes`` key, the new page is stored and the link is a warning.
    written = field.add("Newer", "Newer fact.", frontmatter={"supersedes": "non-utf8"})
    assert any("non-utf8.md could not be marked superseded" in w for w in written.warnings)
    assert (field.path / "non-utf8.md").read_bytes() == latin


def test_cli_supersede_of_a_page_that_is_not_utf8_fails(cli: Cli) -> None:
    cli("new", "f")
    folder = cli.store_path / "f"
    (folder / "non-utf8.md").write_bytes(b"---\ntitle: latin\n---\ncaf\xe9\n")
    (folder / "newp.md").write_bytes(b"# new page\n")
    with pytest.raises(deepfield.InvalidPageError):
        cli("supersede", "f", "non-utf8", "newp")
    assert (folder / "non-utf8.md").read_bytes() == b"---\ntitle: latin\n---\ncaf\xe9\n"


def test_a_rewrite_keeps_the_pages_bom_and_crlf_line_endings(field: deepfield.Field) -> None:
    text = "\ufeff---\r\n# kept\r\ntitle: crlf\r\n---\r\nline one\r\nline two\r\n"
    (field.path / "crlf.md").write_bytes(text.encode())
    (field.path / "newer.md").write_bytes(b"# newer\n")
    field.ensure_synced(embed=False)
    supersede(field, "crlf", "newer")
    assert (field.path / "crlf.md").read_bytes() == text.replace(
        "crlf\r\n", "crlf\r\nsuperseded_by: newer.md\r\n").encode()
    field.archive_page("newer")  # rm releases the link: the key goes, the layout stays
    assert (field.path / "crlf.md").read_bytes() == text.encode()


def test_rm_of_a_successor_says_when_the_old_page_cannot_be_released(
        field: deepfield.Field, monkeypatch: pytest.MonkeyPatch) -> None:
    """The old page keeps a link to a page that is gone, so search hides it: rm says so."""
    from deepfield.manage import supersede as module

    field.add("Office", "The office is in Berlin.", review=False)
    field.add("Office moved", "The office moved to Lisbon.", review=False,
              frontmatter={"supersedes": "office"})
    before = (field.path / "office.md").read_bytes()

    def unwritable(*_args: object, **_kwargs: object) -> bool:
        raise PermissionError("[Errno 13] Permission denied: 'office.md'")

    monkeypatch.setattr(module, "rewrite_keys", unwritable)
    done = field.archive_page("office-moved")
    assert done.unsuperseded == []
    assert any(w.startswith("office.md still says superseded_by office-moved.md")
               and "Permission denied" in w and "by hand" in w for w in done.warnings), \
        done.warnings
    assert (field.path / "office.md").read_bytes() == before
