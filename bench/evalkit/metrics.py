"""Per-question scores, their means per category, and leave-one-conversation-out selection.

A record is one question's scores for one system: ``{"metric name": value}``, a value of None
meaning "not defined for this question" (e.g. answer-word coverage of an answer with no content
word), which leaves it out of that metric's mean and its n. Means are taken overall and per
category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from deepfield.index.keyword import query_terms

from .data import CATEGORIES, Question
from .systems import Ranking

Scores = dict[str, float | None]
GROUPS = ("overall", *CATEGORIES.values())


def turn_scores(question: Question, ranking: Ranking) -> Scores:
    gold = question.evidence
    scores: Scores = {}
    for k in (5, 10):
        found = {t for t in ranking.pointed[:k] if t is not None}
        hit = sum(1 for t in gold if t in found)
        scores[f"turn R@{k}"] = hit / len(gold)
        scores[f"turn all@{k}"] = float(hit == len(gold))
    near = set(ranking.neighbours[:10])
    scores["turn R@10 (neighbours credited)"] = sum(1 for t in gold if t in near) / len(gold)
    sessions = question.sessions
    for k in (3, 5):
        hit = sum(1 for s in sessions if s in ranking.sessions[:k])
        scores[f"session R@{k}"] = hit / len(sessions)
        scores[f"session all@{k}"] = float(hit == len(sessions))
    return scores


def evidence_recall(text: str, gold: Sequence[str]) -> float:
    """Share of the gold turns whose id ``(D#:#)`` is in ``text``."""
    return sum(1 for t in gold if f"({t})" in text) / len(gold)


def answer_coverage(text: str, answer: str) -> float | None:
    """Share of the gold answer's content words in ``text`` (None: it has none): a quote can
    keep a turn's id and drop the sentence with the answer."""
    words = set(query_terms(answer))
    return len(words & set(query_terms(text))) / len(words) if words else None


@dataclass(frozen=True)
class Mean:
    n: int
    value: float | None


def group_of(question: Question) -> str:
    return CATEGORIES[question.category]


def means(items: Iterable[tuple[Question, Scores]], metric: str) -> dict[str, Mean]:
    """{"overall" and each category: Mean of ``metric``}."""
    values: dict[str, list[float]] = {g: [] for g in GROUPS}
    for question, scores in items:
        value = scores.get(metric)
        if value is None:
            continue
        values["overall"].append(value)
        values[group_of(question)].append(value)
    return {g: Mean(len(v), statistics.fmean(v) if v else None) for g, v in values.items()}


@dataclass(frozen=True)
class HeldOut:
    shipped: object
    in_sample: float
    """Mean of the shipped value over every question."""
    best: object
    best_in_sample: float
    held_out: float
    """Mean over every question of the value picked on the other conversations."""
    picks: dict[str, object]


def leave_one_out(values: Sequence[object], shipped: object, questions: Sequence[Question],
                  score: Callable[[object, int], float | None]) -> HeldOut:
    """For each conversation, the value (of ``values``) with the best mean ``score`` on the
    other conversations, scored on this one. ``score(value, i)``: question i's score (None:
    the question does not count for this figure)."""
    def mean(value: object, keep: Callable[[Question], bool]) -> float:
        found = [s for i, q in enumerate(questions) if keep(q)
                 if (s := score(value, i)) is not None]
        return statistics.fmean(found) if found else 0.0

    conversations = sorted({q.conversation for q in questions})
    picks: dict[str, object] = {}
    held: list[float] = []
    for conv in conversations:
        def others(q: Question, conv: str = conv) -> bool:
            return q.conversation != conv

        best = max(values, key=lambda v: mean(v, others))
        picks[conv] = best
        held += [s for i, q in enumerate(questions) if q.conversation == conv
                 if (s := score(best, i)) is not None]
    overall = max(values, key=lambda v: mean(v, lambda q: True))
    return HeldOut(shipped, mean(shipped, lambda q: True), overall,
                   mean(overall, lambda q: True), statistics.fmean(held) if held else 0.0,
                   picks)
