"""Robustness of W in library mode (N_BM25 = N_DENSE = 200): leave-one-conversation-out choice of
W by turn R@10 on the other four, and per-W category margins vs BM25 alone (same index)."""
from recipe import *
import recipe

convs = load(); cache = EmbCache()
WS = [0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6]
per = {}   # (W, conv) -> summary
bmc = {}
for c in convs:
    bmc[c.cid] = evaluate([c], cache, "bm25")[0]
    for w in WS:
        per[(w, c.cid)] = evaluate([c], cache, "hybrid", w=w)[0]
ids = [c.cid for c in convs]
def pooled(w, cs, m):
    n = sum(per[(w, c)]["all"]["n"] for c in cs)
    return sum(per[(w, c)]["all"][m] * per[(w, c)]["all"]["n"] for c in cs) / n
lines = ["| held-out | W chosen on other 4 (by tR10) | held-out tR10 | held-out sR5 | BM25 tR10 | BM25 sR5 |", "|---|---|---|---|---|---|"]
for h in ids:
    tr = [c for c in ids if c != h]
    w = max(WS, key=lambda w: (round(pooled(w, tr, "tR10"), 4), pooled(w, tr, "sR5")))
    lines.append(f"| {h} | {w} | {per[(w, h)]['all']['tR10']:.3f} | {per[(w, h)]['all']['sR5']:.3f} | "
                 f"{bmc[h]['all']['tR10']:.3f} | {bmc[h]['all']['sR5']:.3f} |")
bm_all = evaluate(convs, cache, "bm25")[0]
lines += ["", "| W | tR5 | tR10 | sR3 | sR5 | min margin tR10 over categories | min margin sR5 over categories | A |",
          "|---|---|---|---|---|---|---|---|"]
for w in WS:
    r = evaluate(convs, cache, "hybrid", w=w)[0]
    mt = min(r[c]["tR10"] - bm_all[c]["tR10"] for c in (1, 2, 3, 4))
    ms = min(r[c]["sR5"] - bm_all[c]["sR5"] for c in (1, 2, 3, 4))
    lines.append(f"| {w} | {r['all']['tR5']:.3f} | {r['all']['tR10']:.3f} | {r['all']['sR3']:.3f} | "
                 f"{r['all']['sR5']:.3f} | {mt:+.3f} | {ms:+.3f} | {mt >= 0 and ms >= 0} |")
print("\n".join(lines)); open("out_loco_lib.md", "w").write("\n".join(lines) + "\n")
