"""Step 2: fusion variants on top of a given BM25 configuration.  Usage: t_fusion.py NAME"""
import sys
from lab import *

BASES = {
    "turn": Cfg(),
    "turn_hdr": Cfg(header="column", header_w=1.0),
    "turn_hdr_embhdr": Cfg(header="column", header_w=1.0, emb_header=True),
    "prev_hdr": Cfg(mode="prev", size=2, attr="all", header="column", header_w=1.0),
    "prev_hdr_embturn": Cfg(mode="prev", size=2, attr="all", header="column", header_w=1.0, emb_unit="turn"),
    "prev_hdr_embhdr": Cfg(mode="prev", size=2, attr="all", header="column", header_w=1.0, emb_header=True),
    "prevcur_hdr_embhdr": Cfg(mode="prev", size=2, attr="cur", header="column", header_w=1.0, emb_header=True),
    "prev_hdr_embturnhdr": Cfg(mode="prev", size=2, attr="all", header="column", header_w=1.0, emb_header=True, emb_unit="turn"),
    "win3_hdr_embhdr": Cfg(mode="window", size=3, attr="all", header="column", header_w=1.0, emb_header=True),
    "win3_hdr_embturnhdr": Cfg(mode="window", size=3, attr="all", header="column", header_w=1.0, emb_header=True, emb_unit="turn"),
    "win3cur_hdr_embhdr": Cfg(mode="window", size=3, attr="cur", header="column", header_w=1.0, emb_header=True),
    "win3_hdr": Cfg(mode="window", size=3, attr="all", header="column", header_w=1.0),
    "win3_hdr_embturn": Cfg(mode="window", size=3, attr="all", header="column", header_w=1.0, emb_unit="turn"),
    "win3cur_hdr": Cfg(mode="window", size=3, attr="cur", header="column", header_w=1.0),
    "group3_hdr": Cfg(mode="group", size=3, attr="all", header="column", header_w=1.0),
}

VARIANTS = [("BM25", f_bm25), ("dense", f_dense),
            ("BM25+page0.25", f_bm25_page(0.25)), ("BM25+page0.5", f_bm25_page(0.5)),
            ("RRF c60", f_rrf(60)), ("wRRF c60 w.7", f_rrf(60, 0.7)), ("wRRF c60 w.8", f_rrf(60, 0.8)),
            ("wRRF c10 w.7", f_rrf(10, 0.7)),
            ("rerank top20 w.5", f_rerank(20, 0.5)), ("rerank top50 w.7", f_rerank(50, 0.7)),
            ("union 7+3", f_union(7, 3))]
for w in [0.5, 0.6, 0.7, 0.8, 0.9]:
    VARIANTS.append((f"convex mm w={w}", f_convex(w, "mm")))
for w in [0.5, 0.7]:
    VARIANTS.append((f"convex z w={w}", f_convex(w, "z")))
for w in [0.6, 0.7, 0.8]:
    for lam in [0.25, 0.5]:
        for page in ["bm25", "dense", "both", "fused"]:
            VARIANTS.append((f"convex mm w={w} + {lam}*page[{page}]", f_convex(w, "mm", lam, page)))

if __name__ == "__main__":
    names = sys.argv[1:] or list(BASES)
    out = []
    for n in names:
        recs = records(BASES[n])
        h = header_row().split("\n")
        out += [f"\n### base `{n}`: {BASES[n].__dict__}\n", h[0] + " A |", h[1] + "---|"]
        print(out[-2], out[-1], sep="\n")
        base = evaluate(recs, f_bm25)
        for vn, fn in VARIANTS:
            res = evaluate(recs, fn)
            out.append(row(vn, res) + (" A |" if beats(res, base) and vn != "BM25" else "  |"))
            print(out[-1], flush=True)
    open(f"out_fusion_{'_'.join(names)}.md", "w").write("\n".join(out) + "\n")
