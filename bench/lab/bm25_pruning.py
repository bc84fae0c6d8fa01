"""What leaving common terms out of BM25 queries costs and saves (docs/DESIGN.md, "BM25 at scale").

    python bench/lab/bm25_pruning.py      # needs the 10k corpus bench/perf.py builds

For 300 corpus queries: BM25 time per query and the overlap of the top 10 with the full query,
for several document-frequency cut-offs (1.0 = no pruning).
"""

from __future__ import annotations

import sqlite3
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from corpus import Corpus  # noqa: E402

from deepfield.index import keyword  # noqa: E402

INDEX = HERE.parent / ".cache" / "corpus-g1-s7-n10000" / "store" / "mem" / "bm25-only.sqlite3"


def main() -> int:
    if not INDEX.exists():
        print(f"missing {INDEX}: run bench/perf.py first", file=sys.stderr)
        return 1
    conn = sqlite3.connect(f"file:{INDEX}?mode=ro", uri=True)
    queries = [q.text for q in Corpus().queries(300)]
    keyword.PRUNE_MIN_CHUNKS = 0
    full: dict[str, list[int]] = {}
    print("| terms left out above | mean ms | p50 ms | p95 ms | top-10 overlap |")
    print("|---|---|---|---|---|")
    for share in (1.0, 0.05, 0.02, 0.01):
        keyword.PRUNE_DOC_SHARE = share
        times, overlap = [], []
        for query in queries:
            started = time.perf_counter()
            top = [cid for cid, _ in keyword.bm25_search(conn, query, 200)][:10]
            times.append((time.perf_counter() - started) * 1000)
            reference = full.setdefault(query, top)
            overlap.append(len(set(top) & set(reference)) / max(1, len(reference)))
        print(f"| {share:.0%} of chunks | {statistics.fmean(times):.2f} | "
              f"{statistics.median(times):.2f} | {statistics.quantiles(times, n=20)[-1]:.2f} | "
              f"{statistics.fmean(overlap):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
