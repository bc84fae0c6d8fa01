"""Rank fusion as pure functions over ``(id, score)`` lists, best first.

Kept free of I/O so each formula can be tested against hand-computed results and swapped in
benchmarks. The default for hybrid search was chosen by measurement on LoCoMo (docs/DESIGN.md):
plain reciprocal-rank fusion with a weak dense model made BM25 worse there, while a convex
combination of min-max normalised scores over the union of both candidate lists beat BM25 alone
in every question category, for any keyword weight from 0.2 to 0.5 (default 0.35).
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
Ranked = Sequence[tuple[K, float]]


def rrf(
    lists: Sequence[Ranked[K]], k: float = 60.0, weights: Sequence[float] | None = None
) -> list[tuple[K, float]]:
    """Reciprocal rank fusion: sum of ``weight / (k + rank)`` with ranks starting at 1."""
    weights = weights or [1.0] * len(lists)
    scores: dict[K, float] = {}
    for ranked, weight in zip(lists, weights, strict=True):
        for rank, (item, _) in enumerate(ranked, start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    return _ordered(scores)


def max_normalized(ranked: Ranked[K]) -> dict[K, float]:
    """Scores divided by the best one (best = 1.0); empty or non-positive lists give {}."""
    if not ranked:
        return {}
    top = max(score for _, score in ranked)
    if top <= 0:
        return {}
    return {item: score / top for item, score in ranked}


def min_max_normalized(ranked: Ranked[K]) -> dict[K, float]:
    """Scores mapped linearly to [0, 1] within the list (all equal: all 1.0)."""
    if not ranked:
        return {}
    values = [score for _, score in ranked]
    low, high = min(values), max(values)
    if high == low:
        return {item: 1.0 for item, _ in ranked}
    return {item: (score - low) / (high - low) for item, score in ranked}


def convex(
    keyword: Ranked[K], dense: Ranked[K], keyword_weight: float = 0.35,
    keyword_only: Collection[K] = (),
) -> list[tuple[K, float]]:
    """``w * minmax(bm25) + (1 - w) * minmax(cosine)`` over the union of both candidate lists.

    ``dense`` should hold the cosine of every candidate (the dense top list plus the keyword
    candidates), so a chunk found only by keywords is still placed by its similarity; a chunk
    missing from a list scores 0 for that signal. Items in ``keyword_only`` have no vector to
    compare (not computed yet, or text the model could not encode): they are placed by their
    keyword score alone, not scored 0 for a similarity nobody knows.
    """
    kw = min_max_normalized(keyword)
    dn = min_max_normalized(dense)
    scores = {
        item: kw.get(item, 0.0) if item in keyword_only else
        keyword_weight * kw.get(item, 0.0) + (1.0 - keyword_weight) * dn.get(item, 0.0)
        for item in dict.fromkeys([*kw, *dn])
    }
    return _ordered(scores)


def _ordered(scores: dict[K, float]) -> list[tuple[K, float]]:
    """Best first; ties keep first-seen order (dicts remember insertion), so results are stable."""
    return sorted(scores.items(), key=lambda pair: -pair[1])
