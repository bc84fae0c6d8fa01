"""What a research returns: the packed context, its evidence and sources, the trace of its
rounds, what it cost, and how far the evidence supports an answer (its confidence).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..confidence import RESEARCH, Confidence, Line, assess
from ..llm.base import Usage
from .evidence import Evidence
from .packing import Packed, pack_research


@dataclass
class RoundTrace:
    number: int
    request: str
    plan: dict[str, Any]
    queries: list[dict[str, Any]]
    new_evidence: int
    decision: str
    reflection: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"round": self.number, "request": self.request, "plan": self.plan,
                "queries": self.queries, "new_evidence": self.new_evidence,
                "reflection": self.reflection, "decision": self.decision,
                "seconds": round(self.seconds, 4)}


@dataclass
class ResearchResult:
    question: str
    context: str
    evidence: list[Evidence]
    rounds: list[RoundTrace]
    usage: Usage
    budget: int
    tokens: int
    left_out: int
    mode: str
    seconds: float
    summary: str = ""
    warnings: list[str] = field(default_factory=list)
    ranked: list[Evidence] = field(default_factory=list, repr=False)
    """All evidence found, best first (``evidence`` is the part that fit the budget)."""

    spread: float = field(default=0.0, repr=False)  # packing.diversify's penalty
    voted: list[Evidence] = field(default_factory=list, repr=False)
    """The evidence some query voted for, by its votes: what confidence reads (the fused
    scores of ``ranked`` are rank-based, flat, and say less how strongly lines matched)."""

    @property
    def confidence(self) -> Confidence:  # how far the best evidence supports an answer
        found = assess(self.question, self.confidence_lines(), RESEARCH)
        if found.level == "high" and not self.evidence:
            # The memory may hold the answer, but the context shows none of it: an agent must
            # not answer from it as if it did.
            return replace(found, level="low", reason=(
                f"{found.reason}, but none of that evidence fits in {self.budget} tokens: "
                "raise the budget"))
        return found

    def confidence_lines(self) -> list[Line]:
        """The lines (best first, with their vote scores) the confidence signal reads."""
        return [Line(e.text, e.score, e.title, e.heading) for e in self.voted or self.ranked]

    def repack(self, budget: int) -> Packed:
        """The same research packed to another budget (no new searches)."""
        return pack_research(self.ranked, budget, self.summary, self.spread)

    @property
    def sources(self) -> list[dict[str, Any]]:
        pages: dict[tuple[str, str], dict[str, Any]] = {}
        for item in self.evidence:
            entry = pages.setdefault((item.field, item.filename), {
                "field": item.field, "filename": item.filename, "title": item.title,
                "date": item.date, "lines": [],
            })
            entry["lines"].append(item.line)
        for entry in pages.values():
            entry["lines"] = sorted(set(entry["lines"]))
        return list(pages.values())

    def to_json(self) -> dict[str, Any]:
        usage = self.usage.to_json()
        usage["seconds"] = round(self.seconds, 4)
        usage["llm_seconds"] = round(self.usage.seconds, 4)
        usage["searches"] = sum(len(r.queries) for r in self.rounds)
        return {
            "question": self.question, "context": self.context, "summary": self.summary,
            "evidence": [e.to_json() for e in self.evidence], "sources": self.sources,
            "rounds": [r.to_json() for r in self.rounds], "usage": usage,
            "budget": self.budget, "tokens": self.tokens, "left_out": self.left_out,
            "mode": self.mode, "warnings": self.warnings,
            "confidence": self.confidence.to_json(),
        }
