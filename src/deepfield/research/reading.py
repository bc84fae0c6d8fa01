"""What a reader is shown: which page lines are evidence, and the order evidence is shown in.

A page's scaffolding is not evidence: headings (in fenced code a "#" line is a comment, and
evidence), frontmatter delimiters and thematic breaks (``---``, ``***``), table rules
(``|---|---|``), HTML comments, the "Part 2 of 3 · previous: […](…) · next: […](…)" footer
split.py writes under every part of a long page, and navigation
made of links alone ("← [Back to the index](index.md)", "- [Sensor calibration](sensor.md)").
Such a line matches a query through the titles it links to, and then takes budget from a line
that says something; :func:`is_evidence` (``markdown.says_something``, which search's snippets
use too) keeps it out where candidates are made (the linked page is searched in its own right).

What is quoted is a *span* (:func:`evidence_spans`): a line, or — in prose hard-wrapped over
several lines — a whole sentence cited at the lines it spans, since a line break falls
wherever the editor wrapped; a table row carries its table's header row, which packing shows
above it; a span in a Sources / References section is marked so, and the researcher weighs it
down (research/pagelines.py: SOURCES_WEIGHT).

Packing picks evidence best first; :func:`reading_order` shows it so:

* pages in the order of their best line, so the best evidence opens the context: a reader, or
  a model reading a long prompt, attends most to the beginning, and a context cut short from
  the end (as the model researcher's prompt is) loses the least;
* a page's lines stay together under one header: its title and date are printed once (and the
  relative times in its lines need that date), which is what the token budget counted;
* within a page, a *passage* — lines at most PASSAGE_GAP apart: a question and the answer in
  the next turn, the sentences of a wrapped paragraph — is shown in page order, since
  split apart it reads as nonsense; a page's passages are shown best first, so a weak line at
  the top of a page does not come before the page's best passage.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from ..markdown import (
    SOURCES_TITLE,
    fence_step,
    is_record_line,
    parse_sections,
    split_sentences,
)
from ..markdown import says_something as is_evidence
from ..tokens import count_tokens

PASSAGE_GAP = 2
"""Lines this close (by line number) on one page are shown together, in page order."""

_MARKER = re.compile(r"^(?:[-*+]\s|\d{1,3}[.)]\s|\||>|\[)")
"""A list item, table row, quote or ``[tag]`` entry: always a record of its own."""
_UNSPACED = re.compile(r"[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")
"""Chinese and Japanese characters and their punctuation: no space where a line wraps."""
_SENTENCE_END = re.compile(r"[.!?。！？…]['\"’”)\]]*$")


MAX_SENTENCE_TOKENS = 120
"""A wrapped paragraph is quoted by its sentences only if none is longer than this: lines
without sentence ends (a list without markers, a poem) stay quoted line by line."""


@dataclass(frozen=True)
class Span:
    """A piece of a page that is quoted as one evidence item: a line, or a sentence of a
    paragraph hard-wrapped over lines ``line``..``last`` (its lines joined by spaces)."""

    line: int
    last: int
    text: str
    table_header: tuple[int, str] | None = None
    """(line, text) of the header row of the table this row is in, if it is not that row."""
    in_sources: bool = False
    """In a Sources / References section (markdown.SOURCES_TITLE): it names where a fact
    comes from ("- Heat test report, February 2026."), not what it says."""


def evidence_spans(lines: Sequence[str], start: int) -> list[Span]:
    """The evidence of a page body from line ``start`` on (1-based), in page order.

    Each evidence line is a span, except in a paragraph hard-wrapped over several lines (lines
    that continue the one above: no blank line, list marker, table row, quote or ``Speaker:``
    label between them): there a line ends wherever the editor wrapped it ("…falls below the
    lower threshold and"), so the paragraph is quoted by its sentences, each cited at the lines
    it spans. Lines of fenced code are spans of their own. A table row carries its table's
    header row: "| Valve failures | 1 | 0 |" means nothing without the columns' names. Spans
    under a heading such as "## Sources" (and its subsections) are marked ``in_sources``."""
    spans: list[Span] = []
    run: list[tuple[int, str]] = []
    fenced = False
    table: tuple[int, str] | None = None  # the header row of the table being read
    sources_level = 0  # the heading level of the sources section being read, 0 outside one
    in_comment = False

    def add(span: Span) -> None:
        spans.append(replace(span, in_sources=True) if sources_level else span)

    def flush() -> None:
        if len(run) > 1:
            for span in _sentence_spans(run):
                add(span)
        elif run:
            add(Span(run[0][0], run[0][0], run[0][1]))
        run.clear()

    # Sections by heading, ATX ("## Sources") or setext ("Sources" over "-------"): a
    # heading is no evidence, and tells whether its lines are in a sources section.
    for section in parse_sections("\n".join(lines[start - 1:]), start):
        flush()
        if section.level and (not sources_level or section.level <= sources_level):
            sources_level = section.level if SOURCES_TITLE.match(section.title) else 0
        fence: str | None = None  # the open fence's marker (markdown.fence_step)
        fenced, table = False, None
        for number, raw in section.text_lines:
            text = raw.strip()
            if in_comment:  # an HTML comment over several lines: a template's instructions
                in_comment = "-->" not in text
                continue
            if not fenced and text.startswith("<!--") and "-->" not in text:
                flush()
                in_comment = True
                continue
            step, fence = fence_step(raw, fence)
            if step:
                flush()
                continue
            fenced = fence is not None
            if fenced or not text.startswith("|"):
                table = None
            elif table is None:
                table = (number, text)
            elif is_evidence(text):
                flush()
                add(Span(number, number, text, table))
                continue
            if not is_evidence(text, code=fenced):
                flush()
            elif fenced:  # code is quoted line by line
                flush()
                add(Span(number, number, text))
            else:
                if run and not _continues(run, text):
                    flush()
                run.append((number, text))
    flush()
    return spans


def _continues(run: Sequence[tuple[int, str]], text: str) -> bool:
    """Whether ``text`` continues the lines of ``run`` (see :func:`evidence_spans`). A line
    that looks like a ``label:`` line ("forward: measure the soil") continues a prose
    paragraph whose last line stops mid-sentence; in a transcript it is the next turn."""
    if _MARKER.match(text) or run[-1][1].startswith("|"):
        return False
    if not is_record_line(text):
        return True
    return not is_record_line(run[0][1]) and not _SENTENCE_END.search(run[-1][1])


def _sentence_spans(run: Sequence[tuple[int, str]]) -> list[Span]:
    """The sentences of a wrapped paragraph (``run``: its lines), each with the lines it
    spans; the lines themselves if a sentence cannot be placed or is too long to quote."""
    joined = ""
    starts: list[int] = []
    for _, text in run:
        piece = " ".join(text.split())
        if joined and not (_UNSPACED.match(joined[-1]) and _UNSPACED.match(piece[0])):
            joined += " "  # Chinese and Japanese lines join with no space between
        starts.append(len(joined))
        joined += piece
    spans: list[Span] = []
    position = 0
    for sentence in split_sentences(joined):
        found = joined.find(sentence, position)
        if found < 0 or count_tokens(sentence) > MAX_SENTENCE_TOKENS:
            return [Span(number, number, text) for number, text in run]
        end = found + len(sentence) - 1
        first = bisect_right(starts, found) - 1
        last = bisect_right(starts, end) - 1
        spans.append(Span(run[first][0], run[last][0], sentence))
        position = end + 1
    return spans


class Located(Protocol):
    """An evidence line: where it is (``research.evidence.Evidence`` is one)."""

    field: str
    filename: str
    line: int


T = TypeVar("T", bound=Located)


def reading_order(items: Sequence[T],
                  section: Callable[[T], str] | None = None) -> list[list[T]]:
    """``items`` (best first) as the page groups they are shown in: pages by their best line,
    passages within a page best first, lines within a passage in page order. With
    ``section`` (an item's section heading, "" for none), a passage never crosses a section,
    and a page's sections are shown whole, one after another — lines outside any section
    first, then each section from its best passage on — so each heading is shown once."""
    pages: dict[tuple[str, str], list[T]] = {}
    for item in items:
        pages.setdefault((item.field, item.filename), []).append(item)
    groups: list[list[T]] = []
    for lines in pages.values():  # first appearance: each page's best line, best first
        rank = {id(item): position for position, item in enumerate(lines)}
        passages: list[list[T]] = []
        # Spans that start on one line keep their page order (``part``), not their rank.
        for item in sorted(lines, key=lambda e: (e.line, getattr(e, "part", 0), rank[id(e)])):
            if passages and item.line - passages[-1][-1].line <= PASSAGE_GAP and (
                    section is None or section(item) == section(passages[-1][-1])):
                passages[-1].append(item)
            else:
                passages.append([item])
        passages.sort(key=lambda passage: min(rank[id(item)] for item in passage))
        if section is not None:
            first: dict[str, int] = {}
            for passage in passages:
                first.setdefault(section(passage[0]), len(first))
            passages.sort(key=lambda p: (section(p[0]) != "", first[section(p[0])]))
        groups.append([item for passage in passages for item in passage])
    return groups
