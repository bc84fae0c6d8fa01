"""What the model reads: the text of a chunk, a record line or a page as it is encoded.

BM25 indexes chunks verbatim; the encoder gets them lightly cleaned, and a text left with no
word character at all (a rule ``---``, a row of table dashes) is not encoded: it keeps its
keyword entry and gets no vector or terms (counted as skipped).
"""

from __future__ import annotations

import re

LABEL_MARKER = re.compile(r"^(\S[^:(\n]{0,60}?) \([^)\n]{1,30}\):", re.M)
"""A record label's reference marker: ``Caroline (D1:3):``."""
_WORD = re.compile(r"\w")


def chunk_embedding_text(context: str, body: str) -> str:
    """What a chunk's vector is computed from: its title/heading context, then its text.

    Reference markers in record labels (``Caroline (D1:3): …`` → ``Caroline: …``) carry no
    meaning for a sentence encoder and are dropped; BM25 still indexes them verbatim.
    """
    cleaned = LABEL_MARKER.sub(r"\1:", body)
    return f"{context}\n{cleaned}"


def line_text(line: str) -> str:
    """A transcript line as it is encoded: without its reference marker (``(D1:3)``)."""
    return LABEL_MARKER.sub(r"\1:", line.strip())


def encodable(text: str) -> bool:
    """Whether ``text`` has anything for a model to read (a word character)."""
    return _WORD.search(text) is not None


def window_lines(kind: str, line_start: int, line_end: int, body: str) -> list[str] | None:
    """The page lines a record chunk is made of, when it is a window of whole lines: its
    vector and latent terms are then composed from its lines' own (index/vectors.py,
    index/latent.py). None for any other chunk (prose, a piece of a line cut for length)."""
    if kind != "record":
        return None
    lines = body.split("\n")
    return lines if len(lines) == line_end - line_start + 1 else None
