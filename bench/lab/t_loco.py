"""Robustness: leave-one-conversation-out.  For each held-out conversation, pick (chunking, w, lam)
on the other four by overall turn R@10 (ties -> session R@5), then score the held-out one.
Fusion family: s = w*mm(bm25) + (1-w)*mm(cos) + lam*mm(page max cosine)."""
import itertools
from lab import *

CHUNKINGS = {
    "prev2": Cfg(mode="prev", size=2, attr="all", header="column", header_w=1.0, emb_header=True),
    "win3": Cfg(mode="window", size=3, attr="all", header="column", header_w=1.0, emb_header=True),
    "turn": Cfg(header="column", header_w=1.0, emb_header=True),
}
WS = [0.1, 0.2, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7, 0.8]
LAMS = [0.0, 0.25, 0.5]
ids = [c.cid for c in CONVS]
FIXED = ("win3", 0.35, 0.0)

grid = {}
for (cn, cfg), w, lam in itertools.product(CHUNKINGS.items(), WS, LAMS):
    recs = records(cfg)
    fn = f_convex(w, "mm", lam, "dense")
    grid[(cn, w, lam)] = {cid: evaluate(recs, fn, {cid}) for cid in ids}
bm = {cn: {cid: evaluate(records(cfg), f_bm25, {cid}) for cid in ids} for cn, cfg in CHUNKINGS.items()}


def pooled(res_by_conv, convs, metric):
    # question-weighted mean over conversations
    n = sum(res_by_conv[c]["all"]["n"] for c in convs)
    return sum(res_by_conv[c]["all"][metric] * res_by_conv[c]["all"]["n"] for c in convs) / n


lines = ["| held-out | chosen (chunking, w, lam) on other 4 | held-out tR10 chosen | held-out tR10 fixed "
         f"{FIXED} | held-out tR10 BM25 (win3) | held-out sR5 chosen | sR5 fixed | sR5 BM25 (win3) |",
         "|---|---|---|---|---|---|---|---|"]
for held in ids:
    train = [c for c in ids if c != held]
    best = max(grid, key=lambda k: (round(pooled(grid[k], train, "tR10"), 4), pooled(grid[k], train, "sR5")))
    g, f, b = grid[best][held]["all"], grid[FIXED][held]["all"], bm["win3"][held]["all"]
    lines.append(f"| {held} | {best} | {g['tR10']:.3f} | {f['tR10']:.3f} | {b['tR10']:.3f} | "
                 f"{g['sR5']:.3f} | {f['sR5']:.3f} | {b['sR5']:.3f} |")
# sensitivity of the fixed recipe to w (pooled over all conversations)
lines += ["", "| w (win3, lam=0) | " + " | ".join(f"{c}" for c in ids) + " | pooled tR10 |",
          "|---|" + "---|" * (len(ids) + 1)]
for w in WS:
    r = grid[("win3", w, 0.0)]
    lines.append(f"| {w} | " + " | ".join(f"{r[c]['all']['tR10']:.3f}" for c in ids) +
                 f" | {pooled(r, ids, 'tR10'):.3f} |")
lines.append("| BM25 win3 | " + " | ".join(f"{bm['win3'][c]['all']['tR10']:.3f}" for c in ids) +
             f" | {pooled(bm['win3'], ids, 'tR10'):.3f} |")
print("\n".join(lines))
open("out_loco.md", "w").write("\n".join(lines) + "\n")
