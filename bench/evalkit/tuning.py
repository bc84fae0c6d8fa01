"""Tuned constants and their leave-one-conversation-out check.

Each :class:`Tunable` names a module constant chosen on the dev split, the values tried and
which figure it was tuned for. :func:`sweep` scores every question under every value (the
constant is set, the system rerun, the constant restored); ``metrics.leave_one_out`` then
picks, for each conversation, the value that is best on the other four and scores it on the
held-out one. The docs report that held-out figure next to the in-sample one.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .data import CATEGORIES, Question
from .metrics import HeldOut, leave_one_out
from .run import budget_scores, run_search
from .systems import Fields, Researcher, SearchSystem


@dataclass(frozen=True)
class Tunable:
    target: str
    """``module.NAME``, e.g. ``deepfield.search.KEYWORD_WEIGHT``."""
    values: tuple[object, ...]
    system: str
    """"search" (hybrid turn R@10) or "research" (recall at 1,000 tokens)."""

    def get(self) -> object:
        module, _, name = self.target.rpartition(".")
        return getattr(importlib.import_module(module), name)

    def set(self, value: object) -> None:
        module, _, name = self.target.rpartition(".")
        setattr(importlib.import_module(module), name, value)


TUNABLES = (
    Tunable("deepfield.search.KEYWORD_WEIGHT", (0.2, 0.3, 0.35, 0.4, 0.5, 0.65, 0.8), "search"),
    Tunable("deepfield.line_rank.LINE_WORDS_WEIGHT", (0.1, 0.2, 0.3, 0.4, 0.5), "search"),
    Tunable("deepfield.line_rank.LINE_SPEAKER_WEIGHT", (0.0, 0.2, 0.3, 0.4, 0.6), "search"),
    Tunable("deepfield.line_rank.LINE_LATENT_WEIGHT", (0.0, 0.1, 0.2, 0.4), "search"),
    Tunable("deepfield.research.evidence.LENGTH_PRIOR", (0.0, 0.2, 0.4, 0.6), "research"),
    Tunable("deepfield.research.evidence.SPEAKER_WEIGHT", (1.0, 1.3, 1.6, 2.0), "research"),
    Tunable("deepfield.research.evidence.IDF_SCALE", (1.5, 2.0, 3.0), "research"),
    Tunable("deepfield.research.evidence.REFERENCE_WEIGHT", (0.5, 1.0, 2.0, 3.0), "research"),
    Tunable("deepfield.research.evidence.REFERENCE_OFFSET", (3.0, 5.0, 10.0, 30.0), "research"),
    Tunable("deepfield.research.evidence.KEYWORD_REFERENCE_WEIGHT", (0.0, 0.5, 1.0, 2.0),
            "research"),
    Tunable("deepfield.research.loop.SEARCH_KEYWORD_WEIGHT", (0.2, 0.35, 0.5, 0.65),
            "research"),
)
RESEARCH_BUDGET = 1000

ABLATIONS: tuple[tuple[str, dict[str, object]], ...] = (
    ("shipped", {}),
    ("no latent-term tools", {"deepfield.research.offline.LATENT_TOOLS": ()}),
    ("latent-term tools on chunks only",
     {"deepfield.research.offline.LATENT_TOOLS": ("latent",)}),
    ("latent-term tools for date questions too", {"deepfield.research.offline.LATENT_SKIPS": ()}),
    ("no length prior", {"deepfield.research.evidence.LENGTH_PRIOR": 0.0}),
    ("no speaker weight", {"deepfield.research.evidence.SPEAKER_WEIGHT": 1.0}),
    ("no line-ranked orders (votes alone)",
     {"deepfield.research.evidence.REFERENCE_WEIGHT": 0.0,
      "deepfield.research.evidence.KEYWORD_REFERENCE_WEIGHT": 0.0}),
    ("no keyword line order (hybrid lines only)",
     {"deepfield.research.evidence.KEYWORD_REFERENCE_WEIGHT": 0.0}),
    # A plain search's keyword weight, what it would do to the researcher's searches.
    ("the search's keyword weight (0.65) in research too",
     {"deepfield.research.loop.SEARCH_KEYWORD_WEIGHT": 0.65}),
    # Costs a few tokens a line; what it buys is the answer's words (temporal answers are
    # days, the lines say "yesterday"), not recall.
    ("relative dates left unresolved", {"deepfield.research.packing.RESOLVE_DATES": False}),
)
"""Researcher variants (constants overridden) whose recall the docs compare with the shipped
one: what each part of the researcher buys."""


class MemoisedSearches:
    """Searches made inside research, answered from memory once made: the research constants
    swept here (evidence scoring, which tools run) never change what a given search returns,
    so every pass after the first costs only the researcher's own work. The hybrid fusion's
    keyword weight does change them: it is part of the key."""

    def __init__(self) -> None:
        self.cache: dict[tuple[object, ...], Any] = {}
        self._saved: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> MemoisedSearches:
        from deepfield import search
        from deepfield.research import latent, loop

        def remember(module: Any, name: str, skip: int = 0) -> None:
            original = getattr(module, name)

            def memoised(fields: Any, *args: Any, **kwargs: Any) -> Any:
                # ``skip``: leading arguments that are caches, not part of the search.
                key = (name, search.KEYWORD_WEIGHT, loop.SEARCH_KEYWORD_WEIGHT,
                       tuple(f.name for f in fields),
                       *args[skip:], *sorted(kwargs.items()))
                if key not in self.cache:
                    self.cache[key] = original(fields, *args, **kwargs)
                return self.cache[key]

            self._saved.append((module, name, original))
            setattr(module, name, memoised)

        remember(loop, "search_fields")
        remember(latent, "search", skip=1)  # (fields, encoded terms, query, k, lines=)
        return self

    def __exit__(self, *exc: object) -> None:
        for module, name, original in reversed(self._saved):
            setattr(module, name, original)
        self._saved.clear()


def research_recall(fields: Fields, questions: Sequence[Question]) -> list[float]:
    """Evidence recall at RESEARCH_BUDGET of every question, as the researcher is now."""
    return [recall for recall, _words in research_scores(fields, questions)]


def research_scores(fields: Fields,
                    questions: Sequence[Question]) -> list[tuple[float, float]]:
    """(evidence recall, answer-word coverage) at RESEARCH_BUDGET of every question."""
    researcher = Researcher(fields, RESEARCH_BUDGET)
    found = []
    for done, question in enumerate(questions, 1):
        packer, _seconds = researcher.run(question)
        scores = budget_scores(question, packer.pack(RESEARCH_BUDGET), RESEARCH_BUDGET)
        found.append((float(scores["recall"] or 0.0), float(scores["answer words"] or 0.0)))
        if done % 200 == 0:
            print(f"  {done}/{len(questions)}", file=sys.stderr, flush=True)
    return found


def ablate(overrides: dict[str, object], fields: Fields,
           questions: Sequence[Question]) -> list[tuple[float, float]]:
    """:func:`research_scores` with module constants overridden, then restored."""
    tunables = [Tunable(target, (), "research") for target in overrides]
    shipped = [t.get() for t in tunables]
    try:
        for tunable in tunables:
            tunable.set(overrides[tunable.target])
        return research_scores(fields, questions)
    finally:
        for tunable, value in zip(tunables, shipped, strict=True):
            tunable.set(value)


def sweep(tunable: Tunable, questions: Sequence[Question], fields: Fields,
          search: SearchSystem | None) -> dict[object, list[float]]:
    """{value: the tuned figure of every question}."""
    shipped = tunable.get()
    scores: dict[object, list[float]] = {}
    try:
        for value in tunable.values:
            tunable.set(value)
            print(f"{tunable.target} = {value}", file=sys.stderr, flush=True)
            if tunable.system == "search":
                assert search is not None
                run = run_search([search], questions, sessions=0)[0]
                scores[value] = [float(s["turn R@10"] or 0.0) for _, s in run.records]
            else:
                scores[value] = research_recall(fields, questions)
    finally:
        tunable.set(shipped)
    return scores


def held_out(tunable: Tunable, scores: dict[object, list[float]],
             questions: Sequence[Question]) -> list[tuple[str, HeldOut]]:
    """(figure, HeldOut) overall and for multi-hop questions."""
    out = []
    for figure, keep in (("overall", None), (CATEGORIES[1], 1)):
        def score(value: object, i: int, keep: int | None = keep) -> float | None:
            if keep is not None and questions[i].category != keep:
                return None
            return scores[value][i]
        out.append((figure, leave_one_out(tunable.values, tunable.get(), questions, score)))
    return out


def figure_name(tunable: Tunable, group: str) -> str:
    what = ("hybrid turn R@10" if tunable.system == "search"
            else f"research recall @{RESEARCH_BUDGET:,} tok")
    return f"{what}, {group}"

