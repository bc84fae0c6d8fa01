"""Step 1b: BM25-only, combine the winners (context windows + page score + header column)."""
from lab import *

out = [header_row()]
def run(name, cfg, fn=f_bm25):
    res = evaluate(records(cfg), fn)
    out.append(row(name, res)); print(out[-1], flush=True)
    return res

print(out[0])
for mode, size, attr in [("prev", 2, "cur"), ("prev", 2, "all"), ("window", 3, "cur"), ("window", 3, "all"),
                         ("window", 5, "cur"), ("window", 5, "all"), ("group", 3, "all")]:
    for hw in [0.0, 1.0]:
        cfg = Cfg(mode=mode, size=size, attr=attr, header="column" if hw else "none", header_w=hw,
                  page_header_w=hw, dense=False)
        run(f"{mode}{size}->{attr} hw={hw}", cfg)
        for lam in [0.25, 0.5, 1.0]:
            run(f"{mode}{size}->{attr} hw={hw} + page bm25 lam={lam}", cfg, f_bm25_page(lam, "bm25"))
open("out_bm25b.md", "w").write("\n".join(out) + "\n")
