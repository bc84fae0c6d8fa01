"""Ablations around the final recipe (lab mode, full candidate lists): remove one ingredient at a
time.  Fusion = convex min-max, W = 0.35."""
from lab import *
W = 0.35
R = dict(mode="window", size=3, attr="all", header="column", header_w=1.0, emb_header=True)
rows = [
    ("recipe: win3->all, header col w=1, emb with header", R),
    ("- header column (body only); emb still with header", {**R, "header": "none", "header_w": 0.0}),
    ("- header in embedding text", {**R, "emb_header": False}),
    ("- both header uses", {**R, "header": "none", "header_w": 0.0, "emb_header": False}),
    ("win3 -> centre turn only (line + context)", {**R, "attr": "cur"}),
    ("prev2 (prev line as context) -> both turns", {**R, "mode": "prev", "size": 2}),
    ("prev2 -> current turn only", {**R, "mode": "prev", "size": 2, "attr": "cur"}),
    ("group3 (non-overlapping blocks of 3 lines)", {**R, "mode": "group", "size": 3}),
    ("group2 (non-overlapping blocks of 2 lines)", {**R, "mode": "group", "size": 2}),
    ("turn (one line per chunk)", {**R, "mode": "turn", "size": 1}),
    ("turn, no header anywhere", {**R, "mode": "turn", "size": 1, "header": "none", "header_w": 0.0, "emb_header": False}),
    ("win3, no stopword removal", {**R, "stop": "none"}),
]
h = header_row().replace("| variant |", "| variant (BM25 alone / dense alone / hybrid) |").split("\n")
out = [h[0] + " A |", h[1] + "---|"]
for name, kw in rows:
    recs = records(Cfg(**kw))
    b, d, h = evaluate(recs, f_bm25), evaluate(recs, f_dense), evaluate(recs, f_convex(W, "mm"))
    out.append(row(name + " — BM25", b) + "  |"); out.append(row(name + " — dense", d) + "  |")
    out.append(row(name + " — **hybrid**", h) + (" yes |" if beats(h, b) else " no |"))
    print("\n".join(out[-3:]), flush=True)
open("out_ablate.md", "w").write("\n".join(out) + "\n")
