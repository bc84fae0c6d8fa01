from lab import *
print(header_row())
for base in [Cfg(dense=False), Cfg(mode="window", size=3, attr="all", header="column", header_w=1.0, dense=False)]:
    print(row("base", evaluate(records(base), f_bm25)))
    for m, e in [(3, 5), (5, 10), (10, 10)]:
        cfg = Cfg(**{**base.__dict__, "prf": (m, e)})
        for a in [0.1, 0.3]:
            print(row(f"{base.mode} prf m={m} e={e} a={a}", evaluate(records(cfg), f_prf(a))), flush=True)
