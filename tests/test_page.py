"""Pages: frontmatter parsing and rendering, spec filename rules, input checks."""

from __future__ import annotations

import pytest

from deepfield.errors import InvalidNameError, InvalidPageError
from deepfield.page import (
    Page,
    check_name,
    derive_title,
    frontmatter_json,
    is_debris,
    is_valid_name,
    slugify,
)
from deepfield.page_text import check_text

HAND_WRITTEN = """---
# why this page exists
title: Carbon Fibre Woks
tags:
- cookware   # the main one
- heat
note: |
  first line

  second paragraph
custom:   {a: 1, b: [x, y]}
---
# Carbon Fibre Woks

They heat unevenly.
"""


def test_unknown_keys_are_written_back_byte_for_byte() -> None:
    page = Page.parse(HAND_WRITTEN)
    assert page.frontmatter is not None
    assert page.frontmatter["tags"] == ["cookware", "heat"]
    page.set("uuid", "6aa615f0-486f-48a7-a210-ba4f5ff18c8b")
    page.set("updated", "2026-08-22T14:30:00Z")
    text = page.render()
    for verbatim in ("# why this page exists\ntitle: Carbon Fibre Woks\n",
                     "- cookware   # the main one\n",
                     "note: |\n  first line\n\n  second paragraph\n",
                     "custom:   {a: 1, b: [x, y]}\n"):
        assert verbatim in text
    # new canonical keys go next to their canonical neighbours, others keep their order
    keys = list(Page.parse(text).frontmatter or {})
    assert keys == ["title", "uuid", "updated", "tags", "note", "custom"]
    assert "updated: '2026-08-22T14:30:00Z'" in text  # datetimes are quoted strings (spec)


def test_render_without_changes_is_identity() -> None:
    assert Page.parse(HAND_WRITTEN).render() == HAND_WRITTEN


def test_changed_value_is_redumped() -> None:
    page = Page.parse(HAND_WRITTEN)
    page.set("title", "Woks: a field guide")
    text = page.render()
    assert "title: 'Woks: a field guide'" in text
    assert "# why this page exists" in text  # the comment travelled with the key


def test_page_without_frontmatter() -> None:
    page = Page.parse("# Hello\n\nbody\n")
    assert page.frontmatter is None and page.frontmatter_error is None
    assert page.render() == "# Hello\n\nbody\n"
    assert frontmatter_json(page.frontmatter) == "null"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("---\ntitle: [unclosed\n---\nbody\n", "malformed YAML"),
        ("---\n- a\n- b\n---\nbody\n", "not a mapping"),
        ("---\ntitle: x\nbody without end\n", "never closes"),
        ("---\ntitle: x\na: &a [*a]\n---\nbody\n", "nests too deep"),  # an alias in itself
        ("---\nt: x\na0: &a0 [x, x]\n" + "".join(  # aliases of aliases: 2**40 values
            f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}]\n" for i in range(1, 40)) + "---\nbody\n",
         "more than 10,000 values"),
    ],
)
def test_malformed_frontmatter_never_raises(text: str, reason: str) -> None:
    page = Page.parse(text)
    assert page.frontmatter is None
    assert page.frontmatter_error and reason in page.frontmatter_error
    assert page.body == text  # the whole file is kept as text


def test_body_line_numbers_and_bom() -> None:
    page = Page.parse("\ufeff---\ntitle: a\n---\nline four\n")
    assert page.title == "a"
    assert page.body_line == 4


def test_a_date_yaml_cannot_build_stays_text() -> None:
    """A hand-edited impossible date must not make the page (or the store) unreadable."""
    page = Page.parse("---\ntitle: a\nupdated: 2020-13-45\ncreated: 2020-02-30 10:00\n---\n")
    assert page.frontmatter == {"title": "a", "updated": "2020-13-45",
                                "created": "2020-02-30 10:00"}
    assert '"updated": "2020-13-45"' in frontmatter_json(page.frontmatter)


def test_yaml_datetimes_become_strings_in_json() -> None:
    page = Page.parse("---\ncreated: 2026-03-01T09:00:00Z\nday: 2026-03-01\n---\n")
    assert '"created": "2026-03-01T09:00:00+00:00"' in frontmatter_json(page.frontmatter)
    assert '"day": "2026-03-01"' in frontmatter_json(page.frontmatter)


@pytest.mark.parametrize("name", ["carbon-fibre", "a", "2026-notes", "x1"])
def test_valid_names(name: str) -> None:
    assert is_valid_name(name)
    assert check_name(name + ".md") == name


@pytest.mark.parametrize("name", ["Carbon", "-a", "a-", "a_b", "a b", "", "ü", "a.b", "../x"])
def test_invalid_names(name: str) -> None:
    assert not is_valid_name(name)
    with pytest.raises(InvalidNameError) as info:
        check_name(name)
    assert "lowercase" in info.value.hint


def test_slugify() -> None:
    assert slugify("Carbon Fibre Woks!") == "carbon-fibre-woks"
    assert slugify("Crème brûlée — à la carte") == "creme-brulee-a-la-carte"
    assert slugify("机器学习") == ""
    # Letters no decomposition takes to ASCII are spelled out, not dropped.
    assert slugify("Straße in Ærø, Łódź") == "strasse-in-aero-lodz"
    long = slugify("word " * 40)
    assert len(long) <= 60 and not long.endswith("-") and is_valid_name(long)


@pytest.mark.parametrize("name", [".DS_Store", "desktop.ini", "Thumbs.db", "notes.md~",
                                  "notes.sync-conflict-20260101-123456.md",
                                  "notes (conflicted copy).md",
                                  "notes (Ana's conflicted copy 2024-05-01).md",
                                  "notes (Case Conflict).md", "notes.BACKUP.12345.md",
                                  "notes.base.7.md", "notes_LOCAL_12345.md", "notes_REMOTE_9.md"])
def test_debris(name: str) -> None:
    assert is_debris(name)


@pytest.mark.parametrize("name", ["local-notes.md", "base-camp.md", "backup-plan.md",
                                  "conflicted-copy.md", "notes (1).md", "remote_2.md"])
def test_pages_named_like_debris_are_pages(name: str) -> None:
    assert not is_debris(name)


def test_check_text_errors() -> None:
    with pytest.raises(InvalidPageError, match="empty"):
        check_text(b"  \n", "x", 100)
    with pytest.raises(InvalidPageError, match="UTF-8"):
        check_text(b"caf\xe9", "x", 100)
    with pytest.raises(InvalidPageError, match="binary"):
        check_text(b"\x89PNG\x00\x00", "x", 100)
    with pytest.raises(InvalidPageError, match="bytes"):
        check_text(b"a" * 101, "x", 100)
    assert check_text(b"\xef\xbb\xbfa\r\nb", "x", 100) == "a\nb"


def test_derive_title() -> None:
    assert derive_title(Page.parse("---\ntitle: T\n---\n# H\n")) == "T"
    assert derive_title(Page.parse("## Second\n# First\n")) == "First"
    assert derive_title(Page.parse("```\n# not a heading\n```\n## Real\n")) == "Real"
    assert derive_title(Page.parse("just text here\n")) == "just text here"
    assert derive_title(Page.parse("\n\n"), fallback="stem") == "stem"


def test_long_names_are_refused_clearly() -> None:
    from deepfield.errors import InvalidNameError
    from deepfield.page import check_name

    assert check_name("a" * 120) == "a" * 120
    with pytest.raises(InvalidNameError, match="121 characters long"):
        check_name("a" * 121)
