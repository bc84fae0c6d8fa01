"""What a reader is shown: which page lines are evidence, and the order evidence is shown in.

A page's scaffolding is not evidence: headings, frontmatter delimiters and thematic breaks
(``---``, ``***``), table rules (``|---|---|``), HTML comments, the "Part 2 of 3 · previous:
[…](…) · next: […](…)" footer split.py writes under every part of a long page, and navigation
made of links alone ("← [Back to the index](index.md)", "- [Sensor calibration](sensor.md)").
Such a line matches a query through the titles it links to, and then takes budget from a line
that says something; :func:`is_evidence` keeps it out where candidates are made (the linked
page is searched in its own right).

Packing picks evidence best first; :func:`reading_order` shows it so:

* pages in the order of their best line, so the best evidence opens the context: a reader, or
  a model reading a long prompt, attends most to the beginning, and a context cut short from
  the end (as the model researcher's prompt is) loses the least;
* a page's lines stay together under one header: its title and date are printed once (and the
  relative times in its lines need that date), which is what the token budget counted;
* within a page, a *passage* — lines at most PASSAGE_GAP apart: a question and the answer in
  the next turn, a paragraph hard-wrapped over several lines — is shown in page order, since
  split apart it reads as nonsense; a page's passages are shown best first, so a weak line at
  the top of a page does not come before the page's best passage.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol, TypeVar

PASSAGE_GAP = 2
"""Lines this close (by line number) on one page are shown together, in page order."""

_LINK = re.compile(r"!?\[\[[^\]]*\]\]|!?\[[^\]]*\]\([^)]*\)")
_NAVIGATION = frozenset({
    "part", "parts", "of", "page", "pages", "next", "previous", "prev", "back", "to", "the",
    "up", "top", "home", "index", "contents", "table", "see", "also", "related", "more",
    "continued", "go", "return", "and", "or", "read", "here", "this", "links", "link",
})
_FOOTER = re.compile(r"^part \d+ of \d+$", re.IGNORECASE)
_WORD = re.compile(r"[^\W_]+")
_COMMENT = re.compile(r"^<!--.*-->$")


def is_evidence(text: str) -> bool:
    """Whether a page line can be quoted as evidence (see the module docstring)."""
    line = text.strip()
    if not _WORD.search(line) or line.startswith("#") or _COMMENT.match(line):
        return False  # blank, a rule or delimiter, a heading, a comment
    if _FOOTER.match(line):
        return False
    rest = _LINK.sub(" ", line)
    if rest == line:
        return True
    # Only links, numbers and navigation words ("Part 1 of 2 · next: […](…)"): navigation.
    return any(not w.isdigit() and w.lower() not in _NAVIGATION for w in _WORD.findall(rest))


def evidence_lines(lines: Sequence[str], start: int) -> list[tuple[int, str]]:
    """(line number, text) of the lines from line ``start`` on (1-based) that are evidence."""
    return [(number, line.strip()) for number, line in enumerate(lines[start - 1:], start)
            if is_evidence(line)]


class Located(Protocol):
    """An evidence line: where it is (``research.evidence.Evidence`` is one)."""

    field: str
    filename: str
    line: int


T = TypeVar("T", bound=Located)


def reading_order(items: Sequence[T]) -> list[list[T]]:
    """``items`` (best first) as the page groups they are shown in: pages by their best line,
    passages within a page best first, lines within a passage in page order."""
    pages: dict[tuple[str, str], list[T]] = {}
    for item in items:
        pages.setdefault((item.field, item.filename), []).append(item)
    groups: list[list[T]] = []
    for lines in pages.values():  # first appearance: each page's best line, best first
        rank = {id(item): position for position, item in enumerate(lines)}
        passages: list[list[T]] = []
        for item in sorted(lines, key=lambda e: (e.line, rank[id(e)])):
            if passages and item.line - passages[-1][-1].line <= PASSAGE_GAP:
                passages[-1].append(item)
            else:
                passages.append([item])
        passages.sort(key=lambda passage: min(rank[id(item)] for item in passage))
        groups.append([item for passage in passages for item in passage])
    return groups
