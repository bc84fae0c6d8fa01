"""Splitting pages over 8 KB into linked parts that keep every word and every source."""

from __future__ import annotations

import re

import pytest

import deepfield
from deepfield.page import PAGE_LIMIT_BYTES, Page
from deepfield.split import split_body, split_page


def _names(count: int) -> list[str]:
    return ["doc.md"] + [f"doc-part-{i}.md" for i in range(2, count + 1)]


def _uuid(index: int, _filename: str) -> str:
    return f"00000000-0000-4000-8000-{index:012d}"


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text)


def long_page() -> Page:
    sections = []
    for i in range(18):
        paragraph = " ".join(
            f"Sentence {i}-{j} about topic {i} with detail {j}." for j in range(12)
        )
        sections.append(f"## Section {i}\n\n{paragraph}\n\n- point {i}a\n- point {i}b\n")
    body = "# Long page\n\nIntro paragraph.\n\n" + "\n".join(sections)
    body += "\n## Sources\n\n- https://example.org/paper\n- Interview, 3 May 2026\n"
    return Page(body=body, frontmatter={"title": "Long page", "uuid": "orig-uuid",
                                        "source": "https://example.org/paper", "tags": ["x"]})


def test_parts_fit_link_and_keep_sources() -> None:
    page = long_page()
    assert len(page.render().encode()) > PAGE_LIMIT_BYTES
    parts = split_page(page, "Long page", _names, _uuid)
    assert len(parts) >= 2
    filenames = [name for name, _ in parts]
    for index, (name, part) in enumerate(parts, start=1):
        text = part.render()
        assert len(text.encode()) <= PAGE_LIMIT_BYTES
        fm = part.frontmatter or {}
        assert fm["title"] == f"Long page (part {index} of {len(parts)})"
        assert fm["uuid"] == _uuid(index, name)
        assert fm["split_from"] == "orig-uuid" and fm["part"] == index
        assert fm["parts"] == filenames
        assert fm["source"] == "https://example.org/paper" and fm["tags"] == ["x"]
        assert "https://example.org/paper" in part.body  # sources section in every part
        if index > 1:
            assert f"]({filenames[index - 2]})" in part.body
        if index < len(parts):
            assert f"]({filenames[index]})" in part.body


def test_no_word_is_lost_and_order_is_kept() -> None:
    page = long_page()
    parts = split_page(page, "Long page", _names, _uuid)
    original = _words(page.body.split("## Sources")[0])
    joined = []
    for _, part in parts:
        body = part.body.split("## Sources")[0]
        body = re.sub(r"^#+ .*\(continued\)$", "", body, flags=re.M)
        joined += _words(body)
    assert joined == original


def test_cuts_prefer_section_boundaries() -> None:
    parts = split_page(long_page(), "Long page", _names, _uuid)
    for _, part in parts[1:]:
        assert part.body.lstrip().startswith("## ")


def test_giant_line_and_cjk_are_cut_at_character_boundaries() -> None:
    body = "# Big\n\n" + ("机器学习是人工智能的一个分支" * 900) + "\n"
    pieces = split_body(body, 3000)
    assert all(len(p.encode()) <= 3000 for p in pieces)
    text = "".join(re.sub(r"^# Big.*$", "", p, flags=re.M).replace("\n", "") for p in pieces)
    assert text.count("机器学习") == 900 and len(pieces) > 5


def test_budget_too_small() -> None:
    with pytest.raises(ValueError):
        split_body("x" * 1000, 100)


def test_a_megabyte_paragraph_splits_fast_and_names_its_parts_by_count() -> None:
    """One 1 MB paragraph: every word kept, in order, in ~150 parts within the limit. Listing
    every filename in each part would not fit a part, so past PARTS_LISTED ``parts`` is the
    count (the names follow doc.md, doc-part-2.md, …); the line is split into sentences once
    (re-splitting the rest for every part made this quadratic)."""
    import time

    from deepfield.split import PARTS_LISTED

    text = " ".join(f"Sentence {i} says something about topic {i % 97}." for i in range(22_000))
    started = time.perf_counter()
    parts = split_page(Page(body=text + "\n", frontmatter={"title": "Doc"}), "Doc", _names, _uuid)
    assert time.perf_counter() - started < 10  # about 0.2 s here; quadratic took minutes
    assert len(parts) > PARTS_LISTED
    assert all(len(p.render().encode()) <= PAGE_LIMIT_BYTES for _, p in parts)
    assert [p.get("parts") for _, p in parts] == [len(parts)] * len(parts)
    # A run of sentences that end in numbers is one "sentence" to the splitter, so some cuts
    # fall inside words: compare the characters, not the words.
    bodies = "".join(p.body.split("\n---\n")[0] for _, p in parts)
    assert "".join(bodies.split()) == "".join(text.split())


def test_the_parts_footer_is_not_indexed(field: deepfield.Field) -> None:
    """The "Part 2 of 3 · previous: [Long page (part 1 of 3)](…)" footer names the page's own
    title: indexed, a search for the title came back with footers as snippets."""
    from deepfield.index.chunking import chunk_page

    written = field.write(long_page().render(), name="doc")
    names = [w.filename for w in written.pages]
    assert len(names) >= 2
    for name in names:
        _, page = field.load(name)
        assert re.search(r"Part \d+ of \d+", page.body)
        assert all("Part " not in c.text or " of " not in c.text for c in chunk_page(page))
    hits = field.search("Long page part", mode="bm25", k=20).results
    assert hits and not any(re.search(r"Part \d+ of \d+", h.snippet) for h in hits)


def test_only_the_parts_footer_counts_as_one() -> None:
    from deepfield.markdown import is_parts_footer
    from deepfield.split import _footer

    names, titles = _names(3), [f"Long page (part {i} of 3)" for i in (1, 2, 3)]
    assert all(is_parts_footer(_footer(i, names, titles)) for i in (1, 2, 3))
    # A reading list of links is content: it is what its page is found by.
    assert not is_parts_footer("[Paper A](a.md) · [Paper B](b.md)")
    assert not is_parts_footer("Part 2 of the plan: pour the slab.")
