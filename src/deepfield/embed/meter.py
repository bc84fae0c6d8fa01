"""Counting what the encoder does: forward passes, tokens and seconds, by purpose.

Encoding is where indexing spends its time (docs/DESIGN.md, "What indexing encodes"), so every
call that runs the model is counted under what it was for:

* ``chunk_dense``: a chunk's vector (search), for chunks that are not windows of record lines;
* ``line_dense``: a record line's vector; a window of record lines (a transcript turn and its
  neighbours) gets the mean of its lines' vectors, so each line is encoded once, not three
  times (index/vectors.py);
* ``chunk_sparse``: a chunk's latent terms (the researcher's ``latent`` tool), for chunks that
  are not windows of record lines (a window's are the largest weights of its lines');
* ``line_sparse``: a record line's own latent terms;
* ``page_vector``: a whole page, for the spec's ``pages`` table (only when pages are embedded
  whole; by default a page's vector is the mean of its chunks' and costs no pass);
* ``query`` and ``query_sparse``: a search's or a research's question.

A *pass* is one sequence through the encoder: a text, or each window of a text longer than
the model reads at once. Tokens are the model's own count where the backend knows it
(:meth:`deepfield.embed.base.Embedder.count_tokens`). An :class:`EncodeMeter` lives on each
embedder; a run reports the difference of two :meth:`~EncodeMeter.snapshot` calls.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

PURPOSES = ("chunk_dense", "line_dense", "chunk_sparse", "line_sparse", "page_vector", "query",
            "query_sparse")


@dataclass
class Tally:
    """What the encoder did for one purpose."""

    texts: int = 0
    passes: int = 0
    tokens: int = 0
    seconds: float = 0.0
    skipped: int = 0
    """Texts the model could not encode (empty, or refused): left without a vector."""

    def add(self, other: Tally) -> None:
        self.texts += other.texts
        self.passes += other.passes
        self.tokens += other.tokens
        self.seconds += other.seconds
        self.skipped += other.skipped

    def minus(self, other: Tally) -> Tally:
        return Tally(self.texts - other.texts, self.passes - other.passes,
                     self.tokens - other.tokens, self.seconds - other.seconds,
                     self.skipped - other.skipped)

    def to_json(self) -> dict[str, Any]:
        return {"texts": self.texts, "passes": self.passes, "tokens": self.tokens,
                "seconds": round(self.seconds, 3), "skipped": self.skipped}


class EncodeMeter:
    """Thread-safe running totals by purpose."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tallies: dict[str, Tally] = {}

    def record(self, purpose: str, *, texts: int, passes: int, tokens: int, seconds: float,
               skipped: int = 0) -> None:
        with self._lock:
            self._tallies.setdefault(purpose, Tally()).add(
                Tally(texts, passes, tokens, seconds, skipped))

    def snapshot(self) -> dict[str, Tally]:
        with self._lock:
            return {name: Tally(**vars(t)) for name, t in self._tallies.items()}

    def since(self, before: dict[str, Tally]) -> dict[str, Tally]:
        """What was recorded after ``before`` (a :meth:`snapshot`), purposes with work only."""
        now = self.snapshot()
        spent = {name: tally.minus(before.get(name, Tally())) for name, tally in now.items()}
        return {name: tally for name, tally in spent.items() if tally.texts or tally.skipped}


def totals(tallies: dict[str, Tally]) -> Tally:
    total = Tally()
    for tally in tallies.values():
        total.add(tally)
    return total


def encoding_json(tallies: dict[str, Tally]) -> dict[str, Any]:
    """``{"by_purpose": {...}, "texts", "passes", "tokens", "seconds"}`` for --json output."""
    total = totals(tallies)
    ordered = sorted(tallies, key=lambda n: PURPOSES.index(n) if n in PURPOSES else len(PURPOSES))
    return {"by_purpose": {name: tallies[name].to_json() for name in ordered}} | total.to_json()
