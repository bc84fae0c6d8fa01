from lab import *
print(header_row())
for name, cfg in [("win3", Cfg(mode="window", size=3, attr="all", header="column", header_w=1.0, emb_header=True)),
                  ("prev2", Cfg(mode="prev", size=2, attr="all", header="column", header_w=1.0, emb_header=True))]:
    recs = records(cfg); base = evaluate(recs, f_bm25); basep = evaluate(recs, f_bm25_page(0.25))
    print(row(f"{name} BM25", base)); print(row(f"{name} BM25+page.25", basep))
    for w in [0.2, 0.3, 0.4, 0.5]:
        for lam in [0, 0.25]:
            for norm in ["mm", "z"]:
                res = evaluate(recs, f_convex(w, norm, lam, "dense"))
                print(row(f"{name} {norm} w={w} lam={lam}", res) + (" A" if beats(res, base) else "") + (" A+" if beats(res, basep) else ""), flush=True)
