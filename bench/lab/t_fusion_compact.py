"""Fusion variants on two indexes: the plain one (turn line chunks, no header anywhere) and the
recipe's (win3 chunks, header column, header-prefixed embeddings).  'A' = >= BM25 alone on the
same index in every category at turn R@10 and session R@5."""
from lab import *
BASES = {"plain turn index": Cfg(),
         "recipe index (win3 + header)": Cfg(mode="window", size=3, attr="all", header="column", header_w=1.0, emb_header=True)}
V = [("BM25 alone", f_bm25), ("dense alone", f_dense),
     ("BM25 + 0.25*page BM25 (hierarchical, no dense)", f_bm25_page(0.25, "bm25")),
     ("BM25 + 0.5*page BM25 (hierarchical, no dense)", f_bm25_page(0.5, "bm25")),
     ("RRF c=60", f_rrf(60)), ("weighted RRF c=60, w_bm25=0.7", f_rrf(60, 0.7)), ("weighted RRF c=10, w_bm25=0.7", f_rrf(10, 0.7)),
     ("dense reranks BM25 top-20 (0.5/0.5 min-max)", f_rerank(20, 0.5)), ("dense reranks BM25 top-50 (0.7/0.3)", f_rerank(50, 0.7)),
     ("union: BM25 top-7 then dense top-3", f_union(7, 3)),
     ("convex min-max W=0.35", f_convex(0.35, "mm")), ("convex min-max W=0.5", f_convex(0.5, "mm")),
     ("convex min-max W=0.7", f_convex(0.7, "mm")), ("convex z-score W=0.35", f_convex(0.35, "z")),
     ("convex z-score W=0.5", f_convex(0.5, "z")),
     ("convex mm W=0.35 + 0.25*page max-cos", f_convex(0.35, "mm", 0.25, "dense")),
     ("convex mm W=0.35 + 0.25*page BM25", f_convex(0.35, "mm", 0.25, "bm25")),
     ("convex mm W=0.35 + 0.25*page fused", f_convex(0.35, "mm", 0.25, "fused"))]
out = []
for bn, cfg in BASES.items():
    recs = records(cfg); base = evaluate(recs, f_bm25)
    h = header_row().split("\n")
    out += [f"\n#### {bn}\n", h[0] + " A |", h[1] + "---|"]
    for vn, fn in V:
        res = evaluate(recs, fn)
        out.append(row(vn, res) + (" A |" if vn != "BM25 alone" and beats(res, base) else "  |"))
print("\n".join(out)); open("out_fusion_compact.md", "w").write("\n".join(out) + "\n")
