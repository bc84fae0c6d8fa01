from lab import *
print(header_row())
for mode, size, attr in [("turn", 1, "all"), ("prev", 2, "all"), ("window", 3, "all")]:
    for hw in [0.5, 1.0, 2.0, 4.0]:
        cfg = Cfg(mode=mode, size=size, attr=attr, header="column", header_w=hw, dense=False)
        print(row(f"{mode}{size} hw={hw}", evaluate(records(cfg), f_bm25)), flush=True)
    cfg = Cfg(mode=mode, size=size, attr=attr, header="prepend", dense=False)
    print(row(f"{mode}{size} prepend", evaluate(records(cfg), f_bm25)), flush=True)
    cfg = Cfg(mode=mode, size=size, attr=attr, header="column", header_w=1.0, stop="stop+q", dense=False)
    print(row(f"{mode}{size} hw=1 stop+q", evaluate(records(cfg), f_bm25)), flush=True)
    cfg = Cfg(mode=mode, size=size, attr=attr, header="column", header_w=1.0, line="plain", dense=False)
    print(row(f"{mode}{size} hw=1 plain", evaluate(records(cfg), f_bm25)), flush=True)
