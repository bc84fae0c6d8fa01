"""Tables (Markdown), the JSON record, docs/BENCHMARKS.md sections and the budget plot."""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .data import CATEGORIES
from .metrics import GROUPS, HeldOut, Mean, means
from .run import BudgetRun, SearchRun

SEARCH_METRICS = ("turn R@5", "turn R@10", "turn all@10", "session R@3", "session R@5")
SECONDARY = "turn R@10 (neighbours credited)"


def fmt(mean: Mean) -> str:
    return "–" if mean.value is None else f"{mean.value:.3f}"


def search_table(runs: Sequence[SearchRun]) -> str:
    head = ["category", "n", "system", *SEARCH_METRICS, f"*{SECONDARY}*"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    table = {run.name: {m: means(run.records, m) for m in (*SEARCH_METRICS, SECONDARY)}
             for run in runs}
    for group in GROUPS:
        if not runs or not table[runs[0].name]["turn R@10"][group].n:
            continue
        for run in runs:
            row = table[run.name]
            secondary = fmt(row[SECONDARY][group]) if run.credit.startswith("the turn on") \
                else "(= turn R@10)"
            cells = [fmt(row[m][group]) for m in SEARCH_METRICS]
            lines.append(f"| {group} | {row['turn R@10'][group].n} | {run.name} | "
                         + " | ".join(cells) + f" | {secondary} |")
    return "\n".join(lines)


def _means_json(table: dict[str, Mean]) -> dict[str, dict[str, Any]]:
    return {group: {"n": mean.n, "value": mean.value} for group, mean in table.items()}


def search_summary(runs: Sequence[SearchRun]) -> dict[str, Any]:
    return {run.name: {"unit": run.unit, "credit": run.credit,
                       "p50_ms": round(statistics.median(run.seconds) * 1000, 2)
                       if run.seconds else None,
                       "metrics": {m: _means_json(means(run.records, m))
                                   for m in (*SEARCH_METRICS, SECONDARY)}}
            for run in runs}


def budget_means(run: BudgetRun, metric: str = "recall") -> dict[int, dict[str, Mean]]:
    return {b: means(run.records[b], metric) for b in run.budgets}


def budget_table(runs: Sequence[BudgetRun], budgets: Sequence[int]) -> str:
    head = ["category", "n", "system"]
    for b in budgets:
        head += [f"R@{b:,} tok", f"words@{b:,}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    recall = {run.name: budget_means(run) for run in runs}
    words = {run.name: budget_means(run, "answer words") for run in runs}
    for group in GROUPS:
        if not runs or not recall[runs[0].name][budgets[0]][group].n:
            continue
        for run in runs:
            cells = []
            for b in budgets:
                cells += [fmt(recall[run.name][b][group]), fmt(words[run.name][b][group])]
            lines.append(f"| {group} | {recall[run.name][budgets[0]][group].n} | {run.name} | "
                         + " | ".join(cells) + " |")
    return "\n".join(lines)


def strongest(baselines: Sequence[BudgetRun], group: str, budget: int) -> tuple[str, float]:
    """The baseline with the highest recall in ``group`` at ``budget``: (name, recall)."""
    scored = [(run.name, budget_means(run)[budget][group].value or 0.0) for run in baselines]
    return max(scored, key=lambda pair: pair[1])


def ratio_lines(researcher: BudgetRun, baselines: Sequence[BudgetRun],
                budgets: Sequence[int]) -> list[str]:
    out = []
    mine = budget_means(researcher)
    for group in GROUPS:
        if not mine[budgets[0]][group].n:
            continue
        parts = []
        for b in budgets:
            name, best = strongest(baselines, group, b)
            value = mine[b][group].value or 0.0
            parts.append(f"{value:.3f} vs {best:.3f} ({name}) = {value / max(best, 1e-9):.2f}x "
                         f"@{b:,}")
        out.append(f"- {group}: " + "; ".join(parts))
    return out


def budget_summary(runs: Sequence[BudgetRun]) -> dict[str, Any]:
    return {run.name: {"description": run.description, "over_budget": run.over_budget,
                       "p50_ms": round(statistics.median(run.seconds) * 1000, 2)
                       if run.seconds else None,
                       "p95_ms": round(statistics.quantiles(run.seconds, n=20)[-1] * 1000, 2)
                       if len(run.seconds) > 1 else None,
                       "recall": {b: _means_json(m) for b, m in budget_means(run).items()},
                       "answer words": {b: _means_json(m)
                                        for b, m in budget_means(run, "answer words").items()},
                       "found recall": _means_json(means(run.found, "recall"))}
            for run in runs}


def found_table(runs: Sequence[BudgetRun], budget: int) -> str:
    """Per category and system: recall at ``budget`` beside the recall of everything the
    system found (no budget), so a gap reads as ranking (found, not packed) or retrieval
    (never found)."""
    sizes = means(runs[0].found, "recall") if runs else {}
    groups = [g for g in GROUPS if g in sizes and sizes[g].n]
    head = ["system", *(f"{g} (n={sizes[g].n})" for g in groups)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for run in runs:
        packed, found = means(run.records[budget], "recall"), means(run.found, "recall")
        cells = [f"{packed[g].value or 0:.3f} / {found[g].value or 0:.3f}" for g in groups]
        lines.append(f"| {run.name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def loo_table(rows: Sequence[tuple[str, str, HeldOut]]) -> str:
    lines = ["| tuned constant | figure | shipped value | in-sample (shipped) | best in-sample | "
             "leave-one-conversation-out | value picked per held-out conversation |",
             "|---|---|---|---|---|---|---|"]
    for name, figure, held in rows:
        picks = ", ".join(f"{c} {v}" for c, v in held.picks.items())
        lines.append(f"| `{name}` | {figure} | {held.shipped} | {held.in_sample:.3f} | "
                     f"{held.best_in_sample:.3f} ({held.best}) | **{held.held_out:.3f}** | "
                     f"{picks} |")
    return "\n".join(lines)


def plot(runs: Sequence[BudgetRun], path: Path, title: str) -> None:
    """Recall against token budget per system, overall and multi-hop (needs matplotlib:
    ``pip install -e '.[bench]'``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for axis, group in zip(axes, ("overall", CATEGORIES[1]), strict=True):
        for run in runs:
            table = budget_means(run)
            budgets = sorted(table)
            axis.plot(budgets, [table[b][group].value or 0.0 for b in budgets], marker="o",
                      label=run.name)
        axis.set_title(f"{group}")
        axis.set_xlabel("context budget (tokens, deepfield.tokens.count_tokens)")
        axis.grid(alpha=0.3)
    axes[0].set_ylabel("evidence recall (gold turns in the context)")
    axes[1].legend(fontsize=8, loc="lower right")
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_json(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1, default=str))


def write_section(doc: Path, name: str, text: str, after: str | None = None) -> None:
    """Replace the ``<!-- name:start/end -->`` block of ``doc`` (or add it, after the block
    ``after`` when that exists, else at the end)."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    current = doc.read_text() if doc.exists() else (
        "# Benchmarks\n\nEvery figure on this page is written by a script in `bench/`; rerun "
        "the command shown in each section to reproduce it.\n")
    block = f"{start}\n{text.rstrip()}\n{end}"
    if start in current and end in current:
        before, rest = current.split(start, 1)
        current = before + block + rest.split(end, 1)[1]
    elif after and f"<!-- {after}:end -->" in current:
        head, tail = current.split(f"<!-- {after}:end -->", 1)
        current = f"{head}<!-- {after}:end -->\n\n{block}{tail}"
    else:
        current = current.rstrip() + "\n\n" + block + "\n"
    doc.parent.mkdir(parents=True, exist_ok=True)  # perf.py --docs may name a new folder
    doc.write_text(current)


def write_marked(doc: Path, block: str) -> None:
    """:func:`write_section` for a block rendered with its own ``<!-- name:start -->`` and
    ``<!-- name:end -->`` lines (bench/perf.py, scale.py, scale_replicas.py)."""
    first, _, body = block.strip().partition("\n")
    opened = re.fullmatch(r"<!-- (\S+):start -->", first)
    end = f"<!-- {opened.group(1)}:end -->" if opened else ""
    if opened is None or not body.endswith(end):
        raise ValueError("a marked block starts with <!-- name:start --> and ends with "
                         "<!-- name:end -->")
    write_section(doc, opened.group(1), body[: -len(end)])


def drop_section(doc: Path, name: str) -> None:
    """Remove the block ``name`` (a section this protocol replaces)."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    current = doc.read_text()
    if start in current and end in current:
        before, rest = current.split(start, 1)
        doc.write_text(before.rstrip() + "\n\n" + rest.split(end, 1)[1].lstrip())


# ------------------------------------------------------------- docs/DESIGN.md excerpts


def design_search_table(runs: Sequence[SearchRun], command: str) -> str:
    """The overall search figures docs/DESIGN.md quotes, as the run printed them."""
    lines = [f"From `{command}` (docs/BENCHMARKS.md has every category):", "",
             "| retriever, unit | turn R@10 | multi-hop all@10 | session R@5 | "
             f"*{SECONDARY}* |", "|---|---|---|---|---|"]
    for run in runs:
        recall = means(run.records, "turn R@10")["overall"]
        chained = means(run.records, "turn all@10")[CATEGORIES[1]]
        session = means(run.records, "session R@5")["overall"]
        near = fmt(means(run.records, SECONDARY)["overall"]) if run.credit.startswith(
            "the turn on") else "–"
        lines.append(f"| {run.name} ({run.unit.split(';')[0]}) | {fmt(recall)} | "
                     f"{fmt(chained)} | {fmt(session)} | {near} |")
    return "\n".join(lines)


def design_budget_table(researcher: BudgetRun, baselines: Sequence[BudgetRun], budget: int,
                        command: str) -> str:
    """Recall at one budget per category, and the researcher's ratio to the strongest."""
    lines = [f"From `{command}` (evidence recall at {budget:,} tokens; docs/BENCHMARKS.md "
             "has 500 and 2,000 tokens and answer-word coverage):", "",
             "| system | " + " | ".join(GROUPS) + " |", "|---|" + "---|" * len(GROUPS)]
    for run in [researcher, *baselines]:
        table = budget_means(run)[budget]
        lines.append(f"| {run.name} | " + " | ".join(fmt(table[g]) for g in GROUPS) + " |")
    mine = budget_means(researcher)[budget]
    ratios = []
    for group in GROUPS:
        name, best = strongest(baselines, group, budget)
        value = mine[group].value or 0.0
        ratios.append(f"{group} {value / max(best, 1e-9):.2f}x ({name})")
    lines += ["", "The researcher against the strongest single search in each column: "
              + "; ".join(ratios) + "."]
    return "\n".join(lines)
