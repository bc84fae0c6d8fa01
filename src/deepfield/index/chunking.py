"""Cut a page into the chunks the index searches: small, self-contained, with a heading path.

A chunk never crosses a heading. Record lines (list items, table rows, ``Speaker: text``
transcript turns) are one chunk each, so a search can point at the exact line; prose paragraphs
are one chunk each, short ones merged with their neighbours, long ones cut at sentences. When a
page has a ``summary`` it becomes chunk 0 so memos are searchable on their own.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..markdown import Block, parse_sections, split_blocks, split_sentences
from ..page import Page

MAX_CHUNK_CHARS = 1000
"""Longer blocks are cut at sentence (or line) boundaries; keeps BM25 and vectors focused."""
MERGE_BELOW_CHARS = 160
"""Prose paragraphs shorter than this are merged with the next one of the same section."""


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
        chunks.append(Chunk(0, (), summary, 1, max(1, page.body_line - 1), "summary"))
    for section in parse_sections(page.body, page.body_line):
        path = section.path
        before = len(chunks)
        pending: Block | None = None
        for block in split_blocks(section.text_lines):
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
        if pending is not None:
            chunks.append(_make(len(chunks), path, pending))
        if len(chunks) == before and section.title:
            # A heading with no text of its own is still something a search should find.
            heading = Block(section.title, section.line, section.line, "prose")
            chunks.append(_make(len(chunks), path, heading))
    return chunks


def _make(ord_: int, path: tuple[str, ...], block: Block) -> Chunk:
    return Chunk(ord_, path, block.text, block.line_start, block.line_end, block.kind)
