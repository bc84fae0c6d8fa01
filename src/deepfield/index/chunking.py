"""Cut a page into the chunks the index searches: small, self-contained, with a heading path.

A chunk never crosses a heading. Prose paragraphs are one chunk each, short ones merged with
their neighbours, long ones cut at sentences. Record lines (list items, table rows,
``Speaker: text`` transcript turns) get one chunk per line made of that line and its neighbours
in the same run (a sliding window of three lines): a turn is rarely understandable alone, and on
LoCoMo these windows found more gold turns than single lines (measured before bench/evalkit's
protocol, which credits only the line a hit points to; no script reruns that comparison).
When a page has a ``summary`` it becomes chunk 0 so memos are searchable on their own.
A split page's "Part 2 of 3 · next: […](…)" footer is not chunked.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..markdown import (
    Block,
    is_parts_footer,
    is_session_context,
    parse_sections,
    split_blocks,
    split_sentences,
)
from ..page import Page

MAX_CHUNK_CHARS = 1000
"""Longer blocks are cut at sentence (or line) boundaries; keeps BM25 and vectors focused."""
MERGE_BELOW_CHARS = 160
"""Prose paragraphs shorter than this are merged with the next one of the same section."""
RECORD_WINDOW = 1
"""Lines of context on each side of a record line (1: windows of three lines)."""


@dataclass(frozen=True)
class Chunk:
    ord: int
    heading_path: tuple[str, ...]
    text: str
    line_start: int
    line_end: int
    kind: str  # "summary" | "prose" | "record" | "code"


def _like(block: Block, text: str) -> Block:
    return Block(text, block.line_start, block.line_end, block.kind)


def _cut(block: Block, limit: int) -> list[Block]:
    """Split an oversized block into pieces of at most ``limit`` characters."""
    if len(block.text) <= limit:
        return [block]
    if block.kind == "code" or "\n" in block.text:
        units = block.text.split("\n")
        sep = "\n"
    else:
        units = split_sentences(block.text)
        sep = " "
    pieces: list[Block] = []
    current: list[str] = []
    for unit in units:
        while len(unit) > limit:  # one enormous sentence or line: hard cut
            if current:
                pieces.append(_like(block, sep.join(current)))
                current = []
            pieces.append(_like(block, unit[:limit]))
            unit = unit[limit:]
        if current and len(sep.join([*current, unit])) > limit:
            pieces.append(_like(block, sep.join(current)))
            current = []
        current.append(unit)
    if current:
        pieces.append(_like(block, sep.join(current)))
    return [p for p in pieces if p.text.strip()]


def chunk_page(
    page: Page,
    max_chars: int = MAX_CHUNK_CHARS,
    merge_below: int = MERGE_BELOW_CHARS,
) -> list[Chunk]:
    chunks: list[Chunk] = []
    summary = page.summary
    if summary:
        first, last = page.frontmatter_lines("summary") or (1, max(1, page.body_line - 1))
        chunks.append(Chunk(0, (), summary, first, last, "summary"))
    for section in parse_sections(page.body, page.body_line):
        path = section.path
        before = len(chunks)
        pending: Block | None = None
        run: list[Block] = []  # consecutive record lines, windowed when the run ends
        for block in split_blocks(section.text_lines):
            if run and not (block.kind == "record" and block.line_start == run[-1].line_end + 1):
                chunks.extend(_windows(run, len(chunks), path, max_chars))
                run = []
            if block.kind == "prose" and is_parts_footer(block.text):
                # Its link titles repeat the page's title: a search for it came back with the
                # footers as snippets, pointing at no content. (Other link-only paragraphs
                # stay: a reading list's link texts are what it is found by.)
                continue
            if block.kind == "prose" and is_session_context(block.text):
                # What the frontmatter says (date, speakers, topic), and the title and memo
                # already carry it: as a chunk of its own it came back as a page's snippet.
                continue
            if block.kind == "record" and len(block.text) <= max_chars:
                if pending is not None:
                    chunks.append(_make(len(chunks), path, pending))
                    pending = None
                run.append(block)
                continue
            for piece in _cut(block, max_chars):
                if pending is not None:
                    if piece.kind == "prose" and len(pending.text) + len(piece.text) < max_chars:
                        pending = Block(
                            pending.text + "\n\n" + piece.text,
                            pending.line_start,
                            piece.line_end,
                            "prose",
                        )
                        if len(pending.text) >= merge_below:
                            chunks.append(_make(len(chunks), path, pending))
                            pending = None
                        continue
                    chunks.append(_make(len(chunks), path, pending))
                    pending = None
                if piece.kind == "prose" and len(piece.text) < merge_below:
                    pending = piece
                else:
                    chunks.append(_make(len(chunks), path, piece))
        chunks.extend(_windows(run, len(chunks), path, max_chars))
        if pending is not None:
            chunks.append(_make(len(chunks), path, pending))
        if len(chunks) == before and section.title:
            # A heading with no text of its own is still something a search should find.
            heading = Block(section.title, section.line, section.line, "prose")
            chunks.append(_make(len(chunks), path, heading))
    return chunks


def _windows(run: list[Block], first: int, path: tuple[str, ...], max_chars: int) -> list[Chunk]:
    """One chunk per record line: the line with RECORD_WINDOW neighbours each side, in order,
    dropping neighbours that would push the chunk over ``max_chars``; identical windows (a run
    of two lines) are kept once."""
    windows: list[Chunk] = []
    for i in range(len(run)):
        low = high = i
        for _ in range(RECORD_WINDOW):
            for step in (-1, 1):
                lo, hi = (low - 1, high) if step < 0 else (low, high + 1)
                if lo < 0 or hi >= len(run):
                    continue
                if sum(len(b.text) + 1 for b in run[lo : hi + 1]) <= max_chars + 1:
                    low, high = lo, hi
        span = run[low : high + 1]
        if windows and (windows[-1].line_start, windows[-1].line_end) == (
            span[0].line_start, span[-1].line_end
        ):
            continue
        text = "\n".join(b.text for b in span)
        windows.append(Chunk(first + len(windows), path, text, span[0].line_start,
                             span[-1].line_end, "record"))
    return windows


def _make(ord_: int, path: tuple[str, ...], block: Block) -> Chunk:
    return Chunk(ord_, path, block.text, block.line_start, block.line_end, block.kind)
