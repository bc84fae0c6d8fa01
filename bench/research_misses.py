"""Where the researcher loses gold evidence: not found at all, or found and cut by the budget.

    python bench/research_misses.py                       # LoCoMo dev, every category
    python bench/research_misses.py --only conv-26 --category 1 --show 5

Same protocol as bench/locomo.py (bench/evalkit): the session pages as ``deepfield import
locomo`` writes them, questions of categories 1-4, one token counter. For each question the
offline researcher runs once at 1,000 tokens (``record=False``); its whole ranked evidence
(``ResearchResult.ranked``, before any budget cut) is credited turn by turn, each line for the
dialogue id on the page line it points to. Printed per category:

* packed @B — evidence recall of the context repacked to B tokens (as bench/locomo.py counts it);
* found — share of gold turns some ranked line points to, however low: the ceiling a better
  ordering of the same evidence could reach;
* the rank of each gold turn found but left out at 1,000 tokens (its first line's place in the
  ranked evidence), in buckets.

With ``--show N``, the first N questions of each category with a gold turn found but left
out, with the gold line and its rank, so a reader can see what kind of line is lost.
Output: a Markdown table on stdout and bench/out/research_misses.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from evalkit.data import CATEGORIES, SPLIT_NAME, EvalDataError, Question, load
from evalkit.metrics import evidence_recall
from evalkit.store import DEFAULT_DATA, REPO, build_store
from evalkit.systems import Fields, Researcher

BUDGETS = (500, 1000, 2000)
CUT_AT = 1000
RANK_BUCKETS = ((0, 25), (25, 50), (50, 100), (100, 10**9))
OUT = REPO / "bench" / "out" / "research_misses.json"


def bucket_name(low: int, high: int) -> str:
    return f"rank {low}+" if high >= 10**9 else f"rank {low}-{high - 1}"


@dataclass
class Tally:
    questions: int = 0
    gold: int = 0
    packed: dict[int, float] = field(default_factory=lambda: dict.fromkeys(BUDGETS, 0.0))
    found: float = 0.0
    cut_ranks: Counter[str] = field(default_factory=Counter)
    examples: list[dict[str, object]] = field(default_factory=list)

    def row(self) -> dict[str, object]:
        n = self.questions or 1
        return {"n": self.questions, "gold turns": self.gold,
                **{f"packed @{b}": round(self.packed[b] / n, 3) for b in BUDGETS},
                "found": round(self.found / n, 3),
                "cut at 1000, by rank": {bucket_name(*b): self.cut_ranks[bucket_name(*b)]
                                         for b in RANK_BUCKETS}}


def examine(fields: Fields, researcher: Researcher, question: Question, tally: Tally,
            show: int) -> None:
    packer, _ = researcher.run(question)
    result = packer.result  # type: ignore[attr-defined]
    turns = fields.turns[question.conversation]
    first_rank: dict[str, tuple[int, str]] = {}
    for rank, item in enumerate(result.ranked):
        turn = turns.turn_at(item.filename, item.line)
        if turn in question.evidence and turn not in first_rank:
            first_rank[turn] = (rank, item.text)
    tally.questions += 1
    tally.gold += len(question.evidence)
    texts = {budget: packer.pack(budget) for budget in BUDGETS}
    for budget, text in texts.items():
        tally.packed[budget] += evidence_recall(text, question.evidence)
    tally.found += len(first_rank) / len(question.evidence)
    lost = []
    for turn, (rank, text) in sorted(first_rank.items(), key=lambda kv: kv[1][0]):
        if f"({turn})" in texts[CUT_AT]:
            continue
        name = next(bucket_name(lo, hi) for lo, hi in RANK_BUCKETS if lo <= rank < hi)
        tally.cut_ranks[name] += 1
        lost.append({"turn": turn, "rank": rank, "line": text[:160]})
    if lost and len(tally.examples) < show:
        tally.examples.append({"question": question.question, "answer": question.answer,
                               "ranked": len(result.ranked), "lost": lost})


def table(tallies: dict[str, Tally]) -> str:
    head = (["category", "n", "gold turns"] + [f"packed @{b}" for b in BUDGETS] + ["found"]
            + [f"cut @{CUT_AT}, {bucket_name(*b)}" for b in RANK_BUCKETS])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, tally in tallies.items():
        row = tally.row()
        cut = row["cut at 1000, by rank"]
        assert isinstance(cut, dict)
        packed = [f"{row[f'packed @{b}']:.3f}" for b in BUDGETS]
        cells = [name, row["n"], row["gold turns"], *packed, f"{row['found']:.3f}",
                 *cut.values()]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--only", action="append", default=None, metavar="CONVERSATION")
    parser.add_argument("--category", type=int, action="append", default=None,
                        help="1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop")
    parser.add_argument("--show", type=int, default=0, help="examples per category")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.category or ()) - set(CATEGORIES))
    if unknown:
        print(f"error: unknown category {unknown[0]}; use one of "
              f"{', '.join(f'{k} ({v})' for k, v in CATEGORIES.items())}", file=sys.stderr)
        return 2
    try:
        dataset = load(args.data, args.only)
    except EvalDataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    store = build_store(args.data, only=args.only)
    fields = Fields(store, dataset)
    researcher = Researcher(fields, CUT_AT)
    wanted = set(args.category or CATEGORIES)
    questions = [q for q in dataset.questions if q.category in wanted]
    tallies = {"overall": Tally(), **{CATEGORIES[c]: Tally() for c in sorted(wanted)}}
    for done, question in enumerate(questions, 1):
        examine(fields, researcher, question, tallies[CATEGORIES[question.category]], args.show)
        if done % 50 == 0 or done == len(questions):
            print(f"{done}/{len(questions)} questions", file=sys.stderr, flush=True)
    overall = tallies["overall"]  # per-question values summed over the categories
    for tally in tallies.values():
        if tally is overall:
            continue
        overall.questions += tally.questions
        overall.gold += tally.gold
        for budget in BUDGETS:
            overall.packed[budget] += tally.packed[budget]
        overall.found += tally.found
        overall.cut_ranks.update(tally.cut_ranks)
    print(f"Split: {SPLIT_NAME}; {dataset.describe()}. Unit: the researcher's ranked evidence "
          f"lines, each credited for the turn its page line shows; packed @B: evidence recall "
          f"of the context repacked to B tokens; found: before any budget cut.\n")
    print(table(tallies))
    for name, tally in tallies.items():
        for example in tally.examples:
            print(f"\n[{name}] {example['question']}  (answer: {example['answer']}; "
                  f"{example['ranked']} lines ranked)")
            for lost in example["lost"]:  # type: ignore[attr-defined]
                print(f"  {lost['turn']} rank {lost['rank']}: {lost['line']}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"split": SPLIT_NAME, "data": dataset.describe(),
                               "rows": {n: t.row() for n, t in tallies.items()},
                               "examples": {n: t.examples for n, t in tallies.items()}},
                              indent=2) + "\n")
    print(f"\nwritten: {OUT.relative_to(REPO)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
