"""Do a remembered session's memo and header help retrieval? LoCoMo, keyword-only stores.

    python bench/memo_ablation.py

Every LoCoMo dev session is remembered offline (``deepfield.remember``: extractive memo in the
frontmatter, a context paragraph — when, who, topic — and the raw session) into one store,
and the same pages without memo and context paragraph into another. Both are searched the same
way as in bench/locomo.py (bench/evalkit): the offline researcher and the strongest of the
one-search baselines (BM25, the line each hit points to or the hit's window lines, packed as
lines by the researcher's packer), evidence recall and answer words at 1,000 tokens.
Also times remembering (sessions per second, extractive memo).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import time
from pathlib import Path

from evalkit.data import EvalDataError, load
from evalkit.metrics import GROUPS, means
from evalkit.run import run_budgets
from evalkit.store import CACHE, DEFAULT_DATA
from evalkit.systems import Fields, Researcher, SingleSearchLines
from locomo import write_section

import deepfield
from deepfield.config import EmbeddingConfig
from deepfield.memorize import remember
from deepfield.page import Page
from deepfield.sessions import parse_session

BUDGET = 1000


def build(data: Path) -> tuple[dict[str, deepfield.Store], int, float]:
    """(stores by variant, sessions remembered, seconds remembering took)."""
    root = CACHE / "memo-ablation"
    shutil.rmtree(root, ignore_errors=True)  # remembering into a fresh store is what is timed
    stores = {}
    for variant in ("memo+header", "raw"):
        deepfield.init(root / variant, EmbeddingConfig("none"))
        stores[variant] = deepfield.open(root / variant)
    sessions, seconds = 0, 0.0
    for sample in json.loads(data.read_text()):
        text = json.dumps({"conversation": sample["conversation"]})
        with_memo = stores["memo+header"].create_field(sample["sample_id"], exist_ok=True)
        raw = stores["raw"].create_field(sample["sample_id"], exist_ok=True)
        numbers = sorted(int(k.split("_")[1]) for k, v in sample["conversation"].items()
                         if re.fullmatch(r"session_\d+", k) and v)
        for number in numbers:
            session = parse_session(text, session=number, source=f"session_{number}")
            started = time.perf_counter()
            result = remember(with_memo, session)
            seconds += time.perf_counter() - started
            sessions += 1
            page = Page.parse((with_memo.path / result.filename).read_text())
            assert page.frontmatter is not None
            page.frontmatter.pop("summary", None)
            body = page.body.split("\n\n", 2)  # drop the context paragraph under the title
            page.body = body[0] + "\n\n" + body[2] if len(body) == 3 else page.body
            raw.write(page, name=result.filename[:-3])
    return stores, sessions, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    try:
        dataset = load(args.data)
    except EvalDataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    stores, sessions, seconds = build(args.data)
    rows = ["| pages | category | n | researcher recall | strongest one search (which) | "
            "researcher words | that search's words |", "|---|---|---|---|---|---|---|"]
    for variant, store in stores.items():
        fields = Fields(store, dataset)
        for fld in fields.fields.values():
            fld.index()
        runs = run_budgets([SingleSearchLines(fields, "bm25"),
                            SingleSearchLines(fields, "bm25", whole_window=True),
                            Researcher(fields, BUDGET)], dataset.questions, (BUDGET,))
        table = {r.name: (means(r.records[BUDGET], "recall"),
                          means(r.records[BUDGET], "answer words")) for r in runs}
        mine = table[runs[-1].name]
        for group in GROUPS:
            name = max((r.name for r in runs[:-1]),
                       key=lambda n: table[n][0][group].value or 0.0)
            best = table[name]
            rows.append(f"| {variant} | {group} | {mine[0][group].n} | "
                        f"{mine[0][group].value:.3f} | {best[0][group].value:.3f} ({name}) | "
                        f"{mine[1][group].value:.3f} | {best[1][group].value:.3f} |")
    text = "\n".join([
        "### Do the memo and header help search?", "",
        f"`python bench/memo_ablation.py` · {time.strftime('%Y-%m-%d')} · keyword-only stores "
        f"· {sessions} LoCoMo dev sessions remembered offline (extractive memo) in "
        f"{seconds:.2f} s = **{sessions / seconds:.0f} sessions/s**, then re-written without "
        "memo and header · " + dataset.describe() + ".",
        "Same sessions, same questions; `raw` pages drop the frontmatter `summary` and the "
        "context paragraph (when, who, topic) under the title. Evidence recall and answer "
        f"words at {BUDGET:,} tokens, as in the budget table above (bench/evalkit): one "
        "search credits and packs the line each hit points to (or the hit's window lines).",
        "", *rows,
    ])
    print(text)
    if not args.no_write:
        write_section("memo-ablation", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
