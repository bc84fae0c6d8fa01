"""What leaving common terms out of BM25 queries costs and saves (docs/DESIGN.md, "BM25 at scale").

    python bench/bm25_pruning.py            # 10,000 synthetic pages (bench/corpus.py)

Builds (once, cached in bench/.cache/bm25-pruning-10k) a keyword-only index of the 10k-page
synthetic corpus, then for 300 corpus queries measures BM25 time per query and the overlap of
the top 10 with the full query, for several document-frequency cut-offs (100% = no pruning).
Document frequencies are counted per query (not cached), so the times include that cost.
Writes docs/BENCHMARKS.md (section bm25-pruning).
"""

from __future__ import annotations

import argparse
import platform
import sqlite3
import statistics
import sys
import time

from corpus import Corpus
from evalkit.store import CACHE
from locomo import write_section

from deepfield.field import Field
from deepfield.index import keyword

PAGES = 10_000
SHARES = (1.0, 0.05, 0.02, 0.01)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    folder = CACHE / "bm25-pruning-10k" / "mem"
    if not (folder / "bm25-only.sqlite3").exists():
        print(f"writing and indexing {PAGES:,} corpus pages (once) …", file=sys.stderr)
        Corpus().write_pages(folder, PAGES)
        Field(folder, None, name="mem").index()
    conn = sqlite3.connect(f"file:{folder / 'bm25-only.sqlite3'}?mode=ro", uri=True)
    chunks = conn.execute("SELECT count(*) FROM df_chunks").fetchone()[0]
    queries = [q.text for q in Corpus().queries(300)]
    keyword.PRUNE_MIN_CHUNKS = 0
    full: dict[str, list[int]] = {}
    rows = ["| terms left out when in more than | mean ms | p50 ms | p95 ms | top-10 overlap "
            "with the full query |", "|---|---|---|---|---|"]
    for share in SHARES:
        keyword.PRUNE_DOC_SHARE = share
        times, overlap = [], []
        for query in queries:
            started = time.perf_counter()
            top = [cid for cid, _ in keyword.bm25_search(conn, query, 200)][:10]
            times.append((time.perf_counter() - started) * 1000)
            reference = full.setdefault(query, top)
            overlap.append(len(set(top) & set(reference)) / max(1, len(reference)))
        label = "(no pruning)" if share == 1.0 else f"{share:.0%} of chunks"
        rows.append(f"| {label} | {statistics.fmean(times):.2f} | "
                    f"{statistics.median(times):.2f} | "
                    f"{statistics.quantiles(times, n=20)[-1]:.2f} | "
                    f"{statistics.fmean(overlap):.3f} |")
    text = "\n".join([
        "## BM25 query pruning at scale", "",
        f"`python bench/bm25_pruning.py` · {time.strftime('%Y-%m-%d')} · Python "
        f"{platform.python_version()} · {PAGES:,} synthetic pages (bench/corpus.py), "
        f"{chunks:,} chunks, keyword-only index · 300 corpus queries, document frequencies "
        "counted per query (not cached). Shipped: 5% (deepfield.index.keyword."
        "PRUNE_DOC_SHARE), in fields of 20,000 chunks or more.", "", *rows])
    print(text)
    if not args.no_write:
        write_section("bm25-pruning", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
