"""Markdown structure: sections, blocks, sentences."""

from __future__ import annotations

import pytest

from deepfield.markdown import (
    below_title,
    first_sentences,
    parse_sections,
    split_blocks,
    split_sentences,
)

DOC = """Intro line.

# Title

Para one. Still one.

## Sub A
- item one
- item two

```python
# not a heading
x = 1
```

Setext heading
--------------

Alice (D1:1): hello there
Bob (D1:2): hi
"""


def test_sections_and_paths() -> None:
    sections = parse_sections(DOC)
    assert [(s.level, s.title) for s in sections] == [
        (0, ""), (1, "Title"), (2, "Sub A"), (2, "Setext heading"),
    ]
    assert sections[2].path == ("Title", "Sub A")
    assert sections[3].path == ("Title", "Setext heading")
    assert sections[1].line == 3


def test_blocks_records_code_prose() -> None:
    sections = parse_sections(DOC)
    blocks = split_blocks(sections[2].text_lines)
    assert [b.kind for b in blocks] == ["record", "record", "code"]
    assert blocks[0].text == "- item one" and blocks[0].line_start == 8
    assert "# not a heading" in blocks[2].text
    turns = split_blocks(sections[3].text_lines)
    assert [b.text for b in turns] == ["Alice (D1:1): hello there", "Bob (D1:2): hi"]
    prose = split_blocks(sections[1].text_lines)
    assert [b.kind for b in prose] == ["prose"]


def test_sentences() -> None:
    assert split_sentences("Dr. Smith met Mr. Jones. They talked, e.g. about tea! Done?") == [
        "Dr. Smith met Mr. Jones.", "They talked, e.g. about tea!", "Done?",
    ]
    assert split_sentences("第一句。第二句！") == ["第一句。", "第二句！"]
    assert split_sentences("Version 2.5 shipped. Next") == ["Version 2.5 shipped.", "Next"]
    assert split_sentences("   ") == []
    # A number ends a sentence; a number alone opens a numbered item.
    assert split_sentences("We shipped in 2024. Then we rested.") == [
        "We shipped in 2024.", "Then we rested."]
    assert split_sentences("1. Mix the flour. 2. Bake it.") == ["1. Mix the flour.", "2. Bake it."]
    assert split_sentences("See Fig. 3. It shows x.") == ["See Fig. 3.", "It shows x."]


def test_first_sentences_skip_code() -> None:
    sections = parse_sections("# T\n\n```\ncode. here.\n```\n\nA one. A two. A three.\n")
    assert first_sentences(sections[0], 2) == ["A one.", "A two."]


@pytest.mark.parametrize(("heading", "title", "shown"), [
    ("People > Jonas Berg", "People", "Jonas Berg"),
    ("Design history > Enclosure", "Design history (part 1 of 2)", "Enclosure"),
    ("Session 3 — 8 May, 2023", "Session 3 — 8 May, 2023", ""),
    ("Decisions", "Team meeting, 2 October 2025", "Decisions"),
    ("", "Anything", ""),
])
def test_the_heading_path_below_the_title(heading: str, title: str, shown: str) -> None:
    assert below_title(heading, title) == shown
