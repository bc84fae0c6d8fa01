"""Why does the header column help?  FTS5 computes IDF per row (any column), so terms present in
every header (speaker names) get IDF ~ 0 everywhere.  Check by dropping speaker names from the
query instead."""
import common
from lab import *
names = set()
for c in CONVS:
    for p in c.pages:
        for t in p.turns:
            names.add(t.speaker.lower())
orig = common.query_terms
def qt(q, stop="stop"):
    out = [t for t in orig(q, stop) if t not in names]
    return out or orig(q, stop)
import lab
lab.query_terms = qt
print(header_row())
for mode, size, attr in [("turn", 1, "all"), ("window", 3, "all")]:
    cfg = Cfg(mode=mode, size=size, attr=attr, dense=False, stop="stop")
    print(row(f"{mode}{size} no-names hw=0", evaluate(records(cfg), f_bm25)), flush=True)
