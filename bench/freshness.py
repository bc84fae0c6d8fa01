"""What a long-lived Field (a server worker) pays to see pages another process wrote.

    .venv/bin/python bench/freshness.py            # 10,000 pages
    .venv/bin/python bench/freshness.py --pages 1000 --rounds 20

Two Field objects on one folder of corpus pages (bench/corpus.py), keyword index: one writes a
page, the other's next ``ensure_synced`` brings its index up to date. Within the sync interval
that reader compares the folder's listing with the last one (scan.page_inodes) and reads only
the pages created, deleted or replaced; the full scan it would otherwise run (``stat`` of every
file, the index's row of every page) is timed on the same folder for comparison, as is an
edit in place that a file watcher reported by name. Each write is removed again afterwards.

Writes bench/out/freshness.json and the ``freshness`` section of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path[:0] = [str(BENCH_DIR), str(REPO)]

from corpus import Corpus  # noqa: E402
from locomo import write_section  # noqa: E402

from deepfield.field import Field  # noqa: E402

CACHE = BENCH_DIR / ".cache"
OUT = BENCH_DIR / "out"


def _ms(samples: list[float]) -> dict[str, float]:
    return {"median_ms": round(statistics.median(samples) * 1000, 2),
            "max_ms": round(max(samples) * 1000, 2)}


def _timed(fn: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


def measure(pages: int, rounds: int) -> dict[str, Any]:
    folder = CACHE / f"freshness-{pages}" / "field"
    if not (folder.parent / "done").exists():
        Corpus().write_pages(folder, pages)
        Field(folder, None).index()
        (folder.parent / "done").write_text("ok")
    writer, reader = Field(folder, None), Field(folder, None)
    writer.review_on_write = False
    writer.ensure_synced(embed=False)
    reader.ensure_synced(embed=False)
    by_name, in_place, full = [], [], []
    try:
        for i in range(rounds):
            writer.add(f"Freshness probe {i}", f"A page another process wrote, number {i}.")
            seconds, report = _timed(lambda: reader.ensure_synced(embed=False))
            by_name.append(seconds)
            hit = reader.search(f"freshness probe {i}", k=1, mode="bm25").results
            assert hit and hit[0].filename == f"freshness-probe-{i}.md", hit
            probe = folder / f"freshness-probe-{i}.md"
            with probe.open("a") as handle:  # an edit in place, reported as a watcher would
                handle.write("Edited in place.\n")
            reader.mark_changed({probe.name})
            seconds, report = _timed(lambda: reader.ensure_synced(embed=False))
            in_place.append(seconds)
            assert report.updated == 1, report
            reader.mark_changed()  # nobody knows what changed: every file
            seconds, _ = _timed(lambda: reader.ensure_synced(embed=False))
            full.append(seconds)
            probe.unlink()
            writer.ensure_synced(embed=False)
            reader.ensure_synced(embed=False)
    finally:
        writer.close()
        reader.close()
    return {"pages": pages, "rounds": rounds, "after_anothers_write": _ms(by_name),
            "reported_edit_in_place": _ms(in_place), "full_scan": _ms(full)}


def render(result: dict[str, Any]) -> str:
    rows = [("a page another process wrote (found by the listing)", "after_anothers_write"),
            ("an edit in place a file watcher reported", "reported_edit_in_place"),
            ("every file checked (the interval's full scan)", "full_scan")]
    lines = [
        "## Freshness: seeing another process's writes",
        "",
        f"`.venv/bin/python bench/freshness.py --pages {result['pages']} --rounds "
        f"{result['rounds']}`: two Fields on one folder of {result['pages']:,} corpus pages "
        "(keyword index); one writes, the other's next `ensure_synced` is timed. This is what "
        "each other worker of `deepfield serve --workers N` pays after a write.",
        "",
        "| sync | median ms | max ms |",
        "|---|---|---|",
    ]
    for label, key in rows:
        cell = result[key]
        lines.append(f"| {label} | {cell['median_ms']:.1f} | {cell['max_ms']:.1f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--no-write", action="store_true", help="print, do not edit docs")
    args = parser.parse_args()
    result = measure(args.pages, args.rounds)
    text = render(result)
    print(text)
    if not args.no_write:
        OUT.mkdir(exist_ok=True)
        (OUT / "freshness.json").write_text(json.dumps(result, indent=2))
        write_section("freshness", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
