"""Step 1: BM25-only exploration (chunking, query building, header handling, page score)."""
import sys
from lab import *

out = [header_row()]
def run(name, cfg, fn=f_bm25):
    res = evaluate(records(cfg), fn)
    out.append(row(name, res)); print(out[-1], flush=True)
    return res

print(out[0])
for stop in ["none", "stop", "stop+q"]:
    run(f"turn line, stop={stop}", Cfg(stop=stop, dense=False))
for line in ["plain"]:
    run(f"turn plain (no id)", Cfg(line=line, dense=False))
run("group2", Cfg(mode="group", size=2, dense=False))
run("group3", Cfg(mode="group", size=3, dense=False))
run("prev ctx -> cur", Cfg(mode="prev", size=2, attr="cur", dense=False))
run("prev ctx -> prev,cur", Cfg(mode="prev", size=2, attr="all", dense=False))
run("window3 -> cur", Cfg(mode="window", size=3, attr="cur", dense=False))
run("window3 -> all", Cfg(mode="window", size=3, attr="all", dense=False))
run("header prepend", Cfg(header="prepend", dense=False))
for hw in [0.1, 0.3, 1.0]:
    run(f"header column w={hw}", Cfg(header="column", header_w=hw, dense=False))
for page in ["bm25", "maxchunk", "sumchunk"]:
    for lam in [0.25, 0.5, 1.0]:
        run(f"turn + page {page} lam={lam}", Cfg(dense=False), f_bm25_page(lam, page))
open("out_bm25.md", "w").write("\n".join(out) + "\n")
