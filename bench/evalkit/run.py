"""Running systems over the questions: per-question scores and timings, nothing aggregated."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from deepfield.tokens import count_tokens

from .data import Question
from .metrics import Scores, answer_coverage, evidence_recall, turn_scores
from .systems import BudgetSystem, SearchSystem

TURNS_K = 10
SESSIONS_K = 5
FOUND_BUDGET = 1_000_000
"""A budget nothing a system finds fills: its recall is that of everything the system found,
ranked anywhere (what a better order could pack), beside what a real budget packs."""


@dataclass
class SearchRun:
    name: str
    unit: str
    credit: str
    records: list[tuple[Question, Scores]] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)


@dataclass
class BudgetRun:
    name: str
    description: str
    budgets: tuple[int, ...]
    records: dict[int, list[tuple[Question, Scores]]] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)
    over_budget: int = 0
    """Packed texts the shared token counter finds over their budget (must stay 0)."""
    found: list[tuple[Question, Scores]] = field(default_factory=list)
    """Scores of everything the system found, packed with no budget (FOUND_BUDGET)."""


def _progress(done: int, total: int, what: str) -> None:
    if done % 100 == 0 or done == total:
        print(f"{what}: {done}/{total} questions", file=sys.stderr, flush=True)


def run_search(systems: Sequence[SearchSystem], questions: Sequence[Question],
               sessions: int = SESSIONS_K) -> list[SearchRun]:
    """``sessions`` 0: turn metrics only (session metrics then read 0)."""
    runs = [SearchRun(s.name, s.unit, s.credit) for s in systems]
    for done, question in enumerate(questions, 1):
        for system, run in zip(systems, runs, strict=True):
            ranking = system.rank(question, TURNS_K, sessions)
            run.records.append((question, turn_scores(question, ranking)))
            run.seconds.append(ranking.seconds)
        _progress(done, len(questions), "search")
    return runs


def budget_scores(question: Question, text: str, budget: int) -> Scores:
    return {"recall": evidence_recall(text, question.evidence),
            "answer words": answer_coverage(text, question.answer),
            "tokens": float(count_tokens(text)), "budget": float(budget)}


def run_budgets(systems: Sequence[BudgetSystem], questions: Sequence[Question],
                budgets: tuple[int, ...]) -> list[BudgetRun]:
    runs = [BudgetRun(s.name, s.description, budgets, {b: [] for b in budgets})
            for s in systems]
    for done, question in enumerate(questions, 1):
        for system, run in zip(systems, runs, strict=True):
            packer, seconds = system.run(question)
            run.seconds.append(seconds)
            for budget in budgets:
                scores = budget_scores(question, packer.pack(budget), budget)
                run.over_budget += int((scores["tokens"] or 0) > budget)
                run.records[budget].append((question, scores))
            everything = packer.pack(FOUND_BUDGET)
            run.found.append((question, budget_scores(question, everything, FOUND_BUDGET)))
        _progress(done, len(questions), "budgets")
    return runs
